"""How a job's ranks split one model: one value, :class:`ParallelDims` (torchtitan's ``ParallelDims``:
``torchtitan/distributed/parallel_dims.py``), and the device mesh every parallelism consumes.

Three degrees, their product the job's world size:

- ``dp``: data-parallel replicas, each holding the whole model (DistributedDataParallel: gradients all-reduced);
- ``dp_shard``: data-parallel ranks that shard the parameters, gradients and optimizer state (FSDP2's
  ``fully_shard``: parameters all-gathered a layer at a time, gradients reduce-scattered);
- ``tp``: tensor-parallel ranks that split every layer's matmuls (Megatron-LM's column- and row-parallel linears:
  Shoeybi et al. 2019, "Megatron-LM", s. 3), one copy of the model over all of them.

A degree of 0 means that parallelism is not used; 1 or more, that it is, over that many ranks (1: its wrapper on one
rank, the 1-rank point a scaling curve is measured against: DDP or FSDP2 over one rank). The mesh's dimensions are
named after the degrees used, in that order (outermost first, torchtitan's order:
data parallelism across hosts, tensor parallelism within one, where its per-layer all-reduces have NVLink).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.core.errors import ConfigError

NAMES = ("dp", "dp_shard", "tp")
STRATEGIES = {"ddp": "dp", "fsdp": "dp_shard", "tp": "tp"}  # a parallel strategy's name -> the degree it sets


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelDims:
    """The degrees of data, sharded-data and tensor parallelism (see the module docstring; all 0: one process).

    Raises:
        ValueError: a negative degree.
    """

    dp: int = 0
    dp_shard: int = 0
    tp: int = 0

    def __post_init__(self) -> None:
        for name in NAMES:
            if getattr(self, name) < 0:
                raise ValueError(f"parallel degree {name}={getattr(self, name)}: each degree is 0 (unused) or more")

    @classmethod
    def of(cls, strategy: str, world: int) -> ParallelDims:
        """Every one of ``world`` ranks given to one strategy (``ddp``, ``fsdp`` or ``tp``).

        Raises:
            ValueError: an unknown strategy.
        """
        if strategy not in STRATEGIES:
            raise ValueError(f"parallel strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
        return cls(**{STRATEGIES[strategy]: world})

    @classmethod
    def parse(cls, text: str, world: int | None = None) -> ParallelDims:
        """A layout as :attr:`label` writes it (``tp=4``, ``dp=2,tp=4``); a degree left out (``tp``) is ``world``.

        Raises:
            ConfigError: an unknown name, a degree that is not a positive integer, a name twice, or a bare name
                without ``world`` (exit 2).
        """
        allowed = "degrees as tp=N, dp=N, dp_shard=N joined by commas (a bare name: all of --gpus N)"
        degrees: dict[str, int] = {}
        for item in str(text).split(","):
            name, _, value = item.strip().partition("=")
            if name not in NAMES or name in degrees or (not value and world is None):
                raise ConfigError("parallel", text, allowed)
            if value and not (value.isdigit() and int(value) >= 1):
                raise ConfigError("parallel", text, allowed)
            degrees[name] = int(value) if value else world
        return cls(**degrees)

    @property
    def used(self) -> tuple[tuple[str, int], ...]:
        """``(name, degree)`` of each parallelism used, outermost first."""
        return tuple((n, getattr(self, n)) for n in NAMES if getattr(self, n))

    @property
    def world(self) -> int:
        """Ranks the layout needs: the product of the degrees used (1 for one process)."""
        out = 1
        for _, d in self.used:
            out *= d
        return out

    @property
    def tp_degree(self) -> int:
        """GPUs one copy of the model is split over (1 without tensor parallelism)."""
        return self.tp or 1

    @property
    def label(self) -> str:
        """The degrees used, as the rows' ``mesh`` column names them (``dp_shard=4``, ``dp=2,tp=4``); empty for one
        process."""
        return ",".join(f"{n}={d}" for n, d in self.used)

    def check_world(self, world: int) -> None:
        """The job has the ranks this layout needs.

        Raises:
            ConfigError: ``world`` is not ``dp x dp_shard x tp`` (exit 2).
        """
        if world != self.world:
            raise ConfigError("gpus", world, f"{self.world} ranks ({self.label or 'one process'})")

    def tp_reason(self, heads: int, kv_heads: int) -> str | None:
        """Why a model of ``heads`` query and ``kv_heads`` key-value heads cannot be split ``tp`` ways (each rank
        holds whole heads, its KV cache the heads of its own), or None."""
        tp = self.tp_degree
        if heads % tp or kv_heads % tp:
            return (
                f"tensor parallelism over {tp} GPUs needs {tp} to divide the attention heads ({heads}) and "
                f"key-value heads ({kv_heads})"
            )
        return None

    def build_mesh(self, device_type: str) -> Any:
        """The ``torch.distributed.device_mesh.DeviceMesh`` of this layout over the job's ranks, one named dimension
        a parallelism used (a 1-D ``dp`` mesh of one rank when none is). Needs the process group initialised.

        Raises:
            ConfigError: the job's world size is not this layout's.
        """
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        self.check_world(dist.get_world_size())
        dims = self.used or (("dp", 1),)
        return init_device_mesh(device_type, tuple(d for _, d in dims), mesh_dim_names=tuple(n for n, _ in dims))

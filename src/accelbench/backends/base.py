"""The backend base class and the registry (:data:`BACKENDS`); each backend is a module beside this one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.core.config import pick, put

if TYPE_CHECKING:
    import torch

    # what a backend builds: ``forward(x) -> logits``
    Forward = Callable[[torch.Tensor], Any]

INFERENCE, TRAIN = "inference", "train"  # the image scenarios' workloads; a later scenario names its own


class Backend:
    """Base class. Subclasses set ``name`` and override :meth:`_build` (and, if they can train,
    :meth:`wrap_training`). Everything that differs between backends is an attribute here: nobody compares
    backend names (``tests/test_architecture.py``).

    Attributes:
        name: the mode name users give.
        about: one line for the tables (README, docs): what it runs and how.
        workloads: what it serves: ``inference`` (a forward pass), ``train`` (a training step,
            :meth:`wrap_training`), or a workload of a later scenario; the CLI's help, completion and ``tune`` offer
            a backend for the workloads it serves, and a case of another workload is an ``unsupported`` row.
        compiles: it builds something before the first call (compilation, export, tracing, graph capture): its
            rows carry ``compile_s``, tune's cost model expects a build in its first trial, and the profile counts
            FLOPs on the plain module. False for a backend that calls the module as it is (eager).
        fused: it fuses a language model's projections (q/k/v, gate/up) into one matmul each (generation).
        needs_cuda: it runs on CUDA GPUs only.
        static_shapes: what it builds runs one input shape (a graph, a shape-specialised compile): a server
            that batches requests of any count builds it per batch size (:meth:`build_sizes`) and pads.
        graph_capture: it replays CUDA graphs (on a CUDA device): launches cost nothing, inputs are copied into
            static buffers.
        step_graph: a training step through it is captured whole (forward, loss, backward, GradScaler and
            optimizer step) into one CUDA graph and replayed (:class:`accelbench.training.step.TrainStep`).
        host_bound: its step is bound by the host's Python work (many small operations a step, each dispatched
            from Python: Hugging Face ``generate`` or an eager decode step at batch 1), so a telemetry thread of the
            measured process that takes the GIL slows it (``benchmarks/llm_hf_overhead.py`` measures by how much;
            docs/results.md); with ``telemetry_isolation = "auto"`` its cases sample from a sampler process
            (:func:`accelbench.telemetry.isolation_for`). False for image backends, eager included: a forward is a
            few hundred operators of C++ work each, and the thread sampler measured no slowdown of ResNet-50 at
            batch 1 (docs/results.md, telemetry); ``--telemetry-isolation process`` isolates any case.
        requires: pip packages it imports (checked before a run: :mod:`accelbench.sweep.requirements`).
        torch_quantizer: it quantizes through :meth:`quantize`'s default (PT2E int8, torchao fp8).
        tune: where ``accelbench tune`` tries it by default: each entry words among the device (``cpu``,
            ``cuda``), the workload and the objective (``latency``; ``throughput`` for throughput, cost and energy),
            matching a search all its words describe (:func:`accelbench.studies.tune_space.default_space`);
            None (the default): every search it can run in; ``()``: only when asked for.
    """

    name: str = ""
    about: str = ""
    workloads: tuple[str, ...] = (INFERENCE,)
    compiles: bool = True
    fused: bool = False
    needs_cuda: bool = False
    static_shapes: bool = False
    graph_capture: bool = False
    step_graph: bool = False
    host_bound: bool = False
    requires: tuple[str, ...] = ()
    torch_quantizer: bool = True
    tune: tuple[str, ...] | None = None

    @property
    def trainable(self) -> bool:
        """A training step can run through it (it serves the ``train`` workload)."""
        return TRAIN in self.workloads

    def unsupported_reason(self, device: torch.device, workload: str = INFERENCE) -> str | None:
        """Why this backend cannot run a ``workload`` case on ``device`` (a torch.device), or None."""
        if workload not in self.workloads:
            what = "is not a training mode" if workload == TRAIN else f"does not run {workload} cases"
            return (
                f"{self.name} {what} (it serves {', '.join(self.workloads)}; use one of {', '.join(names(workload))})"
            )
        if self.needs_cuda and device.type != "cuda":
            return f"{self.name} needs a CUDA GPU"
        return None

    def runs_on(self, device_type: str) -> bool:
        """It can run on a device of this type (``cpu``, ``cuda``)."""
        return device_type == "cuda" or not self.needs_cuda

    def build(self, module: Any, example: torch.Tensor, device: torch.device) -> tuple[Forward, float | None]:
        """Wrap ``module`` (a ``torch.nn.Module``, or what :meth:`quantize` returned) and run it once on ``example``
        (a batch on ``device``), inside the precision's context (autocast must be active while tracing or capturing).

        Returns:
            ``(forward, compile_s)``: ``forward(x) -> logits`` and the first call's wall seconds (tracing,
            code generation, autotuning or graph capture, plus one execution); None for eager.
        """
        from accelbench.core import stage
        from accelbench.core.timing import sync

        stage.enter(f"building the {self.name} forward")
        t0 = time.perf_counter()
        fn = self._build(module, example, device)
        sync(device)
        return fn, time.perf_counter() - t0

    def _build(self, module: Any, example: torch.Tensor, device: torch.device) -> Forward:
        raise NotImplementedError

    def build_sizes(
        self, module: Any, examples: list[torch.Tensor], device: torch.device
    ) -> tuple[dict[int, Forward], float]:
        """Forwards for batches of several sizes (``examples``: one batch per size, smallest first).

        Returns:
            ``({batch_size: forward}, build_s)``: a static-shape backend builds one forward per size; any
            other builds one, on the largest example, that takes every size (keyed by that size).
        """
        from accelbench.core.timing import sync

        t0 = time.perf_counter()
        built = examples if self.static_shapes else examples[-1:]
        fns = {int(x.shape[0]): self.build(module, x, device)[0] for x in built}
        sync(device)
        return fns, time.perf_counter() - t0

    def quantize(
        self,
        module: torch.nn.Module,
        scheme: str,
        calibration: list[torch.Tensor],
        example: torch.Tensor,
        device: torch.device,
        granularity: str | None = None,
    ) -> tuple[object, dict[str, Any]]:
        """Quantize ``module`` for this backend (default: int8 through PT2E, :func:`accelbench.quant.pt2e.quantize`;
        fp8 through torchao, :func:`accelbench.quant.fp8.quantize`).

        Args:
            scheme: ``static``, ``dynamic`` or ``float8`` (:attr:`accelbench.precisions.Precision.quant`).
            granularity: fp8 scaling, ``row`` or ``tensor`` (given for fp8 only).
            calibration: float32 batches ``(B, 3, S, S)`` on the host, disjoint from the measured images.
            example: one input batch on ``device``.

        Returns:
            ``(what build takes, columns)``; the columns land in the case's row.

        Raises:
            MissingDependencyError: the quantization library is not installed.
        """
        from accelbench.quant import fp8, pt2e

        if granularity is not None:
            return fp8.quantize(module, granularity, example)
        out, cols = pt2e.quantize(module, scheme, calibration, example)
        return out, {**cols, "quant_kernels": self.quant_kernels}

    # what runs an int8 PT2E module: eager runs its quantize/dequantize reference ops in fp32
    quant_kernels = "simulated: PT2E reference quantize/dequantize around fp32 ops (eager)"

    def options(self) -> dict[str, Any]:
        """The execution options this backend stands for, as row columns: ``compile_mode`` (a
        ``torch.compile`` mode; None when nothing compiles) and ``freezing`` (Inductor freezing)."""
        return {"compile_mode": None, "freezing": False}

    def columns(self, forward: Forward) -> dict[str, Any]:
        """Columns the built ``forward`` adds to its row (an execution provider, say); none by default."""
        return {}

    def wrap_training(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model a training step calls (compiled lazily on the first step), or the model itself.

        Raises:
            ValueError: the backend cannot train.
        """
        raise ValueError(f"{self.name} is not a training mode")


BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Add ``backend`` to :data:`BACKENDS` under its name.

    Raises:
        ValueError: another backend has that name (a plugin never replaces a backend silently).
    """
    return put(BACKENDS, backend.name, backend, "backend")


def get(name: str) -> Backend:
    """The backend called ``name``.

    Raises:
        ConfigError: no such backend.
    """
    return pick(BACKENDS, name, "mode")


def names(workload: str | None = None) -> tuple[str, ...]:
    """Every backend name (only those serving ``workload``, when given: ``train``, ``inference``)."""
    return tuple(n for n, b in BACKENDS.items() if workload is None or workload in b.workloads)


def reference() -> str:
    """The backend that calls the module as it is (compiles nothing, trains): FLOPs are counted through it and it is
    the accuracy reference's backend (``eager``).

    Raises:
        LookupError: no such backend is registered.
    """
    for n, b in BACKENDS.items():
        if not b.compiles and b.trainable:
            return n
    raise LookupError("no backend calls the module as it is")

"""The torchrun launcher: a scenario's cases on N ranks (one per GPU; N CPU processes with gloo without GPUs).

| module | what |
| --- | --- |
| ``ranks`` | rank detection (torchrun / Slurm environment), child environments (NVLink multicast off) |
| ``job`` | the job file a launcher hands its ranks; progress, error and result files |
| ``launch`` | starts ``python -m torch.distributed.run`` and watches it (timeouts, signals, kills) |
| ``tether`` | ties torchrun to the launcher's life (Linux parent-death signal) |
| ``context`` | process group set-up and :class:`RankContext`, the rank's :class:`accelbench.core.rank.Rank` |
| ``worker`` | the rank entry point: the scenario's ``measure`` on every rank, gathered to rank 0 |
| ``results`` / ``maths`` | rank rows, the aggregate row (common window), speed-up and scaling efficiency |
| ``here`` | a run launched by the user's own torchrun or srun (this process is one rank) |

No process pool or socket protocol of our own: torchrun starts and stops the ranks, torch.distributed moves
the results to rank 0, and rank 0 hands them to this launcher through result files. The launcher stores
every row (it holds the run's lease): the rank rows, and one aggregate row per case with the derived
columns (energy of all GPUs, validity, cost of all GPUs) and the speed-up against the 1-rank row. When a
rank fails or a case hangs, torchrun (or the launcher, on timeout) stops every rank; the running case gets
an ``oom``/``error`` row naming the rank, and torchrun starts again on the cases left.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from accelbench.core.errors import UNSUPPORTED, ConfigError
from accelbench.launchers.torchrun.job import DistOptions


def device_kind(opts: DistOptions) -> str:
    """``cuda`` when ranks will get GPUs, else ``cpu``.

    Raises:
        ConfigError: ``device=cuda`` without a GPU, or more GPUs per node than are visible.
    """
    import torch

    cuda = opts.device != "cpu" and torch.cuda.is_available()
    if opts.device == "cuda" and not cuda:
        raise ConfigError("device", "cuda", "cpu or auto (no CUDA GPU is visible)")
    if cuda and opts.gpus > torch.cuda.device_count():
        raise ConfigError("gpus", opts.gpus, f"1..{torch.cuda.device_count()} (GPUs visible)")
    return "cuda" if cuda else "cpu"


class Torchrun:
    """Run a sweep's cases under torchrun (see the module docstring).

    Args:
        opts: processes per node, nodes, rendezvous, global batch, timeouts.
        visible_devices: ``CUDA_VISIBLE_DEVICES`` for the ranks (disjoint GPU sets of concurrent jobs).
        echo: print the ranks' output as it comes; prefix: put before every echoed line.
        stop: set by another thread to stop this launch (a launch in a worker thread gets no signals).
    """

    distributed = True

    def __init__(
        self, opts: DistOptions, visible_devices: str | None = None, echo: bool = True, prefix: str = "", stop=None
    ):
        self.opts, self.visible, self.echo, self.prefix, self.stop = opts, visible_devices, echo, prefix, stop
        self.launches = 0

    # the loop's questions -----------------------------------------------------------------------------
    def device(self, spec):
        import torch

        kind = device_kind(dataclasses.replace(self.opts, device=self._device_setting(spec)))
        return torch.device("cuda", 0) if kind == "cuda" else torch.device("cpu")

    def _device_setting(self, spec) -> str:
        """A spec's device as the ranks take it: each picks ``cuda:<local rank>`` itself."""
        if self.opts.device != "auto":
            return self.opts.device
        return "auto" if spec.device == "auto" else ("cpu" if spec.device == "cpu" else "cuda")

    def case_device(self, device) -> str:
        return device.type

    def env_device(self, device):
        return device

    def devices(self, device) -> list:
        import torch

        return [torch.device("cuda", i) for i in range(self.opts.gpus)] if device.type == "cuda" else [device]

    def prepare(self, scenario, spec, device, store) -> None:
        return None  # every rank prepares its own state

    def kind(self, scenario) -> str:
        if scenario.dist_kind is None:
            raise ConfigError("gpus", self.opts.gpus, f"1 process: {scenario.name} does not run under torchrun")
        return scenario.dist_kind

    def identity(self) -> dict[str, Any]:
        return {"world_size": self.opts.world_size, "nnodes": self.opts.nnodes, "global_batch": self.opts.global_batch}

    def env(self) -> dict[str, Any]:
        import torch

        cuda = torch.cuda.is_available() and self.opts.device != "cpu"
        return {
            "distributed": {
                "world_size": self.opts.world_size,
                "nnodes": self.opts.nnodes,
                "torch_distributed": torch.__version__,
                "gpu_names": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
            }
        }

    def doc(self, scenario) -> dict[str, Any]:
        """What the run's stored spec adds: the workload (``inference``/``train``, as ``--workload`` names it) and
        the launch options."""
        return {"workload": "train" if scenario.training else scenario.name, "distributed": self.opts.to_dict()}

    def key(self, case) -> str:
        from accelbench.launchers.torchrun.results import aggregate_key

        return aggregate_key(case.key, self.opts.world_size)

    # running ----------------------------------------------------------------------------------------
    def execute(self, sweep, cases: list, state) -> None:
        """Launch torchrun on ``cases``; store each result as it arrives; after a failure, store its row and
        launch again on the cases left (larger batch sizes of an OOM are skipped)."""
        from accelbench.launchers.torchrun.job import Job
        from accelbench.launchers.torchrun.launch import failure, launch

        todo = self._runnable(sweep, cases)
        while todo:
            job = Job(
                scenario=sweep.scenario.name,
                spec=sweep.spec.to_dict(),
                cases=[c.to_dict() for c in todo],
                options=self.opts.to_dict(),
            )
            seen: set[str] = set()
            res = launch(
                job,
                self.opts,
                self.visible,
                self.prefix,
                self.echo,
                stop=self.stop,
                on_result=lambda doc: self._store(sweep, todo, doc, seen),  # noqa: B023
            )
            self.launches += 1
            if res.ok and self.opts.nnodes > 1:  # global rank 0 may sit on another node: its store has the rows
                return
            left = [c for c in todo if c.key not in seen]
            failed = next((c for c in left if c.key == res.current), left[0] if left else None)
            if failed is None:  # every case finished (the job may have failed while shutting down)
                return
            # a case without its result, also when every rank exited 0 (model code that exits): its row says why
            status, reason = failure(res)
            sweep.finished(failed, {**self._row(sweep, failed), "status": status, "error": reason})
            todo = self._runnable(sweep, [c for c in left if c is not failed])

    def _row(self, sweep, case) -> dict[str, Any]:
        return {
            **sweep.scenario.base_record(case, sweep.device),
            "world_size": self.opts.world_size,
            "rank": None,
            "aggregate": True,
            "workload": sweep.scenario.dist_workload or sweep.scenario.workload,
        }

    def _runnable(self, sweep, cases: list) -> list:
        """Store the rows of cases that cannot or need not run (unsupported, an uneven global batch, past an
        OOM boundary); return the others."""
        keep = []
        for case in cases:
            reason = sweep.scenario.unsupported_reason(case, sweep.device) or _simulated_only(case, sweep.device)
            if self.opts.global_batch and case.batch_size and case.batch_size % self.opts.world_size:
                reason = (
                    reason or f"global batch {case.batch_size} does not split evenly over {self.opts.world_size} ranks"
                )
            if reason:
                sweep.finished(case, {**self._row(sweep, case), "status": UNSUPPORTED, "error": reason})
            elif sweep.skip_reason(case):
                sweep.finished(case, {**self._row(sweep, case), **sweep.skipped(case, sweep.skip_reason(case))})
            else:
                keep.append(case)
        return keep

    def _store(self, sweep, todo: list, doc: dict, seen: set[str]) -> None:
        """Store one finished case from its result file: the rank rows, then the aggregate row."""
        from accelbench.launchers.torchrun.results import find_baseline, rows_of, summary_line, with_scaling

        case = next(c for c in todo if c.key == doc["key"])
        sweep.started(case)
        if not sweep.scenario.rank_rows:  # rank 0's detail rows and its record are the case's rows
            for row in doc["ranks"][0]["rows"]:
                sweep.add_row(row["record"], row["series"], derived=False)
            rec = {k: v for k, v in doc["ranks"][0]["record"].items() if not k.startswith("_")}
            sweep.finished(case, rec, doc["ranks"][0]["series"])
            seen.add(case.key)
            return
        ranks, agg = rows_of(doc["ranks"], case.key)
        for rec, series in ranks:
            sweep.add_row(rec, series, derived=False)
        base = (
            agg
            if agg["world_size"] == 1
            else find_baseline(sweep.store, sweep.run_id, agg["workload"], case.key, agg.get("device_name"))
        )
        row = with_scaling(agg, base)
        sweep.finished(case, row)
        seen.add(case.key)
        if self.echo:  # the line carries the speed-up and efficiency the stored row has
            print(self.prefix + summary_line(row), flush=True)


def _simulated_only(case, device) -> str | None:
    """A quantized precision with no kernel path here: its simulated accuracy runs in one process only."""
    from accelbench import precisions

    if case.precision not in precisions.PRECISIONS:  # a scenario without a precision axis
        return None
    why = precisions.simulated_reason(case.precision, device)
    return f"{why} (simulated accuracy runs without --gpus only)" if why else None

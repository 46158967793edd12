"""Start torchrun (``python -m torch.distributed.run``) on a :class:`Job` and watch it.

One torchrun agent per node starts one rank per GPU (torchrun docs: "torchrun (Elastic Launch)").
The launcher streams the ranks' output, follows ``progress.jsonl`` and stops the whole job when a
case runs past ``timeout_s`` (or nothing starts within ``startup_timeout_s``, or the ranks outlive the job's last
case by ``EXIT_GRACE_S``, or ``timeout_s`` where shorter): SIGTERM to torchrun and
every process it started (torchrun starts ranks in their own sessions, so they are found through
``psutil`` by parent pid), SIGKILL after a grace period. A rank that raises makes torchrun stop the
others itself (``--max-restarts 0``).

Process groups (the choice, and why): torchrun runs in a **session of its own**, so the SIGINT a
terminal's Ctrl-C sends to the foreground process group reaches accelbench only. accelbench then stops
torchrun and the ranks itself, in order: it mutes the echo of their output first, then signals them, so
torchrun's ``SignalException`` traceback and the ranks' tracebacks never reach the user, and the run
ends with the one "interrupted ... rerun with --resume" line. Left in accelbench's group, torchrun would
get the same SIGINT at the same moment and print its traceback before accelbench could mute it (a
race). The cost of the own session is that a SIGKILL of accelbench's process group no longer reaches
torchrun; :mod:`accelbench.launchers.torchrun.tether` ties torchrun to accelbench's life instead (Linux
parent-death signal: SIGTERM, on which torchrun stops its ranks), so ``kill -9`` still stops everything.
The echo is also muted once a rank reports a failure (its one-line reason becomes the error row), so a
crashed rank's traceback and torchrun's ``ChildFailedError`` report stay out of the output
(``ACCELBENCH_TRACEBACK=1`` shows them).
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.core import stage
from accelbench.core.errors import ERROR, OOM
from accelbench.core.signals import handlers, raise_interrupt
from accelbench.core.stage import Where, from_events
from accelbench.launchers.torchrun.job import DistOptions, Job, read_errors, read_progress, read_results
from accelbench.launchers.torchrun.ranks import child_env

GRACE_S = 10.0
# After the job's last case: a rank's leave (its graphs handed back, the group destroyed within 30 s:
# RankContext.leave) and its interpreter's exit. Past it the ranks are stopped; every case is stored already.
EXIT_GRACE_S = 90.0


def torchrun_argv(opts: DistOptions, job_path: str, python: str | None = None) -> list[str]:
    """The torchrun command line for ``opts`` (pure; ``--standalone`` on a single node)."""
    argv = [python or sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={opts.gpus}"]
    if opts.nnodes == 1 and not opts.rdzv_endpoint:
        argv.append("--standalone")
    else:
        argv += [
            f"--nnodes={opts.nnodes}",
            f"--rdzv-backend={opts.rdzv_backend}",
            f"--rdzv-endpoint={opts.rdzv_endpoint}",
            f"--rdzv-id={opts.rdzv_id}",
        ]
        if opts.rdzv_backend == "static":  # c10d assigns node ranks itself and warns about --node-rank
            argv.append(f"--node-rank={opts.node_rank}")
    # torchelastic's per-rank log folders go beside the job file (else one /tmp/torchelastic_* per launch is
    # left behind): the launch removes the whole work directory when it ends.
    log_dir = str(Path(job_path).parent / "torchelastic")
    return argv + ["--max-restarts=0", f"--log-dir={log_dir}", "-m", "accelbench.launchers.torchrun.worker", job_path]


@dataclass
class LaunchResult:
    """How a torchrun invocation ended.

    Attributes:
        returncode: torchrun's exit status (non-zero when a rank failed or the job was stopped).
        timed_out: the launcher stopped it (a case ran past its timeout, or startup did).
        current: key of the case running when it ended (None when every started case finished).
        done: keys of finished cases, in order.
        errors: rank error reports, earliest first (see :func:`accelbench.launchers.torchrun.job.read_errors`).
        tail: the last output lines (for a reason when no rank reported one).
        wall_s: seconds from start to exit.
        where: the running case and its stage when it ended (:class:`accelbench.core.stage.Where`; None when every
            started case finished).
    """

    returncode: int
    timed_out: bool = False
    current: str | None = None
    done: list[str] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    timeout_s: float | None = None
    where: Where | None = None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class Torchrun:
    """One torchrun invocation: ``start()``, then ``poll()`` until it returns a :class:`LaunchResult`.

    Args:
        job: the job; saved as ``job.json`` in a fresh work directory (``job.workdir`` is set to it).
        opts: launch options (processes, nodes, timeouts).
        visible_devices: ``CUDA_VISIBLE_DEVICES`` for this job (disjoint GPU sets for concurrent jobs).
        prefix: put before every echoed output line (e.g. ``"[job 1] "``).
        echo: print the ranks' output as it comes (else only keep the tail).
    """

    def __init__(
        self, job: Job, opts: DistOptions, visible_devices: str | None = None, prefix: str = "", echo: bool = True
    ):
        self.workdir = tempfile.mkdtemp(prefix="accelbench-dist-")
        self.job = Job(**{**_fields(job), "workdir": self.workdir, "options": opts.to_dict()})
        self.opts, self.visible, self.prefix, self.echo = opts, visible_devices, prefix, echo
        self.proc: subprocess.Popen | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self._t0 = 0.0
        self._reader: threading.Thread | None = None
        self._timed_out = False
        self._stopping = threading.Event()  # set before any signal is sent: mutes the echo
        self._rank_failed = False
        self._keys = {c["key"] for c in self.job.cases}
        self._exit_grace_s = min(EXIT_GRACE_S, opts.timeout_s)  # never longer than a case may run

    def start(self) -> Torchrun:
        path = str(Path(self.workdir) / "job.json")
        self.job.save(path)
        extra = {"PYTHONUNBUFFERED": "1"}
        if "OMP_NUM_THREADS" not in os.environ and not _uses_gpus(self.opts):
            extra["OMP_NUM_THREADS"] = "1"  # one thread per CPU rank, also for 1 rank (torchrun: only for > 1)
        env = child_env(visible_devices=self.visible, extra=extra)
        self._t0 = time.monotonic()
        # Own session: a terminal's Ctrl-C reaches accelbench only, which stops torchrun itself (module
        # docstring); the tether stops torchrun when accelbench dies without a chance to do so.
        argv = [
            sys.executable,
            "-m",
            "accelbench.launchers.torchrun.tether",
            str(os.getpid()),
            *torchrun_argv(self.opts, path),
        ]
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        return self

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.tail.append(line.rstrip("\n"))
            if self.echo and not self._muted():
                sys.stdout.write(self.prefix + line)
                sys.stdout.flush()

    def _muted(self) -> bool:
        """True once stopping started or a rank reported a failure: what follows is shutdown noise (tracebacks).

        A rank writes its error file before it re-raises, so every line of its traceback is read after
        the file exists: the check cannot miss it.
        """
        if self._stopping.is_set():
            return True
        if not self._rank_failed and not os.environ.get("ACCELBENCH_TRACEBACK"):
            self._rank_failed = any(Path(self.workdir).glob("error-rank*.json"))
        return self._rank_failed

    def _deadline_passed(self, events: list[dict]) -> bool:
        """A case ran past ``timeout_s``, no case started within ``startup_timeout_s`` of the launch, or the ranks
        are still running ``EXIT_GRACE_S`` (``timeout_s`` where shorter) after the job's last case, by the progress
        ``events`` so far (the stages are not cases: a stage of the start-up does not start its deadline over)."""
        events = [e for e in events if e["event"] in ("start", "done")]
        started = {e["key"]: e["t"] for e in events if e["event"] == "start"}
        finished = {e["key"] for e in events if e["event"] == "done"}
        running = [t for k, t in started.items() if k not in finished]
        if running:
            return time.time() - max(running) > self.opts.timeout_s
        if not events:
            return time.monotonic() - self._t0 > self.opts.startup_timeout_s
        last = max(e["t"] for e in events)
        if self._all_done(events):  # only the ranks' exit is left
            return time.time() - last > self._exit_grace_s
        return time.time() - last > self.opts.timeout_s

    def _all_done(self, events: list[dict]) -> bool:
        """Every case of the job has its done event."""
        return bool(self._keys) and self._keys <= {e["key"] for e in events if e["event"] == "done"}

    def poll(self) -> LaunchResult | None:
        """None while running; the result once torchrun has exited (after a kill on timeout)."""
        code = self.proc.poll()
        events = read_progress(self.workdir)
        stage.follow(from_events(events))  # the ranks' case and stage: a stopped run and the progress bar name them
        if code is None and self._deadline_passed(events):
            self._timed_out = True
            if self._all_done(events):
                print(
                    f"{self.prefix}note: the ranks were still running {self._exit_grace_s:g} s after the job's last "
                    "case; they were stopped (every case is stored)",
                    file=sys.stderr,
                    flush=True,
                )
            self.kill()
            code = self.proc.wait()
        if code is None:
            return None
        self._reader.join(timeout=5)
        return self._result(code)

    def _result(self, code: int) -> LaunchResult:
        events = read_progress(self.workdir)
        done = [e["key"] for e in events if e["event"] == "done"]
        started = [e["key"] for e in events if e["event"] == "start"]
        current = next((k for k in reversed(started) if k not in done), None)
        return LaunchResult(
            returncode=code,
            timed_out=self._timed_out,
            current=current,
            done=done,
            errors=read_errors(self.workdir),
            tail=list(self.tail),
            wall_s=time.monotonic() - self._t0,
            timeout_s=self.opts.timeout_s if current else self.opts.startup_timeout_s,
            where=from_events(events),
        )

    def kill(self) -> None:
        """Stop torchrun and every process it started: SIGTERM, then SIGKILL after ``GRACE_S``.

        The echo of their output is muted first: torchrun answers SIGTERM with a ``SignalException``
        traceback, which is not news to anyone who asked it to stop.
        """
        import psutil

        self._stopping.set()
        if self.proc is None:
            return
        try:
            procs = [psutil.Process(self.proc.pid)] + psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            _signal(p, signal.SIGTERM)
        _, alive = psutil.wait_procs(procs, timeout=GRACE_S)
        for p in alive:
            _signal(p, signal.SIGKILL)
        psutil.wait_procs(alive, timeout=GRACE_S)


def _uses_gpus(opts: DistOptions) -> bool:
    import torch

    return opts.device != "cpu" and torch.cuda.is_available()


def _signal(proc, sig) -> None:
    import psutil

    try:
        proc.send_signal(sig)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass


def _fields(job: Job) -> dict:
    import dataclasses

    return {f.name: getattr(job, f.name) for f in dataclasses.fields(job)}


def sigterm_as_interrupt():
    """In the main thread, SIGTERM raises KeyboardInterrupt (as Ctrl-C) inside the block; the old handler
    comes back after. ``timeout``, ``kill`` and batch schedulers send SIGTERM; this makes a library caller
    (a notebook, not only ``accelbench.cli.main``) stop the ranks and keep the finished cases too."""
    return handlers(raise_interrupt, (signal.SIGTERM,))


def shielded():
    """In the main thread, a second Ctrl-C or SIGTERM inside the block is ignored: stopping the ranks
    (up to ``2 * GRACE_S``) must not be cut short and leave them running."""
    return handlers(signal.SIG_IGN)


def launch(
    job: Job,
    opts: DistOptions,
    visible_devices: str | None = None,
    prefix: str = "",
    echo: bool = True,
    poll_s: float = 0.2,
    stop: threading.Event | None = None,
    on_result=None,
) -> LaunchResult:
    """Run ``job`` under torchrun and wait for it.

    Args:
        stop: set by another thread to stop this job (a launch in a worker thread gets no signals).
        on_result: called with each finished case's result document (``result-<N>.json``), in case order, as
            it appears (so a case is stored when it finishes, not when the job ends).
    Raises:
        KeyboardInterrupt: Ctrl-C, SIGTERM (main thread) or ``stop``; every rank is stopped first (as for anything
        ``on_result`` raises).
    """
    run = Torchrun(job, opts, visible_devices, prefix, echo)
    seen: set[str] = set()

    def deliver() -> None:
        for _, doc in read_results(run.workdir, seen):
            if on_result is not None:
                on_result(doc)

    try:
        with sigterm_as_interrupt():
            run.start()
            while (res := run.poll()) is None:
                deliver()
                if stop is not None and stop.is_set():
                    raise KeyboardInterrupt
                time.sleep(poll_s)
            deliver()
    except KeyboardInterrupt:
        with shielded():
            run.kill()
        deliver()  # a case that finished just before the stop is kept
        stage.adopt(from_events(read_progress(run.workdir)))  # where the ranks were: the sweep says so
        raise
    except BaseException:  # a result that cannot be stored (StopSweep: the store is locked or full), a bug
        with shielded():
            run.kill()  # never leave ranks running behind
        raise
    finally:  # every result was delivered (or the ranks were stopped): nothing in the work directory is needed
        shutil.rmtree(run.workdir, ignore_errors=True)
    return res


def failure(res: LaunchResult) -> tuple[str, str]:
    """``(status, one-line reason)`` for a failed launch: ``oom`` or ``error``; names the failing rank."""
    if res.timed_out:
        what = f"case {res.current!r}" if res.current else "startup (imports, rendezvous)"
        last = f", last in {res.where.stage}" if res.where is not None and res.where.stage else ""
        return ERROR, f"timeout: {what} ran past {res.timeout_s:g} s{last}; all ranks were stopped"
    if res.errors:
        first = res.errors[0]
        return (OOM if first["oom"] else ERROR), f"rank {first['rank']} failed: {first['error']}"
    last = next((line for line in reversed(res.tail) if line.strip()), "")
    if res.returncode == 0:
        return ERROR, f"ranks exited (code 0) before the case finished, without a report: {last.strip()[:200]}"
    return ERROR, f"ranks exited with code {res.returncode} without a report: {last.strip()[:200]}"

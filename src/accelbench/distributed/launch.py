"""Start torchrun (``python -m torch.distributed.run``) on a :class:`Job` and watch it.

One torchrun agent per node starts one rank per GPU (torchrun docs: "torchrun (Elastic Launch)").
The launcher streams the ranks' output, follows ``progress.jsonl`` and stops the whole job when a
case runs past ``timeout_s`` (or nothing starts within ``startup_timeout_s``): SIGTERM to torchrun and
every process it started (torchrun starts ranks in their own sessions, so they are found through
``psutil`` by parent pid), SIGKILL after a grace period. A rank that raises makes torchrun stop the
others itself (``--max-restarts 0``).
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from accelbench.distributed.job import DistOptions, Job, read_errors, read_progress
from accelbench.distributed.ranks import child_env

GRACE_S = 10.0
_LIVE: set = set()  # torchrun invocations of this process still running (killed on SIGTERM)


def torchrun_argv(opts: DistOptions, job_path: str, python: str | None = None) -> list[str]:
    """The torchrun command line for ``opts`` (pure; ``--standalone`` on a single node)."""
    argv = [python or sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={opts.gpus}"]
    if opts.nnodes == 1 and not opts.rdzv_endpoint:
        argv.append("--standalone")
    else:
        argv += [f"--nnodes={opts.nnodes}", f"--rdzv-backend={opts.rdzv_backend}",
                 f"--rdzv-endpoint={opts.rdzv_endpoint}", f"--rdzv-id={opts.rdzv_id}"]
        if opts.rdzv_backend == "static":  # c10d assigns node ranks itself and warns about --node-rank
            argv.append(f"--node-rank={opts.node_rank}")
    return argv + ["--max-restarts=0", "-m", "accelbench.distributed.worker", job_path]


@dataclass
class LaunchResult:
    """How a torchrun invocation ended.

    Attributes:
        returncode: torchrun's exit status (non-zero when a rank failed or the job was stopped).
        timed_out: the launcher stopped it (a case ran past its timeout, or startup did).
        current: key of the case running when it ended (None when every started case finished).
        done: keys of finished cases, in order.
        errors: rank error reports, earliest first (see :func:`accelbench.distributed.job.read_errors`).
        tail: the last output lines (for a reason when no rank reported one).
        wall_s: seconds from start to exit.
    """

    returncode: int
    timed_out: bool = False
    current: str | None = None
    done: list[str] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    timeout_s: float | None = None

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

    def __init__(self, job: Job, opts: DistOptions, visible_devices: str | None = None,
                 prefix: str = "", echo: bool = True):
        self.workdir = tempfile.mkdtemp(prefix="accelbench-dist-")
        self.job = Job(**{**_fields(job), "workdir": self.workdir, "options": opts.to_dict()})
        self.opts, self.visible, self.prefix, self.echo = opts, visible_devices, prefix, echo
        self.proc: subprocess.Popen | None = None
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self._t0 = 0.0
        self._reader: threading.Thread | None = None
        self._timed_out = False

    def start(self) -> "Torchrun":
        path = str(Path(self.workdir) / "job.json")
        self.job.save(path)
        extra = {"PYTHONUNBUFFERED": "1"}
        if "OMP_NUM_THREADS" not in os.environ and not _uses_gpus(self.opts):
            extra["OMP_NUM_THREADS"] = "1"  # one thread per CPU rank, also for 1 rank (torchrun: only for > 1)
        env = child_env(visible_devices=self.visible, extra=extra)
        self._t0 = time.monotonic()
        self.proc = subprocess.Popen(torchrun_argv(self.opts, path), env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace")
        _LIVE.add(self)
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        return self

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.tail.append(line.rstrip("\n"))
            if self.echo:
                sys.stdout.write(self.prefix + line)
                sys.stdout.flush()

    def _deadline_passed(self) -> bool:
        events = read_progress(self.workdir)
        started = {e["key"]: e["t"] for e in events if e["event"] == "start"}
        finished = {e["key"] for e in events if e["event"] == "done"}
        running = [t for k, t in started.items() if k not in finished]
        if running:
            return time.time() - max(running) > self.opts.timeout_s
        if not events:
            return time.monotonic() - self._t0 > self.opts.startup_timeout_s
        return time.time() - max(e["t"] for e in events) > self.opts.timeout_s

    def poll(self) -> LaunchResult | None:
        """None while running; the result once torchrun has exited (after a kill on timeout)."""
        code = self.proc.poll()
        if code is None and self._deadline_passed():
            self._timed_out = True
            self.kill()
            code = self.proc.wait()
        if code is None:
            return None
        _LIVE.discard(self)
        self._reader.join(timeout=5)
        return self._result(code)

    def _result(self, code: int) -> LaunchResult:
        events = read_progress(self.workdir)
        done = [e["key"] for e in events if e["event"] == "done"]
        started = [e["key"] for e in events if e["event"] == "start"]
        current = next((k for k in reversed(started) if k not in done), None)
        return LaunchResult(returncode=code, timed_out=self._timed_out, current=current, done=done,
                            errors=read_errors(self.workdir), tail=list(self.tail),
                            wall_s=time.monotonic() - self._t0,
                            timeout_s=self.opts.timeout_s if current else self.opts.startup_timeout_s)

    def kill(self) -> None:
        """Stop torchrun and every process it started: SIGTERM, then SIGKILL after ``GRACE_S``."""
        import psutil

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


def _on_sigterm(signum, frame) -> None:
    for run in list(_LIVE):
        run.kill()
    raise KeyboardInterrupt


def launch(job: Job, opts: DistOptions, visible_devices: str | None = None, prefix: str = "",
           echo: bool = True, poll_s: float = 0.2) -> LaunchResult:
    """Run ``job`` under torchrun and wait for it (Ctrl-C or SIGTERM stops every rank, then re-raises)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    run = Torchrun(job, opts, visible_devices, prefix, echo).start()
    try:
        while (res := run.poll()) is None:
            time.sleep(poll_s)
    except KeyboardInterrupt:
        run.kill()
        raise
    return res


def failure(res: LaunchResult) -> tuple[str, str]:
    """``(status, one-line reason)`` for a failed launch: ``oom`` or ``error``; names the failing rank."""
    if res.timed_out:
        what = f"case {res.current!r}" if res.current else "startup (imports, rendezvous)"
        return "error", f"timeout: {what} ran past {res.timeout_s:g} s; all ranks were stopped"
    if res.errors:
        first = res.errors[0]
        return ("oom" if first["oom"] else "error"), f"rank {first['rank']} failed: {first['error']}"
    last = next((line for line in reversed(res.tail) if line.strip()), "")
    return "error", f"ranks exited with code {res.returncode} without a report: {last.strip()[:200]}"

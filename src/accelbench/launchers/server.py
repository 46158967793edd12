"""A server launched for ``accelbench serve --launch`` (or ``--engine transformers``): started, waited for, recorded and
stopped, around the sweep's cases.

:class:`ServerLauncher` is the inline launcher (every case in this process) with a server's lifetime around the
cases: :meth:`ServerLauncher.prepare` starts the command in its own process group (``start_new_session``: the server
and every process it forks are one group), led by a tether (:mod:`accelbench.launchers.tether`) that ends the group
when accelbench dies however it dies (``kill -9`` included), its stdout and stderr to a log file beside the store, and waits until the
server answers the engine's probe (:meth:`accelbench.backends.openai_api.OpenAICompatible.probe`: a state, polled, never
a fixed sleep), bounded by ``launch_timeout_s``. :meth:`ServerLauncher.stop` ends the whole group (SIGTERM, then SIGKILL
after :data:`GRACE_S`) at the end of the cases, on Ctrl-C and on error; the command's caller (:func:`launched`) calls
it whatever ends the sweep. The command, the log file, the server's version and its served model go into the run's
provenance (:meth:`ServerLauncher.env`).

A command that exits before it answers, or does not answer in time, is :class:`LaunchError` (exit 2) with the last
lines of its log. ``{port}`` in a command is replaced by a free port of this host (the URL then follows).

``--engine KIND -m hf:<name>`` is the built-in launch of a server kind (:data:`accelbench.backends.servers.KINDS`:
``transformers serve``, llama.cpp's ``llama-server``): the kind writes its checkpoint into a cache beside the store
(random weights of an architecture, or a folder converted) and gives the command (:class:`~accelbench.backends.
servers.LaunchPlan`); this module starts, waits for and stops it like any other command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.backends import servers
from accelbench.core.errors import AccelbenchError
from accelbench.launchers import tether
from accelbench.launchers.inline import Inline

GRACE_S = tether.GRACE_S  # seconds a server has to exit after SIGTERM before its group is killed
POLL_S = 0.2  # how often a starting server is asked whether it answers
TAIL_LINES = 10  # lines of the log an error shows
OPEN_LOOP_SLOTS = 64  # a built-in launch's request slots for an open loop without --max-concurrency
DATASET_TOKENS = 2048  # a dataset request's prompt or output tokens, not known before the requests are read
# context a built-in launch's request slot has beyond its prompt and output: a prompt the server tokenizes a few
# tokens longer than the client counted (text decoded from random ids, a chat template) must not cut the output short
# (llama.cpp stops a request at its slot's context)
SLOT_MARGIN_TOKENS = 64


class LaunchError(AccelbenchError):
    """A launched server exited or never answered: one line, then the tail of its log (exit 2)."""


@dataclass
class Launched:
    """A running server process group.

    Attributes:
        command: the command as given (a shell command line).
        process: its :class:`subprocess.Popen`: the group's leader, the tether that holds the command (its pid is the
            group id; its exit code the command's).
        log_path: where its stdout and stderr go.
        base_url: where it answers.
        info: the engine's :class:`ServerInfo` once it answered (None before).
        plan: the :class:`~accelbench.backends.servers.LaunchPlan` of a built-in launch (None: a command's).
    """

    command: str
    process: subprocess.Popen
    log_path: Path
    base_url: str
    info: Any = None
    plan: Any = None
    _log: Any = field(default=None, repr=False)

    def alive(self) -> bool:
        return self.process.poll() is None

    def pids(self) -> tuple[int, ...]:
        """The server's processes (the group's leader and its descendants): their CPU and GPU use is the server's,
        not another process's (the telemetry's other-process and CPU-contention checks)."""
        try:
            import psutil

            leader = psutil.Process(self.process.pid)
            return (leader.pid, *(p.pid for p in leader.children(recursive=True)))
        except Exception:  # gone already, or no psutil: the leader alone
            return (self.process.pid,)

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of the log, joined with `` | `` (one line for an error message)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        kept = [ln.strip() for ln in text.splitlines() if ln.strip()][-lines:]
        return " | ".join(kept)

    def stop(self, grace_s: float = GRACE_S) -> None:
        """End the whole process group: SIGTERM, then SIGKILL after ``grace_s``; idempotent."""
        pgid = self.process.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError, PermissionError):  # children that outlived the leader too
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace_s)
        if self._log is not None:
            self._log.close()
            self._log = None


def free_port() -> int:
    """A TCP port of 127.0.0.1 free now (the OS's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command: str, log_path: Path, base_url: str, env: dict[str, str] | None = None) -> Launched:
    """Start ``command`` (a shell command line) in its own process group, stdout and stderr to ``log_path``, held by
    :func:`accelbench.launchers.tether.hold` (the group ends with this process, however it ends).

    Raises:
        LaunchError: the command cannot be started (no shell, a log file that cannot be written).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        log = open(log_path, "ab")  # noqa: SIM115  (closed by Launched.stop)
        proc = subprocess.Popen(
            tether.command(os.getpid(), ["/bin/sh", "-c", command]),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    except OSError as exc:
        raise LaunchError(f"cannot start the server command {command!r}: {exc}") from None
    return Launched(command=command, process=proc, log_path=log_path, base_url=base_url, _log=log)


def wait_ready(server: Launched, probe: Callable[[float], Any], timeout_s: float) -> Any:
    """Poll ``probe(seconds)`` until it answers (returns the engine's ``ServerInfo``), the process exits,
    ``timeout_s`` passes or the probe's error is ``definitive`` (the server answers, but lists no model and none is
    named, or refuses the one named); the server is stopped on failure.

    Raises:
        LaunchError: the command exited, did not answer within ``timeout_s`` (with its log's last lines), or answered
            definitively that it cannot be used.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if not server.alive():
            code = server.process.returncode
            server.stop()
            raise LaunchError(f"the server command exited with code {code} before it answered: {server.tail()}")
        try:
            server.info = probe(min(2.0, max(0.1, deadline - time.monotonic())))
            return server.info
        except AccelbenchError as exc:
            if getattr(exc, "definitive", False):  # it answers, and waiting will not change the answer
                server.stop()
                raise LaunchError(str(exc)) from None
        if time.monotonic() >= deadline:
            server.stop()
            raise LaunchError(
                f"the server did not answer at {server.base_url} within {timeout_s:g} s (--launch-timeout-s): "
                f"{server.tail() or 'its log is empty'}"
            )
        time.sleep(POLL_S)  # between two probes of a starting server: a poll interval, not a wait for a state


class ServerLauncher(Inline):
    """The inline launcher with a launched server around the cases (see the module docstring).

    Args:
        command: the shell command that starts the server, or None for the built-in launch of ``engine``.
        engine: the server kind of the built-in launch (:func:`accelbench.backends.servers.launchable`) when
            ``command`` is None.
        model: the ``hf:`` model of the built-in launch.
        base_url: where the server answers (``{port}`` in ``command`` picks a free port and sets it).
        timeout_s: how long it may take to answer.
        served_model_name: the model id requests name (:func:`accelbench.backends.openai_api.request_model`).
        log_dir: the folder of the log file (beside the store).
    """

    def __init__(
        self,
        *,
        command: str | None,
        engine: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        log_dir: Path = Path("."),
        log_name: str = "serve",
        api: str = "completions",
        served_model_name: str | None = None,
    ):
        self.command, self.engine, self.model, self.base_url = command, engine, model, base_url
        self.timeout_s, self.log_dir, self.log_name = timeout_s, Path(log_dir), log_name
        self.api, self.served_model_name = api, served_model_name
        self.server: Launched | None = None

    def prepare(self, scenario, spec, device, store):
        self.server = self.launch(spec, device)
        return scenario.prepare(spec, device, store, server=self.server)

    def launch(self, spec, device) -> Launched:
        """Start the server and wait until it answers.

        Raises:
            LaunchError: it exited or did not answer in time (its log's tail in the message).
        """
        from accelbench.backends.openai_api import OpenAICompatible, request_model

        env: dict[str, str] = {}
        command, url, plan = self.command, self.base_url, None
        model, guess = request_model(self.served_model_name, self.model)
        if command is None:  # the built-in launch of a server kind
            port = free_port()
            plan = servers.get(self.engine).launch(launch_request(spec, self.model, self.log_dir, device, port))
            command, url, env = plan.command, f"http://127.0.0.1:{port}", plan.env
            model, guess = self.served_model_name or plan.model_id, None
        elif "{port}" in command:
            port = free_port()
            command, url = command.replace("{port}", str(port)), f"http://127.0.0.1:{port}"
        url = url or "http://127.0.0.1:8000"
        stamp = time.strftime("%Y%m%d-%H%M%S")
        server = start(command, self.log_dir / f"{self.log_name}-{stamp}-server.log", url, env)
        server.plan = plan
        engine = OpenAICompatible(url, model=model, api=self.api, guess=guess)
        try:  # a model the server lists not may load on its check's request: that one waits up to the whole timeout
            wait_ready(server, lambda t: engine.probe(t, check_timeout_s=self.timeout_s), self.timeout_s)
        except BaseException:
            server.stop()
            raise
        if plan is not None and server.info is not None and server.info.version is None:
            server.info = dataclasses.replace(server.info, version=plan.version)
        return server

    def execute(self, sweep, cases: list, state) -> None:
        try:
            super().execute(sweep, cases, state)
        finally:
            self.stop()

    def env(self) -> dict:
        s = self.server
        if s is None:
            return {}
        return {
            "server_command": s.command,
            "server_log": str(s.log_path),
            "server_pid": s.process.pid,
            **server_provenance(s.info),
            "server_engine": getattr(s.info, "kind", None) if self.engine is None else self.engine,
        }

    def stop(self) -> None:
        """Stop the launched server, if any (idempotent)."""
        if self.server is not None:
            self.server.stop()


def launch_request(spec, model: str, log_dir: Path, device, port: int) -> servers.LaunchRequest:
    """What a serve spec asks of a built-in launch: slots for its most requests in flight (the highest concurrency,
    or an open loop's cap, else :data:`OPEN_LOOP_SLOTS`), each holding its longest prompt plus output plus
    :data:`SLOT_MARGIN_TOKENS`."""
    st = spec.settings
    return servers.LaunchRequest(
        model=model,
        cache_dir=log_dir / "serve-checkpoints",
        device=device,
        port=port,
        seed=spec.seed,
        precision=st.served_precision,
        parallel=max(st.concurrency or ()) if st.concurrency else st.max_concurrency or OPEN_LOOP_SLOTS,
        tokens_per_request=sum(st.longest(n) or DATASET_TOKENS for n in ("input_len", "output_len"))
        + SLOT_MARGIN_TOKENS,
        continuous_batching=st.continuous_batching,
        server_bin=st.server_bin,
    )


def server_provenance(info: Any) -> dict:
    """A server's entries of the run's provenance: what its probe found (:class:`ServerInfo`)."""
    return {
        "server_engine": getattr(info, "kind", None),
        "server_version": getattr(info, "version", None),
        "served_model": getattr(info, "model", None),
        "server_models": getattr(info, "listing", None),
    }


class ServerByUrl(Inline):
    """The inline launcher of a server given by URL: the server's probe in the run's provenance."""

    def __init__(self) -> None:
        self.state: Any = None

    def prepare(self, scenario, spec, device, store):
        self.state = scenario.prepare(spec, device, store)
        return self.state

    def env(self) -> dict:
        info = getattr(self.state, "info", None)
        return {"server_url": getattr(info, "base_url", None), **server_provenance(info)} if info else {}

    def stop(self) -> None:
        """Nothing to stop: the server is the user's."""


def for_spec(spec, db_path: Path, name: str | None = None) -> ServerLauncher | ServerByUrl:
    """The launcher of a serve spec: its server launched (``launch`` or ``engine``; its log beside the store
    ``db_path``, named after the run (``name``) or the store), or a server by URL."""
    st = spec.settings
    if st.launch is None and st.engine is None:
        return ServerByUrl()
    return ServerLauncher(
        command=st.launch,
        engine=st.engine,
        model=spec.models[0] if spec.models else None,
        base_url=st.url,
        timeout_s=st.launch_timeout_s,
        log_dir=Path(db_path).resolve().parent,
        log_name=name or Path(db_path).stem,
        api=st.api,
        served_model_name=st.served_model_name,
    )


@contextlib.contextmanager
def launched(launcher: ServerLauncher | ServerByUrl | None) -> Iterator[ServerLauncher | ServerByUrl | None]:
    """``launcher`` whose server is stopped whatever ends the block (a sweep's end, Ctrl-C, an error before the cases
    began)."""
    try:
        yield launcher
    finally:
        if launcher is not None:
            launcher.stop()

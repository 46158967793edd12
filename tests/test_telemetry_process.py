"""The sampler process (``telemetry_isolation = "process"``, :mod:`accelbench.telemetry.process`) on the CPU: the
thread mode's columns and data, one clock with the measured process, a child that never outlives its parent, a
broken source or a dead child as ``telemetry_errors`` (never a failed case), and ``auto`` in a real run."""

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch
from conftest import run_cli

from accelbench import backends
from accelbench.store import Store
from accelbench.telemetry import isolation_for, monitor, process
from accelbench.telemetry.sources import SOURCES, register

CPU = torch.device("cpu")


def _busy(cpu_s: float) -> torch.Tensor:
    """Keep this process's thread on the CPU for ``cpu_s`` CPU seconds (many small torch ops, as a host-bound loop)."""
    a = torch.randn(64, 64)
    t0 = time.process_time()
    while time.process_time() - t0 < cpu_s:
        a = (a @ a).tanh_()
    return a


def _watched(isolation: str, period_s: float = 0.01):
    with monitor(CPU, period_s, (), isolation) as mon:
        a = _busy(0.3)
    return mon, a


def _gone(pid: int, timeout_s: float = 30.0) -> bool:
    """Wait until ``pid`` has ended (gone, or a zombie nobody reaped yet); False if it still runs at the timeout."""
    try:
        proc = psutil.Process(pid)
        proc.wait(timeout_s) if proc.ppid() == os.getpid() else _wait_state(proc, timeout_s)
    except psutil.NoSuchProcess:
        return True
    except psutil.TimeoutExpired:
        return False
    return True


def _wait_state(proc: psutil.Process, timeout_s: float) -> None:
    def ended(p):
        try:
            return p.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    gone, alive = psutil.wait_procs([proc], timeout=timeout_s)
    if alive and not ended(proc):
        raise psutil.TimeoutExpired(timeout_s)


def test_process_mode_returns_the_thread_modes_columns_and_data():
    thread, _ = _watched("thread")
    proc, a = _watched("process")
    rt, rp = thread.record(), proc.record()
    assert (rt["telemetry_isolation"], rp["telemetry_isolation"]) == ("thread", "process")
    assert set(rt) == set(rp) and "telemetry_errors" not in rp
    assert set(thread.series()) == set(proc.series()) and set(thread.raw()) == set(proc.raw())
    # the child read this process: >= 0.3 CPU s of it in the window, its RSS holds the tensor
    assert rp["process_cpu_util_pct"] >= 100 * 0.3 / rp["telemetry_window_s"] * 0.95
    # a host busy the whole window reads 100 % give or take the float rounding of its tick counts (1e-9 relative)
    assert rp["process_rss_max_bytes"] > a.numel() * 4 and 0 < rp["system_cpu_util_pct"] <= 100 * (1 + 1e-9)
    assert rp["telemetry_samples"] >= 10 and len(proc.series()["cpu_t_s"]) == rp["telemetry_samples"]
    assert rp["energy_source"] == rt["energy_source"] and rp["cpu_energy_source"] == rt["cpu_energy_source"]
    handed = proc.sampler  # what the thread Sampler holds, from the child
    assert set(handed.samples) == set(thread.sampler.samples) == {"cpu", "rapl"}
    assert handed.window_s == rp["telemetry_window_s"] and handed.busy_s > 0 and handed.errors == {}
    assert proc.child_pid != os.getpid() and psutil.Process(proc.child_pid).ppid() == os.getpid()


def test_the_child_and_this_process_share_one_clock():
    """perf_counter is CLOCK_MONOTONIC on Linux: the child's window edges enclose the body this process timed."""
    if sys.platform.startswith("linux"):
        assert "CLOCK_MONOTONIC" in time.get_clock_info("perf_counter").implementation
    mon, _ = _watched("process")
    counters = mon.sampler.counters["cpu"]
    body = counters["end"]["body_t"]
    assert counters["begin"]["t"] <= body[0] < body[1] <= counters["end"]["t"]
    assert body[1] - body[0] <= mon.record()["telemetry_window_s"]
    t0 = time.perf_counter()
    t_child = process._child().ask("clock")
    assert t0 <= t_child <= time.perf_counter()


def test_one_child_serves_every_window_and_ends_with_its_owner():
    first, _ = _watched("process")
    second, _ = _watched("process")
    assert first.child_pid == second.child_pid  # started once, outside the windows
    process.shutdown()
    assert _gone(first.child_pid)
    third, _ = _watched("process")  # the next monitor starts another
    assert third.child_pid != first.child_pid and third.record()["telemetry_samples"] >= 10


PARENT = """
import sys, torch
from accelbench.telemetry import monitor
with monitor(torch.device("cpu"), 0.05, (), "process") as mon:
    pass
print(mon.child_pid, flush=True)
sys.stdin.read()  # until the test kills us
"""


def test_the_child_ends_when_its_parent_dies():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        child = int(parent.stdout.readline())
        assert psutil.Process(child).ppid() == parent.pid
    finally:
        parent.send_signal(signal.SIGKILL)  # no atexit, no clean-up: only the closed pipe tells the child
        parent.wait()
    assert _gone(child)


def test_a_source_that_raises_in_the_child_is_an_error_entry():
    import telemetry_sources

    register("broken", telemetry_sources.broken_sources)
    try:
        rec = _watched("process")[0].record()
    finally:
        SOURCES.pop("broken")
    assert "broken: RuntimeError: the sensor stopped answering" in rec["telemetry_errors"]
    assert rec["process_cpu_util_pct"] is not None and rec["telemetry_samples"] >= 10  # the others still read


def test_a_factory_the_child_cannot_import_is_left_out_with_its_reason():
    register("local", lambda devices, period_s, pids: [])
    try:
        rec = _watched("process")[0].record()
    finally:
        SOURCES.pop("local")
    assert "local: not read in the sampler process" in rec["telemetry_errors"] and rec["telemetry_samples"] >= 10


def test_a_child_killed_in_the_window_leaves_the_case_without_telemetry():
    with monitor(CPU, 0.01, (), "process") as mon:
        os.kill(mon.child_pid, signal.SIGKILL)
        assert _gone(mon.child_pid)
    rec = mon.record()
    assert rec["telemetry_samples"] == 0 and rec["energy_j"] is None and rec["telemetry_isolation"] == "process"
    assert "sampler process" in rec["telemetry_errors"] and rec["telemetry_window_s"] > 0
    assert mon.series() == {} and _watched("process")[0].record()["telemetry_samples"] >= 10  # a new child


def test_auto_isolates_host_bound_backends_only():
    assert backends.mode("hf-generate").host_bound and backends.mode("static-cache").host_bound
    assert not backends.mode("static-compile").host_bound and not backends.mode("eager").host_bound
    assert isolation_for("auto", True) == "process" and isolation_for("auto", False) == "thread"
    assert isolation_for("thread", True) == "thread" and isolation_for("process", False) == "process"
    with pytest.raises(ValueError, match="telemetry_isolation 'fork'"):
        isolation_for("fork", True)


def _generate(db, modes: str):
    pytest.importorskip("transformers")
    run_cli(
        "generate",
        "-m",
        "hf:tiny-shakespeare",
        "-b",
        "1",
        "--prompt-lens",
        "16",
        "--new-tokens",
        "4",
        "--modes",
        modes,
        "--repeats",
        "1",
        "--idle-s",
        "0",
        "--no-perplexity",
        "--device",
        "cpu",
        "--db",
        str(db),
        check=True,
    )
    return {r["mode"]: r for r in Store(db).records()}


def test_auto_samples_a_host_bound_generate_case_from_the_sampler_process(tmp_path):
    rows = _generate(tmp_path / "g.db", "hf-generate")
    assert list(rows) == ["hf-generate"]
    row = rows["hf-generate"]
    assert row["telemetry_isolation"] == "process" and row.get("telemetry_errors") is None
    assert row["telemetry_samples"] >= 1 and row["process_cpu_util_pct"] > 0 and row["process_rss_max_bytes"] > 0


@pytest.mark.slow
def test_auto_keeps_the_thread_for_a_compiled_generate_case(tmp_path):
    """static-compile compiles its decode step (minutes on a loaded 2-core CPU)."""
    rows = _generate(tmp_path / "g.db", "static-compile")
    assert list(rows) == ["static-compile"] and rows["static-compile"]["telemetry_isolation"] == "thread"


def test_an_isolation_the_cli_does_not_know_is_one_line(tmp_path):
    p = run_cli(
        "generate",
        "-m",
        "hf:tiny-shakespeare",
        "--telemetry-isolation",
        "fork",
        "--device",
        "cpu",
        "--db",
        str(tmp_path / "g.db"),
    )
    assert p.returncode != 0 and "invalid telemetry_isolation 'fork'" in p.stderr + p.stdout

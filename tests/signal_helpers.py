"""What the tests that send signals share: they wait for a state (a stored row, a file a model wrote), never
for a fixed time, under one generous deadline; and a model that holds a case at a gate, so that "the next case
is still running when the signal arrives" is a fact rather than a race against the clock.

The model is ``signal_helpers:gated_net`` (``tests/`` is on the subprocesses' ``PYTHONPATH``). With
``ACCELBENCH_TEST_GATE=<file>`` set, a forward pass whose batch is at least ``ACCELBENCH_TEST_GATE_BATCH`` and
whose process's ``WORLD_SIZE`` is at least ``ACCELBENCH_TEST_GATE_WORLD`` touches ``<file>.waiting`` (and
``<file>.waiting.<pid>``: how many processes wait) and waits while ``<file>`` exists (:class:`Gate` opens it), at
most ``DEADLINE_S``. ``signal_helpers:gated_net_b`` is the same net under another name (two jobs told apart by their
cases).

A test sends its signal and then opens the gate (:meth:`Gate.signal`): the signal is delivered before the gate
opens, so the held case cannot finish first; and a pass that cannot take the signal where it waits (LoadGen
calls the model from its own thread while the main thread is inside LoadGen), or that reaches the gate after its
process dealt with the signal (another rank), goes on instead of waiting for ever.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

DEADLINE_S = 900.0  # a 2-core machine running the suite beside other work starts torch in tens of seconds
GATE, GATE_BATCH, GATE_WORLD = "ACCELBENCH_TEST_GATE", "ACCELBENCH_TEST_GATE_BATCH", "ACCELBENCH_TEST_GATE_WORLD"


def wait_for(
    what: Callable[[], object],
    proc: subprocess.Popen | None = None,
    timeout: float = DEADLINE_S,
    label: str = "the state",
):
    """Poll ``what()`` until it is truthy and return it.

    Raises:
        AssertionError: ``proc`` ended first (with its output), or ``timeout`` seconds passed.
    """
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        got = what()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(
                f"exited {proc.returncode} before {label}\n{(out or '')[-3000:]}\n{(err or '')[-3000:]}"
            )
        time.sleep(0.1)
    raise AssertionError(f"{label} not reached in {timeout:.0f} s")


def takes_ctrl_c() -> None:
    """``preexec_fn`` of a child a test sends SIGINT: Ctrl-C's default action, as in a terminal. A test runner started
    in the background (``cmd &`` in a script) has SIGINT ignored, its children inherit that, and Python then
    installs no KeyboardInterrupt handler: the child would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stored_rows(db: Path) -> int:
    """Rows in the store's ``cases`` table (0 while there is no store file or table yet)."""
    if not Path(db).exists():  # connecting would create it
        return 0
    try:
        con = sqlite3.connect(db)
        try:
            return con.execute("SELECT COUNT(*) FROM cases").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


class Gate:
    """The test's side of the gate: closed when made; :meth:`env` for the process to hold; :meth:`open`."""

    def __init__(self, folder: Path, batch: int = 0, world: int = 0):
        self.path = folder / "gate"
        self.path.touch()
        self.batch, self.world = batch, world

    def env(self) -> dict[str, str]:
        return {GATE: str(self.path), GATE_BATCH: str(self.batch), GATE_WORLD: str(self.world)}

    def signal(self, send: Callable[[], object]) -> None:
        """``send()`` the signal, then open the gate (module docstring)."""
        try:
            send()
        finally:
            self.open()

    def close(self) -> None:
        self.path.touch()

    def reached(self) -> bool:
        """A forward pass is waiting at the gate (since the last :meth:`rearm`)."""
        return Path(f"{self.path}.waiting").exists()

    def waiting(self) -> int:
        """How many processes have a forward pass at the gate (or had, since the gate was made)."""
        return len(list(self.path.parent.glob(f"{self.path.name}.waiting.*")))

    def rearm(self) -> None:
        Path(f"{self.path}.waiting").unlink(missing_ok=True)

    def open(self) -> None:
        self.path.unlink(missing_ok=True)


class GatedNet(nn.Module):
    """A tiny conv net (8x8 inputs, 10 classes) that waits at the gate described in the module docstring."""

    default_image_size = 8

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = os.environ.get(GATE)
        if (
            gate
            and x.shape[0] >= int(os.environ.get(GATE_BATCH, "0"))
            and int(os.environ.get("WORLD_SIZE", "1")) >= int(os.environ.get(GATE_WORLD, "0"))
        ):
            Path(f"{gate}.waiting").touch()
            Path(f"{gate}.waiting.{os.getpid()}").touch()
            t0 = time.monotonic()
            while os.path.exists(gate) and time.monotonic() - t0 < DEADLINE_S:  # the test opens it once it signalled
                time.sleep(0.02)
        return self.fc(self.conv(x).mean((2, 3)))


def gated_net() -> GatedNet:
    return GatedNet()


def gated_net_b() -> GatedNet:
    return GatedNet()

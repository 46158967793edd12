"""One writer per run: a lease on a running run (host, pid, a token of the ``Store`` object, a heartbeat
refreshed every ``HEARTBEAT_S`` by a background thread). ``begin_run`` and ``reopen_run`` take it;
``finish_run`` and ``close`` give it back. A second process that tries to reopen a leased run gets
:class:`RunBusyError`, unless the lease is stale: its heartbeat is older than ``STALE_S``, or its pid is
dead on this host.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import threading
import time
from typing import Any

from accelbench.core.errors import RUNNING
from accelbench.store.schema import RunBusyError

HEARTBEAT_S = 10.0
STALE_S = 60.0  # six missed heartbeats: the process is gone or hung
STALE_STATUS = "interrupted (stale)"  # how a run reads whose status says running but whose process is gone


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class Lease:
    """The lease methods of :class:`accelbench.store.Store` (a mixin)."""

    path: str
    conn: sqlite3.Connection
    token: str

    def reopen_run(self, run_id: int) -> None:
        """Take the run's lease and mark it ``running`` again (``--resume``).

        Raises:
            RunBusyError: a live process holds the lease (its heartbeat is recent and, on this host, its pid lives).
        """

        def take() -> None:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                row = self.conn.execute(
                    "SELECT lease_host, lease_pid, lease_token, lease_heartbeat FROM runs WHERE run_id=?", (run_id,)
                ).fetchone()
                if row is None:
                    raise KeyError(f"no run {run_id}")
                busy = self._busy_reason(run_id, row)
                if busy:
                    raise RunBusyError(busy)
                self.conn.execute(
                    "UPDATE runs SET status=?, finished_at=NULL, lease_host=?, lease_pid=?, "
                    "lease_token=?, lease_heartbeat=? WHERE run_id=?",
                    (RUNNING, socket.gethostname(), os.getpid(), self.token, time.time(), run_id),
                )
            except BaseException:
                self.conn.rollback()
                raise
            self.conn.commit()

        self._write(take)
        self._hold(run_id)

    def _busy_reason(self, run_id: int, row) -> str | None:
        host, pid, token, beat = row["lease_host"], row["lease_pid"], row["lease_token"], row["lease_heartbeat"]
        if token == self.token or not self._alive(row):
            return None  # ours, or stale: the holder stopped heart-beating or its process is gone
        age = time.time() - (beat or 0.0)
        return (
            f"run {run_id} is being run by pid {pid} on {host} (heartbeat {age:.0f} s ago): wait for it, or "
            f"stop it and resume again (a lease is taken over after {STALE_S:.0f} s without a heartbeat)"
        )

    def _alive(self, row) -> bool:
        """The lease of a run row (``lease_*`` columns) is held by a live process: this one, or one whose
        heartbeat is recent and, on this host, whose pid lives."""
        host, pid, token, beat = row["lease_host"], row["lease_pid"], row["lease_token"], row["lease_heartbeat"]
        if pid is None:
            return False
        if token == self.token:
            return True
        if time.time() - (beat or 0.0) > STALE_S:
            return False
        return host != socket.gethostname() or _pid_alive(int(pid))

    def shown_status(self, row) -> str:
        """A run row's status as a reader should see it: :data:`STALE_STATUS` for a ``running`` run nobody runs
        (its process was killed, or lost power: ``--resume`` continues it), else the stored status."""
        return STALE_STATUS if row["status"] == RUNNING and not self._alive(row) else row["status"]

    def lease(self, run_id: int) -> dict[str, Any]:
        """The run's lease: ``host``, ``pid``, ``heartbeat`` (epoch s), all None when nobody holds it."""
        row = self.conn.execute(
            "SELECT lease_host, lease_pid, lease_heartbeat FROM runs WHERE run_id=?", (run_id,)
        ).fetchone()
        return {"host": row[0], "pid": row[1], "heartbeat": row[2]} if row else {}

    def _hold(self, run_id: int) -> None:
        self._leased.add(run_id)
        if self.path == ":memory:" or (self._beat is not None and self._beat.is_alive()):
            return
        self._beat_stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name="accelbench-lease", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        # Its own connection: a sqlite3 connection belongs to the thread that made it.
        conn = sqlite3.connect(self.path, timeout=30)
        try:
            while not self._beat_stop.wait(HEARTBEAT_S):
                try:
                    with conn:
                        conn.execute("UPDATE runs SET lease_heartbeat=? WHERE lease_token=?", (time.time(), self.token))
                except sqlite3.Error:
                    pass  # a busy database: the next beat retries
        finally:
            conn.close()

    def _stop_heartbeat(self) -> None:
        self._beat_stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=5)
        self._beat = None

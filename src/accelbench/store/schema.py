"""The store's schema: tables, versions, migrations, and opening a file (one-line errors for bad ones)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from accelbench.core.errors import EXIT_USAGE, AccelbenchError, StopSweep

SCHEMA_VERSION = 3

# Tables an accelbench store may hold (the profile's are created by accelbench.scenarios.profile.storage).
OWN_TABLES = {"meta", "runs", "cases", "samples", "sqlite_sequence", "ceilings", "profile_kernels"}

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    finished_at REAL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    env_json TEXT NOT NULL,
    lease_host TEXT,
    lease_pid INTEGER,
    lease_token TEXT,
    lease_heartbeat REAL,
    name TEXT,
    tags TEXT
);
CREATE TABLE IF NOT EXISTS cases (
    case_id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(run_id),
    case_key TEXT NOT NULL,
    workload TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS cases_run ON cases(run_id);
CREATE TABLE IF NOT EXISTS samples (
    case_id INTEGER NOT NULL REFERENCES cases(case_id),
    series TEXT NOT NULL,
    idx INTEGER NOT NULL,
    value REAL
);
CREATE INDEX IF NOT EXISTS samples_case ON samples(case_id, series);
"""
_UNIQUE = "CREATE UNIQUE INDEX IF NOT EXISTS cases_run_key ON cases(run_id, case_key)"
_LEASE_COLUMNS = (
    ("lease_host", "TEXT"),
    ("lease_pid", "INTEGER"),
    ("lease_token", "TEXT"),
    ("lease_heartbeat", "REAL"),
)
_LABEL_COLUMNS = (("name", "TEXT"), ("tags", "TEXT"))  # schema 3: a run's name and its tags (a JSON object)


class StoreError(AccelbenchError):
    """The store cannot be used: not a database, another application's database, a newer schema, a
    location that cannot be written. The message is one line."""


class RunBusyError(AccelbenchError):
    """Another live process holds the run's lease (it is running the run now)."""


class StoreWriteError(StoreError, StopSweep):
    """A write the store refused: locked by another process for longer than :func:`lock_wait_s`, a full disk,
    a read-only file. Before a run exists it is one line and exit 2; during a sweep the loop ends the run as
    interrupted (exit 130, ``--resume`` continues it: :class:`accelbench.core.errors.StopSweep`)."""

    exit_code = EXIT_USAGE


LOCK_WAIT_ENV = "ACCELBENCH_STORE_LOCK_WAIT_S"
LOCK_WAIT_S = 300.0  # how long a write waits for another process's write transaction to end
LOCK_SLICE_MS = 1000  # SQLite's busy timeout of one write attempt; between attempts accelbench backs off


def lock_wait_s() -> float:
    """Seconds a write retries while another process holds the store locked: ``$ACCELBENCH_STORE_LOCK_WAIT_S``
    (a number >= 0), else :data:`LOCK_WAIT_S`."""
    try:
        value = float(os.environ.get(LOCK_WAIT_ENV, LOCK_WAIT_S))
    except ValueError:
        return LOCK_WAIT_S
    return value if math.isfinite(value) and value >= 0 else LOCK_WAIT_S


def _locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _sql_type(value: Any) -> str:
    # A column first seen as None gets no declared type (no affinity), so a later float or int is
    # stored as a number, not coerced to text.
    if value is None:
        return ""
    if isinstance(value, bool) or isinstance(value, int):
        return "INTEGER"
    if isinstance(value, float):
        return "REAL"
    return "TEXT"


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str)
    return value


def _reason(exc: sqlite3.Error) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_CREATED: list[str] = []  # the store files this process created


def discard_created() -> list[str]:
    """Delete the store files this process created that hold nothing (a refused command's): returns their paths.
    ``accelbench.cli.main`` calls it as a command ends, so a refused command leaves no file behind."""
    gone = [path for path in dict.fromkeys(_CREATED) if _discard_if_empty(path)]
    _CREATED.clear()
    return gone


def _discard_if_empty(path: str) -> bool:
    """Delete the store at ``path`` (and its journal) when no table but ``meta`` holds a row."""
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=5)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "meta" not in tables or any(
                conn.execute(f'SELECT 1 FROM "{t}" LIMIT 1').fetchone() for t in tables - {"meta", "sqlite_sequence"}
            ):
                return False
    except sqlite3.Error:
        return False
    for suffix in ("", "-journal", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path + suffix)
    return True


class Schema:
    """Opening a store file and keeping its schema current (a mixin of :class:`accelbench.store.Store`)."""

    path: str
    conn: sqlite3.Connection

    def _note_created(self) -> None:
        if self.path != ":memory:" and not Path(self.path).exists():
            _CREATED.append(self.path)

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            p = Path(self.path)
            if p.is_dir():
                raise StoreError(f"results store {self.path} is a directory: give --db a file path")
            base = next((a for a in p.parents if a.exists()), None)
            if base is not None and not base.is_dir():
                raise StoreError(f"cannot create the results store {self.path}: {base} is a file, not a folder")
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the results store {self.path}: {exc.strerror or exc}") from None
        try:
            conn = sqlite3.connect(self.path, timeout=30)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the results store {self.path}: {_reason(exc)}") from None
        conn.row_factory = sqlite3.Row
        return conn

    def _describe(self, exc: sqlite3.Error) -> str:
        why = _reason(exc)
        if "not a database" in why or "malformed" in why:
            return f"{self.path} is not an accelbench database ({why})"
        if "full" in why:
            return f"cannot write the results store {self.path}: its disk is full ({why})"
        if "readonly" in why or "read-only" in why or "unable to open" in why or "disk I/O" in why:
            return f"cannot write the results store {self.path} ({why}): choose a writable --db"
        return f"results store {self.path}: {why}"

    def _tables(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def _init_schema(self) -> None:
        """Check the store's schema and write or upgrade it. The check that leads to a write runs again under the
        write lock, with the write in the same transaction: processes opening one new store at once (the ranks of a
        user's torchrun) see it either empty or complete, never half-created."""
        if self._schema_version() == SCHEMA_VERSION:
            return  # nothing to write: a read-only store can still be read
        self.conn.execute("BEGIN IMMEDIATE")  # waits (the connection's timeout) for another writer's transaction
        try:
            version = self._schema_version()
            if version != SCHEMA_VERSION:
                for statement in filter(str.strip, _DDL.split(";")):
                    self.conn.execute(statement)
                if version is not None and version < 2:
                    self._migrate_v1()
                if version is not None and version < 3:
                    self._add_columns(_LABEL_COLUMNS)
                self.conn.execute(_UNIQUE)
                self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    def _schema_version(self) -> int | None:
        """The store's schema version, None for an empty store.

        Raises:
            StoreError: another application's database, or a schema newer than this accelbench's.
        """
        tables = self._tables()
        if tables and "meta" not in tables:
            raise StoreError(
                f"{self.path} is another application's SQLite database (tables: "
                f"{', '.join(sorted(tables - {'sqlite_sequence'}))}): use another --db"
            )
        version = None
        if "meta" in tables:
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                raise StoreError(
                    f"{self.path} is another application's SQLite database (no accelbench "
                    "schema version): use another --db"
                )
            version = int(row[0])
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema {version}, newer than this accelbench "
                    f"({SCHEMA_VERSION}): upgrade accelbench"
                )
        return version

    def _migrate_v1(self) -> None:
        """Schema 1 -> 2: lease columns on ``runs``; one row per (run, case key). Duplicate keys (written by
        two concurrent resumes before this version) are kept, renamed ``<key>|dup=<case_id>``."""
        self._add_columns(_LEASE_COLUMNS)
        self.conn.execute(
            "UPDATE cases SET case_key = case_key || '|dup=' || case_id WHERE case_id NOT IN "
            "(SELECT MIN(case_id) FROM cases GROUP BY run_id, case_key)"
        )

    def _add_columns(self, columns: tuple[tuple[str, str], ...]) -> None:
        """Add the ``runs`` columns a store of an older schema lacks (schema 2 -> 3: ``name``, ``tags``)."""
        have = {r[1] for r in self.conn.execute("PRAGMA table_info(runs)")}
        for col, typ in columns:
            if col not in have:
                self.conn.execute(f"ALTER TABLE runs ADD COLUMN {col} {typ}")

    def _write(self, fn, *args, wait_s: float | None = None):
        """Run a write; while another process holds the store locked, retry with backoff for ``wait_s``
        (default :func:`lock_wait_s`), saying once on stderr that it waits.

        Raises:
            StoreError: the write breaks a constraint (a second row of a case).
            StoreWriteError: the store stayed locked, is full, or cannot be written.
        """
        wait = lock_wait_s() if wait_s is None else wait_s
        start, delay = time.monotonic(), 0.05
        while True:
            try:
                return self._attempt(fn, *args)
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"results store {self.path}: {_reason(exc)}") from None
            except sqlite3.OperationalError as exc:
                if not _locked(exc):
                    raise StoreWriteError(self._describe(exc)) from None
            waited = time.monotonic() - start
            if waited >= wait:
                raise StoreWriteError(
                    f"the results store {self.path} stayed locked by another process for "
                    f"{waited:.0f} s ({LOCK_WAIT_ENV} sets how long to wait)"
                ) from None
            if delay == 0.05:
                print(
                    f"waiting: the results store {self.path} is locked by another process; retrying for up to "
                    f"{wait:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
            time.sleep(min(delay, max(0.0, wait - waited)))
            delay = min(2 * delay, 5.0)

    def _attempt(self, fn, *args):
        """``fn(*args)`` with SQLite's busy timeout cut to one slice (reads keep the connection's 30 s)."""
        if self.path == ":memory:":
            return fn(*args)
        self.conn.execute(f"PRAGMA busy_timeout = {LOCK_SLICE_MS}")
        try:
            return fn(*args)
        finally:
            self.conn.execute("PRAGMA busy_timeout = 30000")

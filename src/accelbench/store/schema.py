"""The store's schema: tables, versions, migrations, and opening a file (one-line errors for bad ones)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from accelbench.core.errors import AccelbenchError

SCHEMA_VERSION = 2

# Tables an accelbench store may hold (the profile's are created by accelbench.profile.storage).
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
    lease_heartbeat REAL
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
_LEASE_COLUMNS = (("lease_host", "TEXT"), ("lease_pid", "INTEGER"), ("lease_token", "TEXT"), ("lease_heartbeat", "REAL"))


class StoreError(AccelbenchError):
    """The store cannot be used: not a database, another application's database, a newer schema, a
    location that cannot be written. The message is one line."""


class RunBusyError(AccelbenchError):
    """Another live process holds the run's lease (it is running the run now)."""


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




class Schema:
    """Opening a store file and keeping its schema current (a mixin of :class:`accelbench.store.Store`)."""

    path: str
    conn: sqlite3.Connection

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
        if "readonly" in why or "read-only" in why or "unable to open" in why or "disk I/O" in why:
            return f"cannot write the results store {self.path} ({why}): choose a writable --db"
        return f"results store {self.path}: {why}"

    def _tables(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def _init_schema(self) -> None:
        tables = self._tables()
        if tables and "meta" not in tables:
            raise StoreError(f"{self.path} is another application's SQLite database (tables: "
                             f"{', '.join(sorted(tables - {'sqlite_sequence'}))}): use another --db")
        version = None
        if "meta" in tables:
            row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                raise StoreError(f"{self.path} is another application's SQLite database (no accelbench "
                                 "schema version): use another --db")
            version = int(row[0])
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema {version}, newer than this accelbench "
                                 f"({SCHEMA_VERSION}): upgrade accelbench")
        if version == SCHEMA_VERSION:
            return  # nothing to write: a read-only store can still be read
        with self.conn:
            self.conn.executescript(_DDL)
            if version is not None and version < 2:
                self._migrate_v1()
            self.conn.execute(_UNIQUE)
            self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _migrate_v1(self) -> None:
        """Schema 1 -> 2: lease columns on ``runs``; one row per (run, case key). Duplicate keys (written by
        two concurrent resumes before this version) are kept, renamed ``<key>|dup=<case_id>``."""
        have = {r[1] for r in self.conn.execute("PRAGMA table_info(runs)")}
        for col, typ in _LEASE_COLUMNS:
            if col not in have:
                self.conn.execute(f"ALTER TABLE runs ADD COLUMN {col} {typ}")
        self.conn.execute(
            "UPDATE cases SET case_key = case_key || '|dup=' || case_id WHERE case_id NOT IN "
            "(SELECT MIN(case_id) FROM cases GROUP BY run_id, case_key)")

    def _write(self, fn, *args):
        """Run a write; a database that cannot be written is a one-line StoreError."""
        try:
            return fn(*args)
        except sqlite3.IntegrityError as exc:
            raise StoreError(f"results store {self.path}: {_reason(exc)}") from None
        except sqlite3.OperationalError as exc:
            raise StoreError(self._describe(exc)) from None


"""Results store: SQLite (stdlib ``sqlite3``), one file, schema versioned.

Tables:
    meta(key, value): ``schema_version``.
    runs(run_id, created_at, finished_at, kind, status, spec_hash, spec_json, env_json, lease_host, lease_pid,
        lease_token, lease_heartbeat): the lease names the process that is running the run (see below).
    cases(case_id, run_id, case_key, workload, status, error, ... one column per metric): columns
        are added on first use from the record's keys, so every metric has its own column with the
        unit in its name (``latency_p99_ms``, ``peak_mem_bytes``). ``(run_id, case_key)`` is unique: one
        row per case of a run.
    samples(case_id, series, idx, value): raw series linked to a case (per-batch ``latency_ms``, ...).

Every case is committed as soon as it finishes, so an interrupted sweep loses nothing finished.

One writer per run: ``begin_run`` and ``reopen_run`` take a *lease* on the run (host, pid, a token of this
``Store`` object, a heartbeat refreshed every ``HEARTBEAT_S`` by a background thread); ``finish_run`` and
``close`` give it back. A second process that tries to reopen a leased run gets :class:`RunBusyError`,
unless the lease is stale: its heartbeat is older than ``STALE_S``, or its pid is dead on this host.

Errors opening a file (a directory, a read-only location, a file that is not SQLite, another
application's SQLite database, a newer schema) are :class:`StoreError` with a one-line message.

Extension tables (the profile's ``ceilings`` and ``profile_kernels``, later ones alike) go through the
public API (:meth:`Store.ensure_table`, :meth:`Store.insert_rows`, :meth:`Store.rows`,
:meth:`Store.delete_rows`); no caller touches ``Store.conn``. Exports: :mod:`accelbench.store.export`.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterable

from accelbench.core.errors import AccelbenchError

SCHEMA_VERSION = 2
HEARTBEAT_S = 10.0
STALE_S = 60.0  # six missed heartbeats: the process is gone or hung

# Tables an accelbench store may hold (the profile tables are created by accelbench.profile.storage).
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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class Store:
    """An accelbench SQLite database.

    Args:
        path: the database file (created if missing) or ``:memory:``.
    Raises:
        StoreError: the path is a directory or cannot be created/written, the file is not SQLite or is
            another application's database (refused unless it is empty), or it holds a newer schema.
    """

    def __init__(self, path: str | Path = "accelbench.db"):
        self.path = str(path)
        self.token = uuid.uuid4().hex
        self._leased: set[int] = set()
        self._beat: threading.Thread | None = None
        self._beat_stop = threading.Event()
        self.conn = self._connect()
        try:
            self._init_schema()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise StoreError(self._describe(exc)) from None

    # opening --------------------------------------------------------------------------------------
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

    def close(self) -> None:
        """Give back the leases this object holds and close the connection."""
        self._stop_heartbeat()
        if self._leased:
            try:
                with self.conn:
                    self.conn.execute("UPDATE runs SET lease_pid=NULL, lease_host=NULL, lease_token=NULL, "
                                      "lease_heartbeat=NULL WHERE lease_token=?", (self.token,))
            except sqlite3.Error:
                pass
            self._leased.clear()
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # runs -----------------------------------------------------------------------------------------
    def begin_run(self, kind: str, spec: dict, spec_hash: str, env: dict) -> int:
        """Insert a run (status ``running``, leased to this process) and return its id.

        Raises:
            StoreError: the store cannot be written.
        """
        def insert() -> int:
            with self.conn:
                cur = self.conn.execute(
                    "INSERT INTO runs (created_at, kind, status, spec_hash, spec_json, env_json, lease_host, lease_pid, "
                    "lease_token, lease_heartbeat) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (time.time(), kind, "running", spec_hash, json.dumps(spec, default=str), json.dumps(env, default=str),
                     socket.gethostname(), os.getpid(), self.token, time.time()),
                )
            return int(cur.lastrowid)

        run_id = self._write(insert)
        self._hold(run_id)
        return run_id

    def finish_run(self, run_id: int, status: str) -> None:
        """Set the run's final status and give back its lease."""
        def update() -> None:
            with self.conn:
                self.conn.execute("UPDATE runs SET status=?, finished_at=?, lease_pid=NULL, lease_host=NULL, "
                                  "lease_token=NULL, lease_heartbeat=NULL WHERE run_id=?", (status, time.time(), run_id))

        self._write(update)
        self._leased.discard(run_id)
        if not self._leased:
            self._stop_heartbeat()

    def reopen_run(self, run_id: int) -> None:
        """Take the run's lease and mark it ``running`` again (``--resume``).

        Raises:
            RunBusyError: a live process holds the lease (its heartbeat is recent and, on this host, its pid lives).
        """
        def take() -> None:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                row = self.conn.execute("SELECT lease_host, lease_pid, lease_token, lease_heartbeat FROM runs "
                                        "WHERE run_id=?", (run_id,)).fetchone()
                if row is None:
                    raise KeyError(f"no run {run_id}")
                busy = self._busy_reason(run_id, row)
                if busy:
                    raise RunBusyError(busy)
                self.conn.execute("UPDATE runs SET status='running', finished_at=NULL, lease_host=?, lease_pid=?, "
                                  "lease_token=?, lease_heartbeat=? WHERE run_id=?",
                                  (socket.gethostname(), os.getpid(), self.token, time.time(), run_id))
            except BaseException:
                self.conn.rollback()
                raise
            self.conn.commit()

        self._write(take)
        self._hold(run_id)

    def _busy_reason(self, run_id: int, row) -> str | None:
        host, pid, token, beat = row["lease_host"], row["lease_pid"], row["lease_token"], row["lease_heartbeat"]
        if pid is None or token == self.token:
            return None
        age = time.time() - (beat or 0.0)
        if age > STALE_S:
            return None  # stale: the holder stopped heart-beating
        if host == socket.gethostname() and not _pid_alive(int(pid)):
            return None  # its process is gone
        return (f"run {run_id} is being run by pid {pid} on {host} (heartbeat {age:.0f} s ago): wait for it, or "
                f"stop it and resume again (a lease is taken over after {STALE_S:.0f} s without a heartbeat)")

    def lease(self, run_id: int) -> dict[str, Any]:
        """The run's lease: ``host``, ``pid``, ``heartbeat`` (epoch s), all None when nobody holds it."""
        row = self.conn.execute("SELECT lease_host, lease_pid, lease_heartbeat FROM runs WHERE run_id=?", (run_id,)).fetchone()
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

    def resumable_run(self, kind: str, spec_hash: str) -> int | None:
        """The newest run of this kind and spec that did not complete, or None."""
        row = self.conn.execute(
            "SELECT run_id FROM runs WHERE kind=? AND spec_hash=? AND status!='complete' "
            "ORDER BY run_id DESC LIMIT 1",
            (kind, spec_hash),
        ).fetchone()
        return int(row[0]) if row else None

    def run(self, run_id: int | None = None) -> dict[str, Any]:
        """One run as a dict with ``spec`` and ``env`` decoded; the newest when ``run_id`` is None.

        Raises:
            KeyError: no such run (or the store is empty).
        """
        q = "SELECT * FROM runs " + ("WHERE run_id=?" if run_id is not None else "ORDER BY run_id DESC LIMIT 1")
        row = self.conn.execute(q, (run_id,) if run_id is not None else ()).fetchone()
        if row is None:
            raise KeyError(f"no run {run_id}" if run_id is not None else "the store has no runs")
        out = dict(row)
        out["spec"] = json.loads(out.pop("spec_json"))
        out["env"] = json.loads(out.pop("env_json"))
        return out

    def runs(self) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT r.run_id, r.created_at, r.kind, r.status, "
            "(SELECT COUNT(*) FROM cases c WHERE c.run_id=r.run_id) AS cases FROM runs r ORDER BY r.run_id"
        ).fetchall()
        return [dict(r) for r in rows]

    # cases ----------------------------------------------------------------------------------------
    def _columns(self, table: str) -> set[str]:
        return {r[1] for r in self.conn.execute(f"PRAGMA table_info({table})")}

    def _ensure_columns(self, table: str, record: dict[str, Any]) -> None:
        have = self._columns(table)
        for key, value in record.items():
            if key not in have:
                if not key.isidentifier():
                    raise ValueError(f"bad column name {key!r}")
                self.conn.execute(f'ALTER TABLE {table} ADD COLUMN "{key}" {_sql_type(value)}')

    def add_case(self, run_id: int, record: dict[str, Any], series: dict[str, Iterable[float]] | None = None) -> int:
        """Store one case result (committed at once) with its raw series; return ``case_id``.

        Args:
            record: must hold ``case_key``, ``workload`` and ``status``; every other key becomes a column.
            series: raw samples by name, e.g. ``{"latency_ms": [...]}``.
        Raises:
            StoreError: the run already has a row with this ``case_key``, or the store cannot be written.
        """
        rec = {k: _cell(v) for k, v in record.items()}
        rec["run_id"] = run_id

        def insert() -> int:
            with self.conn:
                self._ensure_columns("cases", rec)
                cols = ", ".join(f'"{k}"' for k in rec)
                cur = self.conn.execute(f"INSERT INTO cases ({cols}) VALUES ({', '.join('?' * len(rec))})", list(rec.values()))
                case_id = int(cur.lastrowid)
                for name, values in (series or {}).items():
                    self.conn.executemany(
                        "INSERT INTO samples VALUES (?,?,?,?)", [(case_id, name, i, v) for i, v in enumerate(values)]
                    )
            return case_id

        return self._write(insert)

    def delete_cases(self, run_id: int, keys: Iterable[str]) -> int:
        """Remove the rows (and raw series) of ``keys`` from a run, e.g. epochs a resumed run trains again."""
        keys = list(keys)

        def delete() -> int:
            with self.conn:
                q = ",".join("?" * len(keys))
                ids = [r[0] for r in self.conn.execute(f"SELECT case_id FROM cases WHERE run_id=? AND case_key IN ({q})",
                                                       (run_id, *keys))]
                self.conn.executemany("DELETE FROM samples WHERE case_id=?", [(i,) for i in ids])
                self.conn.executemany("DELETE FROM cases WHERE case_id=?", [(i,) for i in ids])
            return len(ids)

        return self._write(delete) if keys else 0

    def case(self, case_id: int) -> dict[str, Any]:
        """One stored case as a dict, JSON columns (lists, dicts) decoded.

        Raises:
            KeyError: no such case.
        """
        row = self.conn.execute("SELECT * FROM cases WHERE case_id=?", (case_id,)).fetchone()
        if row is None:
            raise KeyError(f"no case {case_id}")
        rec = dict(row)
        for k, v in rec.items():
            if isinstance(v, str) and v[:1] in "[{":
                try:
                    rec[k] = json.loads(v)
                except ValueError:
                    pass
        return rec

    def update_case(self, case_id: int, fields: dict[str, Any]) -> None:
        """Set ``fields`` on a stored case (new columns are added as :meth:`add_case` adds them)."""
        vals = {k: _cell(v) for k, v in fields.items()}

        def update() -> None:
            with self.conn:
                self._ensure_columns("cases", vals)
                sets = ", ".join(f'"{k}"=?' for k in vals)
                self.conn.execute(f"UPDATE cases SET {sets} WHERE case_id=?", [*vals.values(), case_id])

        self._write(update)

    def find_cases(self, *, key_like: str | None = None, workload: str | None = None,
                   status: str | None = None) -> list[dict[str, Any]]:
        """Cases of every run matching a ``LIKE`` pattern on the key (``\\`` escapes), a workload and a status,
        newest first (an empty list on a store without such columns yet)."""
        where, args = [], []
        for col, op, val in (("case_key", "LIKE ? ESCAPE '\\'", key_like), ("workload", "= ?", workload),
                             ("status", "= ?", status)):
            if val is not None:
                where.append(f"{col} {op}")
                args.append(val)
        q = "SELECT * FROM cases" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY case_id DESC"
        try:
            return [dict(r) for r in self.conn.execute(q, args)]
        except sqlite3.OperationalError:
            return []

    # extension tables -------------------------------------------------------------------------------
    def ensure_table(self, ddl: str, table: str, columns: dict[str, str] | None = None) -> None:
        """Create an extension table (``ddl``: ``CREATE TABLE IF NOT EXISTS ...`` and its indexes) and add any
        of ``columns`` (name -> SQL type) that a store written by an older accelbench lacks."""
        def create() -> None:
            with self.conn:
                self.conn.executescript(ddl)
                have = self._columns(table)
                for col, typ in (columns or {}).items():
                    if col not in have:
                        self.conn.execute(f'ALTER TABLE {table} ADD COLUMN "{col}" {typ}')

        self._write(create)

    def insert_rows(self, table: str, rows: list[dict[str, Any]]) -> int | None:
        """Insert ``rows`` (dicts with the same keys) into an extension table; returns the last row id."""
        if not rows:
            return None
        cols = list(rows[0])

        def insert() -> int:
            with self.conn:
                self.conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                      [[_cell(r.get(c)) for c in cols] for r in rows])
                return int(self.conn.execute("SELECT last_insert_rowid()").fetchone()[0])

        return self._write(insert)

    def rows(self, table: str, where: dict[str, Any] | None = None, order_by: str | None = None,
             limit: int | None = None) -> list[dict[str, Any]]:
        """Rows of an extension table matching ``where`` (column -> value), as dicts."""
        cond = " AND ".join(f'"{k}"=?' for k in (where or {}))
        q = f"SELECT * FROM {table}" + (f" WHERE {cond}" if cond else "") + (f" ORDER BY {order_by}" if order_by else "")
        q += f" LIMIT {int(limit)}" if limit else ""
        return [dict(r) for r in self.conn.execute(q, list((where or {}).values()))]

    def delete_rows(self, table: str, where: dict[str, Any]) -> None:
        """Delete the rows of an extension table matching ``where`` (column -> value)."""
        cond = " AND ".join(f'"{k}"=?' for k in where)

        def delete() -> None:
            with self.conn:
                self.conn.execute(f"DELETE FROM {table} WHERE {cond}", list(where.values()))

        self._write(delete)

    def done_keys(self, run_id: int) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT case_key FROM cases WHERE run_id=?", (run_id,))}

    def cases(self, run_id: int | None = None, workload: str | None = None):
        """Cases as a pandas DataFrame (all runs when ``run_id`` is None), empty columns dropped."""
        import pandas as pd

        where, args = [], []
        if run_id is not None:
            where.append("run_id=?")
            args.append(run_id)
        if workload is not None:
            where.append("workload=?")
            args.append(workload)
        q = "SELECT * FROM cases" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY case_id"
        df = pd.read_sql_query(q, self.conn, params=args).dropna(axis=1, how="all")
        for col in df.columns[df.dtypes == object]:
            try:  # numbers kept as text by an older store
                df[col] = pd.to_numeric(df[col])
            except (ValueError, TypeError):
                pass
        return df

    def all_series(self, case_id: int) -> dict[str, list[float]]:
        """Every raw series of a case, by name."""
        out: dict[str, list[float]] = {}
        for r in self.conn.execute("SELECT series, value FROM samples WHERE case_id=? ORDER BY series, idx", (case_id,)):
            out.setdefault(r[0], []).append(r[1])
        return out

    def series(self, case_id: int, name: str) -> list[float]:
        rows = self.conn.execute(
            "SELECT value FROM samples WHERE case_id=? AND series=? ORDER BY idx", (case_id, name)
        ).fetchall()
        return [r[0] for r in rows]

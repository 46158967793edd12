"""Results store: SQLite (stdlib ``sqlite3``), one file, schema versioned.

Tables:
    meta(key, value): ``schema_version``.
    runs(run_id, created_at, finished_at, kind, status, spec_hash, spec_json, env_json, lease_host, lease_pid,
        lease_token, lease_heartbeat, name, tags): ``name`` and ``tags`` (a JSON object) label a run; the lease names the process that is running the run (see below).
    cases(case_id, run_id, case_key, workload, status, error, ... one column per metric): columns
        are added on first use from the record's keys, so every metric has its own column with the
        unit in its name (``latency_p99_ms``, ``peak_mem_bytes``). ``(run_id, case_key)`` is unique: one
        row per case of a run.
    samples(case_id, series, idx, value): raw series linked to a case (per-batch ``latency_ms``, ...).

Every case is committed as soon as it finishes, so an interrupted sweep loses nothing finished.

One writer per run: a *lease* on a running run (:mod:`accelbench.store.lease`). Opening a file and its
schema: :mod:`accelbench.store.schema`. Extension tables: :mod:`accelbench.store.tables`. A run's name and tags
(schema 3): :mod:`accelbench.store.labels`.

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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from accelbench.core.errors import COMPLETE, RUNNING
from accelbench.store.labels import Labels, label_cells, tags_of, what_and_where
from accelbench.store.lease import HEARTBEAT_S, STALE_S, Lease
from accelbench.store.schema import (
    SCHEMA_VERSION,
    RunBusyError,
    Schema,
    StoreError,
    StoreWriteError,
    _cell,
    _sql_type,
    discard_created,
)
from accelbench.store.tables import Tables

__all__ = [
    "Store",
    "StoreError",
    "StoreWriteError",
    "RunBusyError",
    "SCHEMA_VERSION",
    "HEARTBEAT_S",
    "STALE_S",
    "discard_created",
]


class Store(Schema, Lease, Tables, Labels):
    """An accelbench SQLite database.

    Args:
        path: the database file (created if missing) or ``:memory:``.
    Raises:
        StoreError: the path is a directory or cannot be created/written, the file is not SQLite or is
            another application's database (refused unless it is empty), or it holds a newer schema.
    """

    def __init__(self, path: str | Path = "accelbench.db"):
        self.path = str(path)
        self._note_created()
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

    def close(self) -> None:
        """Give back the leases this object holds and close the connection."""
        self._stop_heartbeat()
        if self._leased:
            try:
                with self.conn:
                    self.conn.execute(
                        "UPDATE runs SET lease_pid=NULL, lease_host=NULL, lease_token=NULL, "
                        "lease_heartbeat=NULL WHERE lease_token=?",
                        (self.token,),
                    )
            except sqlite3.Error:
                pass
            self._leased.clear()
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # runs -----------------------------------------------------------------------------------------
    def begin_run(self, kind: str, spec: dict, spec_hash: str, env: dict, label=None) -> int:
        """Insert a run (status ``running``, leased to this process) and return its id.

        Args:
            label: the run's name and tags (:class:`accelbench.core.runlabel.RunLabel`; None: unnamed).
        Raises:
            StoreError: the store cannot be written.
        """
        name, tags = label_cells(label)

        def insert() -> int:
            with self.conn:
                cur = self.conn.execute(
                    "INSERT INTO runs (created_at, kind, status, spec_hash, spec_json, env_json, lease_host, lease_pid, "
                    "lease_token, lease_heartbeat, name, tags) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (
                        time.time(),
                        kind,
                        RUNNING,
                        spec_hash,
                        json.dumps(spec, default=str),
                        json.dumps(env, default=str),
                        socket.gethostname(),
                        os.getpid(),
                        self.token,
                        time.time(),
                        name,
                        tags,
                    ),
                )
            return int(cur.lastrowid)

        run_id = self._write(insert)
        self._hold(run_id)
        return run_id

    def finish_run(self, run_id: int, status: str, wait_s: float | None = None) -> None:
        """Set the run's final status and give back its lease.

        Args:
            wait_s: how long to wait for a store another process holds locked (default :func:`lock_wait_s`).
        Raises:
            StoreWriteError: the store cannot be written.
        """

        def update() -> None:
            with self.conn:
                self.conn.execute(
                    "UPDATE runs SET status=?, finished_at=?, lease_pid=NULL, lease_host=NULL, "
                    "lease_token=NULL, lease_heartbeat=NULL WHERE run_id=?",
                    (status, time.time(), run_id),
                )

        self._write(update, wait_s=wait_s)
        self._leased.discard(run_id)
        if not self._leased:
            self._stop_heartbeat()

    def resumable_run(self, kind: str, spec_hash: str) -> int | None:
        """The newest run of this kind and spec that did not complete, or None."""
        row = self.conn.execute(
            "SELECT run_id FROM runs WHERE kind=? AND spec_hash=? AND status!=? ORDER BY run_id DESC LIMIT 1",
            (kind, spec_hash, COMPLETE),
        ).fetchone()
        return int(row[0]) if row else None

    def complete_run(self, kind: str, spec_hash: str) -> int | None:
        """The newest complete run of this kind and spec (what ``--resume`` reports when nothing is left), or None."""
        row = self.conn.execute(
            "SELECT run_id FROM runs WHERE kind=? AND spec_hash=? AND status=? ORDER BY run_id DESC LIMIT 1",
            (kind, spec_hash, COMPLETE),
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
        out["status"] = self.shown_status(row)
        out["spec"] = json.loads(out.pop("spec_json"))
        out["env"] = json.loads(out.pop("env_json"))
        out["tags"] = tags_of(out.get("tags"))
        return out

    def runs(self) -> list[dict[str, Any]]:
        """Every run: ``run_id``, ``created_at``, ``kind``, ``status`` (a ``running`` run whose process is gone
        reads ``interrupted (stale)``), ``cases`` (rows stored), ``models`` (the spec's, comma-joined; None for a
        study without one), ``device`` (the device's name, from the run's environment), ``name`` (None: unnamed)
        and ``tags`` (a dict)."""
        rows = self.conn.execute(
            "SELECT r.run_id, r.created_at, r.kind, r.status, r.name, r.tags, r.lease_host, r.lease_pid, r.lease_token, "
            "r.lease_heartbeat, r.spec_json, r.env_json, (SELECT COUNT(*) FROM cases c WHERE c.run_id=r.run_id) AS cases "
            "FROM runs r ORDER BY r.run_id"
        ).fetchall()
        keep = ("run_id", "created_at", "kind", "status", "cases", "name")
        return [
            {**{k: r[k] for k in keep}, "status": self.shown_status(r), "tags": tags_of(r["tags"]), **what_and_where(r)}
            for r in rows
        ]

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
                cur = self.conn.execute(
                    f"INSERT INTO cases ({cols}) VALUES ({', '.join('?' * len(rec))})", list(rec.values())
                )
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
                ids = [
                    r[0]
                    for r in self.conn.execute(
                        f"SELECT case_id FROM cases WHERE run_id=? AND case_key IN ({q})", (run_id, *keys)
                    )
                ]
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

    def find_cases(
        self, *, key_like: str | None = None, workload: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        """Cases of every run matching a ``LIKE`` pattern on the key (``\\`` escapes), a workload and a status,
        newest first (an empty list on a store without such columns yet)."""
        where, args = [], []
        for col, op, val in (
            ("case_key", "LIKE ? ESCAPE '\\'", key_like),
            ("workload", "= ?", workload),
            ("status", "= ?", status),
        ):
            if val is not None:
                where.append(f"{col} {op}")
                args.append(val)
        q = "SELECT * FROM cases" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY case_id DESC"
        try:
            return [dict(r) for r in self.conn.execute(q, args)]
        except sqlite3.OperationalError:
            return []

    # extension tables -------------------------------------------------------------------------------
    def done_keys(self, run_id: int) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT case_key FROM cases WHERE run_id=?", (run_id,))}

    def _select(self, run_id: int | None, workload: str | None) -> tuple[str, list]:
        where = [(c, v) for c, v in (("run_id", run_id), ("workload", workload)) if v is not None]
        cond = " WHERE " + " AND ".join(f"{c}=?" for c, _ in where) if where else ""
        return f"SELECT * FROM cases{cond} ORDER BY case_id", [v for _, v in where]

    def records(self, run_id: int | None = None, workload: str | None = None) -> list[dict[str, Any]]:
        """Cases (all runs when ``run_id`` is None) as typed rows: each value as its column declares
        (:func:`accelbench.core.columns.typed`: missing is None, never NaN; ints, 0/1 flags as bools, JSON decoded).
        Columns no selected row has are left out."""
        from accelbench.core.columns import typed_row

        rows = [typed_row(dict(r)) for r in self.conn.execute(*self._select(run_id, workload))]
        empty = {k for k in (rows[0] if rows else ()) if all(r[k] is None for r in rows)}
        return [{k: v for k, v in r.items() if k not in empty} for r in rows]

    def cases(self, run_id: int | None = None, workload: str | None = None):
        """Cases as a pandas DataFrame (all runs when ``run_id`` is None), empty columns dropped."""
        import pandas as pd

        q, args = self._select(run_id, workload)
        df = pd.read_sql_query(q, self.conn, params=args).dropna(axis=1, how="all")
        for col in df.columns[df.dtypes == object]:  # noqa: E721
            try:  # numbers kept as text by an older store
                df[col] = pd.to_numeric(df[col])
            except (ValueError, TypeError):
                pass
        return df

    def all_series(self, case_id: int) -> dict[str, list[float]]:
        """Every raw series of a case, by name."""
        out: dict[str, list[float]] = {}
        for r in self.conn.execute(
            "SELECT series, value FROM samples WHERE case_id=? ORDER BY series, idx", (case_id,)
        ):
            out.setdefault(r[0], []).append(r[1])
        return out

    def series(self, case_id: int, name: str) -> list[float]:
        rows = self.conn.execute(
            "SELECT value FROM samples WHERE case_id=? AND series=? ORDER BY idx", (case_id, name)
        ).fetchall()
        return [r[0] for r in rows]

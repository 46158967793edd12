"""Results store: SQLite (stdlib ``sqlite3``), one file, schema versioned.

Tables:
    meta(key, value): ``schema_version``.
    runs(run_id, created_at, finished_at, kind, status, spec_hash, spec_json, env_json).
    cases(case_id, run_id, case_key, workload, status, error, ... one column per metric): columns
        are added on first use from the record's keys, so every metric has its own column with the
        unit in its name (``latency_p99_ms``, ``peak_mem_bytes``).
    samples(case_id, series, idx, value): raw series linked to a case (per-batch ``latency_ms``, ...).

Every case is committed as soon as it finishes, so an interrupted sweep loses nothing finished.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable

SCHEMA_VERSION = 1

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
    env_json TEXT NOT NULL
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


class StoreError(RuntimeError):
    """The database file is not an accelbench store or has a newer schema."""


def _sql_type(value: Any) -> str:
    if value is None:  # no declared type (no affinity): a later number stays a number, not text
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


class Store:
    """An accelbench SQLite database.

    Args:
        path: the database file (created if missing) or ``:memory:``.
    Raises:
        StoreError: the file holds a newer schema version than this accelbench knows.
    """

    def __init__(self, path: str | Path = "accelbench.db"):
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(self.path, timeout=30)
        self.conn.row_factory = sqlite3.Row
        try:
            self.conn.executescript(_DDL)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not an accelbench database: {exc}") from None
        row = self.conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self.conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.conn.commit()
        elif int(row[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema {row[0]}, newer than this accelbench ({SCHEMA_VERSION})")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # runs -----------------------------------------------------------------------------------------
    def begin_run(self, kind: str, spec: dict, spec_hash: str, env: dict) -> int:
        """Insert a run (status ``running``) and return its id."""
        cur = self.conn.execute(
            "INSERT INTO runs (created_at, kind, status, spec_hash, spec_json, env_json) VALUES (?,?,?,?,?,?)",
            (time.time(), kind, "running", spec_hash, json.dumps(spec, default=str), json.dumps(env, default=str)),
        )
        self.conn.commit()
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str) -> None:
        self.conn.execute("UPDATE runs SET status=?, finished_at=? WHERE run_id=?", (status, time.time(), run_id))
        self.conn.commit()

    def reopen_run(self, run_id: int) -> None:
        self.conn.execute("UPDATE runs SET status='running', finished_at=NULL WHERE run_id=?", (run_id,))
        self.conn.commit()

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
        """
        rec = {k: _cell(v) for k, v in record.items()}
        rec["run_id"] = run_id
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
        return pd.read_sql_query(q, self.conn, params=args).dropna(axis=1, how="all")

    def series(self, case_id: int, name: str) -> list[float]:
        rows = self.conn.execute(
            "SELECT value FROM samples WHERE case_id=? AND series=? ORDER BY idx", (case_id, name)
        ).fetchall()
        return [r[0] for r in rows]

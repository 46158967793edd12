"""A run's name and tags (schema 3): set, looked up by name, read back (a mixin of :class:`accelbench.store.Store`);
what ``Store.runs`` shows of a run's spec and environment.

A name need not be unique: ``compare --baseline NAME`` takes the newest run of that name, so a nightly job can
name every run ``nightly``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any


class Labels:
    """Run names and tags (a mixin of :class:`accelbench.store.Store`)."""

    conn: sqlite3.Connection

    def label_run(self, run_id: int, label) -> None:
        """Set a run's name (when the label has one) and add its tags (a resumed run named on ``--resume``).

        Raises:
            StoreWriteError: the store cannot be written.
        """
        if not label:
            return
        tags = {**self.run(run_id)["tags"], **label.tags}

        def update() -> None:
            with self.conn:
                self.conn.execute(
                    "UPDATE runs SET name=COALESCE(?, name), tags=? WHERE run_id=?",
                    (label.name, json.dumps(tags) if tags else None, run_id),
                )

        self._write(update)

    def insert_run(
        self,
        *,
        kind: str,
        status: str,
        spec: dict,
        env: dict,
        spec_hash: str,
        label=None,
        created_at: float | None = None,
        finished_at: float | None = None,
    ) -> int:
        """Insert a finished run as it was measured elsewhere (``accelbench import``): its status and times kept
        (None: now), no lease. Returns its id.

        Raises:
            StoreWriteError: the store cannot be written.
        """
        name, tags = label_cells(label)
        now = time.time()

        def insert() -> int:
            with self.conn:
                cur = self.conn.execute(
                    "INSERT INTO runs (created_at, finished_at, kind, status, spec_hash, spec_json, env_json, name, tags) "
                    "VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        now if created_at is None else float(created_at),
                        finished_at,
                        kind,
                        status,
                        spec_hash,
                        json.dumps(spec, default=str),
                        json.dumps(env, default=str),
                        name,
                        tags,
                    ),
                )
            return int(cur.lastrowid)

        return self._write(insert)

    def named(self, name: str) -> list[int]:
        """The ids of the runs named ``name``, oldest first (empty: none)."""
        return [int(r[0]) for r in self.conn.execute("SELECT run_id FROM runs WHERE name=? ORDER BY run_id", (name,))]

    def names(self) -> list[str]:
        """Every run name in the store, each once, in the order first used."""
        rows = self.conn.execute("SELECT name FROM runs WHERE name IS NOT NULL GROUP BY name ORDER BY MIN(run_id)")
        return [r[0] for r in rows]


def label_cells(label) -> tuple[str | None, str | None]:
    """``(name, tags as a JSON object or None)`` of a :class:`accelbench.core.runlabel.RunLabel` (or None)."""
    if not label:
        return None, None
    return label.name, json.dumps(dict(label.tags)) if label.tags else None


def tags_of(text: str | None) -> dict[str, str]:
    """A run's stored tags as a dict (``{}``: none)."""
    try:
        tags = json.loads(text) if text else {}
    except ValueError:
        return {}
    return tags if isinstance(tags, dict) else {}


def what_and_where(row) -> dict[str, Any]:
    """``models`` and ``device`` of a run row, from its stored spec and environment (None where absent)."""
    try:
        spec, env = json.loads(row["spec_json"] or "{}"), json.loads(row["env_json"] or "{}")
    except ValueError:
        return {"models": None, "device": None}
    models = spec.get("models") if isinstance(spec, dict) else None
    models = ",".join(map(str, models)) if isinstance(models, list) and models else None
    device = (env.get("device_name") or env.get("device")) if isinstance(env, dict) else None
    return {"models": models, "device": device}

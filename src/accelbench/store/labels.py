"""A run's name and tags (schema 3): set, looked up by name, read back (a mixin of :class:`accelbench.store.Store`);
what ``Store.runs`` shows of a run's spec and environment.

A name need not be unique: ``compare --baseline NAME`` takes the newest run of that name, so a nightly job can
name every run ``nightly``.
"""

from __future__ import annotations

import json
import sqlite3
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
                self.conn.execute("UPDATE runs SET name=COALESCE(?, name), tags=? WHERE run_id=?",
                                  (label.name, json.dumps(tags) if tags else None, run_id))

        self._write(update)

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


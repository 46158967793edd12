"""Extension tables: the public API through which a scenario keeps its own tables in the store (the profile's
``ceilings`` and ``profile_kernels``); no caller touches ``Store.conn``."""

from __future__ import annotations

import sqlite3
from typing import Any

from accelbench.store.schema import _cell


class Tables:
    """The extension-table methods of :class:`accelbench.store.Store` (a mixin)."""

    conn: sqlite3.Connection

    def has_table(self, table: str) -> bool:
        """Whether the store holds extension table ``table`` (reading never creates one)."""
        return table in self._tables()

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
        """Insert ``rows`` into an extension table (a key a row lacks: NULL); returns the last row id."""
        if not rows:
            return None
        cols = list(dict.fromkeys(k for r in rows for k in r))

        def insert() -> int:
            with self.conn:
                self.conn.executemany(
                    f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [[_cell(r.get(c)) for c in cols] for r in rows],
                )
                return int(self.conn.execute("SELECT last_insert_rowid()").fetchone()[0])

        return self._write(insert)

    def rows(
        self, table: str, where: dict[str, Any] | None = None, order_by: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Rows of an extension table matching ``where`` (column -> value), as dicts."""
        cond = " AND ".join(f'"{k}"=?' for k in (where or {}))
        q = (
            f"SELECT * FROM {table}"
            + (f" WHERE {cond}" if cond else "")
            + (f" ORDER BY {order_by}" if order_by else "")
        )
        q += f" LIMIT {int(limit)}" if limit else ""
        return [dict(r) for r in self.conn.execute(q, list((where or {}).values()))]

    def delete_rows(self, table: str, where: dict[str, Any]) -> None:
        """Delete the rows of an extension table matching ``where`` (column -> value)."""
        cond = " AND ".join(f'"{k}"=?' for k in where)

        def delete() -> None:
            with self.conn:
                self.conn.execute(f"DELETE FROM {table} WHERE {cond}", list(where.values()))

        self._write(delete)

"""The JSON Schema (draft 2020-12) of a result row, generated from the column table: what ``accelbench export``
writes (each entry of a JSON export's ``results``, each CSV row), printed by ``accelbench schema`` and shipped as
``docs/result-row.schema.json``.

Every property allows null (missing). Booleans are 0/1 and JSON columns JSON text, as stored. A family of
columns (``family_*_time_s``) is a ``patternProperties`` entry. Columns the table does not declare (a third
party's scenario) are allowed. ``x-combine`` (the rule over ranks and GPUs) and ``x-scenarios`` (who fills it)
are annotations.
"""

from __future__ import annotations

import json
from typing import Any

from accelbench.core.columns.column import BOOL, FLOAT, INT, JSON, STR, WORD, Column, pattern
from accelbench.core.columns.registry import COLUMNS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
REQUIRED = ("case_id", "run_id", "case_key", "workload", "status")
_TYPES = {INT: "integer", FLOAT: "number", STR: "string", JSON: "string"}


def property_schema(c: Column) -> dict[str, Any]:
    """The schema of one column's value."""
    out: dict[str, Any] = {"title": c.label}
    if c.doc:
        out["description"] = c.doc
    if c.type == BOOL:
        out["enum"] = [0, 1, None]
    else:
        out["type"] = _TYPES[c.type] if c.name in REQUIRED else [_TYPES[c.type], "null"]
    if c.type == JSON:
        out["contentMediaType"] = "application/json"
    if c.levels:
        out["enum"] = list(c.levels) + ([] if c.name in REQUIRED else [None])
    out["x-combine"] = c.combine
    if c.scenarios:
        out["x-scenarios"] = list(c.scenarios)
    return out


def json_schema() -> dict[str, Any]:
    """The schema of an exported result row, every stored column of :data:`COLUMNS` in it."""
    stored = [c for c in COLUMNS.values() if c.stored]
    return {
        "$schema": DRAFT,
        "title": "accelbench result row",
        "description": "One case of a run as `accelbench export` writes it (a JSON export's `results` entry, a CSV "
        "row). Units are in the column names; values are in base units; null is missing.",
        "type": "object",
        "required": list(REQUIRED),
        "properties": {c.name: property_schema(c) for c in stored if WORD not in c.name},
        "patternProperties": {pattern(c.name).pattern: property_schema(c) for c in stored if WORD in c.name},
        "additionalProperties": True,
    }


def schema_text() -> str:
    """:func:`json_schema` as the text ``accelbench schema`` prints and ``docs/result-row.schema.json`` holds."""
    return json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n"

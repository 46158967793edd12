"""``accelbench report``: one self-contained HTML file (jinja2, autoescaped; charts inline) or a markdown
file, for one or several stored runs and the comparisons between them.

The document is plain data (:mod:`accelbench.report.sections`): a title and sections, each with provenance,
tables, charts and notes. Every string from a user or the environment (model names, errors, hosts, specs)
is escaped by jinja2's autoescape in HTML and turned into entities in markdown; only the charts, which
matplotlib renders to SVG paths, go in as markup.
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any

from accelbench.report.sections import run_section


def comparison_section(comparison, sides: tuple[dict, dict] | None = None) -> dict[str, Any]:
    """A report section of an :class:`accelbench.core.compare.Comparison`: its headline
    (:func:`accelbench.report.headline.headline`), A and B overlaid and their ratio against batch size
    (:mod:`accelbench.report.compare_charts`; ``sides``: the rows of A and of B by case id, for each run's own
    whiskers), every metric's table and the notes."""
    from accelbench.report.blocks import charts_block
    from accelbench.report.compare_charts import comparison_charts
    from accelbench.report.compare_table import METRIC_COLUMNS, notes, rows
    from accelbench.report.headline import headline

    heads, body = rows(comparison, wide=True)
    lines = notes(comparison) or ["same environment, no flags"]
    head = headline(comparison)
    return {
        "id": "compare",
        "title": f"Comparison: {comparison.b} (B) against {comparison.a} (A)",
        "provenance": [],
        "spec": None,
        "headline": head["line"],
        "blocks": [
            b
            for b in (
                {"type": "headline", "title": None, **head},
                charts_block(comparison_charts(comparison, sides)),
                {
                    "type": "table",
                    "title": f"Matched cases (margin {100 * comparison.margin:g}%, 95% intervals)",
                    "headers": heads,
                    "rows": body,
                    "notes": [],
                    "unit": METRIC_COLUMNS,
                    "max_columns": {"screen": 12},
                },  # two metrics a group: its interval cells are wide
                {"type": "notes", "title": "Environment differences and flags", "lines": lines},
            )
            if b
        ],
    }


def build(
    store,
    run_ids: list[int] | None = None,
    comparisons: list | None = None,
    runs: list[tuple[Any, int, str]] | None = None,
    sides: list | None = None,
) -> dict[str, Any]:
    """The report document: a section per run (all runs of the store when neither ``run_ids`` nor ``runs`` is
    given, in id order), one setting side by side the tensor-parallel degrees of a generate case measured at several
    (:func:`accelbench.report.generate.tp_section`), and one per comparison, whose headlines also head the page
    (``headlines``: ``href`` and ``line``). ``runs``: ``(store, run_id, label)`` triples, for runs of several stores
    (:func:`accelbench.store.refs.open_ref`); ``sides``: per comparison, the rows of A and of B by case id (or None).

    Raises:
        KeyError: a run that does not exist.
    """
    from accelbench.core.version import __version__

    if runs is None:
        ids = run_ids if run_ids else [r["run_id"] for r in store.runs()]
        runs = [(store, i, f"run {i}") for i in ids]
    sections = [run_section(s, i) for s, i, _ in runs]
    if len({str(s.path) for s, _, _ in runs}) > 1:  # runs of several stores: "Run 1" twice would not say which
        for sec, (s, i, _) in zip(sections, runs):  # noqa: B007
            where = "/".join(Path(str(s.path)).parts[-2:])  # the store's folder and file: llm-h100/llm.db
            sec["title"] = sec["title"].replace(":", f" ({where}):", 1)  # after the run's name, if it has one
    if len({str(s.path) for s, _, _ in runs}) == 1:  # serve runs of one store: their engines on shared axes
        from accelbench.report.serve import engines_section

        shared = engines_section(runs[0][0], [i for _, i, _ in runs])
        sections += [shared] if shared else []
    from accelbench.report.generate import tp_section

    split = tp_section(runs)  # a case's TP degrees, usually from several runs, side by side
    sections += [split] if split else []
    comparisons = comparisons or []
    sections += [comparison_section(c, side) for c, side in zip(comparisons, sides or [None] * len(comparisons))]
    for i, s in enumerate(sections):  # ids unique even when a run is listed twice
        s["id"] = f"{s['id']}-{i}"
    headlines = [{"href": f"#{s['id']}", "line": s["headline"]} for s in sections if s.get("headline")]
    return {
        "title": "accelbench report: " + ", ".join(label for _, _, label in runs),
        "version": __version__,
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "store": store.path,
        "sections": sections,
        "headlines": headlines,
    }


def _verdict_class(cell: Any) -> str:
    text = str(cell).replace(" (ambiguous)", "")
    if text in ("faster", "better", "slower", "worse"):
        return f"verdict-{text}"
    return "verdict-few" if text == "too few windows" else ""


# a table wider than this is split into column groups, so a screen (1,400 px) or an A4 page holds every column
MAX_COLUMNS = {"screen": 18, "print": 11}
KEY_HEADERS = (
    "Case",
    "Windows A/B",
    "Model",
    "Batch Size",
    "Prompt (tokens)",
    "New tokens",
    "Precision",
    "Mode",
    "NHWC",
    "Stage",
)


def column_groups(
    headers: list[str], rows: list[list[str]], limit: int = MAX_COLUMNS["print"], unit: int = 1
) -> list[dict[str, Any]]:
    """A wide table as tables of at most ``limit`` columns (``headers``, ``rows`` each), every one repeating the
    leading key columns (:data:`KEY_HEADERS`: which case a row is), so no column hides behind a scroll bar on a
    screenshot or a printed page; groups hold whole runs of ``unit`` columns (a comparison's five columns a metric),
    even where one run is wider than ``limit``. A table that fits is one group."""
    keys = 0
    while keys < len(headers) - 1 and headers[keys] in KEY_HEADERS:
        keys += 1
    keys = max(keys, 1)
    if len(headers) <= limit:
        return [{"headers": headers, "rows": rows}]
    others = len(headers) - keys
    parts = -(-others // max((limit - keys) // unit * unit, unit))
    step = -(-others // parts)  # balanced: no last group holding one column
    step = -(-step // unit) * unit
    return [
        {"headers": headers[:keys] + headers[i : i + step], "rows": [r[:keys] + r[i : i + step] for r in rows]}
        for i in range(keys, len(headers), step)
    ]


def table_layouts(block: dict[str, Any]) -> list[tuple[str | None, list[dict[str, Any]]]]:
    """``(media, column groups)`` of a table block: one layout when it fits a printed page (``media`` None), else
    one for the screen and one for print (:data:`MAX_COLUMNS`, or the block's ``max_columns``; groups of whole runs of
    the block's ``unit`` columns; the stylesheet shows each on its medium)."""
    if len(block["headers"]) <= MAX_COLUMNS["print"]:
        return [(None, column_groups(block["headers"], block["rows"]))]
    unit, limits = block.get("unit", 1), {**MAX_COLUMNS, **block.get("max_columns", {})}
    return [(media, column_groups(block["headers"], block["rows"], limit, unit)) for media, limit in limits.items()]


def render_html(doc: dict[str, Any]) -> str:
    """The document as one HTML page (template ``templates/report.html.j2``, autoescape on).

    Raises:
        MissingDependencyError: jinja2 is not installed (``pip install jinja2``).
    """
    from accelbench.core.errors import MissingDependencyError

    try:
        import jinja2
    except ImportError:
        raise MissingDependencyError("jinja2") from None
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("accelbench.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["verdict_class"] = _verdict_class
    env.filters["layouts"] = table_layouts
    return env.get_template("report.html.j2").render(doc=doc)


def _md(text: Any) -> str:
    """A markdown cell: HTML special characters as entities (a ``<script>`` stays text), pipes escaped."""
    return html.escape(str(text), quote=False).replace("|", "\\|").replace("\n", " ")


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_md(h) for h in headers) + " |", "|" + " --- |" * len(headers)]
    return out + ["| " + " | ".join(_md(c) for c in r) + " |" for r in rows]


def compare_markdown(comparisons: list, gate: str | None = None) -> str:
    """``accelbench compare --markdown``: each comparison as GitHub markdown for a CI job's summary page: a heading
    (B vs A, the margin), the gate's outcome when given (``gate``: one line), the compact table (a row per case and
    metric: ratio B/A, its 95 % interval, the verdict) and the notes (environment differences, flags)."""
    from accelbench.report.compare_table import compact_rows, notes

    out = [f"**Gate: {_md(gate)}**", ""] if gate else []
    for c in comparisons:
        out += [f"### accelbench compare: {_md(c.b)} (B) vs {_md(c.a)} (A), margin {100 * c.margin:g}%", ""]
        if c.cases:
            out += _md_table(*compact_rows(c)) + [""]
        else:
            out += ["No case matched.", ""]
        out += [f"- {_md(n)}" for n in notes(c)] + [""]
    return "\n".join(out)


def render_markdown(doc: dict[str, Any]) -> str:
    """The document as GitHub markdown: the same tables and notes; charts are in the HTML report only."""
    out = [
        f"# {_md(doc['title'])}",
        "",
        f"accelbench {_md(doc['version'])}; generated {_md(doc['generated'])}; store {_md(doc['store'])}",
        "",
    ]
    out += [f"**{_md(h['line'])}**" for h in doc.get("headlines", [])] + ([""] if doc.get("headlines") else [])
    for s in doc["sections"]:
        out += [f"## {_md(s['title'])}", ""]
        if s["provenance"]:
            out += _md_table(["Provenance", ""], [[k, v] for k, v in s["provenance"]]) + [""]
        for b in s["blocks"]:
            if b["type"] == "charts":
                titles = ", ".join(_md(i["title"]) for i in b["items"])
                out += [f"*Charts ({titles}): in the HTML report (accelbench report --html).*", ""]
                continue
            out += [f"### {_md(b['title'])}", ""] if b.get("title") else []
            if b["type"] == "headline":
                out += [f"**{_md(b['line'])}**", ""] + (_md_table(["", "Cases"], b["rows"]) if b["rows"] else [])
            elif b["type"] == "table":
                out += _md_table(b["headers"], b["rows"]) + [""] + [f"- {_md(n)}" for n in b["notes"]]
            else:
                out += [f"- {_md(n)}" for n in b["lines"]] or ["none"]
            out.append("")
    return "\n".join(out) + "\n"

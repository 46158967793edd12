"""Reading stored results: :func:`compare` (A/B verdicts), :func:`report` (HTML / markdown), :func:`export_json`.

Re-exported by :mod:`accelbench.api`."""

from __future__ import annotations

from typing import Any


def compare(store, a, b, *, margin: float | None = None, ignore: tuple[str, ...] = (), n_boot: int | None = None):
    """``accelbench compare``: run B (or each of several) against run A, case by case.

    Args:
        store: the store that run ids without a path refer to.
        a, b: run references: an id (``12``) or ``PATH:ID`` (a run in another store); ``b`` may be a list.
        margin: equivalence margin of the verdicts (fraction, default 0.02).
        ignore: match fields left out of the case matching (e.g. ``("precision",)`` to compare fp32 with bf16).
        n_boot: bootstrap replicates per side and case (default 2000).
    Returns:
        One :class:`accelbench.core.compare.Comparison` per B.
    Raises:
        AccelbenchError: a run or store that does not exist (one line).
    """
    from accelbench.core import compare as cmp
    from accelbench.store.refs import load_ref

    base = load_ref(store, a)
    kw = {"margin": cmp.MARGIN if margin is None else margin, "ignore": tuple(ignore),
          "n_boot": cmp.N_BOOT if n_boot is None else n_boot}
    return [cmp.compare_runs(base, load_ref(store, r), **kw) for r in (b if isinstance(b, (list, tuple)) else [b])]


def report(store, run_ids: list[int | str] | None = None, *, html=None, markdown=None, compare: tuple | None = None,
           margin: float | None = None) -> dict:
    """``accelbench report``: one self-contained HTML file and/or a markdown file over stored runs.

    Args:
        run_ids: the runs (default: every run in the store): ids in ``store`` or ``PATH:ID`` references to runs of
            other stores (one report over runs measured on different machines).
        html, markdown: paths to write (either or both).
        compare: ``(A, B)`` run references (as :func:`compare`) to compare in the report; without it, two runs
            given in ``run_ids`` whose cases match are compared.
        margin: equivalence margin of the comparison's verdicts (default 0.02).
    Returns:
        The report document (:func:`accelbench.report.document.build`).
    Raises:
        AccelbenchError: a run that does not exist (one line). MissingDependencyError: jinja2 or matplotlib missing.
        OutputError: an output that cannot be written (checked first: exit 2; a write that fails: exit 1).
    """
    from accelbench.core.outputs import check_writable, write_text
    from accelbench.store.refs import open_ref
    from accelbench.report import document

    for path in (html, markdown):  # before minutes of charts
        if path:
            check_writable(path)
    runs = [open_ref(store, ref) for ref in run_ids] if run_ids else None
    store = store if store is not None else runs[0][0]  # every run named by PATH:ID
    comparisons, pair = [], None
    if compare is not None:
        pair = (str(compare[0]), str(compare[1]))
        comparisons = globals()["compare"](store, pair[0], [pair[1]], margin=margin)
    elif run_ids and len(run_ids) == 2:
        pair = (str(run_ids[0]), str(run_ids[1]))
        comparisons = [c for c in globals()["compare"](store, pair[0], [pair[1]], margin=margin) if c.cases]
    sides = [tuple(_rows_by_case(store, ref) for ref in pair) for _ in comparisons]  # each run's own intervals
    doc = document.build(store, None, comparisons, runs=runs, sides=sides)
    if html:
        write_text(html, document.render_html(doc))
    if markdown:
        write_text(markdown, document.render_markdown(doc))
    return doc


def _rows_by_case(store, ref) -> dict[int, dict]:
    """The rows of the run ``ref`` names (:func:`accelbench.store.refs.open_ref`) by case id."""
    from accelbench.store.refs import open_ref

    st, run_id, _ = open_ref(store, ref)
    return {r["case_id"]: r for r in st.records(run_id)}


def export_json(store, run_id: int, path, sections: dict[str, Any] | None = None) -> None:
    """Write a run (spec, environment, results, and its scenario's extension data) as JSON, atomically.

    Args:
        sections: further top-level sections (a tune's ``{"tune": TuneResult.json_section()}``).
    Raises:
        OutputError: the file cannot be written (the run stays in the store).
    """
    from accelbench import scenarios
    from accelbench.store.export import write_json

    scenario = scenarios.by_kind(store.run(run_id)["kind"])

    def extra(st, rid, doc: dict) -> None:
        if scenario is not None:
            scenario.export_extra(st, rid, doc)
        doc.update(sections or {})

    write_json(path, store, run_id, extra)

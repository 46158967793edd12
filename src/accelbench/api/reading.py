"""Reading stored results: :func:`compare` (A/B verdicts), :func:`report` (HTML / markdown), :func:`export_json`, :func:`export_parquet`, :func:`import_run`.

Re-exported by :mod:`accelbench.api`."""

from __future__ import annotations

from typing import Any


def compare(
    store,
    a=None,
    b=None,
    *,
    baseline: str | None = None,
    margin: float | None = None,
    ignore: tuple[str, ...] = (),
    n_boot: int | None = None,
):
    """``accelbench compare``: run B (or each of several) against run A, case by case.

    Args:
        store: the store that run ids without a path refer to.
        a, b: run references: an id (``12``), ``PATH:ID`` (a run in another store), ``name:NAME`` or
            ``PATH:name:NAME`` (the newest run of that name); ``b`` may be a list.
        baseline: instead of ``a``: the newest run of ``store`` named ``baseline``; ``b`` then defaults to the newest
            run of ``store`` other than it (``accelbench compare --baseline NAME``).
        margin: equivalence margin of the verdicts (fraction, default 0.02).
        ignore: match fields left out of the case matching (e.g. ``("precision",)`` to compare fp32 with bf16).
        n_boot: bootstrap replicates per side and case (default 2000).
    Returns:
        One :class:`accelbench.core.compare.Comparison` per B.
    Raises:
        AccelbenchError: a run or store that does not exist, a baseline name no run has (the message lists the
            store's names), ``a`` and ``baseline`` both given or neither (one line).
    """
    from accelbench.core import compare as cmp
    from accelbench.core.errors import AccelbenchError
    from accelbench.store.refs import latest_named, load_ref, newest_other

    if (a is None) == (baseline is None):
        raise AccelbenchError("compare takes run A or a baseline name, one of them")
    if baseline is not None:
        a = latest_named(store, baseline)
        b = b if b else newest_other(store, a)
    base = load_ref(store, a)
    kw = {
        "margin": cmp.MARGIN if margin is None else margin,
        "ignore": tuple(ignore),
        "n_boot": cmp.N_BOOT if n_boot is None else n_boot,
    }
    return [cmp.compare_runs(base, load_ref(store, r), **kw) for r in (b if isinstance(b, (list, tuple)) else [b])]


def history(
    store,
    run_ids: list[int | str] | None = None,
    cases: list[str] = (),
    *,
    margin: float | None = None,
    n_boot: int | None = None,
) -> list:
    """The history of cases across runs (``accelbench report --history``): each case's throughput (a generate case:
    decode tokens/s and time per output token p50) in every run, in time order, with 95 % intervals, and the verdict
    ``compare`` gives each step between consecutive runs (:func:`accelbench.core.history.history`).

    Args:
        run_ids: the runs (default: every run of ``store``), references as :func:`compare` takes them.
        cases: filters such as ``"model=cifar-resnet20,batch_size=8"`` (a case matches one of them; none: every case).
    Returns:
        A list of :class:`accelbench.core.history.Series`, one per case and metric.
    Raises:
        AccelbenchError: a run that does not exist, a malformed filter (one line).
    """
    from accelbench.core import compare as cmp
    from accelbench.core.history import history as series_of
    from accelbench.core.history import parse_filter
    from accelbench.store.refs import load_ref

    filters = [parse_filter(c) for c in cases]
    refs = run_ids if run_ids else [r["run_id"] for r in store.runs()]
    return series_of(
        [load_ref(store, r) for r in refs],
        filters,
        margin=cmp.MARGIN if margin is None else margin,
        n_boot=cmp.N_BOOT if n_boot is None else n_boot,
    )


def report(
    store,
    run_ids: list[int | str] | None = None,
    *,
    html=None,
    markdown=None,
    compare: tuple | None = None,
    margin: float | None = None,
    history_of: list[str] | None = None,
) -> dict:
    """``accelbench report``: one self-contained HTML file and/or a markdown file over stored runs.

    Args:
        run_ids: the runs (default: every run in the store): ids in ``store`` or ``PATH:ID`` references to runs of
            other stores (one report over runs measured on different machines).
        html, markdown: paths to write (either or both).
        compare: ``(A, B)`` run references (as :func:`compare`) to compare in the report; without it, two runs
            given in ``run_ids`` whose cases match are compared.
        margin: equivalence margin of the comparison's verdicts (default 0.02).
        history_of: instead of a section per run, the history view of these runs (:func:`history`) over the cases
            these filters match (``[]``: every case).
    Returns:
        The report document (:func:`accelbench.report.document.build`).
    Raises:
        AccelbenchError: a run that does not exist (one line). MissingDependencyError: jinja2 or matplotlib missing.
        OutputError: an output that cannot be written (checked first: exit 2; a write that fails: exit 1).
    """
    from accelbench.core.outputs import check_writable
    from accelbench.report import document
    from accelbench.store.refs import open_ref

    for path in (html, markdown):  # before minutes of charts
        if path:
            check_writable(path)
    runs = [open_ref(store, ref) for ref in run_ids] if run_ids else None
    store = store if store is not None else runs[0][0]  # every run named by PATH:ID
    if history_of is not None:
        from accelbench.report.history import history_section

        found = history(store, run_ids, history_of, margin=margin)
        doc = document.build(store, None, [], runs=[])
        doc.update(
            title="accelbench report: history",
            sections=[history_section(found, margin=0.02 if margin is None else margin, cases=history_of)],
        )
        return _write(doc, html, markdown)
    comparisons, pair = [], None
    if compare is not None:
        pair = (str(compare[0]), str(compare[1]))
        comparisons = globals()["compare"](store, pair[0], [pair[1]], margin=margin)
    elif run_ids and len(run_ids) == 2:
        pair = (str(run_ids[0]), str(run_ids[1]))
        comparisons = [c for c in globals()["compare"](store, pair[0], [pair[1]], margin=margin) if c.cases]
    sides = [tuple(_rows_by_case(store, ref) for ref in pair) for _ in comparisons]  # each run's own intervals
    return _write(document.build(store, None, comparisons, runs=runs, sides=sides), html, markdown)


def _write(doc: dict, html, markdown) -> dict:
    """Write the report document as HTML and/or markdown (atomically); return it."""
    from accelbench.core.outputs import write_text
    from accelbench.report import document

    if html:
        write_text(html, document.render_html(doc))
    if markdown:
        write_text(markdown, document.render_markdown(doc))
    return doc


def import_run(store, path) -> int:
    """``accelbench import``: one JSON or Parquet export loaded into ``store`` as a new run (its provenance, name,
    tags, times, raw series, the ceilings its rows were measured against and its scenario's extension data: a
    profile's kernels; ``env["imported_from"]`` names the file); returns the new run's id.

    Raises:
        AccelbenchError: unreadable, a CSV (it holds no run metadata), not an accelbench export (one line, exit 2).
        MissingDependencyError: a Parquet file without pyarrow (``pip install 'accelbench[parquet]'``).
    """
    from accelbench import scenarios
    from accelbench.store.imports import import_run as load

    def extra(st, run_id: int, doc: dict, case_ids: dict[str, int]) -> None:
        scenario = scenarios.by_kind(doc["kind"])
        if scenario is not None:
            scenario.import_extra(st, run_id, doc, case_ids)

    return load(store, path, extra)


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


def export_parquet(store, run_id: int) -> bytes:
    """A run as a Parquet file (:func:`accelbench.store.export.parquet_bytes`), with its scenario's extension data
    (a profile's kernels) in the file's metadata as the JSON export has them.

    Raises:
        MissingDependencyError: pyarrow is not installed (``pip install 'accelbench[parquet]'``).
    """
    from accelbench import scenarios
    from accelbench.store.export import parquet_bytes

    scenario = scenarios.by_kind(store.run(run_id)["kind"])
    return parquet_bytes(store, run_id, scenario.export_extra if scenario is not None else None)

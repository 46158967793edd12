"""``accelbench compare`` (run B against run A, case by case) and ``accelbench report`` (HTML / markdown);
parsing only: the work is :func:`accelbench.api.compare` and :func:`accelbench.api.report`."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console, err_console, styled
from accelbench.cli.options import DB
from accelbench.core.errors import EXIT_CASE_ERRORS, EXIT_UNDECIDED


def parse_margin(text: str) -> float:
    """``2%`` or ``0.02`` -> 0.02; a one-line error (exit 2) outside 0..50 %."""
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        v = -1.0
    if not 0 <= v <= 0.5:
        a.fail(f"invalid margin {text!r}: allowed a fraction 0..0.5 or a percentage like 2%")
    return v


@command()
def compare(
    runs: list[str] | None = typer.Argument(
        None,
        help="Run A, then run B (and more): a run id in --db, PATH:ID for a run in another store, name:NAME or PATH:name:NAME for the newest run of that name. With --baseline: run B (and more; default: the newest other run in --db).",
    ),
    db: Path = DB,
    baseline: str | None = typer.Option(
        None,
        "--baseline",
        help="Run A is the newest run in --db named NAME (accelbench run --name NAME); B defaults to the newest other run.",
    ),
    margin: str = typer.Option(
        "2%", "--margin", help="Equivalence margin: changes smaller than this are 'within noise' (2% or 0.02)."
    ),
    ignore: str | None = typer.Option(
        None, "--ignore", help="Match fields to ignore, e.g. precision,channels_last (compare fp32 with bf16)."
    ),
    fail_on_slower: bool = typer.Option(
        False,
        "--fail-on-slower",
        help="A gate for CI: exit 1 when a matched case is slower beyond the margin (throughput or latency p50), 3 when none is slower but one could not be judged (too few windows, or a validity flag fired), 2 when no case matched.",
    ),
    allow_undecided: bool = typer.Option(
        False,
        "--allow-undecided",
        help="With --fail-on-slower: cases that could not be judged do not fail the gate (exit 0 unless one is slower).",
    ),
    n_boot: int = typer.Option(2000, "--bootstrap", help="Bootstrap replicates per side and case."),
    wide: bool = typer.Option(
        False,
        "--wide",
        help="Every metric, the p-values and the per-dollar / per-joule figures (a pager when wider than the terminal).",
    ),
    markdown_path: Path | None = typer.Option(
        None,
        "--markdown",
        help="Also write the comparison and the gate's outcome as markdown, for a CI job's summary page.",
    ),
    json_path: Path | None = typer.Option(
        None,
        "--json",
        callback=a.json_to_stdout,
        help="Also write the comparison as JSON: a list with one object per run B (A and B labels, margin, environment differences, cases found on one side only, and per matched case each metric's A and B values, ratio B/A, 95% interval, p-value and verdict); - for stdout.",
    ),
) -> None:
    """Compare run B (and C, ...) with run A: ratios B/A with 95% confidence intervals, a Mann-Whitney test
    on the windows and a verdict per matched case (faster / slower / within noise / too few windows)."""
    from accelbench import api
    from accelbench.core.compare import MATCH_FIELDS
    from accelbench.core.outputs import check_writable, write_text
    from accelbench.report.compare_table import AMBIGUOUS_MARK, common_model, compare_table, notes, slower_line

    runs = list(runs or [])
    if baseline is None and len(runs) < 2:
        a.fail("compare needs two runs or more: A B [C ...], or --baseline NAME [B ...]")
    fields = tuple(f.strip() for f in (ignore or "").split(",") if f.strip())
    bad = [f for f in fields if f not in MATCH_FIELDS]
    if bad:
        a.fail(f"invalid --ignore {','.join(bad)!r}: allowed {', '.join(MATCH_FIELDS)}")
    if n_boot < 100:
        a.fail(f"invalid --bootstrap {n_boot}: allowed 100 or more")
    for path in (json_path, markdown_path):
        if path is not None:
            check_writable(path)
    from accelbench.store.refs import ref_path

    store = a.open_store(db) if baseline is not None or any(ref_path(r) is None for r in runs) else None
    a_ref, b_refs = (None, runs) if baseline is not None else (runs[0], runs[1:])
    results = api.compare(
        store, a_ref, b_refs, baseline=baseline, margin=parse_margin(margin), ignore=fields, n_boot=n_boot
    )
    failed, undecided = [], []
    for c in results:
        model = common_model(c) if not wide else None
        console.print(
            f"{c.b} (B) vs {c.a} (A): {len(c.cases)} matched cases"
            + (f" of {model}" if model else "")
            + f", margin {100 * c.margin:g}%"
        )
        if not c.cases:
            err_console.print(styled("warning:", "yellow", " no case matched (see --ignore)"))
        else:
            a.print_table(compare_table(c, wide), wide)
            if not wide and any(case.ambiguous for case in c.cases):
                console.print(f"{AMBIGUOUS_MARK} ambiguous: a validity flag fired on either side (the lines below)")
        for line in notes(c):
            console.print(line)
        line = slower_line(c)
        if line:
            failed.append(line)
        undecided += [f"{case.label}: {why}" for case, why in c.undecided()]
    if json_path:
        text = json.dumps([c.to_dict() for c in results], indent=1, default=str)
        a.write_output(json_path, lambda path: write_text(path, text))
        console.print(f"wrote {'the JSON to stdout' if a.is_stdout(json_path) else json_path}")
    gate(
        results,
        failed,
        undecided,
        fail_on_slower=fail_on_slower,
        allow_undecided=allow_undecided,
        markdown_path=markdown_path,
    )


def gate(
    results: list,
    failed: list[str],
    undecided: list[str],
    *,
    fail_on_slower: bool,
    allow_undecided: bool,
    markdown_path: Path | None,
) -> None:
    """The CI gate of ``compare --fail-on-slower`` (exit 1 slower, 3 undecided, 2 nothing matched; README "Exit
    codes") and the ``--markdown`` summary with its outcome."""
    from accelbench.core.outputs import write_text

    matched = any(c.cases for c in results)
    if markdown_path:
        from accelbench.report.document import compare_markdown

        outcome = (
            None
            if not fail_on_slower
            else (
                f"FAIL, {len(failed)} comparison(s) slower"
                if failed
                else "no case matched"
                if not matched
                else f"UNDECIDED, {len(undecided)} case(s) could not be judged"
                if undecided and not allow_undecided
                else "PASS"
            )
        )
        text = compare_markdown(results, outcome)
        a.write_output(markdown_path, lambda path: write_text(path, text))
    if not fail_on_slower:
        return
    if failed:
        err_console.print(styled("slower:", "red", " " + " | ".join(failed)))
        raise typer.Exit(EXIT_CASE_ERRORS)
    if not matched:
        a.fail("--fail-on-slower: no case matched, so nothing was judged (see --ignore, or compare the right runs)")
    if undecided and not allow_undecided:
        err_console.print(
            styled(
                "undecided:",
                "yellow",
                f" {len(undecided)} matched case(s) could not be judged, so the "
                "gate cannot pass (--repeats 5 or more gives a verdict; --allow-undecided accepts "
                "them): " + " | ".join(undecided),
            )
        )
        raise typer.Exit(EXIT_UNDECIDED)


@command()
def report(
    run_ids: list[str] | None = typer.Option(
        None,
        "--run",
        help="A run to include: an id, or PATH:ID for a run in another store (repeat for several; default: every run).",
    ),
    db: Path = DB,
    html: Path | None = typer.Option(
        None, "--html", help="Write one self-contained HTML file (charts inline, works offline)."
    ),
    markdown: Path | None = typer.Option(None, "--markdown", help="Write the tables and notes as markdown."),
    compare_runs: list[str] | None = typer.Option(
        None, "--compare", help="Compare two runs in the report: --compare A --compare B (ids or PATH:ID)."
    ),
    margin: str = typer.Option("2%", "--margin", help="Equivalence margin of the comparison (2% or 0.02)."),
    history: bool = typer.Option(
        False,
        "--history",
        help="Instead: the history view: each case's throughput (generate: decode tokens/s, TPOT) across the runs in time order, with 95% whiskers and the steps compare calls significant marked.",
    ),
    cases: list[str] | None = typer.Option(
        None,
        "--case",
        help="With --history: the cases to show, e.g. model=cifar-resnet20,batch_size=8 (repeat for several; default: every case).",
    ),
) -> None:
    """A report of stored runs: provenance, sweeps, training, rooflines, scaling, comparisons with their CIs."""
    import time

    from accelbench import api

    if not html and not markdown:
        a.fail("give --html FILE and/or --markdown FILE")
    if compare_runs and len(compare_runs) != 2:
        a.fail("--compare takes two runs: --compare A --compare B")
    from accelbench.store.refs import ref_path

    refs = [*(run_ids or []), *(compare_runs or [])]  # runs named by PATH:ID only need no --db store
    store = a.open_store(db) if not run_ids or any(ref_path(r) is None for r in refs) else None
    t0 = time.perf_counter()
    if cases and not history:
        a.fail("--case applies to --history")
    doc = api.report(
        store,
        run_ids or None,
        html=html,
        markdown=markdown,
        compare=tuple(compare_runs) if compare_runs else None,
        margin=parse_margin(margin),
        history_of=list(cases or []) if history else None,
    )
    wrote = " and ".join(str(p) for p in (html, markdown) if p)
    console.print(f"wrote {wrote}: {len(doc['sections'])} sections in {time.perf_counter() - t0:.1f} s")

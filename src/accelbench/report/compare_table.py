"""Tables and lines of ``accelbench compare`` (rich; plain Text cells, never markup), and the same rows as
plain strings for the HTML and markdown reports."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from accelbench.core.columns import MetricMap, named
from accelbench.core.compare import METRICS
from accelbench.report.notes import group_cases, grouped_flags
from accelbench.report.units import number


def case_map(case) -> MetricMap:
    """The metric map of a matched case's scenario (:attr:`accelbench.core.compare.CaseComparison.scenario`)."""
    return named(case.scenario) or named("inference")


def common_map(comparison) -> MetricMap:
    """The scenario map every matched case shares, else the image inference map (its words are generic)."""
    found = {case_map(c).name for c in comparison.cases}
    return named(found.pop()) if len(found) == 1 else named("inference")


def metric_label(case, name: str) -> str:
    """A metric's name as the case's scenario words it (:meth:`accelbench.core.columns.MetricMap.label`)."""
    return case_map(case).label(name)


_VERDICT_STYLE = {
    "faster": "green",
    "better": "green",
    "slower": "red",
    "worse": "red",
    "within noise": "",
    "too few windows": "yellow",
}


def ratio_text(r) -> str:
    """``0.987x (0.951..1.021)``: the ratio B/A and its 95 % interval (``-`` when not measured)."""
    if r.ratio is None:
        return "-"
    ci = f" ({r.ci_low:.3f}..{r.ci_high:.3f})" if r.ci_low is not None else ""
    return f"{r.ratio:.3f}x{ci}"


def verdict_text(case, name: str) -> str:
    """The verdict, marked ``(ambiguous)`` when a validity flag fired on either side."""
    r = case.metrics.get(name)
    if r is None:
        return "-"
    v = r.verdict
    return v + (" (ambiguous)" if case.ambiguous and v not in ("not measured",) else "")


def _fmt(v: Any) -> str:
    return "-" if v is None else number(v, 4)


def _p(v: Any) -> str:
    return "-" if v is None else ("<0.001" if v < 0.001 else number(v, 2))


METRIC_COLUMNS = 5  # a metric's columns in the wide table: A, B, B/A (95% CI), p, verdict


def rows(comparison, wide: bool = False) -> tuple[list[str], list[list[str]]]:
    """``(headers, rows)`` of a comparison as strings (the rich table and the HTML report share them)."""
    m = common_map(comparison)
    shown = {n for c in comparison.cases for n in case_map(c).compares()}
    names = [x.name for x in METRICS if x.name in shown or x.name in m.compares()]
    names = names if wide else list(compact_metrics(m))
    words = {n: m.label(n) for n in names}
    heads = ["Case", "Windows A/B"]
    for n in names:
        heads += ([f"{words[n]} A", f"{words[n]} B"] if wide else []) + [f"{words[n]} B/A (95% CI)"]
        heads += (["p"] if wide else []) + ["Verdict"]
    if wide:
        heads += ["samples/$ A", "samples/$ B", "samples/J A", "samples/J B"]
    out = []
    for c in comparison.cases:
        row = [c.label, f"{c.windows[0]}/{c.windows[1]}"]
        for n in names:
            r = c.metrics.get(n)
            if r is None:
                row += (["-", "-"] if wide else []) + ["-"] + (["-"] if wide else []) + ["-"]
                continue
            row += ([_fmt(r.a), _fmt(r.b)] if wide else []) + [ratio_text(r)]
            row += ([_p(r.p_value)] if wide else []) + [verdict_text(c, n)]
        if wide:
            row += [_fmt(c.normalised[s][k]) for k in ("samples_per_usd", "samples_per_j") for s in ("a", "b")]
        out.append(row)
    return heads, out


COMPACT_METRICS = ("throughput", "latency_p50")


def compact_metrics(m: MetricMap) -> tuple[str, ...]:
    """The metrics of a case's compact comparison: those its scenario names (a serve level's output tokens/s, TPOT
    and TTFT), else throughput, then the scenario's first extra metric (a generate case's TTFT: decode and prefill)
    or else its latency p50."""
    if m.compared:
        return m.compared
    return ("throughput", m.extra[0]) if m.extra else COMPACT_METRICS


AMBIGUOUS_MARK = "*"


def common_model(comparison) -> str | None:
    """The model every matched case names first (the compact table then leaves it out of the labels), or None."""
    firsts = {c.label.split(" ", 1)[0] for c in comparison.cases}
    model = firsts.pop() if len(firsts) == 1 else None
    return model if model and all(c.label.startswith(model + " ") for c in comparison.cases) else None


def compact_rows(comparison) -> tuple[list[str], list[list[str]]]:
    """``(headers, rows)`` that fit 80 columns: a row per case and metric (throughput, latency p50), the ratio
    and its interval in columns of their own; an ambiguous verdict is marked :data:`AMBIGUOUS_MARK`."""
    heads = ["Case", "Windows", "Metric", "B/A", "95% CI", "Verdict"]
    model = common_model(comparison)
    out = []
    for c in comparison.cases:
        for i, n in enumerate(compact_metrics(case_map(c))):
            r = c.metrics[n]
            ratio = "-" if r.ratio is None else f"{r.ratio:.3f}x"
            ci = f"{r.ci_low:.3f}..{r.ci_high:.3f}" if r.ci_low is not None else "-"
            verdict = r.verdict + (AMBIGUOUS_MARK if c.ambiguous and r.verdict != "not measured" else "")
            label = c.label[len(model) + 1 :] if model else c.label
            out.append(
                [
                    label if i == 0 else "",
                    f"{c.windows[0]}/{c.windows[1]}" if i == 0 else "",
                    metric_label(c, n),
                    ratio,
                    ci,
                    verdict,
                ]
            )
    return heads, out


def compare_table(comparison, wide: bool = False) -> Table:
    """The comparison as a rich table: compact (throughput and latency p50, a row each) or every metric
    (``wide``: a row per case)."""
    heads, body = rows(comparison, True) if wide else compact_rows(comparison)
    t = Table(box=box.HEAVY_HEAD if wide else box.SIMPLE_HEAD, padding=(0, 1) if wide else (0, 0), show_edge=wide)
    for h in heads:
        t.add_column(
            h, justify="left" if h in ("Case", "Verdict", "Metric") else "right", no_wrap=h != "Case", overflow="fold"
        )
    for row in body:
        t.add_row(
            *[Text(v, style=_VERDICT_STYLE.get(v.replace(" (ambiguous)", "").rstrip(AMBIGUOUS_MARK), "")) for v in row]
        )
    return t


def _grouped(pairs: list[tuple[str, str]]) -> list[str]:
    """``note: text: N cases: a, b`` for a note several cases share; ``note: case: text`` for one (:func:`group_cases`)."""
    lines = group_cases((text, label, label, None, "") for label, text in pairs)
    return [
        f"note: {cases[0]}: {text}" if len(cases) == 1 else f"note: {text}: {n}: {', '.join(cases)}"
        for text, n, cases in lines
    ]


def notes(comparison) -> list[str]:
    """Lines under the table: environment differences, unmatched cases, flags and window notes."""
    out = [f"differs: {k} {a!s} (A) vs {b!s} (B)" for k, a, b in comparison.env_diff]
    if comparison.only_a:
        out.append(f"only in A ({comparison.a}): {', '.join(comparison.only_a)}")
    if comparison.only_b:
        out.append(f"only in B ({comparison.b}): {', '.join(comparison.only_b)}")
    out += [f"warning: {line}" for line in comparison.collided]
    pairs, flags = [], []
    for c in comparison.cases:
        flags += [(c.label, flag) for flag in c.ambiguous]
        pairs += [(c.label, n) for n in c.notes]
        pairs += [(c.label, n) for n in dict.fromkeys(r.note for r in c.metrics.values() if r.note)]
    return out + grouped_flags(flags) + _grouped(pairs)


def slower_line(comparison) -> str | None:
    """One line naming every case slower beyond the margin (``--fail-on-slower``), or None."""
    found = comparison.slower()
    if not found:
        return None
    parts = [
        f"{c.label} ({metric_label(c, n).lower()} {ratio_text(c.metrics[n])}"
        + (", ambiguous" if c.ambiguous else "")
        + ")"
        for c, n in found
    ]
    return f"{comparison.b} is slower than {comparison.a} beyond the {100 * comparison.margin:g}% margin: " + "; ".join(
        parts
    )

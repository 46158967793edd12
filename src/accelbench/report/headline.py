"""The headline of a comparison: what a reader wants before the tables. Every count is one of ``accelbench
compare``'s own verdicts (:mod:`accelbench.core.compare`), counted, never decided again here:

- speed: each matched case's throughput verdict (a generate case's decode tokens/s): ``faster``, ``slower``,
  ``within noise`` (equivalent within the margin) or undecided (``too few windows``, ``not measured``), with the
  range of the ratios B/A of the faster and of the slower cases;
- cost: the verdict of the cost per 1,000 samples (tokens): ``better`` is B cheaper, ``worse`` A cheaper;
- energy: the verdict of the energy per sample (token): ``better`` is B doing more work per joule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelbench.core.compare import UNDECIDED
from accelbench.report.compare_table import common_map


@dataclass(frozen=True, kw_only=True, slots=True)
class Tally:
    """One metric's verdicts over the matched cases: ``counts`` per verdict word (``undecided`` for
    :data:`accelbench.core.compare.UNDECIDED`) and the ratios B/A per verdict word (dimensionless)."""

    counts: dict[str, int] = field(default_factory=dict)
    ratios: dict[str, list[float]] = field(default_factory=dict)

    def n(self, word: str) -> int:
        return self.counts.get(word, 0)


def tally(comparison, metric: str) -> Tally:
    """The verdicts of ``metric`` (a :data:`accelbench.core.compare.METRICS` name) over the matched cases; cases
    without the metric, or without its figure on a side (no ratio: no energy counter, no price), are left out."""
    out = Tally()
    for c in comparison.cases:
        r = c.metrics.get(metric)
        if r is None or r.ratio is None:
            continue
        word = "undecided" if r.verdict in UNDECIDED else r.verdict
        out.counts[word] = out.counts.get(word, 0) + 1
        out.ratios.setdefault(word, []).append(r.ratio)
    return out


def _range(ratios: list[float]) -> str:
    lo, hi = min(ratios), max(ratios)
    return f"{lo:.2f}x" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}x"


def _side_name(comparison, side: str) -> str:
    """The run's label, with its device when the two runs ran on different devices (``h200.db:1 (NVIDIA H200)``)."""
    label = comparison.a if side == "a" else comparison.b
    for key, a, b in comparison.env_diff:
        if key == "device_name":
            return f"{label} ({a if side == 'a' else b})"
    return label


def _who(t: Tally, a: str, b: str, what: str) -> str | None:
    """``cheaper per 1k samples: A on 30 cases (B/A 1.05-1.14x), B on 10 (0.91-0.98x), 4 within noise, 1 undecided
    (1.02x)``, or None without any case measured on both sides."""
    if not t.counts:
        return None
    parts = sorted(
        (
            (t.n(w), f"{name} on {t.n(w)} ({_range(t.ratios[w])})")
            for name, w in ((b, "better"), (a, "worse"))
            if t.n(w)
        ),
        key=lambda p: -p[0],
    )
    rest = [
        f"{t.n(w)} {w}" + (f" ({_range(t.ratios[w])})" if w == "undecided" else "")
        for w in ("within noise", "undecided")
        if t.n(w)
    ]
    return f"{what}: " + ", ".join([p for _, p in parts] + rest)


def headline(comparison) -> dict:
    """The headline of a comparison: ``line`` (one sentence) and ``rows`` (``(label, value)`` strings: the verdict
    counts with their ratio ranges, then which run is cheaper and which does more work per joule)."""
    m = common_map(comparison)
    a, b = _side_name(comparison, "a"), _side_name(comparison, "b")
    n = len(comparison.cases)
    if not n:
        return {"line": f"No case of {b} matched one of {a}.", "rows": []}
    speed = tally(comparison, "throughput")
    # a case without a throughput on a side is undecided too ("not measured")
    speed.counts["undecided"] = n - sum(v for k, v in speed.counts.items() if k != "undecided")
    figure = m.throughput_label[0].lower() + m.throughput_label[1:]
    words = (
        ("faster", "Faster", "faster"),
        ("slower", "Slower", "slower"),
        ("within noise", f"Equivalent (within {100 * comparison.margin:g}%)", "equivalent"),
        ("undecided", "Undecided (too few windows)", "undecided"),
    )
    rows, said = [], []
    for word, label, short in words:
        if not speed.n(word):
            continue
        ratios = f" ({figure} B/A {_range(speed.ratios[word])})" if speed.ratios.get(word) else ""
        rows.append((label, f"{speed.n(word)} of {n}{ratios}"))
        said.append(f"{short} on {speed.n(word)}" + (f" ({_range(speed.ratios[word])})" if ratios else ""))
    sample = m.sample
    money = _who(tally(comparison, "cost_per_1000"), a, b, f"cheaper per {sample} (cost B/A)")
    joule = _who(tally(comparison, "energy_per_sample"), a, b, f"more {sample}s per joule (energy per {sample} B/A)")
    rows += [(text[0].upper() + text[1:].split(": ", 1)[0], text.split(": ", 1)[1]) for text in (money, joule) if text]
    line = (
        f"{b} against {a}, {n} matched cases ({figure} B/A): "
        + ", ".join(said)
        + "".join(f"; {t}" for t in (money, joule) if t)
        + "."
    )
    return {"line": line, "rows": rows}

"""The lines under a results table: why a case failed, and which cases a validity check flagged.

A failed case gets its own line (its error is its own). Flagged cases are grouped: one line per validity
flag with the count and the cases, each with its own figure (``latency spread (IQR/median) > 5%: 4 cases of
resnet50: bs=1 fp32 eager 52.2%, ...``), so a contended sweep prints a few lines, not one per case.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from accelbench.core.errors import OK
from accelbench.core.validity import VALID

_NUMBER = re.compile(r"\d+(?:\.\d+)?%?")


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def case_label(r: dict, model: bool = True) -> str:
    """``model bs=B precision mode``: names a case in notes and messages (``model=False``: without the model); a
    language model's ``--gpus`` case adds its parallel strategy (ddp, fsdp), a profile case its step."""
    name = r.get("model")
    # a case without a model (the input pipeline's loader cases) is named by its key
    parts = [str(name) if _present(name) else str(r.get("case_key") or "?")] if model else []
    if _present(r.get("batch_size")):
        parts.append(f"bs={int(r['batch_size'])}")
    parts += [
        str(r[k]) for k in ("precision", "mode", "parallel_strategy", "step", "loadgen_scenario") if _present(r.get(k))
    ]
    return " ".join(parts)


def flag_texts() -> dict[str, str]:
    """What each validity flag of :func:`accelbench.core.validity.assess` means, with its threshold."""
    from accelbench.core.stats import SPREAD_WARN
    from accelbench.core.validity import CLOCK_VARIATION_MAX, CPU_OTHER_MAX_PCT, THROTTLE_FRAC_MAX

    return {
        "latency-spread": f"latency spread (IQR/median) > {100 * SPREAD_WARN:.0f}%",
        "throttled": f"clocks limited for > {100 * THROTTLE_FRAC_MAX:.0f}% of the window",
        "clock-variation": f"SM clock varied > {100 * CLOCK_VARIATION_MAX:.0f}% (p95-p5)/median",
        "other-process": "other compute processes on the GPU",
        "cpu-contention": f"other processes used > {CPU_OTHER_MAX_PCT:.0f}% of the host's CPU time",
        "failed-requests": "requests failed (their reasons in errors_json)",
        "client-limited": "the client fell behind its schedule (the client, not the server, limited the level)",
        "non-finite-output": "model outputs hold NaN or inf (no accuracy reported)",
        "non-finite-loss": "training loss is not finite (the step diverged)",
    }


def _flags(r: dict) -> list[tuple[str, str]]:
    """``(what, figure)`` per flag of a flagged row: the flag's text and the case's own number in its reason
    (``validity`` and ``validity_reason`` list the flags and their reasons in the same order)."""
    flags = [f for f in str(r.get("validity") or "").split(",") if f and f != VALID]
    reasons = str(r["validity_reason"]).split("; ")
    if len(flags) != len(reasons):  # a row written otherwise: its reason as it is
        return [(str(r["validity_reason"]), "")]
    known = flag_texts()
    out = []
    for flag, reason in zip(flags, reasons):
        found = _NUMBER.search(reason)
        out.append((known[flag], found.group(0) if found else "") if flag in known else (reason, ""))
    return out


def group_cases(entries: Iterable[tuple[str, str, str, str | None, str]]) -> list[tuple[str, str, list[str]]]:
    """The one grouper of note lines: ``(what, case label, label without its model, model, figure)`` entries as one
    ``(what, "N cases [of model]", ["label figure", ...])`` a ``what``, in first-seen order: a reason or flag several
    cases share is printed once with its cases, each with its own figure. When every case of a line has one model,
    the model is said once (``of resnet50``) and the cases are named without it."""
    groups: dict[str, list[tuple[str, str, str | None, str]]] = {}
    for what, label, short, model, figure in entries:
        groups.setdefault(what, []).append((label, short, model, figure))
    out = []
    for what, members in groups.items():
        models = {m[2] for m in members}
        one = len(models) == 1 and None not in models
        cases = [" ".join(x for x in ((short if one else label), figure) if x) for label, short, _, figure in members]
        n = f"{len(members)} case{'s' if len(members) > 1 else ''}" + (f" of {models.pop()}" if one else "")
        out.append((what, n, cases))
    return out


def _grouped(flagged: list[tuple[dict, str, str]]) -> list[tuple[str, str]]:
    """One ``flagged:`` line per flag: ``what: N cases [of model]: case figure, ...``."""
    entries = [
        (what, case_label(r), case_label(r, model=False), str(r.get("model")), figure) for r, what, figure in flagged
    ]
    return [("flagged:", f"{what}: {n}: {', '.join(cases)}") for what, n, cases in group_cases(entries)]


def case_notes(records: Iterable[dict]) -> list[tuple[str, str]]:
    """``(label, text)`` lines under a compact table: why each case failed, and the flagged cases grouped.

    Labels: ``error``, ``oom``, ``unsupported``, ``skipped`` (one line a reason: a case's label and its reason, or
    the reason and the cases that share it), ``INVALID`` (LoadGen's verdict, one line a case); then ``flagged``, one
    line per validity flag naming its cases.
    """
    out, flagged, failed = [], [], {}
    for r in records:
        status = r.get("status")
        if status != OK and isinstance(r.get("error"), str):
            failed.setdefault((status, r["error"]), []).append(case_label(r))
            continue
        if status == OK and isinstance(r.get("validity_reason"), str):
            flagged += [(r, what, figure) for what, figure in _flags(r)]
        if status == OK and r.get("result_validity") == "INVALID":
            out.append(("INVALID:", f"{case_label(r)}: {r.get('invalid_reasons')}"))
    # one line a reason: "unsupported: cudagraphs needs a CUDA GPU: 12 cases: ..." rather than the sentence 12 times
    failures = [
        (
            f"{status}:",
            f"{labels[0]}: {error}" if len(labels) == 1 else f"{error}: {len(labels)} cases: {', '.join(labels)}",
        )
        for (status, error), labels in failed.items()
    ]
    return failures + out + _grouped(flagged)


_DIGITS = re.compile(r"\d[\d,]*(?:\.\d+)?")  # a number without its unit (the flags' _NUMBER keeps a %)


def fold_similar(lines: Iterable[str]) -> list[str]:
    """Lines that differ only in their numbers as one line: the first of them and how many more there are
    (``p99 interval needs >= 368 timed batches (have 15) (and 13 more like it)``); order kept."""
    groups: dict[str, list[str]] = {}
    for line in lines:
        groups.setdefault(_DIGITS.sub("N", line), []).append(line)
    return [g[0] if len(g) == 1 else f"{g[0]} (and {len(g) - 1} more like it)" for g in groups.values()]


def grouped_flags(pairs: Iterable[tuple[str, str]], word: str = "ambiguous") -> list[str]:
    """``(case label, "A: flag; flag")`` pairs as one line per side and flag (:func:`group_cases`), its cases listed
    with their figure (the flag's first number): ``ambiguous: A: latency spread (IQR/median) N% > 5%: 4 cases:
    bs=1 29.2%, ...`` rather than the sentence once a case; a flag only one case has keeps its own line."""
    entries, own = [], {}
    for label, text in pairs:
        side, sep, reasons = text.partition(": ")
        if not sep:
            side, reasons = "", text
        where = f"{side}: " if side else ""
        for flag in reasons.split("; "):
            m = _DIGITS.search(flag)
            figure = m.group(0) + ("%" if flag[m.end() : m.end() + 1] == "%" else "") if m else ""
            what = where + _DIGITS.sub("N", flag, count=1)
            entries.append((what, label, label, None, figure))
            own.setdefault(what, f"{label}: {where}{flag}")
    return [
        f"{word}: {own[what]}" if len(cases) == 1 else f"{word}: {what}: {n}: {', '.join(cases)}"
        for what, n, cases in group_cases(entries)
    ]

"""The end of ``accelbench tune`` (:mod:`accelbench.studies.tune`): the finalists and the default configuration
in interleaved rounds, their windows pooled, the winner's verdicts through ``accelbench compare``'s maths
(:func:`accelbench.core.compare.compare_metric`: two-level bootstrap interval of the ratio, Mann-Whitney test
on the windows, 2 % equivalence margin), the Pareto front, and the winner as a command and a TOML file."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from accelbench.studies import tune_search as ts


def pooled(store, rows: list[dict[str, Any]]):
    """One :class:`accelbench.core.rundata.Measured` from the rows of one candidate's rounds: every window of
    every round (each window's latencies cut to the shortest window's count: the bootstrap stacks them), the
    pooled throughput and latency figures, and the mean energy and cost per sample."""
    from accelbench.core.ci import Windows
    from accelbench.core.rundata import Measured, windows_of

    wins = [w for w in (windows_of(store, r) for r in rows) if w is not None]
    if not wins:
        return None
    n = min(len(x) for w in wins for x in w.latency_ms)
    win = Windows(wall_s=np.concatenate([w.wall_s for w in wins]), samples=np.concatenate([w.samples for w in wins]),
                  latency_ms=tuple(x[:n] for w in wins for x in w.latency_ms))
    lat = np.concatenate(win.latency_ms)
    rec = {**rows[-1], "throughput_samples_per_s": win.throughput(), "latency_p50_ms": float(np.median(lat)),
           "latency_p99_ms": float(np.quantile(lat, 0.99)), "final_windows": win.n, "final_rounds": len(rows)}
    for col in ("energy_per_sample_j", "cost_per_1000_samples_usd"):
        vals = [r[col] for r in rows if r.get(col) is not None]
        rec[col] = float(np.mean(vals)) if vals else None
    return Measured(record=rec, windows=win)


def verdict_of(a, b, objective: str, seed: int = 0):
    """B against A on the objective's metric (:data:`tune_search.VERDICT_METRIC`): a
    :class:`accelbench.core.compare.MetricResult` (ratio B/A, its 95 % interval, p-value, verdict)."""
    from accelbench.core import compare as cmp
    from accelbench.core.ci import hierarchical_replicates

    metric = next(m for m in cmp.METRICS if m.name == ts.VERDICT_METRIC[objective])
    reps_a = hierarchical_replicates(a.windows, seed=seed)
    reps_b = hierarchical_replicates(b.windows, seed=seed + 1)
    return cmp.compare_metric(a, b, metric, reps_a, reps_b)


def final(t, finalists: list[tuple], base_cfg: tuple[str, str]) -> None:
    """Stage 3 of :mod:`accelbench.studies.tune`: fills ``t.out`` (winner, runner-up, baseline, verdicts).
    The first round always runs (a tune ends with a measured winner); later rounds only within the budget."""
    s, out = t.settings, t.out
    if not finalists:
        out.notes.append("no configuration met the constraints: nothing to recommend")
        return
    cands = list(dict.fromkeys([*finalists, (base_cfg, finalists[0][1])]))
    rows: dict[tuple, list] = {c: [] for c in cands}
    for i in range(s.final_rounds):
        for c in cands:
            row = t.trial(c[0], c[1], f"final{i}", s.final_repeats, share=float("inf") if i == 0 else 1.0)
            if row is not None and row.get("status") == "ok":
                rows[c].append(row)
    if any(len(v) < s.final_rounds for v in rows.values()):
        out.notes.append("the budget ran out during the final rounds: fewer windows, wider intervals")
    measured = {c: m for c, v in rows.items() if v and (m := pooled(t.store, v)) is not None}
    ok = {c: m for c, m in measured.items() if t.score(m.record) is not None and c in finalists}
    if not ok:
        out.notes.append("no finalist met the constraints in the final rounds")
        return
    ranked = sorted(ok, key=lambda c: t.score(ok[c].record), reverse=True)
    win = ok[ranked[0]]
    out.winner = win.record
    if len(ranked) > 1:
        out.runner_up = ok[ranked[1]].record
        out.verdict = verdict_of(ok[ranked[1]], win, s.objective)
    base = measured.get((base_cfg, finalists[0][1]))
    if base is not None:
        out.baseline = base.record
        out.gain = verdict_of(base, win, s.objective, seed=2) if base is not win else None


def front(trials: list[dict[str, Any]], t) -> list[dict[str, Any]]:
    """The Pareto front (:func:`tune_search.pareto_front`) of the acceptable trials, the latest row of each
    (configuration, batch size)."""
    return ts.latest_front(trials, lambda r: t.score(r) is not None)


def run_flags(spec, rec: dict[str, Any]) -> list[tuple[str, Any]]:
    """The winner's settings as ``(TOML key, value)``: what ``run``, ``loadgen`` and ``train`` share; a
    ``train_step`` spec adds its optimizer and, when the trial set it, ``fused_optimizer``."""
    out = [("model", rec["model"]), ("batch_sizes", [int(rec["batch_size"])]), ("precisions", [rec["precision"]]),
           ("modes", [rec["mode"]]), ("channels_last", spec.channels_last), ("device", spec.device),
           ("data", spec.data)]
    if spec.image_size is not None:
        out.append(("image_size", spec.image_size))
    if spec.cudnn_benchmark is not None:
        out.append(("cudnn_benchmark", spec.cudnn_benchmark))
    if spec.scenario == "train_step":
        out.append(("optimizer", spec.settings.optimizer))
        if rec.get("fused_optimizer") is not None:
            out.append(("fused_optimizer", bool(rec["fused_optimizer"])))
    return out


def command(spec, rec: dict[str, Any]) -> str:
    """The winner as a runnable ``accelbench run ...`` command (``accelbench train ...`` for a training step)."""
    import shlex

    parts = ["accelbench", "train" if spec.scenario == "train_step" else "run"]
    for key, v in run_flags(spec, rec):
        flag = "--" + key.replace("_", "-")
        if isinstance(v, bool) or key == "channels_last":
            on = v if isinstance(v, bool) else v == "on"
            if key == "channels_last" and v == "auto":
                continue
            parts.append(flag if on else flag.replace("--", "--no-", 1))
        else:
            parts += [flag, ",".join(map(str, v)) if isinstance(v, list) else str(v)]
    return " ".join(shlex.quote(p) for p in parts)


def toml_text(spec, rec: dict[str, Any], comment: str = "") -> str:
    """The winner as a TOML file ``accelbench run -c`` reads (``train -c`` and ``loadgen -c`` read its shared
    keys; a training step's file is for ``train -c``). Values are strings, integers, booleans and lists of them: JSON spells those as TOML does."""
    head = "".join(f"# {line}\n" for line in comment.splitlines())
    return head + "".join(f"{k} = {json.dumps(v)}\n" for k, v in run_flags(spec, rec))

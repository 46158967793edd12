"""The end of ``accelbench tune`` (:mod:`accelbench.studies.tune`): the finalists and the default configuration
in interleaved rounds, their windows pooled, the winner's verdicts through ``accelbench compare``'s maths
(:func:`accelbench.core.compare.compare_metric`: two-level bootstrap interval of the ratio, Mann-Whitney test
on the windows, 2 % equivalence margin), the Pareto front, and the winner as a command and a TOML file."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from accelbench.core.errors import OK
from accelbench.studies import tune_search as ts


def pooled(store, rows: list[dict[str, Any]]):
    """One :class:`accelbench.core.rundata.Measured` from the rows of one candidate's rounds: every window of
    every round (each window's latencies cut to the shortest window's count, then thinned to
    :data:`VERDICT_LATENCIES`: the bootstrap stacks them), the pooled throughput and latency figures (of every
    latency), and the mean energy and cost per sample."""
    from accelbench.core.ci import Windows
    from accelbench.core.rundata import Measured, windows_of

    wins = [w for w in (windows_of(store, r) for r in rows) if w is not None]
    if not wins:
        return None
    n = min(len(x) for w in wins for x in w.latency_ms)
    win = Windows(
        wall_s=np.concatenate([w.wall_s for w in wins]),
        samples=np.concatenate([w.samples for w in wins]),
        latency_ms=tuple(_thinned(x[:n]) for w in wins for x in w.latency_ms),
    )
    lat = np.concatenate([x for w in wins for x in w.latency_ms])
    rec = {
        **rows[-1],
        "throughput_samples_per_s": win.throughput(),
        "latency_p50_ms": float(np.median(lat)),
        "latency_p99_ms": float(np.quantile(lat, 0.99)),
        "final_windows": win.n,
        "final_rounds": len(rows),
    }
    for col in ("energy_per_sample_j", "cost_per_1000_samples_usd"):
        vals = [r[col] for r in rows if r.get(col) is not None]
        rec[col] = float(np.mean(vals)) if vals else None
    return Measured(record=rec, windows=win)


# Latencies per window the verdicts' bootstrap resamples: its time grows with windows x latencies x replicates
# (2,000), about 0.1 us a cell here, and a GPU window at batch 1 holds thousands of steps; evenly spaced steps keep
# the window's course. The pooled figures use every latency.
VERDICT_LATENCIES = 256


def _thinned(x):
    """At most :data:`VERDICT_LATENCIES` evenly spaced entries of ``x``."""
    if len(x) <= VERDICT_LATENCIES:
        return x
    return np.asarray(x)[np.linspace(0, len(x) - 1, VERDICT_LATENCIES).round().astype(int)]


def verdict_of(a, b, objective: str, seed: int = 0):
    """B against A on the objective's metric (:data:`tune_search.VERDICT_METRIC`): a
    :class:`accelbench.core.compare.MetricResult` (ratio B/A, its 95 % interval, p-value, verdict)."""
    from accelbench.core import compare as cmp
    from accelbench.core.ci import hierarchical_replicates

    metric = next(m for m in cmp.METRICS if m.name == ts.VERDICT_METRIC[objective])
    reps_a = hierarchical_replicates(a.windows, seed=seed)
    reps_b = hierarchical_replicates(b.windows, seed=seed + 1)
    return cmp.compare_metric(a, b, metric, reps_a, reps_b)


def final(t, finalists: list[tuple], base_cfg: tuple) -> None:
    """Stage 3 of :mod:`accelbench.studies.tune`: fills ``t.out`` (winner, runner-up, baseline, verdicts). As many
    rounds of as many candidates as the budget left fits (:func:`accelbench.studies.tune_budget.fit_final`:
    without the default configuration, then without the runner-up, before none); with no final round at all, the
    winner is the leader's own search trial."""
    from accelbench.studies.tune_budget import STOPPED, fit_final

    s, out = t.settings, t.out
    if not finalists:
        cut = [r for r in out.trials if str(r.get("error") or "").startswith(STOPPED)]
        out.notes.append(
            f"no trial finished within the budget ({len(cut)} stopped at it, the longest after "
            f"{max(r['case_wall_s'] for r in cut):.0f} s): nothing to recommend; give a larger --budget-s"
            if cut and len(cut) == len(out.trials)
            else "no configuration met the constraints: nothing to recommend"
        )
        return
    wanted = list(dict.fromkeys([*finalists, (base_cfg, finalists[0][1])]))
    cands, n_rounds = fit_final(
        wanted, lambda c: t.cost(c[0], c[1], "final0", s.final_repeats), t.clock.left(), s.final_rounds
    )
    if not cands:
        out.notes.append("the budget left no time for a final round: the winner's figures are from its search trial")
        return _search_winner(t, finalists[0])
    rows: dict[tuple, list] = {c: [] for c in cands}
    for i in range(n_rounds):
        for c in cands:
            row = t.trial(c[0], c[1], f"final{i}", s.final_repeats)
            if row is not None and row.get("status") == OK:
                rows[c].append(row)
    if len(cands) < len(wanted) or any(len(v) < s.final_rounds for v in rows.values()):
        out.notes.append(
            f"the budget allowed {n_rounds} of {s.final_rounds} final round(s) of {len(cands)} of "
            f"{len(wanted)} candidate(s): fewer windows, wider intervals"
        )
    measured = {c: m for c, v in rows.items() if v and (m := pooled(t.store, v)) is not None}
    ok = {c: m for c, m in measured.items() if t.score(m.record) is not None and c in finalists}
    if not ok:
        out.notes.append("no finalist measured in the final rounds: the winner's figures are from its search trial")
        return _search_winner(t, finalists[0])
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


def _search_winner(t, leader: tuple) -> None:
    """The winner when no final round fits: the leader's best search trial (the longest windows it had)."""
    rows = [r for cfg, b, r in t.tried if (cfg, b) == leader and t.score(r) is not None]
    m = pooled(t.store, rows[-1:]) if rows else None
    if m is not None:
        t.out.winner = m.record


def front(trials: list[dict[str, Any]], t) -> list[dict[str, Any]]:
    """The Pareto front (:func:`tune_search.pareto_front`) of the acceptable trials, the latest row of each
    (configuration, batch size)."""
    return ts.latest_front(trials, lambda r: t.score(r) is not None)


def run_flags(spec, rec: dict[str, Any]) -> list[tuple[str, Any]]:
    """The winner's settings as ``(TOML key, value)``: what ``run``, ``loadgen`` and ``train`` share; a
    ``train_step`` spec adds its optimizer and, when the trial set it, ``fused_optimizer``."""
    out = [
        ("model", rec["model"]),
        ("batch_sizes", [int(rec["batch_size"])]),
        ("precisions", [rec["precision"]]),
        ("modes", [rec["mode"]]),
        ("channels_last", spec.channels_last),
        ("device", spec.device),
        ("data", spec.data),
    ]
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

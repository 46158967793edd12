"""The search stages of ``accelbench tune`` (:mod:`accelbench.studies.tune`, whose docstring tells them): the
probe and the refusal of a budget too small for one trial, the reference trial, screening with bracketing and
pruning, successive halving. Each trial goes through
:meth:`accelbench.studies.tune.Tuner.trial`, which measures it only when its predicted cost fits the budget."""

from __future__ import annotations

import math

from accelbench.studies import tune_budget as tb
from accelbench.studies import tune_search as ts
from accelbench.studies.tune_space import label

# Bracketing starts here: a compile per batch size costs tens of seconds on a GPU, and throughput below 32
# images per batch is never the answer there; a CPU starts at 1.
BRACKET_START = {True: 32, False: 1}
DOMINANCE_MARGIN = 0.05  # screening windows are short: prune only what is more than 5 % worse everywhere


def first_batch(s: ts.TuneSettings, cuda: bool) -> int:
    """The batch size of the first screening trial: the first of ``batch_sizes``, 1 for ``latency``, else
    :data:`BRACKET_START` (at most ``max_batch``)."""
    if s.batch_sizes:
        return s.batch_sizes[0]
    if s.objective == "latency":
        return 1
    return min(BRACKET_START[cuda], s.max_batch or (1024 if cuda else 256))


def reference_config(cfgs: list) -> tuple:
    """The configuration of the fp32 top-1 reference: an fp32 configuration of the space, else fp32 through the
    backend that compiles nothing (eager)."""
    from accelbench import backends, precisions

    return next(
        (c for c in cfgs if precisions.is_reference(c[0])),
        (next(n for n in precisions.names() if precisions.is_reference(n)), backends.reference()),
    )


def reference_batch(s: ts.TuneSettings) -> int:
    return (s.batch_sizes or (8,))[0]


def bracket(t, cfg, tried: dict[int, float | None], start: int, max_batch: int) -> dict[int, float | None]:
    """Bracket and bisect ``cfg``'s batch size (:func:`tune_search.next_batch`) while the budget has room for them."""
    while (b := ts.next_batch(tried, start, max_batch)) is not None:
        row = t.trial(cfg, b, "screen")
        if row is None:
            break
        tried[b] = t.score(row)
    return tried


def screen(t, cfgs: list) -> dict[tuple, dict[int, float | None]]:
    """Stage 1 (:mod:`accelbench.studies.tune`): ``{configuration: {batch size: score}}`` of the screening trials."""
    s = t.settings
    max_batch = s.max_batch or (1024 if t.cuda else 256)
    fixed = s.batch_sizes or ((1,) if s.objective == "latency" else None)
    scores: dict[tuple, dict[int, float | None]] = {c: {} for c in cfgs}
    if fixed:
        for c in cfgs:
            for b in fixed:
                row = t.trial(c, b, "screen")
                if row is not None:
                    scores[c][b] = t.score(row)
        return scores
    bracket(t, cfgs[0], scores[cfgs[0]], first_batch(s, t.cuda), max_batch)
    top = ts.best_batch(scores[cfgs[0]]) or 1
    for c in cfgs[1:]:
        row = t.trial(c, top, "screen")
        if row is not None:
            scores[c][top] = t.score(row)
    pruned = ts.dominated(scores, DOMINANCE_MARGIN)
    t.out.pruned = [label(c) for c in cfgs if c in pruned]
    for c in cfgs[1:]:
        if c not in pruned and scores[c]:
            bracket(t, c, scores[c], top, max_batch)
    return {c: v for c, v in scores.items() if c not in pruned}


def halving(t, scores: dict) -> list[tuple]:
    """Stage 2: (configuration, batch) candidates halved on longer repeated windows until two remain."""
    cands = [(c, ts.best_batch(v)) for c, v in scores.items() if ts.best_batch(v) is not None]
    cands = sorted(cands, key=lambda cb: scores[cb[0]][cb[1]], reverse=True)
    rung, reps = 1, t.settings.final_repeats
    while len(cands) > 2:
        if not t.affordable(sum(t.cost(c, b, f"rung{rung}", reps) for c, b in cands), f"rung{rung}"):
            break  # a rung runs whole or not at all: the order so far stands
        got = {cb: t.score(t.trial(cb[0], cb[1], f"rung{rung}", reps)) for cb in cands}
        if all(v is None for v in got.values()):
            break  # nothing of the rung fitted after all: the order so far stands
        cands, rung = ts.halve(got, t.settings.eta, keep_min=2), rung + 1
    return cands[:2]


def reference_top1(t, cfgs: list) -> None:
    """The fp32 top-1 the ``min_top1_ratio`` constraint divides by: an fp32 trial of the space, or a
    ``reference`` trial (fp32, eager) when the space has none; a note when the model reports no accuracy."""
    ref = reference_config(cfgs)
    row = t.trial(ref, reference_batch(t.settings), "reference")
    t.top1_ref = row.get("top1") if row else None
    if not t.top1_ref:
        t.out.notes.append("no fp32 top-1 (random weights or no labels): --min-top1-ratio not applied")


def probe(spec, device, train: bool, state):
    """The probe's figures (:func:`tune_budget.probe`; ``state``: the scenario's prepared state, the images
    first), None when the model fails in it (its trials will say why)."""
    from accelbench.launchers.case import cleanup

    try:
        return tb.probe(spec.models[0], spec.image_size, device, train, state[0], spec.settings)
    except Exception:  # the first trial stores the failure as its row
        return None
    finally:
        cleanup(device)


def check_budget(t, cfgs: list) -> None:
    """Refuse a budget too small for the tune's first trial here, with the minimum it needs.

    Raises:
        ConfigError: ``budget_s`` below what was spent so far (decoding the images, the probe) plus the predicted
        cost of the first trial.
    """
    from accelbench.core.errors import ConfigError

    s = t.settings
    first = (
        (reference_config(cfgs), reference_batch(s), "reference")
        if s.min_top1_ratio is not None
        else (cfgs[0], first_batch(s, t.cuda), "screen")
    )
    spent, cost = t.clock.spent(), t.cost(*first)
    if spent + cost > s.budget_s:
        raise ConfigError(
            "budget_s",
            s.budget_s,
            f"at least {math.ceil(spent + cost)} s here (decoding the images "
            f"and a probe of the model took {spent:.1f} s; one {label(first[0])} trial at batch "
            f"{first[1]} needs about {cost:.1f} s)",
        )

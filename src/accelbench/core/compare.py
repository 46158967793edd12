"""A/B comparison of two runs (``accelbench compare``): matched cases, ratios B/A with confidence intervals,
a significance test and a verdict per metric. Pure apart from numpy/scipy; tested with exact numbers.

Per matched case and metric (throughput, latency p50 and p99, energy per sample, cost per 1,000 samples, and the
scenario's extra metrics): each metric's column is the one the case's scenario names (its
:class:`~accelbench.core.columns.MetricMap`, by the row's workload): a generate case's throughput is its decode
tokens/s, its latency the time per output token, and its extra metric the time to first token p50, the prefill,
whose windows are the timed generations, each one TTFT:

- **ratio** B/A of the stored figures, with a 95 % percentile interval from the two-level bootstrap of each
  side (:func:`accelbench.core.ci.hierarchical_replicates`: windows, then batches). Energy and cost are one
  reading per case (power is not measured per window), so their replicates are the stored figure scaled by
  the throughput's: energy per sample = mean power / throughput, cost per sample = price / throughput.
- **test**: the two-sided Mann-Whitney U test on the per-window values (window throughput, window latency
  median / p99, energy and cost scaled per window). With ``n_a`` and ``n_b`` windows its smallest attainable
  p-value is 2 / C(n_a + n_b, n_a); when that cannot reach ``alpha`` (e.g. 3 vs 3 windows: 0.10; one window:
  1) the verdict is ``too few windows``. 5 vs 5 windows (smallest p 0.008) leave room for overlap.
- **verdict**: ``faster`` / ``slower`` (energy, cost: ``better`` / ``worse``) when the test is significant
  and the ratio is beyond the equivalence margin (default 2 %: B/A above 1 + margin or below 1 - margin);
  ``within noise`` otherwise (not significant, or a real change smaller than the margin).
- **ambiguous**: a validity flag (throttling, clock variation, latency spread, another process, CPU
  contention) fired on either side: the verdict stands but may come from the environment.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from accelbench.core import kinds
from accelbench.core.ci import (
    LEVEL,
    N_BOOT,
    SEED,
    hierarchical_replicates,
    mann_whitney_p,
    min_attainable_p,
    percentile_interval,
)
from accelbench.core.columns import MetricMap, named, of_row
from accelbench.core.rundata import Measured, RunData
from accelbench.core.validity import VALID

MARGIN = 0.02
ALPHA = 1 - LEVEL
MATCH_FIELDS = (
    "workload",
    "model",
    "batch_size",
    "precision",
    "mode",
    "channels_last",
    "image_size",
    "optimizer",
    "include_transfer",
    "world_size",
    "prompt_len",
    "new_tokens",
    "seq_len",  # a language model's training step
    "token_source",
    "activation_checkpointing",
    "parallel_strategy",
    "concurrency",  # a serve level
    "request_rate_per_s",
    "arrival",
    "slo_search",
)
# Provenance that changes results; a difference is listed beside the verdicts.
ENV_KEYS = (
    "device_name",
    "gpu_name",
    "driver_version",
    "cuda",
    "cudnn",
    "torch",
    "torchvision",
    "accelbench",
    "git_commit",
    "python",
    "cpu_model",
    "cpu_count",
    "torch_threads",
    "power_limit_w",
    "sm_clock_max_mhz",
    "mem_clock_max_mhz",
    "gpu_mem_total_bytes",
    "host",
)
CLOCK_DIFF = 0.02  # mean SM clocks further apart than this are noted per case


@dataclass(frozen=True, kw_only=True, slots=True)
class Metric:
    """A compared figure: its name, which way is better, the verdict words, and how its bootstrap replicates are
    made (``rep``: a replicate series of :func:`hierarchical_replicates`, or ``per_throughput``: the stored figure
    scaled by throughput). Its column in a row is the row's scenario's (:meth:`MetricMap.column`)."""

    name: str
    higher_better: bool
    words: tuple[str, str] = ("faster", "slower")
    rep: str | None = None


METRICS = (
    Metric(name="throughput", higher_better=True, rep="throughput"),
    Metric(name="latency_p50", higher_better=False, rep="latency_p50"),
    Metric(name="latency_p99", higher_better=False, rep="latency_p99"),
    Metric(name="energy_per_sample", higher_better=False, words=("better", "worse")),
    Metric(name="cost_per_1000", higher_better=False, words=("better", "worse")),
    Metric(name="ttft_p50", higher_better=False, rep="ttft_p50"),  # a scenario's extra (generate: the prefill)
)
GATED = ("throughput", "latency_p50")  # the metrics --fail-on-slower reads
UNDECIDED = ("too few windows", "not measured")  # verdicts a gate cannot pass


@dataclass(kw_only=True, slots=True)
class MetricResult:
    """One metric of one matched case: ``a``, ``b`` (stored figures), ``ratio`` B/A, ``ci_low``/``ci_high`` of the
    ratio, ``p_value`` (Mann-Whitney on windows, None when not run), ``verdict`` and a ``note``."""

    a: float | None
    b: float | None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    verdict: str = "not measured"
    note: str | None = None


@dataclass(kw_only=True, slots=True)
class CaseComparison:
    """A matched case: its match key, its scenario (the name of side A's
    :class:`~accelbench.core.columns.MetricMap`), the two case ids, per-metric results, normalised figures per side,
    ``ambiguous`` (validity flags that fired, per side) and notes (clock differences, window counts)."""

    key: dict[str, Any]
    label: str
    scenario: str
    a_case_id: int
    b_case_id: int
    windows: tuple[int, int]
    metrics: dict[str, MetricResult] = field(default_factory=dict)
    normalised: dict[str, dict[str, float | None]] = field(default_factory=dict)
    ambiguous: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _norm(v: Any) -> Any:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def match_key(rec: dict[str, Any], ignore: tuple[str, ...] = ()) -> tuple:
    """The case's identity across runs: :data:`MATCH_FIELDS` less ``ignore`` (missing fields are None)."""
    return tuple((f, _norm(rec.get(f))) for f in MATCH_FIELDS if f not in ignore)


def case_label(key: tuple) -> str:
    """``model bs=B precision mode ...`` from a match key (what is set, in order)."""
    d = dict(key)
    parts = [str(d.get("model"))] if d.get("model") is not None else []
    if d.get("batch_size") is not None:
        parts.append(f"bs={d['batch_size']}")
    parts += [str(d[f]) for f in ("precision", "mode") if d.get(f) is not None]
    named = (("prompt_len", "prompt"), ("new_tokens", "new"), ("seq_len", "seq"), ("concurrency", "concurrency"))
    parts += [f"{w}={d[f]}" for f, w in named if d.get(f) is not None]
    if d.get("request_rate_per_s") is not None:
        parts.append(f"rate={d['request_rate_per_s']:g}/s" + (f" {d['arrival']}" if d.get("arrival") else ""))
    parts += [str(d[f]) for f in ("token_source", "parallel_strategy") if d.get(f)]
    if d.get("activation_checkpointing") not in (None, "none"):
        parts.append(f"checkpointing={d['activation_checkpointing']}")
    if d.get("slo_search"):
        parts.append("SLO search")
    if d.get("world_size") and d.get("workload") == kinds.GENERATE:  # a model split over the job's GPUs
        parts.append(f"tp={d['world_size']}")
    if d.get("workload") not in (None, kinds.INFERENCE):
        parts.append(str(d["workload"]))
    if d.get("channels_last"):
        parts.append("NHWC")
    return " ".join(parts)


def verdict(
    ratio: float, p_value: float | None, min_p: float, metric: Metric, *, margin: float = MARGIN, alpha: float = ALPHA
) -> str:
    """The verdict of one metric (module docstring): ``too few windows``, ``within noise``, or the metric's
    better/worse word."""
    if min_p >= alpha or p_value is None:
        return "too few windows"
    if p_value >= alpha or (1 - margin) <= ratio <= (1 + margin):
        return "within noise"
    better = ratio > 1 if metric.higher_better else ratio < 1
    return metric.words[0] if better else metric.words[1]


def map_of(rec: dict[str, Any]) -> MetricMap:
    """The row's scenario map (:func:`accelbench.core.columns.of_row`); a record without a workload (one built by
    hand, not read from a store, where every row has one) reads as an image inference row."""
    m = of_row(rec)
    return m if m is not None else named("inference")


def metric_column(name: str, rec: dict[str, Any]) -> str | None:
    """The row's column of metric ``name`` (:data:`METRICS`), as its scenario names it: ``throughput`` of a generate
    row is ``decode_tokens_per_s``, its ``latency_p50`` is ``tpot_p50_ms``; None where the scenario has none."""
    return map_of(rec).column(name)


def ttft_replicates(ttft_ms: tuple[float, ...], *, n_boot: int = N_BOOT, seed: int = SEED) -> np.ndarray:
    """Bootstrap replicates of the median time to first token: the timed generations (one TTFT each) resampled
    with replacement, shape ``(n_boot,)``."""
    rng = np.random.default_rng(seed)
    v = np.asarray(ttft_ms, dtype=float)
    return np.median(v[rng.integers(0, len(v), size=(n_boot, len(v)))], axis=1)


def _window_values(m: Measured, metric: Metric, column: str) -> np.ndarray:
    w = m.windows
    assert w is not None  # only a case with windows has replicates
    if metric.rep == "ttft_p50":
        return np.asarray(m.ttft_ms, dtype=float)
    if metric.rep == "throughput":
        return w.window_throughputs()
    if metric.rep in ("latency_p50", "latency_p99"):
        return w.window_quantiles(0.5 if metric.rep == "latency_p50" else 0.99)
    return m.record[column] * w.throughput() / w.window_throughputs()  # a figure per sample scales as 1 / throughput


def _replicates(m: Measured, metric: Metric, column: str, reps: dict[str, np.ndarray]) -> np.ndarray:
    if metric.rep is not None:
        return reps[metric.rep]
    assert m.windows is not None  # only a case with windows has replicates
    return m.record[column] * m.windows.throughput() / reps["throughput"]


def compare_metric(
    a: Measured,
    b: Measured,
    metric: Metric,
    reps_a: dict | None,
    reps_b: dict | None,
    *,
    margin: float = MARGIN,
    alpha: float = ALPHA,
) -> MetricResult:
    """One metric of a matched pair (see the module docstring); ``reps_*``: :func:`hierarchical_replicates`
    of each side (None: no per-batch samples stored)."""
    col_a, col_b = metric_column(metric.name, a.record), metric_column(metric.name, b.record)
    res = MetricResult(a=a.record.get(col_a) if col_a else None, b=b.record.get(col_b) if col_b else None)
    if res.a is None or res.b is None or res.a == 0:
        return res
    res.ratio = res.b / res.a
    if (
        reps_a is None
        or reps_b is None
        or (metric.rep is not None and not (metric.rep in reps_a and metric.rep in reps_b))
    ):
        res.verdict, res.note = "too few windows", "no per-batch samples stored"
        return res
    ratios = _replicates(b, metric, col_b, reps_b) / _replicates(a, metric, col_a, reps_a)
    res.ci_low, res.ci_high = percentile_interval(ratios)
    assert a.windows is not None and b.windows is not None  # both have replicates
    n_a, n_b = a.windows.n, b.windows.n
    min_p = min_attainable_p(n_a, n_b)
    if min_p < alpha:
        res.p_value = mann_whitney_p(_window_values(a, metric, col_a), _window_values(b, metric, col_b))
    else:
        res.note = (
            f"{n_a} vs {n_b} windows: the smallest attainable Mann-Whitney p is {min_p:.3g} >= {alpha:g}; "
            "use --repeats 5 or more"
        )
    if min(n_a, n_b) == 1:
        res.note = "one window on a side: the interval resamples its batches only (their autocorrelation ignored); " + (
            res.note or ""
        )
    res.verdict = verdict(res.ratio, res.p_value, min_p, metric, margin=margin, alpha=alpha)
    return res


def normalised(rec: dict[str, Any]) -> dict[str, float | None]:
    """Figures that compare across devices (CPU vs GPU, GPU vs GPU), from one case row.

    Per sample as the derived columns count one (``throughput_samples_per_s``, the rate ``energy_per_sample_j`` and
    ``cost_per_1000_samples_usd`` divide by: a generate row's output tokens/s), so the three agree with the stored
    per-sample figures.

    ``samples_per_usd`` = 3600 x throughput / price per hour (the price of every device the case used);
    ``samples_per_j`` = 1 / energy per sample (the energy counter: images per joule);
    ``throughput_per_w`` = throughput / mean power over the window (samples/s per W; equal to samples per J
    when the power is steady, from the sampled power rather than the counter).
    """
    thr, price = rec.get("throughput_samples_per_s"), rec.get("price_per_hour_usd")
    e, p = rec.get("energy_per_sample_j"), rec.get("power_mean_w")
    return {
        "samples_per_usd": 3600 * thr / price if thr and price else None,
        "samples_per_j": 1 / e if e else None,
        "throughput_per_w": thr / p if thr and p else None,
    }


def env_diff(env_a: dict[str, Any], env_b: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """``(key, a, b)`` for each provenance key of :data:`ENV_KEYS` whose values differ."""
    return [(k, env_a.get(k), env_b.get(k)) for k in ENV_KEYS if env_a.get(k) != env_b.get(k)]


def _flags(rec: dict[str, Any], side: str) -> list[str]:
    v = rec.get("validity")
    return [f"{side}: {rec.get('validity_reason') or v}"] if isinstance(v, str) and v != VALID else []


def compare_case(
    a: Measured,
    b: Measured,
    key: tuple,
    *,
    margin: float = MARGIN,
    alpha: float = ALPHA,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> CaseComparison:
    """Every metric of one matched pair, the normalised figures, validity flags and clock notes."""
    reps_a = hierarchical_replicates(a.windows, n_boot=n_boot, seed=seed) if a.windows else None
    reps_b = hierarchical_replicates(b.windows, n_boot=n_boot, seed=seed + 1) if b.windows else None
    if a.ttft_ms is not None and b.ttft_ms is not None and reps_a is not None and reps_b is not None:
        reps_a["ttft_p50"] = ttft_replicates(a.ttft_ms, n_boot=n_boot, seed=seed + 2)
        reps_b["ttft_p50"] = ttft_replicates(b.ttft_ms, n_boot=n_boot, seed=seed + 3)
    ma, mb = map_of(a.record), map_of(b.record)
    out = CaseComparison(
        key=dict(key),
        label=case_label(key),
        scenario=ma.name,
        a_case_id=a.record["case_id"],
        b_case_id=b.record["case_id"],
        windows=(a.windows.n if a.windows else 0, b.windows.n if b.windows else 0),
    )
    both = set(mb.compares())
    for m in METRICS:
        if m.name in ma.compares() and m.name in both:
            out.metrics[m.name] = compare_metric(a, b, m, reps_a, reps_b, margin=margin, alpha=alpha)
    out.normalised = {"a": normalised(a.record), "b": normalised(b.record)}
    out.ambiguous = _flags(a.record, "A") + _flags(b.record, "B")
    ca, cb = a.record.get("sm_clock_mean_mhz"), b.record.get("sm_clock_mean_mhz")
    if ca and cb and abs(cb / ca - 1) > CLOCK_DIFF:
        out.notes.append(f"mean SM clock {ca:.0f} vs {cb:.0f} MHz")
    thr = out.metrics["throughput"].verdict.replace(" (ambiguous)", "")
    if thr in ("faster", "slower") and any(
        "autotune" in str(r.get("compile_mode") or "") for r in (a.record, b.record)
    ):
        # Inductor's max-autotune times candidate kernels in each process and keeps the fastest of that moment:
        # two processes can run different kernels (PyTorch docs, torch.compile "max-autotune")
        out.notes.append(
            "max-autotune chose its kernels by timing them in each process: A and B may run different "
            "kernels (the difference can be the choice, not the change)"
        )
    out.notes += _split_notes(a.record, b.record)
    ka, kb = a.record.get("quant_kernels"), b.record.get("quant_kernels")
    if ka != kb and (ka or kb):  # e.g. the 8-bit GEMV's int8 conversion, chosen by timing in each process
        out.notes.append(f"the quantized matmuls ran different kernels: A {ka or 'none named'}; B {kb or 'none named'}")
    return out


def _split_notes(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """For two generations over different numbers of GPUs (``world_size``: a model split by tensor parallelism), the
    ratio per GPU of the decode tokens/s the table compares for the whole job, and each side's cost per million
    output tokens (``cost_per_1000_samples_usd`` x 1000: its GPUs' price)."""
    if kinds.GENERATE not in (a.get("workload"), b.get("workload")):
        return []
    ga, gb = (int(r.get("world_size") or r.get("tp_degree") or 1) for r in (a, b))
    ta, tb = a.get("decode_tokens_per_s"), b.get("decode_tokens_per_s")
    if ga == gb or not ta or not tb:
        return []
    said = [f"decode tokens/s per GPU: B/A {(tb / gb) / (ta / ga):.3f}x (A on {ga} GPUs, B on {gb})"]
    ca, cb = a.get("cost_per_1000_samples_usd"), b.get("cost_per_1000_samples_usd")
    if ca is not None and cb is not None:
        said.append(f"cost per million output tokens: A ${1000 * ca:.2f}, B ${1000 * cb:.2f}")
    return said


@dataclass(kw_only=True, slots=True)
class Comparison:
    """Run B against run A: the environment differences, the matched cases, and the cases of each side
    that had no partner (their labels)."""

    a: str
    b: str
    margin: float
    alpha: float
    env_diff: list[tuple[str, Any, Any]]
    cases: list[CaseComparison]
    only_a: list[str]
    only_b: list[str]
    # a side's cases that one match key holds once ``ignore`` is applied: what was compared and what was left
    collided: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def slower(self) -> list[tuple[CaseComparison, str]]:
        """``(case, metric name)`` for every gated metric (:data:`GATED`) whose verdict is ``slower``."""
        return [(c, n) for c in self.cases for n in GATED if c.metrics[n].verdict == "slower"]

    def undecided(self) -> list[tuple[CaseComparison, str]]:
        """``(case, why)`` for every matched case a gate cannot judge and that is not slower: a gated metric
        (:data:`GATED`) whose verdict is ``too few windows`` or ``not measured`` (the test cannot reach its level:
        a pass would mean nothing), or a validity flag that fired on either side (the verdict may be the
        environment's)."""
        slow = {id(c) for c, _ in self.slower()}
        out = []
        for c in self.cases:
            if id(c) in slow:
                continue
            open_ = [f"{n} {c.metrics[n].verdict}" for n in GATED if c.metrics[n].verdict in UNDECIDED]
            if open_ or c.ambiguous:
                out.append((c, "; ".join(open_ + [f"flagged ({f})" for f in c.ambiguous])))
        return out


def compare_runs(
    a: RunData,
    b: RunData,
    *,
    margin: float = MARGIN,
    alpha: float = ALPHA,
    ignore: tuple[str, ...] = (),
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> Comparison:
    """Match the cases of two :class:`accelbench.core.rundata.RunData` by :func:`match_key` (less ``ignore``)
    and compare every pair (:func:`compare_case`). A key seen twice on one side (two precisions, once ``precision``
    is ignored) keeps its first case; ``collided`` says which, and which were left."""
    collided: list[str] = []

    def index(run: RunData, side: str) -> dict[tuple, Measured]:
        out: dict[tuple, list[Measured]] = {}
        for m in run.cases:
            out.setdefault(match_key(m.record, ignore), []).append(m)
        for k, ms in out.items():
            if len(ms) > 1:
                what = [", ".join(f"{f}={m.record.get(f)}" for f in ignore if m.record.get(f) is not None) for m in ms]
                why = f"once {', '.join(ignore)} are ignored" if ignore else "with one match key"
                collided.append(
                    f"{side} has {len(ms)} cases of {case_label(k)} {why}: compared the first "
                    f"({what[0] or 'as listed'}); not compared: {'; '.join(w or '?' for w in what[1:])} "
                    "(compare them in a run of their own, or ignore fewer fields)"
                )
        return {k: ms[0] for k, ms in out.items()}

    ia, ib = index(a, "A"), index(b, "B")
    cases = [compare_case(ia[k], ib[k], k, margin=margin, alpha=alpha, n_boot=n_boot, seed=seed) for k in ia if k in ib]
    return Comparison(
        a=a.label,
        b=b.label,
        margin=margin,
        alpha=alpha,
        env_diff=env_diff(a.run["env"], b.run["env"]),
        cases=cases,
        only_a=[case_label(k) for k in ia if k not in ib],
        only_b=[case_label(k) for k in ib if k not in ia],
        collided=collided,
    )

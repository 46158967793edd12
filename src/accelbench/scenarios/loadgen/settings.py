"""LoadGen's ``TestSettings`` and log settings for one test.

Two regimes:

- a sweep (default): ``min_duration_s`` and ``min_query_count`` short enough to run many cases, with the
  scenario's latency targets as MLPerf sets them (SingleStream p90, MultiStream 8 samples a query and
  p99, Server p99 under ``server_latency_ms``);
- ``--mlperf-rules``: LoadGen's built-in ``mlperf.conf`` for the model (``TestSettings.FromConfig(path="",
  model, scenario, conf_type=0)``: 600 s minimum, MLPerf's query counts, early stopping; ResNet-50's
  Server bound is 15 ms there). Every row says which regime it ran under.

LoadGen plans a test from expected figures: it pre-generates ``min_duration / expected latency`` queries
(SingleStream, MultiStream) or one query of ``expected_qps * min_duration`` samples (Offline), and a test
that runs out of them before its minimum duration is INVALID. They are set from the forward's measured
time with a 2x margin (:data:`EXPECTATION_MARGIN`): the pipelined SUT runs faster than the synchronised
calibration, and a busy host makes the calibration noisy. SingleStream and MultiStream stop issuing once
both minimums are met, so the surplus costs nothing; an Offline test runs its whole query (up to about 2x
the minimum duration).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

MULTISTREAM_SAMPLES = 8  # samples per MultiStream query: LoadGen's default and MLPerf's rule
MLPERF_MODELS = {"resnet50": "resnet50"}  # accelbench model -> the model's name in mlperf.conf
# Minimum query counts of a sweep's short tests, per scenario: LoadGen's mlperf.conf (loadgen 6.0) where it
# suffices, SingleStream 100 and MultiStream 662; Server also 662, the fewest queries whose p99 early-stopping
# estimate can pass at all (LoadGen's early stopping, with no query over the bound); Offline runs one query.
MIN_QUERIES = {"SingleStream": 100, "MultiStream": 662, "Server": 662, "Offline": 1}
EXPECTATION_MARGIN = 2.0  # expected latency / margin, expected QPS x margin (module docstring)
# A sweep's test runs at most this many times its minimum duration (one of at least MIN_DURATION_FLOOR_S):
# LoadGen runs until both minimums are met, so a low Server rate or a slow query would stretch a "2 s" test
# to minutes (662 queries at 3 queries/s: 220 s). Settings that would are refused before LoadGen starts.
MAX_DURATION_FACTOR = 4.0
MIN_DURATION_FLOOR_S = 1.0
# A Server target above this many times the measured capacity (the largest batch back to back) is not run:
# it cannot be VALID, and LoadGen pre-generates every query of the test (1e12 queries/s x 2 s exhausts memory).
MAX_OVER_CAPACITY = 4.0


@dataclass(frozen=True, kw_only=True, slots=True)
class TestPlan:
    """What one LoadGen test runs.

    Attributes:
        scenario: ``SingleStream``, ``MultiStream``, ``Server`` or ``Offline``.
        accuracy: LoadGen's AccuracyOnly mode (every sample once, answers logged) instead of PerformanceOnly.
        min_duration_s, min_query_count: the test's minimums (ignored under ``mlperf_rules``; None takes
            :data:`MIN_QUERIES` of the scenario).
        mlperf_rules: LoadGen's built-in ``mlperf.conf`` for ``model``.
        model: the accelbench model name.
        server_qps: Server's target arrival rate (queries/s, Poisson).
        server_latency_ms: Server's latency bound at ``server_percentile`` (MLPerf ResNet-50: 15 ms at p99).
        expected_latency_s: the forward's time at the query's batch size (SingleStream, MultiStream).
        expected_qps: samples/s the SUT can sustain (Offline).
    """

    scenario: str
    accuracy: bool = False
    min_duration_s: float = 10.0
    min_query_count: int | None = None
    mlperf_rules: bool = False
    model: str = ""
    server_qps: float | None = None
    server_latency_ms: float = 15.0
    server_percentile: float = 0.99
    expected_latency_s: float | None = None
    expected_qps: float | None = None


def plan_for(case, spec, **changes: Any) -> TestPlan:
    """The LoadGen test of ``case`` (a :class:`TestPlan`; ``changes`` override its fields)."""
    s = spec.settings
    doc = dict(
        scenario=case.extras.loadgen_scenario,
        min_duration_s=s.min_duration_s,
        min_query_count=s.min_query_count,
        mlperf_rules=s.mlperf_rules,
        model=case.model,
        server_qps=s.server_target_qps,
        server_latency_ms=s.server_latency_ms,
    )
    return TestPlan(**{**doc, **changes})


def build_settings(lg, plan: TestPlan) -> Any:
    """LoadGen's ``TestSettings`` for ``plan``.

    Raises:
        ValueError: LoadGen refused its built-in configuration for the model and scenario.
    """
    s = lg.TestSettings()
    if plan.mlperf_rules:
        if s.FromConfig("", MLPERF_MODELS.get(plan.model, plan.model), plan.scenario, 0) != 0:
            raise ValueError(f"LoadGen has no MLPerf settings for {plan.model} {plan.scenario}")
    else:
        s.min_duration_ms = int(plan.min_duration_s * 1000)
        s.min_query_count = plan.min_query_count or MIN_QUERIES[plan.scenario]
        s.server_target_latency_ns = int(plan.server_latency_ms * 1e6)
        s.server_target_latency_percentile = plan.server_percentile
    s.scenario = getattr(lg.TestScenario, plan.scenario)
    s.mode = lg.TestMode.AccuracyOnly if plan.accuracy else lg.TestMode.PerformanceOnly
    if plan.expected_latency_s:
        s.single_stream_expected_latency_ns = max(1, int(plan.expected_latency_s * 1e9 / EXPECTATION_MARGIN))
        s.multi_stream_expected_latency_ns = max(1, int(plan.expected_latency_s * 1e9 / EXPECTATION_MARGIN))
    if plan.expected_qps:
        s.offline_expected_qps = plan.expected_qps * EXPECTATION_MARGIN
    if plan.server_qps:
        s.server_target_qps = plan.server_qps
    return s


def log_settings(lg, folder: Path) -> Any:
    """LoadGen's log settings: summary, detail and accuracy logs in ``folder`` (created), nothing on stdout."""
    folder.mkdir(parents=True, exist_ok=True)
    out = lg.LogOutputSettings()
    out.outdir = str(folder)
    out.copy_summary_to_stdout = False
    ls = lg.LogSettings()
    ls.log_output = out
    ls.enable_trace = False
    return ls


def duration_limit_s(min_duration_s: float) -> float:
    """The longest a sweep's test may run: :data:`MAX_DURATION_FACTOR` x its minimum duration (at least
    :data:`MIN_DURATION_FLOOR_S`)."""
    return MAX_DURATION_FACTOR * max(min_duration_s, MIN_DURATION_FLOOR_S)


def slowest_server_qps(min_duration_s: float, min_query_count: int | None) -> float:
    """The lowest Server rate (queries/s) whose minimum query count fits :func:`duration_limit_s`."""
    return (min_query_count or MIN_QUERIES["Server"]) / duration_limit_s(min_duration_s)


def infeasible(plan: TestPlan, forward_s: dict[int, float], max_batch: int) -> str | None:
    """Why ``plan`` cannot give a result worth its time on the model measured here (None: it can), before LoadGen
    starts: a Server latency bound below the least one query can take (the forward time per sample at the
    smallest batch built, halved: the synchronised calibration overstates a pipelined forward, and a batch of
    one takes at least its share of a larger batch's time), a Server target above :data:`MAX_OVER_CAPACITY` x
    the capacity (``max_batch`` / its forward time), or a test whose minimum query count would run past
    :func:`duration_limit_s` (not under ``mlperf_rules``: MLPerf's own durations).

    Args:
        forward_s: seconds of the forward alone at each built batch size (``Runner.calibrate``).
    """
    small = min(forward_s)
    least_s = forward_s[small] / small / EXPECTATION_MARGIN  # the least one query can take here
    last = forward_s[max(forward_s)]
    if plan.scenario == "Server":
        if not plan.mlperf_rules and plan.server_latency_ms / 1e3 < least_s:
            return (
                f"Server latency bound {plan.server_latency_ms:g} ms is below the least a query takes here "
                f"({1e3 * least_s:.3g} ms: half the forward time per sample at batch {small}): no arrival rate "
                "meets it; not run"
            )
        capacity = max_batch / last
        if plan.server_qps and plan.server_qps > MAX_OVER_CAPACITY * capacity:
            return (
                f"Server target {plan.server_qps:,.0f} queries/s is over {MAX_OVER_CAPACITY:g}x the capacity "
                f"measured here ({capacity:,.0f} queries/s at batch {max_batch}): it cannot be VALID, and LoadGen "
                f"would pre-generate {plan.server_qps * plan.min_duration_s:,.0f} queries; not run"
            )
    if plan.mlperf_rules or plan.scenario not in ("SingleStream", "MultiStream"):
        return None
    n = plan.min_query_count or MIN_QUERIES[plan.scenario]
    took = n * forward_s.get(MULTISTREAM_SAMPLES if plan.scenario == "MultiStream" else 1, last)
    if took > duration_limit_s(plan.min_duration_s):
        return (
            f"{plan.scenario}'s {n} queries take about {took:.0f} s here, over {MAX_DURATION_FACTOR:g}x the "
            f"{plan.min_duration_s:g} s minimum duration: raise --min-duration-s or lower --min-query-count; "
            "not run"
        )
    return None


def check_server(
    qps: float | None, latency_ms: float, min_duration_s: float, min_query_count: int | None, mlperf_rules: bool
) -> None:
    """The Server settings a sweep can run, before anything runs: a target rate > 0 and finite whose minimum query
    count fits :func:`duration_limit_s`, and a latency bound > 0 and finite.

    Raises:
        ConfigError: one line naming the field and what it allows.
    """
    from accelbench.core.config import is_number
    from accelbench.core.errors import ConfigError

    if qps is not None and (not is_number(qps) or qps <= 0):
        raise ConfigError("server_target_qps", qps, "a finite number of queries/s > 0")
    if not is_number(latency_ms) or latency_ms <= 0:
        raise ConfigError("server_latency_ms", latency_ms, "a finite number of milliseconds > 0")
    least = slowest_server_qps(min_duration_s, min_query_count)
    if qps is not None and not mlperf_rules and qps < least:
        n = min_query_count or MIN_QUERIES["Server"]
        raise ConfigError(
            "server_target_qps",
            qps,
            f"at least {least:.3g} queries/s: the Server test's {n} queries "
            f"would take {n / qps:.0f} s, over {MAX_DURATION_FACTOR:g}x the {min_duration_s:g} s minimum "
            "duration (or lower --min-query-count)",
        )

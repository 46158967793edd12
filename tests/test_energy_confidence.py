"""Energy from the steps of NVML's energy counter (``counter-steps``): ok-confidence for the default sweep's ~0.5 s
windows where the plain counter difference is "low" (~20 %), with an uncertainty that holds.

Replayed: the H200 capture in tests/data (a 10 ms sampler sees every step of the 100 ms counter), cut into 0.5 s
windows; simulated counters with known power, steps, publication lag and read brackets; the watch thread on a
counter that is a known function of the clock. Expected values are computed from the inputs, never copied from
a run.
"""

import gzip
import json
import random
import statistics
import time
from pathlib import Path

import pytest

from accelbench.telemetry import energy as en
from accelbench.telemetry.aggregate import gpu_record
from accelbench.telemetry.ticks import CounterWatch, step_counters

DATA = json.loads(gzip.decompress((Path(__file__).parent / "data" / "nvml_samples_h200.json.gz").read_bytes()))


def _capture_steps(name: str) -> tuple[list[dict], list[tuple[float, float, float]]]:
    """The samples of a captured window and the counter steps they bracket: ``(lo, hi, value_mj)``."""
    s = DATA["windows"][name]["samples"]["gpu0"]
    return s, [(a["t_s"], b["t_s"], b["energy_mj"]) for a, b in zip(s, s[1:]) if b["energy_mj"] != a["energy_mj"]]


@pytest.mark.parametrize("start", [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5])
def test_a_half_second_window_of_the_h200_capture_is_ok_and_within_exact_bounds(start):
    samples, steps = _capture_steps("load_10ms")
    window = 0.5
    ticks = [(lo - start, hi - start, v) for lo, hi, v in steps]
    got = en.tick_energy([t for t in ticks if 0 <= t[0] and t[1] <= window], window)
    assert got is not None and got["periods"] >= 3
    assert got["uncertainty"] <= en.UNCERTAINTY_MAX
    # the exact energy of the whole periods inside the window, and of the periods that overlap it, per second:
    # the window's mean power lies between the smallest and largest per-period power of the overlapping periods
    overlap = [t for t in ticks if t[1] > 0 and t[0] < window + 0.1]
    powers = [(b[2] - a[2]) / 1000 / ((b[0] + b[1] - a[0] - a[1]) / 2) for a, b in zip(overlap, overlap[1:])]
    assert min(powers) <= got["power_w"] <= max(powers)
    assert got["energy_j"] == pytest.approx(got["power_w"] * window)
    # the plain difference of the same window is "low": one 100 ms update in 0.5 s
    frac, conf = en.confidence(window, got["update_s"])
    assert conf == "low" and frac == pytest.approx(0.2, rel=0.01)


def test_the_whole_capture_agrees_with_the_plain_counter_difference():
    samples, steps = _capture_steps("load_10ms")
    c = DATA["windows"]["load_10ms"]["counters"]["gpu0"]
    window = samples[-1]["t_s"]
    got = en.tick_energy(steps, window)
    plain_w = (c["end"]["energy_mj"] - c["begin"]["energy_mj"]) / 1000 / (c["end"]["t"] - c["begin"]["t"])
    plain_u, _ = en.confidence(c["end"]["t"] - c["begin"]["t"], got["update_s"])
    assert got["update_s"] == pytest.approx(0.1, abs=0.001)  # the H200's 100 ms updates
    assert abs(got["power_w"] - plain_w) / plain_w <= got["uncertainty"] + plain_u


def test_steps_seen_only_by_a_100ms_sampler_are_not_used():
    _, steps = _capture_steps("load_100ms")  # brackets as wide as the period: the steps cannot be placed
    assert en.tick_energy(steps, 2.0) is None


def _simulated(
    rng: random.Random,
    window: float,
    spread: float = 0.03,
    period: float = 0.0999,
    max_bracket: float = 0.009,
    max_lag: float = 0.015,
    power: float = 400.0,
):
    """A counter stepping every ``period`` s with per-period powers ``power * (1 + N(0, spread))``, each step published
    ``lag`` (0..max_lag) after its period ends and seen in a bracket up to ``max_bracket`` wide. Returns the steps seen
    during ``[0, window]`` and the true energy of the window (J)."""
    phase = rng.uniform(0, period)
    edges = [-0.5 + phase + k * period for k in range(int((window + 1) / period) + 2)]
    watts = [power * (1 + rng.gauss(0, spread)) for _ in edges]

    def joules(a: float, b: float) -> float:
        return sum(max(0.0, min(b, e1) - max(a, e0)) * w for e0, e1, w in zip(edges, edges[1:], watts))

    lag, ticks = rng.uniform(0, max_lag), []
    for edge in edges[1:]:
        seen = edge + lag
        if 0 <= seen <= window:
            width = rng.uniform(0.002, max_bracket)
            lo = seen - rng.uniform(0, width)
            ticks.append((lo, lo + width, 1000 * joules(edges[0], edge)))
    return ticks, joules(0, window)


@pytest.mark.parametrize("window", [0.5, 1.0, 2.0])
def test_simulated_windows_are_ok_and_the_uncertainty_covers_the_error(window):
    rng = random.Random(21)
    results = [(en.tick_energy(ticks, window), true) for ticks, true in (_simulated(rng, window) for _ in range(400))]
    results = [(r, true) for r, true in results if r is not None]
    assert len(results) >= 390  # a 0.5 s window holds >= 3 usable steps of a 100 ms counter
    errors = [abs(r["energy_j"] - true) / true for r, true in results]
    assert sum(r["uncertainty"] <= en.UNCERTAINTY_MAX for r, _ in results) / len(results) >= 0.95
    covered = sum(e <= r["uncertainty"] for e, (r, _) in zip(errors, results)) / len(results)
    assert covered >= 0.9 and statistics.median(errors) < 0.01
    # the plain difference of the same windows would claim period / window: 20 % at 0.5 s
    assert max(r["uncertainty"] for r, _ in results) < en.confidence(window, 0.1)[0]


def test_a_known_update_interval_is_used_when_it_is_better():
    rng = random.Random(3)
    ticks, _ = _simulated(rng, 0.5, max_bracket=0.02)
    own = en.tick_energy(ticks, 0.5)
    better = en.tick_energy(ticks, 0.5, known=(0.0999, 0.0001))
    assert better["update_s"] == 0.0999 and better["uncertainty"] < own["uncertainty"]
    assert en.tick_energy(ticks, 0.5, known=(0.1, 0.05))["update_s"] == own["update_s"]  # a worse one is ignored


def _record(steps: list, window: float, body=(0.0, None)) -> dict:
    samples = [{"t_s": 0.0, "power_w": 300.0, "energy_mj": 0.0}, {"t_s": window, "power_w": 300.0, "energy_mj": 0.0}]
    begin = {"t": 0.0, "energy_mj": steps[0][2] - 30_000}
    end = {"t": window + 0.08, "energy_mj": steps[-1][2], "body_t": (body[0], body[1] or window)}
    if steps:
        end.update(step_counters(steps, key=("test", window)))
    return gpu_record(samples, begin, end, {"power_source": "instant"}, window)


def test_a_gpu_record_reports_the_method_its_uncertainty_and_the_measured_block():
    _, steps = _capture_steps("load_10ms")
    window = 0.5
    inside = [t for t in steps if 0.3 <= t[0] and t[1] <= 0.3 + window]
    r = _record([(lo - 0.3, hi - 0.3, v) for lo, hi, v in inside], window)
    assert r["energy_source"] == "nvml-counter" and r["energy_method"] == "counter-steps"
    assert r["energy_confidence"] == "ok" and 0 < r["energy_uncertainty_pct"] <= 100 * en.UNCERTAINTY_MAX
    assert r["energy_window_s"] == window  # the measured block, not the sampler's start and stop around it
    got = en.tick_energy([(lo - 0.3, hi - 0.3, v) for lo, hi, v in inside], window)
    assert r["energy_j"] == pytest.approx(got["energy_j"])
    # without steps: the plain difference, "low" over 0.5 s, as before
    plain = gpu_record(
        [{"t_s": 0.0, "energy_mj": 0.0}, {"t_s": 0.1, "energy_mj": 40_000.0}],
        {"t": 0.0, "energy_mj": 0.0},
        {"t": window, "energy_mj": 200_000.0},
        {},
        window,
    )
    assert plain["energy_method"] == "counter-difference" and plain["energy_confidence"] == "low"


def test_the_watch_brackets_every_step_of_a_clocked_counter():
    period, t0 = 0.02, time.perf_counter()

    def counter() -> float:  # steps of 5 J every 20 ms, a known function of the clock
        return 5000.0 * int((time.perf_counter() - t0) / period)

    watch = CounterWatch(counter).start()
    deadline = time.perf_counter() + 30
    while len(watch.ticks) < 12 and time.perf_counter() < deadline:  # a state: 12 steps seen
        time.sleep(0.01)
    ticks = watch.stop()
    assert len(ticks) >= 12
    for lo, hi, value in ticks:  # the true moment of each step lies in its bracket
        step_at = t0 + period * value / 5000.0
        assert lo <= step_at <= hi
    counters = step_counters(ticks, key="clocked")
    u, du = counters["energy_update"]
    assert abs(u - period) <= du and counters["energy_ticks"] == ticks


def test_a_counter_that_cannot_be_read_stops_the_watch():
    watch = CounterWatch(lambda: None).start()
    assert watch.stop() == [] and step_counters([], key="none") == {}


def test_the_sampler_gives_each_source_the_measured_block():
    from accelbench.telemetry.sampler import Sampler
    from accelbench.telemetry.sources import Source

    class Edges(Source):
        name, sampled = "edges", False

        def begin(self):
            return {"t": time.perf_counter()}

        def end(self):
            return {"t": time.perf_counter()}

    with Sampler([Edges()], 0.02) as s:
        inside = time.perf_counter()
    c = s.counters["edges"]
    start, stop = c["end"]["body_t"]
    assert c["begin"]["t"] <= start <= inside <= stop <= c["end"]["t"]  # the with-body, within the sampler's edges

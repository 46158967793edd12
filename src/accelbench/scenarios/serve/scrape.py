"""The server's own Prometheus metrics over a level: ``GET /metrics`` scraped on the level's timeline by a thread,
parsed by ``prometheus_client`` (:func:`prometheus_client.parser.text_string_to_metric_families`; the ``serve``
extra), reduced to the level's measured window.

vLLM, SGLang, TGI and llama.cpp (``--metrics``) answer ``/metrics``; ``transformers serve`` does not (no scrape). Which
series mean what is each server kind's entry (:data:`accelbench.backends.servers.KINDS`).

Timeline: a scrape right before the level's first send, one every :func:`period_s` while it runs, one right after
its last request ends; each stamped with ``time.time()``, turned into seconds since the level's start
(``LevelResult.started_at``), the clock of the requests' stamps.

Reduction (``server_metrics_json``, one key a sample name with its labels, ``name{label="value",...}``):

- a **gauge** (and an untyped sample): the mean of its scrapes inside the measured window (first scheduled send to
  last completion); all scrapes when none falls inside (a level shorter than a period);
- a **counter** (``*_total``), and a histogram's or summary's ``*_count`` and ``*_sum``: its increase from the first
  scrape to the last (the scrapes around the level: every request of the window is counted); buckets, quantiles
  and ``*_created`` stamps are left out.

Series (the report's timeline): ``server_t_s`` (the scrapes' times, s since the level's start) and, for the
queue and cache gauges :data:`TIMELINE` names that the server has, ``server_<metric>`` (``:`` as ``_``; summed over
label sets).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from accelbench.backends import servers

# the gauges drawn on the timeline: each server kind's requests running and waiting and KV-cache use
# (:class:`accelbench.backends.servers.Metrics`), and vLLM's KV-cache name before 0.10
TIMELINE = (*dict.fromkeys(n for k in servers.KINDS.values() for n in k.metrics.timeline), "vllm:gpu_cache_usage_perc")
MIN_PERIOD_S = 0.25  # a scrape makes the server render every metric: not more often than this
COUNTED = ("counter", "histogram", "summary", "gaugehistogram")


def available() -> bool:
    """Whether ``prometheus_client`` is installed (the ``serve`` extra)."""
    import importlib.util

    return importlib.util.find_spec("prometheus_client") is not None


def period_s(telemetry_period_ms: float | None) -> float:
    """The scrape period: the telemetry's, at least :data:`MIN_PERIOD_S`; 1 s without telemetry."""
    return max(MIN_PERIOD_S, telemetry_period_ms / 1e3) if telemetry_period_ms else 1.0


def _key(name: str, labels: dict[str, str]) -> str:
    return name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}" if labels else "")


def parse(text: str) -> dict[str, tuple[str, float]]:
    """``{sample key: (kind, value)}`` of a Prometheus text exposition; kind ``counter`` (reduced as an increase) or
    ``gauge`` (as a mean); the samples the module docstring leaves out are left out."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, tuple[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        counted = fam.type in COUNTED
        for s in fam.samples:
            if s.name.endswith("_created") or s.name.endswith("_bucket") or "quantile" in s.labels:
                continue
            if counted and not s.name.endswith(("_total", "_count", "_sum")) and fam.type != "counter":
                continue
            out[_key(s.name, s.labels)] = ("counter" if counted else "gauge", float(s.value))
    return out


class Scraper:
    """Scrapes ``base_url``/metrics every ``period`` seconds in a thread while the ``with`` block runs, once before
    and once after (module docstring). A failed scrape is skipped; ``errors`` counts them."""

    def __init__(self, base_url: str, period: float, timeout_s: float = 5.0):
        self.url, self.period, self.timeout_s = base_url.rstrip("/") + "/metrics", period, timeout_s
        self.scrapes: list[tuple[float, dict[str, tuple[str, float]]]] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._client: Any = None

    def scrape(self) -> None:
        """One scrape, stamped with ``time.time()`` before the request."""
        t = time.time()
        try:
            r = self._client.get(self.url)
            r.raise_for_status()
            self.scrapes.append((t, parse(r.text)))
        except Exception:  # a scrape the server did not answer: a gap in the timeline, never a failed level
            self.errors += 1

    def _run(self) -> None:
        k = 1
        start = time.monotonic()
        while not self._stop.wait(max(0.0, start + k * self.period - time.monotonic())):  # absolute ticks
            self.scrape()
            k += 1

    def __enter__(self) -> Scraper:
        import httpx

        self._client = httpx.Client(timeout=self.timeout_s)
        self.scrape()
        self._thread = threading.Thread(target=self._run, name="accelbench-metrics", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.scrape()
        self._client.close()


def reduce(
    scrapes: list[tuple[float, dict[str, tuple[str, float]]]], started_at: float, window: tuple[float, float]
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """``(metrics, series)`` of ``scrapes`` (``(time.time(), parse(...))`` pairs) for a level started at
    ``started_at`` (``time.time()``) whose measured window is ``window`` (s since its start): module docstring."""
    if not scrapes:
        return {}, {}
    times = [t - started_at for t, _ in scrapes]
    inside = [i for i, t in enumerate(times) if window[0] <= t <= window[1]] or list(range(len(scrapes)))
    metrics: dict[str, float] = {}
    keys = dict.fromkeys(k for _, s in scrapes for k in s)
    for key in keys:
        kind = next(s[key][0] for _, s in scrapes if key in s)
        if kind == "counter":
            seen = [s[key][1] for _, s in scrapes if key in s]
            metrics[key] = seen[-1] - seen[0]
        else:
            vals = [scrapes[i][1][key][1] for i in inside if key in scrapes[i][1]]
            if vals:
                metrics[key] = sum(vals) / len(vals)
    series: dict[str, list[float]] = {}
    for name in TIMELINE:  # a gauge every scrape has (summed over its label sets)
        vals = [[v for k, (_, v) in s.items() if k == name or k.startswith(name + "{")] for _, s in scrapes]
        if all(vals):
            series["server_" + name.replace(":", "_")] = [sum(v) for v in vals]
    if series:
        series["server_t_s"] = times
    return metrics, series

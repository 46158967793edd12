"""Columns of a serve level (``accelbench serve``): the load, the server, the requests' outcome, the inter-token
latencies, throughput and goodput against the SLO, and how the client itself did.

Definitions (:mod:`accelbench.scenarios.serve.metrics` holds the formulas and their sources): TTFT runs from the
request's scheduled send to its first token, TPOT is ``(E2E - TTFT) / (output tokens - 1)`` per request, ITL each gap
between token arrivals (a chunk of k tokens spread over k gaps); these share the ``ttft_*``, ``tpot_*`` and
``e2e_latency_*`` columns of ``accelbench generate`` (:mod:`accelbench.core.columns.generate`). A sample of a serve
row is an output token: ``energy_per_sample_j`` is the energy per output token and ``cost_per_1000_samples_usd`` the
cost per 1,000 output tokens over the level's measured window (``measured_wall_s``).
"""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.columns.column import BOOL, FLOAT, INT, JSON, MAX, RANK, STR, SUM, col
from accelbench.core.columns.metric_map import MetricMap

S = "serve"


def _itl() -> tuple:
    return tuple(
        col(
            f"itl_{k}_ms",
            FLOAT,
            f"ITL {k} (ms)",
            "number",
            short=f"ITL {k} ms",
            combine=RANK,
            scenarios=S,
            doc="Inter-token latency: a gap between token arrivals (a chunk of k tokens counts as k gaps).",
        )
        for k in ("mean", "p50", "p90", "p99")
    )


DECLARED = (
    # the load
    col("concurrency", INT, "Concurrency", "int", short="Conc", scenarios=S, doc="Closed loop: requests in flight."),
    col(
        "request_rate_per_s",
        FLOAT,
        "Request rate (/s)",
        "rate",
        short="Rate/s",
        scenarios=S,
        doc="Open loop: the arrival rate asked (requests per second).",
    ),
    col("arrival", STR, "Arrival", scenarios=S, levels="poisson gamma", doc="Open-loop arrivals: poisson or gamma."),
    col("burstiness", FLOAT, "Burstiness", "number", scenarios=S, doc="The gamma arrivals' shape k."),
    col("max_concurrency", INT, "Max concurrency", "int", scenarios=S),
    col("api", STR, "API", scenarios=S, levels="completions chat"),
    # the server
    col("server_engine", STR, "Server engine", short="Engine", scenarios=S, doc="transformers, vllm or openai."),
    col("server_version", STR, "Server version", scenarios=S),
    col("served_model", STR, "Served model", scenarios=S, doc="The model id the server answered with."),
    col("server_url", STR, "Server URL", scenarios=S),
    # the requests
    col("requests", INT, "Requests", "int", combine=SUM, scenarios=S, doc="Measured requests of the level."),
    col("requests_ok", INT, "Requests ok", "int", short="OK", combine=SUM, scenarios=S),
    col("requests_failed", INT, "Requests failed", "int", short="Failed", combine=SUM, scenarios=S),
    col("errors_json", JSON, "Errors", scenarios=S, doc="Failed requests by reason (http 422, timeout, ...)."),
    col(
        "output_tokens_mismatch",
        INT,
        "Output token mismatches",
        "int",
        scenarios=S,
        doc="Requests whose server-reported, tokenizer-counted and requested output lengths disagree.",
    ),
    *_itl(),
    col(
        "request_throughput_per_s",
        FLOAT,
        "Requests/s",
        "rate",
        short="Req/s",
        combine=RANK,
        scenarios=S,
        doc="Completed requests over the measured window (first scheduled send to last completion).",
    ),
    col("input_tokens_per_s", FLOAT, "Input tok/s", "rate", combine=RANK, scenarios=S),
    col(
        "goodput_requests_per_s",
        FLOAT,
        "Goodput (req/s)",
        "rate",
        short="Goodput/s",
        combine=RANK,
        scenarios=S,
        doc="Requests meeting every SLO per second of the measured window (DistServe, Zhong et al. 2024).",
    ),
    col("slo_met_fraction", FLOAT, "SLO met", "pct:1", combine=RANK, scenarios=S, doc="Share of requests meeting it."),
    col("measured_wall_s", FLOAT, "Measured window (s)", "number", combine=RANK, scenarios=S),
    # the client's own health
    col("loop_lag_p99_ms", FLOAT, "Client loop lag p99 (ms)", "number", combine=MAX, scenarios=S),
    col("send_slip_p50_ms", FLOAT, "Send slip p50 (ms)", "number", combine=MAX, scenarios=S),
    col(
        "send_slip_p99_ms",
        FLOAT,
        "Send slip p99 (ms)",
        "number",
        combine=MAX,
        scenarios=S,
        doc="Actual minus scheduled send time of the open loop's requests.",
    ),
    col("client_cpu_percent", FLOAT, "Client CPU (%)", "fixed:.0f", combine=MAX, scenarios=S),
    col(
        "client_limited",
        BOOL,
        "Client limited",
        "yesno",
        scenarios=S,
        doc="The client's send slip or event-loop lag passed its threshold: the client, not the server, limited "
        "the level.",
    ),
    # what the device could do (accelbench.scenarios.serve.roof, accelbench.scenarios.serve.ceiling)
    col(
        "mean_decode_batch",
        FLOAT,
        "Mean decode batch",
        "number",
        short="Decode batch",
        combine=RANK,
        scenarios=S,
        doc="Requests between their first and last token, averaged over the measured window: sum(end - first "
        "token) / window (Little's law).",
    ),
    col(
        "mean_in_flight_requests",
        FLOAT,
        "Mean requests in flight",
        "number",
        combine=RANK,
        scenarios=S,
        doc="Requests between their send and their end, averaged over the measured window: sum(end - sent) / window.",
    ),
    col(
        "memory_bandwidth_bytes_per_s",
        FLOAT,
        "Memory bandwidth",
        "si:B/s",
        scenarios=S,
        doc="The device's measured copy bandwidth the served decode's MBU is taken against (the store's cached "
        "ceilings, else one copy measured a run).",
    ),
    col(
        "ceiling_mode",
        STR,
        "Ceiling engine",
        scenarios=S,
        doc="The in-process engine the ceiling beside the level was decoded with (static-compile, static-cache, ...).",
    ),
    col("ceiling_batch", INT, "Ceiling batch", "int", scenarios=S, doc="The batch the in-process ceiling ran at."),
    col(
        "ceiling_tp_degree",
        INT,
        "Ceiling TP degree",
        "int",
        short="Ceil TP",
        scenarios=S,
        doc="The GPUs the ceiling split the model over (--ceiling-gpus N: accelbench generate --gpus N --parallel "
        "tp); None for a ceiling on one device.",
    ),
    col(
        "ceiling_tpot_p50_ms",
        FLOAT,
        "Ceiling TPOT p50 (ms)",
        "number",
        short="Ceil TPOT ms",
        scenarios=S,
        doc="Median decode step of the same checkpoint decoded in process at the ceiling batch (CUDA events).",
    ),
    col(
        "ceiling_output_tokens_per_s",
        FLOAT,
        "Ceiling output tok/s",
        "rate",
        short="Ceil tok/s",
        scenarios=S,
        doc="In-process output tokens/s at the ceiling batch: batch x new tokens / mean end-to-end, prefill "
        "included (accelbench generate's output_tokens_per_s).",
    ),
    col(
        "engine_share_of_ceiling",
        FLOAT,
        "Engine share of ceiling",
        "pct:1",
        short="Of ceiling",
        scenarios=S,
        doc="Served output tokens/s / ceiling output tokens/s at the same batch: the share of what this device "
        "does in process that the served engine delivers.",
    ),
    col("ceiling_note", STR, "Ceiling note", scenarios=S, doc="Why a level has no ceiling figures."),
    # the server's own metrics (accelbench.scenarios.serve.scrape)
    col(
        "server_metrics_json",
        JSON,
        "Server metrics",
        scenarios=S,
        doc="The server's Prometheus /metrics over the measured window: gauges' means and counters' increases, "
        "by metric name (labels joined into the name).",
    ),
    # the SLO and its search
    col("slo_search", BOOL, "SLO search", "yesno", scenarios=S, doc="The row is an SLO search's answer."),
    col("slo", STR, "SLO", scenarios=S, doc="The objective: a preset name or ttft_ms=...,tpot_ms=..."),
    col("slo_met", BOOL, "SLO met", "yesno", scenarios=S, doc="The level (or a search's answer) meets the SLO."),
    col("slo_search_probes", INT, "Search probes", "int", scenarios=S),
    col("slo_max_request_rate_per_s", FLOAT, "Max rate meeting the SLO (/s)", "rate", scenarios=S),
    col("slo_max_concurrency", INT, "Max concurrency meeting the SLO", "int", scenarios=S),
    col("slo_lowest_missed_request_rate_per_s", FLOAT, "Lowest rate missing the SLO (/s)", "rate", scenarios=S),
    col("slo_lowest_missed_concurrency", INT, "Lowest concurrency missing the SLO", "int", scenarios=S),
)

# What a serve row means: a sample is an output token, the throughput output tokens/s over the level's window, the
# latency TPOT (TTFT compared beside it). compare reads a level's batch-means windows (consecutive groups of its
# requests: accelbench.scenarios.serve.metrics.request_windows) and their requests' TPOTs.
METRIC_MAPS = (
    MetricMap(
        name="serve",
        workloads=(kinds.SERVE,),
        kinds=(kinds.SERVE,),
        throughput="output_tokens_per_s",
        throughput_unit="output tokens/s",
        throughput_label="Output tok/s",
        sample="output token",
        per="token",
        latency="tpot",
        latency_series="window_tpot_ms",
        latency_label="TPOT",
        extra=("ttft_p50",),
        tracked=("throughput", "latency_p50"),
        compared=("throughput", "latency_p50", "ttft_p50"),  # output tokens/s, TPOT, TTFT
        table=tuple(
            "model concurrency request_rate_per_s arrival requests_ok requests_failed ttft_p50_ms ttft_p99_ms "
            "tpot_p50_ms tpot_p99_ms itl_p99_ms e2e_latency_p99_ms request_throughput_per_s output_tokens_per_s "
            "goodput_requests_per_s slo_met_fraction slo_max_request_rate_per_s slo_max_concurrency mean_decode_batch mbu "
            "ceiling_output_tokens_per_s engine_share_of_ceiling power_mean_w "
            "energy_per_sample_j cost_per_million_tokens client_limited validity status".split()
        ),
        compact=tuple(
            "concurrency request_rate_per_s requests_failed ttft_p50_ms tpot_p50_ms output_tokens_per_s "
            "request_throughput_per_s engine_share_of_ceiling energy_per_sample_j status".split()
        ),
        statistic="TTFT, TPOT: medians of the level's requests; rates over its measured window",
        section="serve",
        group=("model",),
    ),
)

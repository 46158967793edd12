"""The options of ``accelbench loadgen`` (the ``loadgen`` scenario's own settings), declared once
(:mod:`accelbench.core.options`); the evaluation settings are :mod:`accelbench.core.options.evaluation`'s."""

from __future__ import annotations

from accelbench.core.options import Option, declare

# MLPerf Inference's scenarios, in LoadGen's spelling (flags and TOML take any case)
SCENARIOS = ("SingleStream", "MultiStream", "Server", "Offline")

LOADGEN = declare(
    Option(
        name="scenarios",
        type=str,
        many=True,
        default=SCENARIOS,
        choices=SCENARIOS,
        item="scenario",
        short="-s",
        help="LoadGen scenarios, comma-separated",
        aliases=("loadgen_scenarios",),
    ),
    Option(
        name="batch_timeout_us",
        type=int,
        low=0,
        default=2000,
        unit="us",
        help="Server: the longest a batch waits for more queries after its first",
    ),
    Option(
        name="server_target_qps",
        type=float,
        default=None,
        unit="queries/s",
        allowed="a finite number of queries/s > 0",
        default_text="search for the highest VALID one",
        help="Server: arrival rate",
    ),
    Option(
        name="server_latency_ms",
        type=float,
        default=15.0,
        unit="ms",
        allowed="a finite number of milliseconds > 0",
        help="Server: p99 latency bound (MLPerf's ResNet-50 bound: 15 ms)",
    ),
    Option(
        name="server_search_steps",
        type=int,
        low=1,
        default=6,
        panel="how",
        help="Server search: probes (6 come within 0.8 % of the capacity bound)",
    ),
    Option(
        name="min_duration_s",
        type=float,
        low=0,
        default=10.0,
        gpu=10.0,
        cpu=2.0,
        unit="s",
        panel="how",
        help="Each test's minimum duration",
    ),
    Option(
        name="min_query_count",
        type=int,
        low=1,
        default=None,
        panel="how",
        default_text="SingleStream 100, MultiStream and Server 662, Offline 1 query",
        help="Each test's minimum query count",
    ),
    Option(
        name="mlperf_rules",
        type=bool,
        default=False,
        panel="how",
        help="MLPerf's own settings from LoadGen's mlperf.conf: 600 s, official query counts",
    ),
    Option(
        name="accuracy",
        type=bool,
        default=False,
        panel="accuracy",
        help="Also run LoadGen's AccuracyOnly mode: top-1/top-5",
    ),
    Option(
        name="log_dir",
        type=str,
        default=None,
        panel="store",
        allowed="a folder path",
        default_text="<db>-loadgen/ beside the store",
        help="LoadGen's logs go here",
    ),
)

"""The options of ``accelbench serve`` (the ``serve`` scenario's settings), declared once
(:mod:`accelbench.core.options`)."""

from __future__ import annotations

from accelbench.core.options import Option, declare

LENGTHS = "tokens: N, or a uniform range LOW:HIGH"
OUTPUT_LENGTHS = "tokens: N, a uniform range LOW:HIGH, or dataset (each request's own)"
POSITIVE = "a number > 0"

OPTIONS = declare(
    Option(
        name="url",
        type=str,
        default=None,
        allowed="a URL, http://host:port",
        help="Base URL of a running OpenAI-compatible server",
    ),
    Option(
        name="launch",
        type=str,
        default=None,
        allowed="a shell command",
        help="Shell command that starts the server (stopped at the end; {port} is replaced by a free port)",
    ),
    Option(
        name="engine",
        type=str,
        default=None,
        allowed="a server kind accelbench starts: transformers, llama.cpp",
        help="Built-in launch of -m hf:<name> (or X.gguf) by a server kind: transformers (transformers serve), "
        "llama.cpp (llama-server)",
    ),
    Option(
        name="server_bin",
        type=str,
        default=None,
        default_text="$ACCELBENCH_LLAMA_SERVER, else llama-server on PATH",
        allowed="an executable file",
        help="The server binary of --engine llama.cpp (benchmarks/build_llama_server.sh builds one)",
    ),
    Option(
        name="served_precision",
        type=str,
        default=None,
        default_text="bf16 (fp32 on a CPU for transformers)",
        allowed="bf16, fp32 (transformers), q8_0 (llama.cpp)",
        help="Precision the server holds the weights in: what --engine writes, and what MBU counts for any server",
    ),
    Option(
        name="served_model_name",
        type=str,
        default=None,
        default_text="the -m checkpoint folder's path, else the server's only model",
        allowed="a model id",
        help="Model id requests name (what the server calls it), apart from -m (accelbench's own model: tokenizer, "
        "ceiling, shape)",
    ),
    Option(
        name="api", type=str, default="completions", choices=("completions", "chat"), help="Endpoint requests go to"
    ),
    Option(
        name="concurrency",
        type=int,
        many=True,
        low=1,
        default=None,
        default_text="GPU 1,8,32; CPU 1,4",
        help="Closed-loop levels: requests kept in flight, each a case",
        aliases=("concurrencies",),
    ),
    Option(
        name="request_rates",
        type=float,
        many=True,
        low=0,
        default=None,
        flag="--request-rate",
        unit="requests/s",
        allowed="request rates > 0, e.g. 2,4,8",
        raw=True,  # numbers as typed: the scenario's normalize reads them (a list option parses integers only)
        item="request_rate",
        help="Open-loop levels: requests per second, each a case",
        aliases=("request_rate", "rate"),
    ),
    Option(
        name="arrival",
        type=str,
        default="poisson",
        choices=("poisson", "gamma"),
        help="Open-loop arrivals on absolute send times: exponential gaps, or gamma of shape --burstiness",
    ),
    Option(
        name="burstiness",
        type=float,
        low=0,
        default=1.0,
        allowed=POSITIVE,
        help="Gamma shape k of --arrival gamma (1: Poisson; below 1 burstier)",
    ),
    Option(
        name="max_concurrency",
        type=int,
        low=1,
        default=None,
        help="Open loop: at most this many requests in flight (the wait counts in TTFT)",
    ),
    Option(name="requests", type=int, low=1, default=200, cpu=16, panel="how", help="Measured requests a level"),
    Option(
        name="duration_s",
        type=float,
        low=0,
        default=None,
        unit="s",
        panel="how",
        allowed=POSITIVE,
        help="A level lasts this long instead (its requests still capped by --requests)",
    ),
    Option(
        name="warmup_requests",
        type=int,
        low=0,
        default=8,
        cpu=2,
        panel="how",
        help="Untimed requests before each level, at its load",
    ),
    Option(
        name="workload",
        type=str,
        default="random",
        choices=("random", "text", "sharegpt", "jsonl"),
        help="Prompts: random token ids, the shipped text, or a local ShareGPT JSON / JSONL file (--dataset)",
    ),
    Option(
        name="dataset",
        type=str,
        default=None,
        allowed="a local file path",
        help="The local file of --workload sharegpt or jsonl",
    ),
    Option(
        name="input_len",
        type=str,
        default="128",
        cpu="64",
        allowed=LENGTHS,
        help="Prompt length: N tokens, or a uniform range LOW:HIGH",
    ),
    Option(
        name="output_len",
        type=str,
        default="128",
        cpu="32",
        allowed=OUTPUT_LENGTHS,
        help="Output length asked of the server: N tokens, a range LOW:HIGH, or dataset",
    ),
    Option(
        name="tokenizer",
        type=str,
        default=None,
        default_text="the model's folder, or the served model's where it is one",
        allowed="a local folder",
        help="Tokenizer the requests are built and counted with (nothing is downloaded)",
    ),
    Option(
        name="slo",
        type=str,
        default=None,
        panel="how",
        allowed="mlperf-server, mlperf-interactive or ttft_ms=N,tpot_ms=N[,percentile=50|90|99]",
        help="Service-level objective: mlperf-server, mlperf-interactive or ttft_ms=N,tpot_ms=N[,percentile=P]",
    ),
    Option(
        name="slo_search",
        type=bool,
        default=False,
        negatable=False,
        panel="how",
        help="Search the highest load meeting --slo between the lowest and highest level given",
    ),
    Option(name="search_steps", type=int, low=0, default=4, panel="how", help="Midpoints the SLO search probes"),
    Option(
        name="continuous_batching",
        type=bool,
        default=False,
        negatable=False,
        help="The built-in launch serves with continuous batching",
    ),
    Option(
        name="ceiling",
        type=str,
        default="static-compile",
        cpu="none",
        allowed="an in-process engine (static-compile, static-cache, hf-generate, ...) or none",
        help="In-process ceiling beside each level: the same hf: model decoded here at the level's batch by this "
        "engine, after the levels (none: skip)",
    ),
    Option(
        name="ceiling_gpus",
        type=int,
        low=1,
        default=1,
        help="GPUs the in-process ceiling splits the model over: N > 1 takes it with accelbench generate --gpus N "
        "--parallel tp (a model larger than one GPU)",
    ),
    Option(
        name="launch_timeout_s",
        type=float,
        low=0,
        default=300.0,
        unit="s",
        allowed=POSITIVE,
        help="How long a launched server may take to answer",
    ),
    Option(
        name="request_timeout_s",
        type=float,
        low=0,
        default=600.0,
        unit="s",
        allowed=POSITIVE,
        panel="how",
        help="How long one request may take before it counts as failed",
    ),
)

"""The server kinds ``accelbench serve`` drives: one entry each in :data:`KINDS`, as vLLM's benchmark client keeps one
request function a backend (``benchmarks/lib/endpoint_request_func.py``'s ``ASYNC_REQUEST_FUNCS``).

A kind says how a server of it is recognised (:attr:`ServerKind.detect`, asked in :data:`KINDS`' order), how its
version is read, how exactly N output tokens are asked of it, whether it takes ``stream_options.include_usage``,
which of its Prometheus ``/metrics`` series mean requests running and waiting, KV-cache use and tokens, and, for a
kind accelbench can start itself (``accelbench serve --engine KIND``), what checkpoint it reads, in which precisions,
and the command and environment that start it (:attr:`ServerKind.launch`). A new kind is one entry here (and one
module beside this one); the client (:mod:`accelbench.backends.openai_api`), the launcher
(:mod:`accelbench.launchers.server`) and the scrape (:mod:`accelbench.scenarios.serve.scrape`) read the entries, never a
kind's name.

| kind | recognised by | fixed output length | checkpoint of ``--engine`` |
| --- | --- | --- | --- |
| ``transformers`` | ``/openapi.json`` lists ``/load_model`` | ``generation_config`` min/max new tokens, ``max_tokens`` | safetensors folder |
| ``llama.cpp`` | ``/props`` answers ``build_info`` | ``ignore_eos``, ``max_tokens`` (no ``min_tokens``) | GGUF (bf16, Q8_0) |
| ``sglang`` | ``/get_server_info`` answers its ``version`` | ``ignore_eos``, ``min_tokens``, ``max_tokens`` | |
| ``vllm`` | ``/version`` answers ``{"version": ...}`` | ``ignore_eos``, ``min_tokens``, ``max_tokens`` | |
| ``openai`` | any other | ``max_tokens`` only (an early stop is an output-length mismatch) | |
"""

# each module registers its kind (the fallback is asked last; SGLang, which answers /version too, before vLLM)
from accelbench.backends.servers import generic, llamacpp, transformers  # noqa: F401
from accelbench.backends.servers.kind import (  # noqa: F401  (the table's names, re-exported)
    KINDS,
    LaunchPlan,
    LaunchRequest,
    Metrics,
    ServerKind,
    detect,
    get,
    launchable,
    random_weight_bans,
    register,
    served_bytes_per_weight,
)

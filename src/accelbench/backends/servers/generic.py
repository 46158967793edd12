"""The server kinds accelbench measures but does not start itself (``--url``, or ``--launch COMMAND``): SGLang (its
``/get_server_info``) and vLLM (its ``/version``), which take vLLM's sampling extensions (``ignore_eos``,
``min_tokens``), and any other OpenAI-compatible server, asked with the OpenAI API's own fields alone."""

from __future__ import annotations

from accelbench.backends.servers.kind import Metrics, ServerKind, register


def _ignore_eos(n: int) -> dict:
    """vLLM's sampling extensions, which SGLang takes too: generation neither stops at the end-of-sequence token nor
    before ``n`` tokens."""
    return {"max_tokens": n, "ignore_eos": True, "min_tokens": n}


def _sglang(client) -> tuple[bool, str | None]:
    info = client.get("/get_server_info").json()
    return isinstance(info, dict) and "version" in info, info.get("version")


def _version(client) -> tuple[bool, str | None]:
    version = client.get("/version").json().get("version")
    return isinstance(version, str), version if isinstance(version, str) else None


SGLANG = register(
    ServerKind(
        name="sglang",
        about="SGLang (a /get_server_info endpoint; ignore_eos and min_tokens)",
        fixed_length=_ignore_eos,
        detect=_sglang,
        metrics=Metrics(
            running="sglang:num_running_reqs", waiting="sglang:num_queue_reqs", kv_cache="sglang:token_usage"
        ),
    )
)
VLLM = register(
    ServerKind(
        name="vllm",
        about="vLLM (a /version endpoint; ignore_eos and min_tokens)",
        fixed_length=_ignore_eos,
        detect=_version,
        metrics=Metrics(
            running="vllm:num_requests_running",
            waiting="vllm:num_requests_waiting",
            kv_cache="vllm:kv_cache_usage_perc",
            prompt_tokens="vllm:prompt_tokens_total",
            output_tokens="vllm:generation_tokens_total",
        ),
    )
)
OPENAI = register(
    ServerKind(
        name="openai",
        about="any other OpenAI-compatible server (max_tokens only: the model may stop early)",
        fixed_length=lambda n: {"max_tokens": n},
    )
)

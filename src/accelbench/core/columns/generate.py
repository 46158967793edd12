"""Columns of a language-model generation case (``accelbench generate``): the case's shape, the two phases apart
(prefill: time to first token, prefill tokens/s, MFU; decode: time per output token, decode tokens/s, MBU), the
KV cache and weights, and quality (perplexity).

Definitions (:mod:`accelbench.core.lm_analytic` holds the formulas and their sources): TTFT is prefill plus
the first token; TPOT is one decode step (the inter-token latency); a sample of a generate row is an output token,
so ``throughput_samples_per_s``, ``energy_per_sample_j`` and ``cost_per_1000_samples_usd`` are per output token.

Every rate and utilisation is a mean, tokens (or bytes, FLOPs) over the time they took summed over the timed
generations, as vLLM's ``benchmark_serving`` (output throughput = output tokens / duration) and MLPerf's Llama
harness (tokens/s over the run) count them; each is taken at the mean latency of its phase, so a table that shows
them beside the means (``ttft_mean_ms``, ``tpot_mean_ms``: the compact table) agrees on every line:
decode tokens/s = batch / mean TPOT. The percentiles (p50, p99) describe the latencies' distribution.
"""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.columns.column import BOOL, FLOAT, INT, MAX, MEAN, RANK, STR, col
from accelbench.core.columns.metric_map import GENERATIONS, MetricMap

G = "generate"
SERVED = ("ttft", "tpot", "e2e_latency")  # timing columns a serve level fills too (core/columns/serve.py)
GP = "generate profile"  # also a language model's profiled step (accelbench profile --step prefill|decode)


def _stats(prefix: str, what: str, short: str, doc: str) -> tuple:
    """``<prefix>_{mean,min,p50,p90,p99,max}_ms``, ``<prefix>_spread`` and ``<prefix>_noisy``
    (:func:`accelbench.core.stats.stat_columns`)."""
    out = [
        col(
            f"{prefix}_{k}_ms",
            FLOAT,
            f"{what} {k} (ms)",
            "number",
            short=f"{short} ms" if k == "mean" else f"{short} {k} ms",  # the compact table's: its caption says mean
            combine=RANK,
            scenarios=(G, "serve") if prefix in SERVED else G,
            doc={"p50": doc, "mean": f"{doc} The mean: the time the row's rates are taken at."}.get(k, ""),
        )
        for k in ("mean", "min", "p50", "p90", "p99", "max")
    ]
    out += [
        col(
            f"{prefix}_spread",
            FLOAT,
            f"{what} spread",
            "pct:1",
            combine=MAX,
            scenarios=(G, "serve") if prefix in SERVED else G,
            doc="IQR / median of the observations.",
        ),
        col(f"{prefix}_noisy", BOOL, f"{what} noisy", "yesno", scenarios=G),
    ]
    return tuple(out)


DECLARED = (
    # the case
    col("prompt_len", INT, "Prompt (tokens)", "int", short="Prompt", scenarios=GP),
    col("new_tokens", INT, "New tokens", "int", short="New", scenarios=G, doc="Tokens generated a sequence."),
    col(
        "prompt_source",
        STR,
        "Prompt source",
        scenarios=GP,
        levels="random text",
        doc="What the prompts are: random token ids (seeded) or windows of the held-out shipped text.",
    ),
    col("vocab_size", INT, "Vocabulary", "int", scenarios=GP),
    col("context_len", INT, "Context (tokens)", "int", scenarios=GP),
    col(
        "fused_projections",
        BOOL,
        "Fused projections",
        "yesno",
        scenarios=G,
        doc="q/k/v and gate/up projections fused into one matmul each (static-compile-fused).",
    ),
    col("generations_timed", INT, "Generations timed", "int", scenarios=G, doc="Timed generations: the windows."),
    col(
        "oom_retried",
        BOOL,
        "OOM retried",
        "yesno",
        scenarios=G,
        doc="The case ran out of memory on the model built for earlier cases (their CUDA graphs' memory) and ran "
        "on a fresh build.",
    ),
    col("output_tokens_timed", INT, "Output tokens timed", "int", scenarios=G),
    col(
        "compile_prefill_s",
        FLOAT,
        "Prefill compile (s)",
        "fixed:.1f",
        combine=MAX,
        scenarios=G,
        doc="A compiling engine's first prefill: its compile (or a recompile for a new shape) and one run; the "
        "row's compile_s is the whole first generation's, this and compile_decode_s included. None: nothing "
        "compiles.",
    ),
    col(
        "compile_decode_s",
        FLOAT,
        "Decode compile (s)",
        "fixed:.1f",
        combine=MAX,
        scenarios=G,
        doc="A compiling engine's first decode step: its compile (or a recompile for a new shape) and one step.",
    ),
    # prefill and the first token
    *_stats(
        "ttft",
        "TTFT",
        "TTFT",
        "Time to first token: prefill of the prompt plus the first token, one observation a timed generation.",
    ),
    col(
        "prefill_tokens_per_s",
        FLOAT,
        "Prefill (tok/s)",
        "rate",
        combine=RANK,
        scenarios=G,
        doc="Prefill tokens/s: the batch's prompt tokens over the mean TTFT (prompt tokens of every timed generation "
        "over their summed TTFTs).",
    ),
    col(
        "prefill_flops",
        FLOAT,
        "Prefill FLOPs",
        "si:FLOP",
        scenarios=G,
        doc="2 x parameters x prompt tokens plus attention (causal), the batch's.",
    ),
    col(
        "prefill_min_bytes",
        FLOAT,
        "Prefill bytes",
        "si:B",
        scenarios=G,
        doc="The least bytes prefill moves: the weights read once plus the prompt's KV cache written.",
    ),
    col("prefill_flops_per_s", FLOAT, "Prefill FLOP/s", "si:FLOP/s", combine=RANK, scenarios=G),
    col(
        "ttft_floor_ms",
        FLOAT,
        "TTFT floor (ms)",
        "number",
        short="Floor ms",
        combine=RANK,
        scenarios=G,
        doc="The least time the prefill can take here, the roofline in time form: max(prefill FLOPs / the "
        "precision's measured matmul roof, prefill bytes / the measured copy bandwidth) (Williams et al. 2009). "
        "None where a ceiling was not measured.",
    ),
    col(
        "ttft_over_floor",
        FLOAT,
        "TTFT / floor",
        "number",
        short="TTFT/floor",
        combine=RANK,
        scenarios=G,
        doc="TTFT p50 over ttft_floor_ms: 1.0 is a prefill on the roofline (the first token's sampling included).",
    ),
    col(
        "mfu",
        FLOAT,
        "MFU",
        "pct:1",
        combine=MEAN,
        scenarios=(G, "train_lm"),
        doc="Model FLOP utilisation over the precision's measured matmul roof (None where no roof was measured). "
        "generate: of prefill, prefill FLOPs / mean TTFT; train_lm: of the training step, its model FLOPs a token "
        "(torchtitan's 6N + 12 L H Q T) x tokens/s; a multi-GPU case's aggregate: the mean of its GPUs'.",
    ),
    col(
        "mfu_datasheet",
        FLOAT,
        "MFU (datasheet)",
        "pct:1",
        combine=MEAN,
        scenarios=(G, "train_lm"),
        doc="The same FLOP rate over the datasheet's dense peak of the precision.",
    ),
    # decode
    *_stats(
        "tpot",
        "TPOT",
        "TPOT",
        "Time per output token: one decode step (the inter-token latency), over every step of every timed generation.",
    ),
    col(
        "decode_tokens_per_s",
        FLOAT,
        "Decode (tok/s)",
        "rate",
        short="tok/s",
        combine=RANK,
        scenarios=G,
        doc="Decode tokens/s: the decode phase's tokens over the decode phase's time, batch x (new tokens - 1) x "
        "generations over the summed inter-token latencies, = batch / mean TPOT (vLLM's benchmark and MLPerf's "
        "Llama harness: TPOT = (latency - TTFT) / (tokens - 1)). The first token is prefill's.",
    ),
    col(
        "output_tokens_per_s",
        FLOAT,
        "Output (tok/s)",
        "rate",
        short="Out tok/s",
        combine=RANK,
        scenarios=G,
        doc="Output tokens/s: every generated token over the whole generation's time, prefill included: batch x new "
        "tokens / mean end-to-end latency (vLLM's output throughput, output tokens over duration). At most "
        "decode tokens/s whenever a prefill takes at least one decode step (mean TTFT >= mean TPOT).",
    ),
    col(
        "decode_step_bytes",
        FLOAT,
        "Decode step bytes",
        "si:B",
        scenarios=(G, "serve"),
        doc="Bytes a decode step must read: the weights plus the KV cache filled so far (mean over the steps).",
    ),
    col("decode_step_flops", FLOAT, "Decode step FLOPs", "si:FLOP", scenarios=G),
    col("decode_bytes_per_s", FLOAT, "Decode bandwidth", "si:B/s", combine=RANK, scenarios=G),
    col(
        "mbu",
        FLOAT,
        "MBU",
        "pct:1",
        combine=RANK,
        scenarios=(G, "serve"),
        doc="Memory-bandwidth utilisation of decode: decode step bytes / mean TPOT over the measured copy "
        "bandwidth (Databricks' MBU).",
    ),
    col("mbu_datasheet", FLOAT, "MBU (datasheet)", "pct:1", combine=RANK, scenarios=(G, "serve")),
    *_stats("e2e_latency", "End-to-end", "E2E", "One generation, prompt in to last token out."),
    # memory
    col(
        "kv_cache_bytes",
        INT,
        "KV cache",
        "si:B",
        scenarios=GP,
        doc="Keys and values of every layer for batch x (prompt + new tokens), in the cache's dtype.",
    ),
    col("kv_bytes_per_token", INT, "KV bytes/token", "si:B", scenarios=GP + " serve"),
    col(
        "weight_bytes",
        INT,
        "Weights",
        "si:B",
        scenarios=GP + " serve",
        doc="Bytes of the weights as stored for the run.",
    ),
    # a model split over several GPUs (accelbench generate --gpus N --parallel tp)
    col(
        "tp_degree",
        INT,
        "Tensor-parallel GPUs",
        "int",
        short="TP",
        scenarios=G,
        doc="GPUs one copy of the model is split over (tensor parallelism; 1: one GPU). The row's rates, bytes, "
        "energy and cost are the whole job's; MBU and MFU are over every GPU's bandwidth and FLOP/s.",
    ),
    col(
        "weight_bytes_per_gpu",
        INT,
        "Weights per GPU",
        "si:B",
        scenarios=G,
        doc="Bytes of the weights one GPU holds: its shards and the replicated embedding table and norms.",
    ),
    col(
        "kv_cache_bytes_per_gpu",
        INT,
        "KV cache per GPU",
        "si:B",
        scenarios=G,
        doc="The KV cache one GPU holds: its key-value heads (kv_cache_bytes / tp_degree).",
    ),
    col("output_tokens_per_s_per_gpu", FLOAT, "Output tok/s per GPU", "rate", combine=RANK, scenarios=G),
    col(
        "decode_tokens_per_s_per_gpu",
        FLOAT,
        "Decode tok/s per GPU",
        "rate",
        combine=RANK,
        scenarios=G,
        doc="Decode tokens/s over the GPUs the model is split over.",
    ),
    col(
        "allreduce_share",
        FLOAT,
        "All-reduce share",
        "pct:1",
        short="AR share",
        combine=RANK,
        scenarios=G,
        doc="The share (0..1) of a decode step's time spent in the collectives (the row-parallel all-reduces and the "
        "split LM head's all-gather), from 8 more decode steps every rank runs under torch.profiler after the timed "
        "generations (rank 0's figure). On GPUs device time: the NCCL kernels' time over the time of every kernel, "
        "copy and fill (an NCCL kernel's time includes waiting for the slowest rank). On CPUs (gloo) host time: the "
        "time the steps' thread spends in the collective ops (launch and wait) over the steps' wall time. Rows at "
        "tp_degree 1 have none.",
    ),
    col(
        "decode_kernel_ms",
        FLOAT,
        "Decode kernel ms",
        "ms",
        combine=RANK,
        scenarios=G,
        doc="Device time of a decode step: its kernels, copies and fills, from 8 more decode steps run under "
        "torch.profiler after the timed generations (GPUs only; a split model's rank 0). Below "
        "decode_profiled_step_ms by the time the GPU had no work.",
    ),
    col(
        "decode_profiled_step_ms",
        FLOAT,
        "Profiled step ms",
        "ms",
        combine=RANK,
        scenarios=G,
        doc="Wall time of a decode step under torch.profiler, the steps of decode_kernel_ms: the profiler adds its own "
        "overhead, so compare it with decode_kernel_ms, not with TPOT.",
    ),
    col(
        "decode_kernel_families",
        STR,
        "Decode kernel families",
        combine=RANK,
        scenarios=G,
        doc="decode_kernel_ms by kernel family, each 'family ms' a step, most first: gemm, "
        "attention, norm, rotary, activation, elementwise, copy, sampling, other (accelbench.core.kernels), and the "
        "NCCL kernels as collective.",
    ),
    col(
        "decode_top_kernels",
        STR,
        "Top decode kernels",
        combine=RANK,
        scenarios=G,
        doc="The ten kernels with most device time in a decode step, each 'name ms xcalls' a step, most first: where "
        "decode_kernel_ms goes.",
    ),
    col(
        "allreduce_share_note",
        STR,
        "All-reduce share note",
        scenarios=G,
        doc="Why a tensor-parallel row has no all-reduce share.",
    ),
    col(
        "decode_profile_note",
        STR,
        "Decode profile note",
        scenarios=G,
        doc="Why a row of one GPU has no profiled decode step (decode_kernel_ms and the columns beside it): an engine "
        "that runs whole generations has no step of its own, or the profile recorded or could not be read nothing.",
    ),
    # against the smallest tensor-parallel degree of the same case (accelbench.core.parallel.tp_scaling): the report
    # computes them over the rows it shows, never stored
    col(
        "tp_efficiency",
        FLOAT,
        "TP efficiency",
        "pct:1",
        scenarios=G,
        stored=False,
        doc="Decode tokens/s per GPU at this tp_degree over the same at the smallest degree of the same case: "
        "(T(n) / n) / (T(b) / b), the scaling efficiency; 100 % is linear scaling.",
    ),
    col(
        "tpot_speedup",
        FLOAT,
        "TPOT speed-up",
        "times:2",
        scenarios=G,
        stored=False,
        doc="TPOT p50 at the smallest tp_degree of the same case over TPOT p50 at this one.",
    ),
    # energy and quality
    col(
        "perplexity",
        FLOAT,
        "Perplexity",
        "number",
        scenarios=G,
        doc="exp(mean next-token cross-entropy) on the held-out shipped text (models with real weights).",
    ),
    col("perplexity_tokens", INT, "Perplexity tokens", "int", scenarios=G),
    col("perplexity_window", INT, "Perplexity window", "int", scenarios=G),
    col("perplexity_text", STR, "Perplexity text", scenarios=G),
    col("quality_note", STR, "Quality note", scenarios=G),
)

# The throughput of a generate case is its decode tokens/s (batch / mean TPOT): the rate of the windows compare
# bootstraps (a window is a timed generation's decode steps), the rate the compact table shows beside the mean TPOT.
METRIC_MAPS = (
    MetricMap(
        name="generate",
        workloads=(kinds.GENERATE,),
        kinds=(kinds.GENERATE,),
        throughput="decode_tokens_per_s",
        throughput_unit="output tokens/s",
        throughput_label="Decode tok/s",
        sample="output token",
        per="token",
        latency="tpot",
        latency_series="itl_ms",
        latency_label="TPOT",
        series_label="Inter-token latency",
        windows=GENERATIONS,
        extra=("ttft_p50",),
        tracked=("throughput", "latency_p50"),
        table=tuple(
            "model batch_size prompt_len new_tokens precision mode tp_degree ttft_mean_ms ttft_p50_ms ttft_p99_ms "
            "ttft_floor_ms ttft_over_floor tpot_mean_ms tpot_p50_ms tpot_p99_ms e2e_latency_mean_ms prefill_tokens_per_s decode_tokens_per_s "
            "output_tokens_per_s mbu mbu_datasheet mfu allreduce_share kv_cache_bytes peak_mem_bytes compile_s "
            "energy_per_sample_j cost_per_million_tokens perplexity validity status".split()
        ),
        # the rates are means (tokens over time), so the compact table shows them beside the mean latencies
        compact=tuple(
            "model batch_size prompt_len precision mode ttft_mean_ms tpot_mean_ms decode_tokens_per_s mbu "
            "status".split()
        ),
        statistic="TTFT, TPOT: means of the timed generations (tok/s = batch / TPOT)",
        section="generate",
        group=("model", "precision", "mode", "prompt_len", "new_tokens", "tp_degree"),
    ),
)

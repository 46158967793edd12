"""Columns of a language model's training step (``accelbench train -m hf:...``, the ``train_lm`` scenario).

A row's sample is a token: its ``throughput_samples_per_s`` is ``tokens_per_s``, its ``samples_timed`` the tokens
timed, so the derived energy and cost per sample are per token (``energy_per_token_j``,
``cost_per_billion_tokens_usd`` name them so). FLOPs a token and MFU follow torchtitan's count
(:mod:`accelbench.training.lm_maths`); the memory split is the allocator's (a GPU only;
``param_bytes``, the parameters' bytes, is the profile's column).
"""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.columns.column import FLOAT, INT, MAX, MEAN, STR, SUM, col
from accelbench.core.columns.metric_map import MetricMap

LM = "train_lm"
CONVERGE = "converge_lm"

DECLARED = (
    col("seq_len", INT, "Seq len", "int", scenarios=LM, doc="Tokens a sequence."),
    col("token_source", STR, "Tokens", scenarios=LM, doc="random (uniform ids) or text (packed shipped-text windows)."),
    col(
        "activation_checkpointing",
        STR,
        "Activation checkpointing",
        short="AC",
        scenarios=LM,
        doc="none, selective (every second decoder layer recomputed) or full (every layer).",
    ),
    col(
        "parallel_strategy",
        STR,
        "Parallelism",
        short="Parallel",
        scenarios=LM,
        doc="ddp (DistributedDataParallel) or fsdp (FSDP2: fully_shard per decoder layer, then the root); None in "
        "one process.",
    ),
    col(
        "mesh",
        STR,
        "Mesh",
        scenarios=(LM, "generate"),
        doc="The device mesh (accelbench.core.parallel_dims.ParallelDims): dp=N (replicas), dp_shard=N (FSDP2 "
        "shards) or tp=N (a model split over N GPUs by tensor parallelism).",
    ),
    col(
        "tokens_per_step",
        INT,
        "Tokens/step",
        "int",
        combine=SUM,
        scenarios=LM,
        doc="batch x seq_len of a rank (the aggregate row: of every rank).",
    ),
    col("tokens_timed", INT, "Tokens timed", "int", combine=SUM, scenarios=LM),
    col(
        "tokens_per_s",
        FLOAT,
        "Tokens/s",
        "rate",
        short="tok/s",
        combine=SUM,
        scenarios=LM,
        doc="Tokens trained on per second: tokens timed / the window's wall time (the aggregate row: the ranks' sum).",
    ),
    col(
        "tokens_per_s_per_gpu",
        FLOAT,
        "Tokens/s per GPU",
        "rate",
        short="tok/s/GPU",
        combine=MEAN,
        scenarios=LM,
        doc="Tokens per second per GPU (per process on a CPU).",
    ),
    col("non_embedding_params", INT, "Non-embedding params", "si:", scenarios=LM, doc="torchtitan's N."),
    col(
        "flops_per_token",
        INT,
        "FLOPs/token",
        "si:FLOP",
        scenarios=LM,
        doc="Training FLOPs a token: 6 N + 12 L H Q T (torchtitan; PaLM appendix B).",
    ),
    col("model_flops_per_s", FLOAT, "Model FLOP/s", "si:FLOP/s", combine=SUM, scenarios=LM),
    col("grad_bytes", INT, "Grads (MB)", "fixed:,.0f", scale=1e-6, combine=MAX, scenarios=LM),
    col("optimizer_state_bytes", INT, "Optimizer (MB)", "fixed:,.0f", scale=1e-6, combine=MAX, scenarios=LM),
    col(
        "activation_bytes",
        INT,
        "Activations (MB)",
        "fixed:,.0f",
        scale=1e-6,
        combine=MAX,
        scenarios=LM,
        doc="The step's peak allocation less parameters, gradients and optimizer state.",
    ),
    # training to a held-out perplexity (converge_lm): epoch rows and a summary per batch size
    col(
        "eval_perplexity",
        FLOAT,
        "Held-out perplexity",
        "fixed:.2f",
        short="PPL",
        scenarios=CONVERGE,
        doc="exp of the mean next-token cross-entropy over the held-out text's packed windows.",
    ),
    col("final_eval_perplexity", FLOAT, "Final perplexity", "fixed:.2f", scenarios=CONVERGE),
    col("best_eval_perplexity", FLOAT, "Best perplexity", "fixed:.2f", scenarios=CONVERGE),
    col("target_perplexity", FLOAT, "Target perplexity", "fixed:.2f", scenarios=CONVERGE),
    col("train_tokens", INT, "Train tokens", "int", scenarios=CONVERGE, doc="Tokens an epoch trained on."),
    col("train_tokens_total", INT, "Train tokens total", "int", scenarios=CONVERGE),
    col("energy_per_token_j", FLOAT, "Energy/token (J)", "number", combine=MEAN, scenarios=LM),
    col("cost_per_billion_tokens_usd", FLOAT, "$/1B tokens", "usd", combine=MEAN, scenarios=LM),
)

METRIC_MAPS = (
    MetricMap(
        name="training-lm",
        workloads=(kinds.TRAIN_LM, kinds.TRAIN_LM_DDP),
        kinds=(kinds.TRAIN_LM,),
        throughput="tokens_per_s",
        throughput_unit="tokens/s",
        throughput_label="Tokens/s",
        sample="token",
        per="token",
        latency="step_time",
        latency_series="step_time_ms",
        latency_label="Step time",
        series_label="Step time",
        table=tuple(
            "model batch_size seq_len precision mode activation_checkpointing tokens_per_s step_time_p50_ms "
            "step_time_p99_ms step_time_spread ci_throughput compile_s mfu mfu_datasheet peak_mem_bytes param_bytes "
            "grad_bytes optimizer_state_bytes activation_bytes loss_first loss_last energy_per_token_j "
            "cost_per_billion_tokens_usd validity status".split()
        ),
        compact=tuple(
            "model batch_size seq_len precision mode tokens_per_s step_time_p50_ms mfu peak_mem_bytes status".split()
        ),
        statistic="Step p50: median of every timed step; tok/s: tokens over the timed time",
        group=("model", "precision", "mode", "seq_len"),
        throughput_ci=("throughput_ci95_low_samples_per_s", "throughput_ci95_high_samples_per_s"),
    ),
)

METRIC_MAPS += (
    # an epoch's and a batch size's figures (time to a held-out perplexity): no throughput or latency to compare
    MetricMap(
        name="convergence-lm",
        workloads=(kinds.CONVERGENCE_LM,),
        kinds=(kinds.CONVERGENCE_LM,),
        sample="token",
        per="token",
        table=tuple(
            "model batch_size seq_len precision mode epochs_done final_train_loss final_eval_perplexity "
            "best_eval_perplexity best_epoch target_perplexity epochs_to_target time_to_target_s tokens_per_s "
            "total_wall_s energy_per_sample_j status".split()
        ),
        compact=tuple(
            "batch_size seq_len precision final_eval_perplexity best_eval_perplexity epochs_to_target "
            "time_to_target_s tokens_per_s status".split()
        ),
        statistic="Perplexity: the held-out text's; tok/s: training tokens over the training time",
        group=("model", "precision", "mode", "seq_len"),
    ),
)

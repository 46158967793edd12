"""Columns of training: the step's optimizer and loss, convergence runs (one row per epoch and a summary per batch
size), and the input pipeline (the loader's rate, storage reads)."""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.columns.column import ANY, BOOL, FLOAT, INT, MAX, MEAN, MIN, RANK, STR, col
from accelbench.core.columns.metric_map import MetricMap

STEP = "train_step converge"
CONVERGE = "converge"
PIPELINE = "input_pipeline train_step"

DECLARED = (
    # the training step
    col("optimizer", STR, "Optimizer", scenarios=STEP),
    col("optimizer_fused", BOOL, "Fused optimizer", "yesno", scenarios=STEP),
    col(
        "fused_optimizer",
        BOOL,
        "Fused optimizer kernels",
        "yesno",
        scenarios="train_step tune",
        doc="The optimizer's kernels a tune trial chose: fused (True), foreach (False), the default (None).",
    ),
    col(
        "autocast",
        BOOL,
        "Autocast",
        "yesno",
        scenarios="train_step",
        doc="The step ran forward and loss under torch.autocast (an amp precision); False under FSDP2 with "
        "--no-fsdp-autocast, its gathers in the autocast dtype alone.",
    ),
    col("fused", BOOL, "Fused", "yesno", scenarios=CONVERGE),
    col("lr", FLOAT, "Learning rate", "number", scenarios=STEP),
    col("momentum", FLOAT, "Momentum", "number", scenarios=STEP),
    col("weight_decay", FLOAT, "Weight decay", "number", scenarios=STEP),
    col("loss_first", FLOAT, "First loss", "number", combine=RANK, scenarios="train_step"),
    col("loss_last", FLOAT, "Last loss", "number", combine=RANK, scenarios="train_step"),
    col(
        "loss_finite",
        BOOL,
        "Loss finite",
        "yesno",
        combine=MIN,
        scenarios="train_step",
        doc="False when the training loss was NaN or inf (on any rank).",
    ),
    col(
        "loader_samples_per_s",
        FLOAT,
        "Loader (img/s)",
        "rate",
        short="Loader/s",
        scenarios=PIPELINE,
        titles=(("pipeline", "Throughput (img/s)"),),
        doc="The DataLoader's images/s (decode, augment, collate).",
    ),
    col("loader_error", STR, "Loader error", scenarios="train_step"),
    col(
        "input_bound",
        BOOL,
        "Input-bound",
        "YESno",
        combine=ANY,
        scenarios=STEP,
        doc="The loader delivers fewer samples/s than the step consumes.",
    ),
    # convergence: the run's settings
    col("lr_peak", FLOAT, "Peak LR", "number:4", scenarios=CONVERGE),
    col(
        "schedule",
        STR,
        "Schedule",
        scenarios="converge concurrent",
        doc="converge: the learning-rate schedule "
        "(cosine, step, ...); concurrent: concurrent, sequential or comparison.",
    ),
    col("placement", STR, "Placement", scenarios=CONVERGE),
    col("workers", INT, "Workers", "int", scenarios=CONVERGE),
    col("eval_data", STR, "Evaluation data", scenarios=CONVERGE),
    col("epochs", INT, "Epochs", "int", scenarios=CONVERGE),
    col("target_top1", FLOAT, "Target top-1", "pct:1", scenarios=CONVERGE),
    # convergence: one row per epoch
    col("epoch", INT, "Epoch", "int", scenarios=CONVERGE),
    col("eval_top1", FLOAT, "Test Top-1", "pct:2", scenarios=CONVERGE),
    col("eval_top5", FLOAT, "Test Top-5", "pct:2", scenarios=CONVERGE),
    col("eval_loss", FLOAT, "Test loss", "fixed:.3f", scenarios=CONVERGE),
    col("eval_images", INT, "Test images", "int", scenarios=CONVERGE),
    col("eval_wall_s", FLOAT, "Evaluation (s)", "fixed:.1f", scenarios=CONVERGE),
    col("train_loss", FLOAT, "Train Loss", "fixed:.3f", scenarios=CONVERGE),
    col("train_top1", FLOAT, "Train top-1", "pct:2", scenarios=CONVERGE),
    col("lr_last", FLOAT, "Last LR", "number:4", scenarios=CONVERGE),
    col("steps", INT, "Steps", "int", scenarios=CONVERGE),
    col("train_samples", INT, "Train samples", "int", scenarios=CONVERGE),
    col("epoch_wall_s", FLOAT, "Epoch wall (s)", "fixed:.1f", scenarios=CONVERGE),
    col("epoch_compute_s", FLOAT, "Epoch compute (s)", "fixed:.1f", scenarios=CONVERGE),
    col("epoch_gpu_s", FLOAT, "Epoch GPU (s)", "fixed:.1f", scenarios=CONVERGE),
    col("samples_per_s", FLOAT, "Train (img/s)", "rate", scenarios=CONVERGE),
    col("data_wait_s", FLOAT, "Data wait (s)", "number", scenarios=CONVERGE),
    col("data_wait_fraction", FLOAT, "Data wait share", "pct:1", combine=MAX, scenarios=CONVERGE),
    col("elapsed_train_s", FLOAT, "Elapsed training (s)", "fixed:.1f", scenarios=CONVERGE),
    col(
        "elapsed_s",
        FLOAT,
        "Elapsed (s)",
        "fixed:.1f",
        scenarios=CONVERGE,
        doc="Wall time since the run started, evaluation included.",
    ),
    # convergence: the summary per batch size
    col("epochs_done", INT, "Epochs", "int", scenarios=CONVERGE),
    col("final_eval_top1", FLOAT, "Final Top-1", "pct:2", scenarios=CONVERGE),
    col("final_eval_top5", FLOAT, "Final top-5", "pct:2", scenarios=CONVERGE),
    col("final_train_loss", FLOAT, "Final train loss", "fixed:.3f", scenarios=CONVERGE),
    col("best_eval_top1", FLOAT, "Best Top-1", "pct:2", scenarios=CONVERGE),
    col("best_epoch", INT, "Best Epoch", "int", scenarios=CONVERGE),
    col("epochs_to_target", INT, "Epochs to Target", "int", scenarios=CONVERGE),
    col("time_to_target_s", FLOAT, "Time to Target (s)", "fixed:.1f", scenarios=CONVERGE),
    col("time_to_target_train_s", FLOAT, "Training time to target (s)", "fixed:.1f", scenarios=CONVERGE),
    col("total_wall_s", FLOAT, "Total Time (s)", "fixed:.1f", scenarios=CONVERGE),
    col("total_train_s", FLOAT, "Total training (s)", "fixed:.1f", scenarios=CONVERGE),
    col("train_samples_total", INT, "Train samples total", "int", scenarios=CONVERGE),
    col("samples_per_s_mean", FLOAT, "Train (img/s)", "rate", combine=MEAN, scenarios=CONVERGE),
    col("input_bound_epochs", INT, "Input-bound Epochs", "int", scenarios=CONVERGE),
    # the input pipeline
    col("source", STR, "Source", scenarios="input_pipeline", doc="loader, resident or storage."),
    col("augment", BOOL, "Augment", "yesno", scenarios="input_pipeline"),
    col("loader_startup_s", FLOAT, "Start-up (s)", "fixed:.2f", scenarios="input_pipeline"),
    col("loader_batches_timed", INT, "Loader batches timed", "int", scenarios="input_pipeline"),
    col("loader_workers", INT, "Workers", "int", scenarios="input_pipeline"),
    col("loader_pin_memory", BOOL, "Pinned", "yesno", scenarios="input_pipeline"),
    col("cache_state", STR, "Cache", scenarios="input_pipeline", doc="cold or warm page cache."),
    col("cold_method", STR, "Evicted by", scenarios="input_pipeline"),
    col("files", INT, "Files", "int", scenarios="input_pipeline"),
    col("read_bytes", INT, "Read (MB)", "fixed:,.1f", scale=1e-6, scenarios="input_pipeline"),
    col("read_s", FLOAT, "Read (s)", "number", scenarios="input_pipeline"),
    col("read_mb_per_s", FLOAT, "Read (MB/s)", "fixed:,.0f", scenarios="input_pipeline"),
    col("page_cache_resident_fraction", FLOAT, "Cached Before", "pct:0", scenarios="input_pipeline"),
)

METRIC_MAPS = (
    MetricMap(
        name="training",
        workloads=(kinds.TRAINING, kinds.TRAIN_DDP),
        kinds=(kinds.TRAINING,),
        throughput="throughput_samples_per_s",
        throughput_unit="images/s",
        sample="training image",
        latency="step_time",
        latency_series="step_time_ms",
        latency_label="Step time",
        series_label="Step time",
        table=tuple(
            "model batch_size precision mode channels_last throughput_samples_per_s step_time_p50_ms "
            "step_time_p99_ms step_time_spread ci_throughput ci_step_time_p50 ci_step_time_p99 compile_s "
            "gpu_util_mean_pct peak_mem_bytes loader_samples_per_s input_bound status".split()
        ),
        compact=tuple(
            "model batch_size precision mode throughput_samples_per_s step_time_p50_ms compile_s "
            "loader_samples_per_s energy_per_sample_j status".split()
        ),
        statistic="Step p50: median of every timed step; img/s: images over the timed time",
        throughput_ci=("throughput_ci95_low_samples_per_s", "throughput_ci95_high_samples_per_s"),
    ),
    # an epoch's and a batch size's figures (time to accuracy): no throughput or latency to compare
    MetricMap(
        name="convergence",
        workloads=(kinds.CONVERGENCE,),
        kinds=(kinds.CONVERGENCE,),
        sample="training image",
        section="convergence",
    ),
    MetricMap(
        name="input-pipeline",
        workloads=(kinds.INPUT_PIPELINE,),
        kinds=(kinds.INPUT_PIPELINE,),
        sample="image",
        section="pipeline",
    ),
)

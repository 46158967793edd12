"""Columns that name a row and the configuration it ran: the store's keys, the case (model, batch size, precision,
backend), its data and its settings, the process that ran it."""

from __future__ import annotations

from accelbench.core.columns.column import BOOL, FLOAT, INT, JOIN, MAX, MIN, RANK, STR, col

IMAGES = "inference train_step converge profile loadgen tune"  # scenarios of an image model
MODELS = IMAGES + " generate"  # scenarios of any model (images and language)
SWEEP = "inference train_step tune"

DECLARED = (
    # the store's own keys and every row's outcome
    col("case_id", INT, "Case", "int", combine=RANK, doc="The row's id in the store."),
    col("run_id", INT, "Run", "int", combine=RANK, doc="The run the row belongs to."),
    col("case_key", STR, "Case key", combine=RANK, doc="Unique within a run: the case's configuration as text."),
    col(
        "workload",
        STR,
        "Workload",
        doc="What the row measured: inference, training, inference-dp, train-ddp, collective, p2p, ...",
    ),
    col(
        "status",
        STR,
        "Status",
        levels="ok skipped unsupported oom error",
        combine=RANK,
        doc="ok, or why the case has no figures: oom, error, unsupported, skipped.",
    ),
    col("error", STR, "Error", combine=RANK, doc="The one-line reason of a row that is not ok."),
    col("row_type", STR, "Row type", doc="A detail row beside a case's own: epoch, summary, server-probe."),
    col("started_at", FLOAT, "Started at (epoch s)", "number", combine=MIN),
    col(
        "case_wall_s",
        FLOAT,
        "Case wall time (s)",
        "fixed:.1f",
        short="Wall s",
        combine=MAX,
        doc="Wall time of the whole case: set-up, warm-up and timing.",
    ),
    # the case
    col("model", STR, "Model", scenarios=MODELS),
    col(
        "batch_size", INT, "Batch Size", "int", short="Batch", doc="Samples per batch (the global batch under --gpus)."
    ),
    col("precision", STR, "Precision", scenarios=MODELS),
    col("mode", STR, "Mode", scenarios=MODELS, doc="The backend: eager, compile, compile-freeze, cudagraphs, ..."),
    col(
        "compile_mode",
        STR,
        "Compile mode",
        scenarios=MODELS,
        doc="torch.compile's mode (None: the backend does not compile).",
    ),
    col("freezing", BOOL, "Inductor freezing", "yesno", scenarios=MODELS),
    col("channels_last_setting", STR, "Channels-last setting", scenarios=IMAGES, doc="auto, on or off, as asked."),
    col("channels_last", BOOL, "NHWC", "yesno", scenarios=IMAGES, doc="Whether the case ran channels-last."),
    col("cudnn_benchmark", BOOL, "cuDNN benchmark", "yesno", scenarios=IMAGES),
    col("cudnn_deterministic", BOOL, "cuDNN deterministic", "yesno", scenarios="converge"),
    col("include_transfer", BOOL, "Host-to-device copy timed", "yesno", scenarios=SWEEP),
    col("seed", INT, "Seed", "int"),
    col("weights", STR, "Weights", scenarios=MODELS, doc="The weights file, or random."),
    col("pretrained", BOOL, "Pretrained", "yesno", scenarios=MODELS),
    col("params", INT, "Parameters", "number", scenarios="profile generate"),
    col("param_bytes", INT, "Parameter bytes", "si:B", scenarios="profile"),
    col("num_classes", INT, "Classes", "int", scenarios="train_step converge"),
    # the data
    col("data", STR, "Data", doc="cifar10-test, synthetic, an ImageFolder path, ..."),
    col("data_description", STR, "Data description"),
    col("images", INT, "Images", "int", doc="Images per pass (the whole pass over the ranks under --gpus)."),
    col("image_size", INT, "Image Size", "int"),
    col("transform", STR, "Transform"),
    col("label_space", STR, "Label space"),
    col("labels_mapped", BOOL, "Labels mapped", "yesno", scenarios="train_step"),
    col("accuracy_note", STR, "Accuracy note", doc="Why a case reports no accuracy."),
    # where it ran
    col("device", STR, "Device", combine=JOIN, doc="The torch device: cpu, cuda, cuda:N (each rank's, joined)."),
    col("device_name", STR, "Device", doc="The GPU's name (NVML) or the CPU model."),
    col("device_type", STR, "Device type"),
    col("host", STR, "Host", combine=JOIN),
    col("gpu_uuid", STR, "GPU UUID", combine=JOIN),
    # a tune's trials and a concurrent study's jobs
    col("tune_stage", STR, "Stage", scenarios="tune", doc="probe, screen, rungN, finalN."),
    col("tune_window_s", FLOAT, "Tune window (s)", "fixed:.2f", scenarios="tune"),
    col("tune_trial_s", FLOAT, "Tune trial (s)", "fixed:.1f", scenarios="tune"),
    col("tune_summary", STR, "Tune summary", scenarios="tune", doc="The winner, verdict and command lines."),
    col("job", INT, "Job", "int", scenarios="concurrent"),
    col("jobs", INT, "Jobs", "int", scenarios="concurrent"),
    col("job_models", STR, "Job models", scenarios="concurrent"),
    col("job_workloads", STR, "Job workloads", scenarios="concurrent"),
)

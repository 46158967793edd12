"""Training workloads: step throughput, convergence (time to accuracy), input pipeline.

Modules:
    step: the reusable training step (forward + loss + backward + optimizer step) for one module,
        precision, optimizer, memory format and execution mode. Also used for DDP (issue 6).
    spec: ``TrainSpec`` (step-throughput sweep) and ``ConvergeSpec`` (training runs), validated.
    throughput: the step-throughput sweep, model x batch size x precision x mode, stored as rows.
    schedule: learning-rate schedules (linear warm-up + cosine, or step decay).
    augment: deterministic per-epoch augmentation plans (random crop with padding + flip).
    datasets: the decoding Dataset for a DataLoader, and the GPU-resident dataset.
    converge: training from scratch with per-epoch evaluation, checkpoints and resume.
    evaluate: top-1/top-5 and loss on a device-resident evaluation set.
    checkpoint: atomic per-epoch checkpoints (model, optimizer, scaler, RNG, history).
    pipeline: input-pipeline throughput (DataLoader workers, pinned memory) and storage reads.
    input_bench: the ``accelbench input-pipeline`` run (loader rows, resident row, storage rows).
"""

from accelbench.scenarios.train import converge, input_pipeline, train_step  # noqa: E402,F401  (register the training scenarios)

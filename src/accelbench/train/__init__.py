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
    pipeline: input-pipeline throughput (DataLoader workers, pinned memory) and storage reads.
"""

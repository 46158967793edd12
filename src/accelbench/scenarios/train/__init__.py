"""The training scenarios: step throughput (``train_step``), training to accuracy (``converge``) and the input
pipeline alone (``input_pipeline``), with the machinery they share.

| module | what |
| --- | --- |
| :mod:`.train_step` | the ``train_step`` scenario: training-step throughput, model x batch size x precision x mode |
| :mod:`.lm` / :mod:`.lm_case` | the ``train_lm`` scenario: a causal language model's training step (tokens/s, MFU, memory split; DDP or FSDP2) and its case; the model made ready and its step are :mod:`accelbench.training.lm_step`, the FLOP and memory counts :mod:`accelbench.training.lm_maths` |
| :mod:`.converge` / :mod:`.convergence` | the ``converge`` scenario / training from scratch with per-epoch evaluation, checkpoints and resume |
| :mod:`.input_pipeline` | the ``input_pipeline`` scenario: loader rows, the resident row, storage rows |
| :mod:`accelbench.training.step` | (below the scenarios) the training step every command that trains builds: forward + loss + backward + optimizer step for one module, precision, optimizer, memory format and execution mode; also under DDP, and the step ``accelbench profile`` profiles |
| :mod:`.timed` | the timed steps of a training case (warm-up, the agreed passes, the windows under telemetry, the last loss) and their columns, for image and language-model rows |
| :mod:`.schedule` | learning-rate schedules (linear warm-up + cosine, or step decay) |
| :mod:`.augment` | deterministic per-epoch augmentation plans (random crop with padding + flip) |
| :mod:`.datasets` | the decoding Dataset for a DataLoader, and the GPU-resident dataset |
| :mod:`.evaluate` | top-1/top-5 and loss on a device-resident evaluation set |
| :mod:`.checkpoint` | atomic per-epoch checkpoints (model, optimizer, scaler, RNG, history) |
| :mod:`.pipeline` | input-pipeline throughput (DataLoader workers, pinned memory) and storage reads |
"""

from accelbench.scenarios.train import converge, input_pipeline, lm, lm_converge, train_step  # noqa: F401  (register the training scenarios)

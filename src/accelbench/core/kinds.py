"""Run kinds (the store's ``runs.kind``) and row workloads (``cases.workload``): each name stored, written once.

A scenario declares its own from these (:attr:`accelbench.scenarios.Scenario.kind`, ``dist_kind``, ``workload``,
``dist_workload``; :func:`accelbench.scenarios.by_kind` finds it back from a stored run), a study names the run it
opens, and every reader (tables, reports, comparisons) compares with these names, never with a literal.
"""

from __future__ import annotations

# one process / under torchrun: a run's kind, and the workload of its case rows
INFERENCE, INFERENCE_DP = "inference", "inference-dp"  # accelbench run, accelbench run --gpus N
TRAINING, TRAIN_DDP = "training", "train-ddp"  # accelbench train, accelbench train --gpus N
TRAIN_LM, TRAIN_LM_DDP = "train-lm", "train-lm-ddp"  # accelbench train -m hf:... (a language model), under --gpus N
CONVERGENCE = "convergence"  # accelbench train --epochs N
CONVERGENCE_LM = "convergence-lm"  # accelbench train -m hf:... --epochs N (to a held-out perplexity)
PROFILE = "profile"
INPUT_PIPELINE = "input-pipeline"
INTERCONNECT = "interconnect"
LOADGEN = "loadgen"
GENERATE = "generate"  # accelbench generate: language-model prefill and decode
SERVE = "serve"  # accelbench serve: an OpenAI-compatible server under load

# runs opened by a study (several launches in one run)
SCALE, CONCURRENT, TUNE = "scale", "concurrent", "tune"

# kinds whose cases time windows of batches: confidence intervals, the sweep tables
SWEEP_KINDS = (INFERENCE, TRAINING, TRAIN_LM)

# workloads of detail rows beside a case's own
COLLECTIVE, P2P = "collective", "p2p"  # an interconnect run's collectives and GPU pair copies
LOADGEN_PROBE = "loadgen-probe"  # one Server QPS the LoadGen search tried
SERVE_PROBE = "serve-probe"  # one load level the SLO search of accelbench serve tried
CONCURRENT_SUMMARY = "concurrent-summary"  # a concurrent study's comparison and per-schedule rows

"""The training step every command that trains runs (:mod:`accelbench.training.step`): ``train`` for image and
language models, ``train --gpus``, ``profile --step train`` and ``tune --workload train`` build it, so what one
times is what another profiles. It sits below the scenarios: a scenario asks it, never another scenario."""

"""Model factories of the measurement fault rows (``measure_helpers:<factory>``): outputs that cannot be scored
(NaN, too few classes, a batch of another size) and a model whose forward gets slow above a batch size."""

import time

import torch
from torch import nn


class _Small(nn.Module):
    """A tiny conv net on 32x32 images with ``outputs`` logits."""

    default_image_size = 32

    def __init__(self, outputs: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, outputs)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


class NanOutputs(_Small):
    """Ten logits, every one NaN (an fp16 overflow looks like this)."""

    def forward(self, x):
        return super().forward(x) * float("nan")


class FirstOnly(_Small):
    """The logits of the first image only: an output batch of 1 for any input batch."""

    def forward(self, x):
        return super().forward(x)[:1]


class SlowAbove(_Small):
    """Fast up to ``limit`` images a batch, then ``delay_s`` seconds a step (a configuration whose cost nothing
    measured before it predicts)."""

    def __init__(self, limit: int = 2, delay_s: float = 30.0):
        super().__init__()
        self.limit, self.delay_s = limit, delay_s

    def forward(self, x):
        if x.shape[0] > self.limit:
            time.sleep(self.delay_s)
        return super().forward(x)


def nan_outputs():
    return NanOutputs()


def three_outputs():
    return _Small(outputs=3)


def first_only():
    return FirstOnly()


def slow_above_two():
    return SlowAbove()

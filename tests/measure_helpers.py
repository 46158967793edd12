"""Model factories of the measurement fault rows (``measure_helpers:<factory>``): outputs that cannot be scored
(NaN, too few classes, a batch of another size), a model whose forward gets slow above a batch size, and one that
stalls now and then."""

import time

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


class Jittery(_Small):
    """Fast, but every tenth forward stalls ``stall_s`` seconds (a host hiccup): a Server's p99 latency misses any
    bound below the stall while its median forward, the calibration, stays fast."""

    def __init__(self, stall_s: float = 0.02):
        super().__init__()
        self.stall_s, self.calls = stall_s, 0

    def forward(self, x):
        self.calls += 1
        if self.calls % 10 == 0:
            time.sleep(self.stall_s)
        return super().forward(x)


def nan_outputs():
    return NanOutputs()


def three_outputs():
    return _Small(outputs=3)


def first_only():
    return FirstOnly()


def slow_above_two():
    return SlowAbove()


def jittery():
    return Jittery()

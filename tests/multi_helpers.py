"""Model factories for the distributed tests (``multi_helpers:<factory>``): ranks that fail on purpose."""

import os
import time

from torch import nn


class FailOnRank(nn.Module):
    """A tiny conv net whose forward raises (or hangs) on one rank only, as a real rank failure does."""

    default_image_size = 32

    def __init__(self, rank: int, hang: bool = False):
        super().__init__()
        self.bad = int(os.environ.get("RANK", "0")) == rank
        self.hang = hang
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        if self.bad and self.hang:
            time.sleep(3600)
        if self.bad:
            raise RuntimeError("injected failure on this rank\nsecond line")
        return self.fc(self.conv(x).mean((2, 3)))


def crash_on_rank1():
    return FailOnRank(1)


def hang_on_rank1():
    return FailOnRank(1, hang=True)


def tiny():
    return FailOnRank(-1)

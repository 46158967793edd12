"""Model factories of the lifecycle fault rows, used as ``lifecycle_factories:<factory>``: user code that tries to
take accelbench over (exits, parses accelbench's flags) and a module that declares its model's settings at module
level, as the README tells users to."""

import argparse
import sys

from torch import nn

# Declared on the MODULE, as the README documents; the models below carry none of them.
label_space = "cifar10"
default_image_size = 16


class Plain(nn.Module):
    """A tiny conv net with no attributes of its own: what it needs is declared on the module."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


def plain():
    return Plain()


def exits():
    """A factory that ends the process as a script would."""
    sys.exit(0)


def parses_required():
    """A factory written as a script's main: its parser needs an argument accelbench never passes."""
    parser = argparse.ArgumentParser(prog="mymodel")
    parser.add_argument("--width", type=int, required=True)
    parser.parse_args()
    return Plain()


def parses_optional():
    """A factory whose parser has only optional flags: it must see none of accelbench's."""
    parser = argparse.ArgumentParser(prog="mymodel")
    parser.add_argument("--width", type=int, default=4)
    args = parser.parse_args()
    assert args.width == 4
    return Plain()

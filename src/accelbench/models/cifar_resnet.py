"""The CIFAR-10 ResNets of He et al. 2016 ("Deep Residual Learning for Image Recognition", s. 4.2).

Architecture from the paper: 3x3 conv (16) -> BN -> ReLU, three stages of ``n`` BasicBlocks with 16, 32
and 64 channels (stride 2 at the first block of stages 2 and 3), "option A" parameter-free shortcuts
(spatial subsampling by 2 and zero-padding of channels), global average pooling, a 64 -> 10 linear layer.
Depth = 6n + 2: ResNet-20 has n = 3, ResNet-56 n = 9. Parameter names match the pretrained checkpoints of
akamaster/pytorch_resnet_cifar10 (commit d5489e89), bundled in ``accelbench/assets/cifar10/weights``.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "assets" / "cifar10" / "weights"
WEIGHT_FILES = {20: "resnet20-12fca82f.th", 56: "resnet56-4bfd9763.th"}


class ShortcutA(nn.Module):
    """Option A shortcut: take every second pixel, zero-pad the new channels half on each side."""

    def __init__(self, planes: int):
        super().__init__()
        self.pad = planes // 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))


class BasicBlock(nn.Module):
    def __init__(self, in_planes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_planes != planes:
            self.shortcut = ShortcutA(planes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    """CIFAR ResNet of depth 6n + 2. Input ``(N, 3, H, W)`` (32x32 native), output logits ``(N, 10)``."""

    def __init__(self, n: int, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = self._stage(16, 16, n, stride=1)
        self.layer2 = self._stage(16, 32, n, stride=2)
        self.layer3 = self._stage(32, 64, n, stride=2)
        self.linear = nn.Linear(64, num_classes)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight)

    @staticmethod
    def _stage(in_planes: int, planes: int, n: int, stride: int) -> nn.Sequential:
        blocks = [BasicBlock(in_planes, planes, stride)]
        blocks += [BasicBlock(planes, planes, 1) for _ in range(n - 1)]
        return nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer3(self.layer2(self.layer1(out)))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def cifar_resnet(depth: int, pretrained: bool = True) -> CifarResNet:
    """Build ResNet-``depth`` (20 or 56 have bundled weights; any 6n+2 builds with random weights).

    Raises:
        ValueError: depth is not of the form 6n + 2.
        RuntimeError: the checkpoint does not match the architecture (strict loading).
    """
    if (depth - 2) % 6:
        raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
    model = CifarResNet((depth - 2) // 6)
    if pretrained and depth in WEIGHT_FILES:
        ckpt = torch.load(WEIGHTS_DIR / WEIGHT_FILES[depth], map_location="cpu", weights_only=True)
        state = {k.removeprefix("module."): v for k, v in ckpt["state_dict"].items()}
        model.load_state_dict(state, strict=True)
    return model

"""Model factories used by the tests as ``helpers:<factory>`` (the user-model path of --model)."""

import torch
from torch import nn


class OomAbove(nn.Module):
    """A small conv net that raises a real ``torch.OutOfMemoryError`` for batches larger than ``limit``,
    as the CUDA caching allocator does when a batch's activations do not fit."""

    default_image_size = 32

    def __init__(self, limit: int = 4):
        super().__init__()
        self.limit = limit
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        if x.shape[0] > self.limit:
            oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
            raise oom(f"CUDA out of memory. Tried to allocate {x.shape[0] * 2} GiB")
        return self.fc(self.conv(x).mean((2, 3)))


def oom_model():
    return OomAbove(limit=4)


class Broken(nn.Module):
    default_image_size = 32

    def forward(self, x):
        raise RuntimeError("shape mismatch in layer 3\nsecond line of detail")


def broken_model():
    return Broken()


def not_a_module():
    return 42


class TinyConvNet(nn.Module):
    """Conv(3->8, 3x3, pad 1, no bias) -> ReLU -> Flatten -> Linear(8*8*8 -> 10) on 8x8 inputs.

    Hand counts for a batch of 1 (FLOPs = 2 x MACs): conv 8*8 outputs x 8 channels x 3*3*3 taps = 13,824
    MACs = 27,648 FLOPs; linear 512 x 10 = 5,120 MACs = 10,240 FLOPs; 37,888 in all. Parameters:
    8*3*3*3 = 216 + 512*10 + 10 = 5,346.
    """

    default_image_size = 8

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.relu = nn.ReLU()
        self.flat = nn.Flatten()
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(self.flat(self.relu(self.conv(x))))


def tiny_conv_net():
    return TinyConvNet()


class CountingNet(nn.Module):
    """A tiny conv net that appends the first pixel of every batch it is called with to ``calls`` (a class
    attribute, shared by every instance: a test clears it), to count and order the forward calls of a case."""

    default_image_size = 8
    calls: list = []

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 10)

    def forward(self, x):
        CountingNet.calls.append(float(x[0, 0, 0, 0]))
        return self.fc(self.conv(x).mean((2, 3)))


def counting_net():
    return CountingNet()


def stop_after(n: int, seen: list):
    """An ``on_case`` callback for the sweep loops that raises KeyboardInterrupt (a Ctrl-C) once ``n`` cases
    have finished; ``seen`` collects their batch sizes."""

    def on_case(i, total, case, rec):
        if rec is not None:
            seen.append(case.batch_size)
            if len(seen) == n:
                raise KeyboardInterrupt

    return on_case


class CpuOomAbove(nn.Module):
    """Allocates a real CPU tensor of ``2**50`` bytes per sample above ``limit``: torch's CPU allocator
    refuses it ("DefaultCPUAllocator: can't allocate memory"), a genuine out-of-memory on a CPU."""

    default_image_size = 32

    def __init__(self, limit: int = 2):
        super().__init__()
        self.limit = limit
        self.fc = nn.Linear(3, 10)

    def forward(self, x):
        if x.shape[0] > self.limit:
            torch.empty(x.shape[0] * 2**50, dtype=torch.uint8)
        return self.fc(x.mean((2, 3)))


def cpu_oom_model():
    return CpuOomAbove(limit=2)


class BracketError(nn.Module):
    """Raises an error whose text holds square brackets, as torch's own allocator messages do."""

    default_image_size = 32

    def forward(self, x):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] data. [timm] kept as written")


def bracket_error_model():
    return BracketError()


class ColorNet(nn.Module):
    """Predicts the brightest channel: logits ``(N, 10)`` = the per-channel means of the input for outputs 0 (R),
    1 (G), 2 (B), -1e4 for the rest. On pure red/green/blue images normalised around 0.5 it is always right when
    the data's labels follow R=0, G=1, B=2 (the label tests check mappings with it). Declares no label space."""

    default_image_size = 8

    def forward(self, x):
        rest = torch.full((x.shape[0], 7), -1e4, dtype=x.dtype, device=x.device)
        return torch.cat([x.mean((2, 3)), rest], dim=1)


def color_net():
    return ColorNet()


class WorkNet(nn.Module):
    """A conv layer applied ``repeats`` times: the same case (same model name, same match key) doing ``repeats``
    times the work, so a run can be made truly slower than another (the history and compare tests)."""

    default_image_size = 16

    def __init__(self, repeats: int = 1):
        super().__init__()
        self.repeats = repeats
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.stem(x)
        for _ in range(self.repeats):
            x = torch.relu(self.conv(x))
        return self.fc(x.mean((2, 3)))


def work_net():
    """:class:`WorkNet` repeating its layer ``$ACCELBENCH_TEST_WORK`` times (default 1)."""
    import os

    return WorkNet(repeats=int(os.environ.get("ACCELBENCH_TEST_WORK", "1")))


def held_memory_lm():
    """A tiny Llama whose forward runs out of memory at batch >= 3 once it has run another batch size (the memory
    earlier cases' CUDA graphs hold, as on a GPU), and at batch >= 5 always (a true boundary)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    class HeldMemory(LlamaForCausalLM):
        def forward(self, input_ids=None, **kw):
            b = input_ids.shape[0]
            seen = self.__dict__.setdefault("_batches_seen", set())
            if b >= 5 or (b >= 3 and seen - {b}):
                raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (test model: batch {b} after {sorted(seen)})")
            seen.add(b)
            return super().forward(input_ids=input_ids, **kw)

    torch.manual_seed(0)
    return HeldMemory(
        LlamaConfig(
            vocab_size=300,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        )
    ).eval()


def tiny_untied_llama():
    """A 2-layer Llama whose LM head is its own weight (not the embedding's): tensor parallelism splits it over the
    vocabulary (the bundled tiny model's head is tied, and stays whole)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
        max_position_embeddings=256,
    )
    return LlamaForCausalLM(config)

"""FP8 (e4m3) inference on CUDA GPUs through torchao: float8 dynamic activation + float8 weight on Linear layers.

``torchao.quantization.quantize_(model, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))`` swaps
each eligible ``nn.Linear`` weight for a float8 tensor; its forward quantizes the activation per batch (dynamic
scaling) and calls ``torch._scaled_mm`` (FP8 tensor cores, compute capability >= 8.9). The row-wise path expects
bfloat16 weights (torchao asserts it), so the model is cast to bf16 first and its input is cast to bf16 inside
the forward: everything that is not a converted Linear layer runs in bf16. torchao leaves a Linear layer whose
dimensions are not multiples of 16 as it is (``_fp8_mm_compat``), silently: the columns count both.

torchao's FP8 convolution needs SM100 (Blackwell) and only per-tensor scaling (torchao 0.18 ``quant_api``:
"4D/5D tensor only supports per tensor activation and weight quantization"); accelbench converts Linear layers
only, so a model whose compute is convolutions (:func:`conv_dominated`) is simulated instead
(:mod:`accelbench.quant.simulate`).
"""

from __future__ import annotations

# A model is "convolutional" when convolutions carry more than this share of its Conv2d + Linear FLOPs.
CONV_SHARE = 0.5
# What an fp8 model runs in around its converted layers: torchao's row-wise path takes bf16 weights (module docstring).
COMPUTE_DTYPE = "bfloat16"


def layer_flops(module, example) -> list[tuple[str, str, float, bool]]:
    """Per Conv2d / Linear layer of ``module`` on one sample of ``example``: ``(name, kind, flops, fp8_eligible)``.

    FLOPs: 2 x multiply-accumulates; Linear ``2 * in * out * rows``, Conv2d ``2 * out.numel() * in/groups * kh * kw``
    (the formulas of ``torch.utils.flop_counter``). Eligible: a Linear layer with both dimensions multiples of 16
    (torchao's ``_fp8_mm_compat``).
    """
    import math

    import torch

    rows, hooks = [], []

    def hook(name):
        def fn(mod, inputs, out):
            if isinstance(mod, torch.nn.Linear):
                n = inputs[0].numel() // mod.in_features
                ok = mod.in_features % 16 == 0 and mod.out_features % 16 == 0
                rows.append((name, "linear", 2.0 * mod.in_features * mod.out_features * n, ok))
            else:
                k = math.prod(mod.kernel_size) * mod.in_channels // mod.groups
                rows.append((name, "conv", 2.0 * out.numel() * k, False))

        return fn

    for name, m in module.named_modules():
        if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d)):
            hooks.append(m.register_forward_hook(hook(name)))
    try:
        with torch.no_grad():
            module(example[:1])
    finally:
        for h in hooks:
            h.remove()
    return rows


def total_flops(module, example) -> float | None:
    """All matrix-product, convolution and attention FLOPs of one sample (``torch.utils.flop_counter``), or None
    where the counter fails: the denominator of ``fp8_flops_share``."""
    import torch

    from accelbench.core.analytic import count_flops

    try:
        # with autograd on: nn.MultiheadAttention's inference fast path is an op the counter does not know
        with torch.enable_grad():
            # a clone: an inference-mode tensor cannot be saved for backward
            return count_flops(lambda: module(example[:1].clone()))[0]
    except Exception:  # a share we cannot compute is left out, never guessed
        return None


def conv_dominated(rows) -> float | None:
    """The convolutions' share of the Conv2d + Linear FLOPs when above :data:`CONV_SHARE`, else None."""
    total = sum(r[2] for r in rows)
    conv = sum(r[2] for r in rows if r[1] == "conv")
    return conv / total if total and conv / total > CONV_SHARE else None


def _api():
    """``(quantize_, Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor)``, or None without torchao."""
    try:
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, quantize_
    except ImportError:
        return None
    try:
        from torchao.quantization import PerRow, PerTensor
    except ImportError:  # older torchao
        from torchao.quantization.granularity import PerRow, PerTensor
    return quantize_, Float8DynamicActivationFloat8WeightConfig, PerRow, PerTensor


def missing_reason() -> str | None:
    """Why the real fp8 path cannot be built (torchao missing), or None."""
    return None if _api() is not None else "torchao is not installed: pip install 'accelbench[quant]'"


def _cast_input(module, dtype):
    import torch

    class CastInput(torch.nn.Module):
        """Casts the (float32) input batch to the model's dtype inside the forward (compiled with it)."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x.to(dtype))

    return CastInput(module)


def quantize(module, granularity: str, example):
    """``module`` (fp32, eval, on a CUDA device of compute capability >= 8.9) with its eligible Linear layers in fp8.

    Args:
        granularity: ``row`` (torchao ``PerRow``: one scale per activation row and per weight output row) or
            ``tensor`` (``PerTensor``).
        example: one input batch on the device (its first sample counts the layers' FLOPs).

    Returns:
        ``(forward module, columns)``: ``quant_api``, ``quant_config``, ``fp8_linear_layers`` (converted),
        ``fp8_linear_layers_skipped`` (left in bf16: dimensions not multiples of 16, or a Linear used through its
        weight, as ``nn.MultiheadAttention``'s ``out_proj``), ``fp8_flops_share`` (the converted layers' share of
        all matrix-product, convolution and attention FLOPs, ``torch.utils.flop_counter``),
        ``quant_kernels``, ``compute_dtype``.

    Raises:
        MissingDependencyError: torchao is not installed.
    """
    import torch

    rows, total = layer_flops(module, example), total_flops(module, example)
    module = module.to(getattr(torch, COMPUTE_DTYPE)).eval()
    called = {r[0] for r in rows if r[1] == "linear"}
    # only Linear layers whose own forward runs: nn.MultiheadAttention uses out_proj's weight in a fused op
    cols, done = _convert(module, granularity, lambda fqn: fqn in called)
    linear = [r for r in rows if r[1] == "linear"]
    cols["fp8_flops_share"] = sum(r[2] for r in linear if r[0] in done) / total if total else None
    return _cast_input(module, getattr(torch, COMPUTE_DTYPE)), cols


def quantize_lm(model, granularity: str = "row") -> dict:
    """A language model's Linear layers (the LM head included) in fp8, in place, through torchao; the model is in
    bfloat16 on a CUDA device of compute capability >= 8.9 (the generate scenario builds it so).

    A decode step multiplies one row a sequence by each weight: the weight is read once in 8 bits (half of bf16's
    bytes, the point of 8-bit decode) and the activation row is quantized per row at run time, as in
    :func:`quantize`. Returns the columns of :func:`quantize` but ``fp8_flops_share``.

    Raises:
        MissingDependencyError: torchao is not installed.
    """
    return _convert(model, granularity, lambda fqn: True)[0]


def _convert(module, granularity: str, keep) -> tuple[dict, set[str]]:
    """torchao's conversion of ``module``'s Linear layers whose qualified name ``keep`` accepts (a model, or one of its
    decoder layers; layers already converted are left): ``(columns, names of the converted layers)``.

    Raises:
        MissingDependencyError: torchao is not installed.
    """
    import torch

    from accelbench.core.errors import MissingDependencyError

    api = _api()
    if api is None:
        raise MissingDependencyError("torchao", "quant")
    quantize_, Config, PerRow, PerTensor = api
    gran = PerRow() if granularity == "row" else PerTensor()
    try:  # torchao's own Inductor settings are process-wide (float32 matmul precision "high" among them): off
        config = Config(granularity=gran, set_inductor_config=False)
    except TypeError:
        config = Config(granularity=gran)
    plain = (torch.Tensor, torch.nn.Parameter)  # a converted linear's weight is a torchao tensor subclass

    def convert(m, fqn: str) -> bool:  # linears a per-layer pass already converted are left
        return isinstance(m, torch.nn.Linear) and type(m.weight) in plain and keep(fqn)

    quantize_(module, config, filter_fn=convert)
    every = {n for n, m in module.named_modules() if isinstance(m, torch.nn.Linear)}
    done = {n for n, m in module.named_modules() if isinstance(m, torch.nn.Linear) and type(m.weight) not in plain}
    cols = {
        "quant_api": "torchao.quantization.quantize_ Float8DynamicActivationFloat8WeightConfig",
        "quant_config": (
            f"float8 e4m3 weights and activations, per-{granularity} scaling, dynamic activations; "
            "Linear layers only; the rest bf16 (model cast to bfloat16)"
        ),
        "fp8_linear_layers": len(done),
        "fp8_linear_layers_skipped": len(every - done),
        "quant_kernels": "fp8: torch._scaled_mm (FP8 tensor cores) through torchao",
        "compute_dtype": COMPUTE_DTYPE,
    }
    return cols, done

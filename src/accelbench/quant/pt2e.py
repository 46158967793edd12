"""PT2E post-training int8 quantization for the torch backends (CPU, ``X86InductorQuantizer``).

Follows the PyTorch tutorial "PyTorch 2 Export Quantization with X86 Backend through Inductor": export the
model, ``prepare_pt2e`` with the x86 Inductor quantizer's default config (weights int8 per-channel
symmetric, activations uint8 per-tensor affine), run the calibration images through it, ``convert_pt2e``.
The converted module holds quantize/dequantize pairs around fp32 ops: run eagerly it *simulates* int8
numerics; ``torch.compile`` with Inductor freezing (``torch._inductor.config.freezing = True``) folds them
into int8 oneDNN kernels with packed weights (the tutorial: freezing is needed for the weight packing).
"""

from __future__ import annotations

from accelbench.core.errors import MissingDependencyError

# Set on a converted module: the compile backends turn Inductor freezing on for it.
FREEZE_ATTR = "accelbench_freeze"


def api():
    """``(prepare_pt2e, convert_pt2e, x86_inductor_quantizer module, source)``: torchao's PT2E, else torch's.

    Since torch 2.6 the PT2E flow lives in torchao (``torchao.quantization.pt2e``); ``torch.ao.quantization``
    keeps a deprecated copy in older releases.

    Raises:
        MissingDependencyError: neither is importable (names the ``quant`` extra).
    """
    try:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq

        return prepare_pt2e, convert_pt2e, xiq, "torchao.quantization.pt2e"
    except ImportError:
        pass
    try:
        from torch.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e
        from torch.ao.quantization.quantizer import x86_inductor_quantizer as xiq

        return prepare_pt2e, convert_pt2e, xiq, "torch.ao.quantization"
    except ImportError:
        raise MissingDependencyError("torchao", "quant") from None


def _export(module, example):
    """``torch.export`` of ``module`` with a dynamic batch axis (one export serves every batch size).

    Strict (Dynamo) export first: it names each call of a module apart, whereas the non-strict exporter gives the
    three calls of torchvision ResNet-50's shared ``Bottleneck.relu`` one source partition, which
    ``X86InductorQuantizer`` rejects ("Input partition has more than one output node", torch 2.15 / torchao 0.18).
    A model strict export cannot trace is exported non-strict.
    """
    import torch

    dims = ({0: torch.export.Dim.AUTO},)
    try:
        return torch.export.export(module, (example,), dynamic_shapes=dims, strict=True).module()
    except Exception:  # untraceable by Dynamo: the non-strict exporter may still take it
        return torch.export.export(module, (example,), dynamic_shapes=dims, strict=False).module()


def quantize(module, scheme: str, calibration: list, example):
    """Quantize ``module`` (eval mode, fp32, on the CPU) to int8 with PT2E.

    Args:
        module: the fp32 model.
        scheme: ``static`` (activations calibrated on ``calibration``) or ``dynamic`` (activation scales
            computed per batch at run time; the quantizer's ``is_dynamic`` config).
        calibration: float32 batches ``(B, 3, S, S)`` disjoint from the measured images (unused if dynamic).
        example: one input batch ``(B, 3, S, S)``: the export's example (its batch dimension stays dynamic).

    Returns:
        ``(converted GraphModule, columns)``: columns ``quant_api`` and ``quant_config``.

    Raises:
        MissingDependencyError: no PT2E flow is importable.
    """
    import torch

    prepare_pt2e, convert_pt2e, xiq, source = api()
    module = module.eval()
    exported = _export(module, example)
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(xiq.get_default_x86_inductor_quantization_config(is_dynamic=scheme == "dynamic"))
    prepared = prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for xb in calibration if scheme == "static" else [example]:
            prepared(xb.to(example.device))
    converted = convert_pt2e(prepared)
    setattr(converted, FREEZE_ATTR, True)
    config = "weights int8 per-channel symmetric, activations uint8 per-tensor " + (
        "dynamic (per batch)" if scheme == "dynamic" else "static (calibrated)"
    )
    return converted, {"quant_api": f"{source} X86InductorQuantizer", "quant_config": config}

"""The ``onnxruntime`` backend: the model exported with ``torch.onnx`` and run by an ``InferenceSession``.

- Export: ``torch.onnx.export(..., dynamo=False)`` (the TorchScript exporter: the dynamo exporter needs
  ``onnxscript``), opset :data:`OPSET`, a dynamic batch axis. A failed export raises; the loop stores it as
  an ``error`` row with the exporter's message.
- Provider: the best one the installed build offers for the device (:data:`PREFERENCE`): TensorRT, then
  CUDA on a GPU, the CPU provider otherwise; stored as ``ort_provider``.
- int8: onnxruntime's ``quantize_static`` in QDQ format, weights int8 per-channel symmetric, activations
  uint8 per-tensor (MinMax calibration over the same calibration images as PT2E), or ``quantize_dynamic``
  (onnxruntime docs, "Quantize ONNX models": QDQ and U8S8 are the recommended defaults on x86-64).

Inputs and outputs cross as host numpy arrays (no IO binding): on a GPU that copy is inside the timed region.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from accelbench.backends.base import INFERENCE, Backend, register

OPSET = 17
PREFERENCE = {
    "cuda": ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"),
    "cpu": ("CPUExecutionProvider",),
}


@dataclass(frozen=True, slots=True)
class OnnxModel:
    """An exported (and maybe quantized) ONNX file; ``keep`` holds the temporary folder alive."""

    path: Path
    keep: object


def best_provider(available: list[str], device_type: str) -> str:
    """The first of :data:`PREFERENCE` for ``device_type`` among ``available`` (onnxruntime's names).

    Raises:
        RuntimeError: none is available.
    """
    for name in PREFERENCE.get(device_type, PREFERENCE["cpu"]):
        if name in available:
            return name
    raise RuntimeError(f"no onnxruntime execution provider for {device_type} among {available}")


def export(module, example) -> OnnxModel:
    """``module`` as an ONNX file (fp32, batch axis dynamic).

    Raises:
        RuntimeError: the export failed (the exporter's message, one line).
    """
    import torch

    tmp = tempfile.TemporaryDirectory(prefix="accelbench-onnx-")
    path = Path(tmp.name) / "model.onnx"
    try:
        torch.onnx.export(
            module.eval(),
            (example.cpu(),),
            str(path),
            dynamo=False,
            opset_version=OPSET,
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        )
    except Exception as exc:  # every exporter failure becomes the row's one-line reason
        tmp.cleanup()
        raise RuntimeError(
            f"torch.onnx export failed: {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
        ) from exc
    return OnnxModel(path, tmp)


class _Reader:
    """onnxruntime's ``CalibrationDataReader`` protocol over host batches."""

    def __init__(self, batches):
        self._it = iter([{"input": b.cpu().numpy()} for b in batches])

    def get_next(self):
        return next(self._it, None)


class OnnxRuntime(Backend):
    name = "onnxruntime"
    about = (
        "torch.onnx export run by an onnxruntime InferenceSession on the best execution provider; int8 through "
        "onnxruntime's QDQ quantization"
    )
    tune = ()
    requires = ("onnxruntime", "onnx")
    torch_quantizer = False
    quant_kernels = "int8: onnxruntime QDQ (MLAS/oneDNN int8 kernels on the CPU)"

    def unsupported_reason(self, device, workload: str = INFERENCE) -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            return "onnxruntime is not installed: pip install 'accelbench[quant]'"
        return Backend.unsupported_reason(self, device, workload)

    def quantize(self, module, scheme, calibration, example, device, granularity=None):
        from onnxruntime import quantization as q

        from accelbench.core.errors import Unsupported

        if granularity is not None:
            raise Unsupported(
                "fp8 through onnxruntime is not built in accelbench (its FP8 paths need a TensorRT or "
                "CUDA build and a GPU run to claim): use the torch modes"
            )

        fp32 = export(module, example)
        source, pre = _preprocessed(fp32.path)
        path = fp32.path.with_name("model.int8.onnx")
        if scheme == "static":
            q.quantize_static(
                str(source),
                str(path),
                _Reader(calibration),
                quant_format=q.QuantFormat.QDQ,
                per_channel=True,
                activation_type=q.QuantType.QUInt8,
                weight_type=q.QuantType.QInt8,
            )
        else:
            q.quantize_dynamic(str(source), str(path), per_channel=True, weight_type=q.QuantType.QInt8)
        config = (
            "weights int8 per-channel symmetric, activations uint8 per-tensor "
            + ("static QDQ (MinMax calibration)" if scheme == "static" else "dynamic")
            + f"; {pre}"
        )
        return OnnxModel(path, fp32.keep), {
            "quant_api": "onnxruntime.quantization",
            "quant_config": config,
            "quant_kernels": self.quant_kernels,
        }

    def _build(self, module, example, device):
        import onnxruntime as ort
        import torch

        model = module if isinstance(module, OnnxModel) else export(module, example)
        provider = best_provider(ort.get_available_providers(), device.type)
        session = ort.InferenceSession(str(model.path), providers=[provider])

        def forward(x):
            out = session.run(None, {"input": x.detach().cpu().numpy()})[0]
            return torch.from_numpy(out).to(x.device)

        forward.model, forward.provider = model, session.get_providers()[0]  # keep the file alive with the callable
        forward(example)
        return forward

    def columns(self, forward) -> dict:
        import onnxruntime as ort

        return {"ort_provider": forward.provider, "onnxruntime_version": ort.__version__}


def _preprocessed(path):
    """``(model path to quantize, what was done)``: onnxruntime's quantization pre-processing (graph optimisation,
    which folds batch norm into the convolutions so their biases become initializers, then shape inference), the
    step its docs ask for before ``quantize_static`` (onnxruntime docs, "Quantize ONNX models: Pre-processing";
    without it ResNet-50's QDQ model ran at 0.33x its fp32 model on a 16-core Xeon, docs/results.md, reduced precision).
    A model the pre-processor cannot handle is quantized as exported, and the row says so."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    out = path.with_name("model.pre.onnx")
    try:
        quant_pre_process(str(path), str(out))
    except Exception as exc:  # noqa: BLE001 - any failure of the optional step: quantize the export itself
        return path, f"no pre-processing ({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''})"
    return out, "pre-processed (quant_pre_process: optimised, shapes inferred)"


register(OnnxRuntime())

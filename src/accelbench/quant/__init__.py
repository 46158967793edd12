"""Post-training int8 quantization: calibration data, PT2E for the torch backends, accuracy beside fp32.

- :mod:`accelbench.quant.calibration`: which images calibrate (always disjoint from those accuracy is
  measured on) and loading them.
- :mod:`accelbench.quant.pt2e`: PT2E static/dynamic quantization with ``X86InductorQuantizer`` (torchao's
  ``torchao.quantization.pt2e`` or, in older torch, ``torch.ao.quantization``).
- :mod:`accelbench.quant.accuracy`: ``top1_delta_pts`` and MLPerf's ``accuracy_target_met``.

The onnxruntime backend quantizes with onnxruntime's own tools (:mod:`accelbench.backends.onnxruntime`).
"""

"""accelbench's 8-bit GEMV kernel (``accelbench.quant.gemv``) on the CPU through Triton's interpreter
(``TRITON_INTERPRET=1``, in a child process: the interpreted kernel must not be the one a GPU test later gets):
``(x @ q.T) * s`` for int8 and fp8 weights at 1 to 128 rows (one row, then tiles of rows), at more rows than a tile
holds and at ragged shapes, against the dequantized product; the int8 conversion by bits gives every one of the 256
int8 values exactly, as the conversion instruction does; a weight-only linear running it, compiled whole
(``fullgraph``: the custom op is one opaque call), gives the eager module's outputs. The kernel's speed is a benchmark
(``benchmarks/gemv_8bit_probe.py``), not a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("triton")

CHILD = r"""
import json, torch
from accelbench.quant import gemv
from accelbench.quant.weight_only import WeightOnlyLinear, quantize_weight

torch.manual_seed(0)
out = {"errors": [], "refused": None}
for n, k in ((100, 300), (64, 512), (37, 1000)):
    w = torch.randn(n, k)
    for scheme in ("int8", "fp8"):
        q, s = quantize_weight(w, scheme)
        for m in (1, 2, 3, 16, 17, 40, gemv.MAX_ROWS):  # a GEMV, then tiles of 16 to MAX_ROWS rows
            x = torch.randn(m, k, dtype=torch.bfloat16)
            got = gemv.gemv_8bit(x, q, s.to(torch.bfloat16)).float()
            ref = (x.float() @ q.float().T) * s.to(torch.bfloat16).float()
            out["errors"].append([n, k, m, scheme, list(got.shape), ((got - ref).norm() / ref.norm()).item()])
# more rows than the largest tile: several tiles of rows over one weight tile, float32 activations exact
w = torch.randn(50, 200)
q, s = quantize_weight(w, "int8")
x = torch.randn(2 * gemv.TILES[-1] + 3, 200)
y = torch.empty(x.shape[0], 50)
gemv.launch(x, q, s, y)
ref = (x.double() @ q.double().T) * s.double()
out["many_rows"] = [list(y.shape), ((y.double() - ref).norm() / ref.norm()).item()]
# K split in 2 to 8 parts (each a float32 partial product, then their sum) gives the unsplit product
w = torch.randn(40, 4100)
q, s = quantize_weight(w, "int8")
x = torch.randn(1, 4100, dtype=torch.bfloat16)
ref = (x.float() @ q.float().T) * s.float()
out["split"] = {}
for split in gemv.SPLITS:
    y = torch.empty(1, 40, dtype=torch.bfloat16)
    gemv.launch(x, q, s, y, split_k=split)
    out["split"][split] = ((y.float() - ref).norm() / ref.norm()).item()
try:
    gemv.launch(x, q, s, y, split_k=3)
except ValueError as e:
    out["split_refused"] = str(e)
# every int8 value through the bit conversion, exactly: column 5 of the weight holds -128..127, x picks it out
every = torch.arange(-128, 128, dtype=torch.int8)[:, None].repeat(1, 64)
pick = torch.zeros(1, 64)
pick[0, 5] = 1.0
got = {}
for conversion in gemv.INT8_CONVERSIONS:
    y = torch.empty(1, 256)
    gemv.launch(pick, every, torch.ones(256), y, int8_conversion=conversion)
    got[conversion] = y[0].tolist()
out["every_int8"] = got["bits"] == list(range(-128, 128)) and got["instruction"] == got["bits"]
try:
    gemv.gemv_8bit(torch.zeros(gemv.MAX_ROWS + 1, 8), torch.zeros(4, 8, dtype=torch.int8), torch.ones(4))
except ValueError as e:
    out["refused"] = str(e)
lin = torch.nn.Linear(256, 96, bias=True).to(torch.bfloat16)
wo = WeightOnlyLinear(lin, "int8", int8_kernel=False, gemv=True)
plain = WeightOnlyLinear(lin, "int8", int8_kernel=False, gemv=False)
x = torch.randn(1, 1, 256, dtype=torch.bfloat16)
compiled = torch.compile(wo, fullgraph=True, backend="eager")(x).float()
ref = plain(x).float()
out["compiled_rel_err"] = ((compiled - ref).norm() / ref.norm()).item()
out["compiled_shape"] = list(compiled.shape)
print(json.dumps(out))
"""


def test_the_kernel_computes_the_dequantized_product_and_compiles_as_one_op():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(got["errors"]) == 3 * 2 * 7
    for n, k, m, scheme, shape, err in got["errors"]:
        assert shape == [m, n] and err < 1e-2, (n, k, m, scheme, err)  # bf16 output rounding: ~3e-3
    assert sorted(map(int, got["split"])) == [1, 2, 4, 8]
    for split, err in got["split"].items():
        assert err < 1e-2, (split, err)
    assert "split_k must be one of" in got["split_refused"]
    assert got["every_int8"] is True  # the int8 -> float32 conversion by bits is exact for all 256 values
    assert "at most 128 rows" in got["refused"]
    assert got["many_rows"][0] == [259, 50] and got["many_rows"][1] < 1e-6  # float32: the exact product
    assert got["compiled_shape"] == [1, 1, 96] and got["compiled_rel_err"] < 1e-2

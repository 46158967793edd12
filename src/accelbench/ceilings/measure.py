"""Machine ceilings: measured dense matmul throughput per precision and DRAM copy bandwidth, with the
vendor datasheet peaks beside them (``datasheets.json``).

Measured on random data (never zeros: zeros make tensor cores draw less power and run faster), each
figure the median of ``iters`` timed repetitions after ``warmup`` (CUDA events on a GPU):

| ceiling | how | FLOPs or bytes |
| --- | --- | --- |
| fp32 | ``a @ b``, n x n fp32, TF32 off | 2 n^3 |
| tf32 | the same with ``torch.backends.cuda.matmul.allow_tf32`` | 2 n^3 |
| fp16, bf16 | ``a @ b`` in that dtype | 2 n^3 |
| fp8 | ``torch._scaled_mm`` on ``float8_e4m3fn`` (compute capability >= 8.9), bf16 out | 2 n^3 |
| int8 | ``torch._int_mm`` (int8 in, int32 out) | 2 n^3 integer ops |
| DRAM | ``dst.copy_(src)`` on a buffer far larger than L2 | 2 x buffer bytes (read + write) |
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from accelbench.precisions import ROOFS as MATMUL_PRECISIONS  # which roof bounds a precision: its ``ceiling``

DATASHEETS = Path(__file__).with_name("datasheets.json")


@dataclass(frozen=True, kw_only=True, slots=True)
class Ceilings:
    """Ceilings of one device.

    Attributes:
        device_name: ``torch.cuda.get_device_name`` or the CPU model.
        matmul_flops_per_s: measured dense matmul throughput by precision (FLOP/s; int8: op/s).
        dram_bytes_per_s: measured copy bandwidth, bytes read + written per second.
        unsupported: precision -> why it was not measured.
        datasheet_flops_per_s / datasheet_dram_bytes_per_s / datasheet_source: vendor peaks, if known.
        matmul_n / copy_bytes: problem sizes used; measured_at: UNIX time.
    """

    device_name: str
    matmul_flops_per_s: dict[str, float]
    dram_bytes_per_s: float
    unsupported: dict[str, str] = field(default_factory=dict)
    datasheet_flops_per_s: dict[str, float] = field(default_factory=dict)
    datasheet_dram_bytes_per_s: float | None = None
    datasheet_source: str | None = None
    matmul_n: int = 0
    copy_bytes: int = 0
    measured_at: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Ceilings:
        return cls(**d)


def datasheet(device_name: str, path: Path = DATASHEETS) -> dict | None:
    """The datasheet entry whose key ``device_name`` starts with (longest key first), or None."""
    devices = json.loads(Path(path).read_text())["devices"]
    for key in sorted(devices, key=len, reverse=True):
        if device_name.startswith(key):
            return devices[key]
    return None


def _median_s(fn: Callable[[], object], device, warmup: int, iters: int) -> float:
    import torch

    for _ in range(warmup):
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for s, e in ev:
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize(device)
        return statistics.median(s.elapsed_time(e) / 1e3 for s, e in ev)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _operands(prec: str, n: int, device):
    """``(callable, reason)``: a matmul of two random n x n operands in ``prec``, or why not."""
    import torch

    g = torch.Generator(device=device).manual_seed(0)
    randn = lambda dt=torch.float32: torch.randn(n, n, device=device, generator=g, dtype=dt)  # noqa: E731
    if device.type != "cuda" and prec not in ("fp32", "bf16"):
        return None, f"{prec} matmul is measured on CUDA GPUs only"
    if prec in ("fp32", "tf32"):
        a, b = randn(), randn()
        return (lambda: torch.mm(a, b)), None
    if prec in ("fp16", "bf16"):
        dt = torch.float16 if prec == "fp16" else torch.bfloat16
        a, b = randn(dt), randn(dt)
        return (lambda: torch.mm(a, b)), None
    cc = torch.cuda.get_device_capability(device)
    if prec == "fp8":
        if cc < (8, 9) or not hasattr(torch, "float8_e4m3fn"):
            return None, "fp8 needs compute capability 8.9 or newer"
        a = randn().to(torch.float8_e4m3fn)
        b = randn().to(torch.float8_e4m3fn).t()  # _scaled_mm wants the second operand column-major
        one = torch.tensor(1.0, device=device)
        return (lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), None
    if prec == "int8":
        a = torch.randint(-128, 128, (n, n), device=device, dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (n, n), device=device, dtype=torch.int8, generator=g)
        return (lambda: torch._int_mm(a, b)), None
    return None, f"unknown precision {prec}"


def measure_matmul(prec: str, n: int, device, warmup: int = 3, iters: int = 10) -> tuple[float | None, str | None]:
    """``(FLOP/s, None)`` for an n x n x n matmul in ``prec`` (2 n^3 / median time), or ``(None, reason)``."""
    import torch

    from accelbench.core.errors import one_line

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    try:
        fn, reason = _operands(prec, n, device)
        if fn is None:
            return None, reason
        return 2.0 * n**3 / _median_s(fn, device, warmup, iters), None
    except Exception as exc:  # an unsupported dtype/kernel on this device is a result, not a crash
        return None, one_line(exc)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
        if device.type == "cuda":
            torch.cuda.empty_cache()


def measure_copy(nbytes: int, device, warmup: int = 3, iters: int = 10) -> float:
    """DRAM bandwidth (byte/s) of ``dst.copy_(src)`` on ``nbytes`` buffers: 2 x nbytes / median time."""
    import torch

    src = torch.rand(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    bw = 2.0 * src.numel() * 4 / _median_s(lambda s=src, d=dst: d.copy_(s), device, warmup, iters)
    del src, dst
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return bw


def measure(device, matmul_n: int | None = None, copy_bytes: int | None = None) -> Ceilings:
    """Measure every ceiling of ``device`` (GPU: n = 8192, 2 GiB copies; CPU: n = 1024, 256 MiB)."""
    import torch

    from accelbench.core import stage
    from accelbench.core.device import cpu_model

    stage.enter("measuring the device's ceilings")

    cuda = device.type == "cuda"
    n = matmul_n or (8192 if cuda else 1024)
    nbytes = copy_bytes or (2 << 30 if cuda else 256 << 20)
    name = torch.cuda.get_device_name(device) if cuda else cpu_model()
    flops, unsupported = {}, {}
    for prec in MATMUL_PRECISIONS if cuda else ("fp32",):
        value, reason = measure_matmul(prec, n, device)
        if value is None:
            unsupported[prec] = reason
        else:
            flops[prec] = value
    sheet = datasheet(name) or {}
    return Ceilings(
        device_name=name,
        matmul_flops_per_s=flops,
        dram_bytes_per_s=measure_copy(nbytes, device),
        unsupported=unsupported,
        datasheet_flops_per_s=sheet.get("flops_per_s", {}),
        datasheet_dram_bytes_per_s=sheet.get("dram_bytes_per_s"),
        datasheet_source=sheet.get("source"),
        matmul_n=n,
        copy_bytes=nbytes,
        measured_at=time.time(),
    )

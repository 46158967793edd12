"""Nsight Compute: run ``ncu`` on one profiled step and parse its CSV by metric name.

Command (see :func:`command`): ``ncu --nvtx --nvtx-include accelbench_step/ --clock-control none
--metrics <METRICS> --csv --page raw --print-units base --print-kernel-base demangled --log-file F
python -m accelbench.scenarios.profile.target <json>``: only the kernels of the one step inside the target's
NVTX range are profiled, at the GPU's own clocks.

CUDA graphs (a compiled decode step, ``static-compile`` on CUDA, is one graph replay): ``--graph-profiling node``
(ncu's default, named so it stays so) profiles each kernel node of a launched graph as its own kernel, with its own
name and counters, so the step's families are those of its kernels; ``graph`` would profile the whole graph as one
workload, one row without kernel names, which cannot be grouped (Nsight Compute CLI manual, "--graph-profiling").
The NVTX filter applies to the graph launch, which the target issues inside the range.

FLOPs from the counters (Nsight Compute "Kernel Profiling Guide", roofline sections
``SpeedOfLight_Hierarchical{Single,Half,Double}RooflineChart.section``):
    SASS FLOPs = add + mul + 2 x fma per precision, from the predicated-on thread instruction counts
    ``smsp__sass_thread_inst_executed_op_{f,h,d}{add,mul,fma}_pred_on.sum``. Half precision: see
    ``HALF_WEIGHT`` (each HADD2/HMUL2/HFMA2 thread instruction works on a pair of halves).
    Tensor FLOPs = the ``sm__ops_path_tensor_src_<type>_dst_<type>.sum`` counters, which count math
    operations (2 per multiply-add). One family only: per (source, destination) pair where the chip
    has it, never also the per-source aggregate or the sparsity splits (that would double count).
"""

from __future__ import annotations

import csv
import functools
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from accelbench.core.errors import AccelbenchError
from accelbench.core.kernels import KernelMetrics, classify

TIME = "gpu__time_duration.sum"
DRAM_READ, DRAM_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
# Half-precision SASS weighting as Nsight Compute documents it: the CLI manual's nvprof metric
# comparison maps ``flop_count_hp`` to ``hadd + hmul + hfma * 2`` (thread instructions), the same as
# fp32. A packed HADD2/HFMA2 instruction works on two halves, so this can undercount by up to 2x;
# such instructions are rare in PyTorch kernels (they compute in fp32 and round).
HALF_WEIGHT = 1.0
SASS: dict[str, tuple[str, float]] = {  # metric -> (kind, FLOPs per thread instruction)
    f"smsp__sass_thread_inst_executed_op_{p}{op}_pred_on.sum": (kind, w * (HALF_WEIGHT if p == "h" else 1.0))
    for p, kind in (("f", "fp32"), ("h", "fp16"), ("d", "fp64"))
    for op, w in (("add", 1.0), ("mul", 1.0), ("fma", 2.0))
}
TENSOR_SOURCES = ("bf16", "fp16", "tf32", "fp8", "int8", "fp64")
# Used when ``ncu --query-metrics`` cannot be read: the Hopper (GH100) per-(source, destination) family.
TENSOR_FALLBACK = (
    "sm__ops_path_tensor_src_bf16_dst_fp32",
    "sm__ops_path_tensor_src_fp16_dst_fp16",
    "sm__ops_path_tensor_src_fp16_dst_fp32",
    "sm__ops_path_tensor_src_tf32_dst_fp32",
    "sm__ops_path_tensor_src_fp64",
    "sm__ops_path_tensor_src_int8",
)
_TENSOR_RE = re.compile(r"^sm__ops_path_tensor_src_([a-z0-9]+?)(?:_dst_([a-z0-9]+))?$")
_PREFIX = {"p": 1e-12, "n": 1e-9, "u": 1e-6, "m": 1e-3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# Long and short unit names as ncu prints them (``nsecond`` with --print-units base in some versions,
# ``ns`` in 2025.3; ``byte``, ``Kbyte``; ``inst``); the prefix letter scales the base unit.
_BASE_UNITS = ("second", "byte", "inst", "cycle", "warp", "thread", "sector", "request", "s", "B")
# Inductor compiling inside the profiled process (a compiled decode step) with its pool of compile workers
# segfaulted under ncu on an H200 (ncu 2025.3.1, torch 2.11): the target compiles in-process and ncu follows only it
TARGET_ENV = {"TORCHINDUCTOR_COMPILE_THREADS": "1"}
NVTX_RANGE = "accelbench_step"  # the range ncu limits the profile to (the target pushes it around one step)


def payload(spec, case, warmup: int) -> str:
    """The JSON argument for one profiled step."""
    return json.dumps({"spec": spec.to_dict(), "case": case.to_dict(), "warmup": warmup}, default=str)


class NcuError(AccelbenchError):
    """Nsight Compute could not produce the profile; the message is one line."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NcuProfile:
    """Parsed result of one ``ncu`` run.

    Attributes:
        kernels: one entry per profiled kernel launch, in launch order.
        wall_s: wall time of the whole ``ncu`` process (model build, warm-up, replay).
        metrics: the metric names requested; missing: requested but absent or ``n/a`` in the CSV.
        csv_text: the raw CSV as ncu wrote it.
    """

    kernels: list[KernelMetrics]
    wall_s: float
    metrics: tuple[str, ...]
    missing: tuple[str, ...] = ()
    csv_text: str = field(default="", repr=False)


def find_ncu() -> str:
    """Path of ``ncu``: ``$ACCELBENCH_NCU``, then ``PATH``, then ``/opt/nvidia/nsight-compute/*/ncu``.

    Raises:
        NcuError: not found.
    """
    cand = [os.environ.get("ACCELBENCH_NCU"), shutil.which("ncu")]
    cand += sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    cand += sorted(glob.glob("/usr/local/cuda*/bin/ncu"), reverse=True)
    for c in cand:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise NcuError(
        "ncu (Nsight Compute) not found on PATH or in /opt/nvidia/nsight-compute: install it or set ACCELBENCH_NCU"
    )


def tensor_family(available: set[str] | None) -> tuple[str, ...]:
    """The one tensor-op metric family to sum (base names, without ``.sum``).

    Per (source, destination) counters where the chip has them; a per-source aggregate only where no
    split exists; never the ``_sparsity_on/off`` splits. ``available=None`` gives ``TENSOR_FALLBACK``.
    """
    if available is None:
        return TENSOR_FALLBACK
    found = [m for m in sorted(available) if (g := _TENSOR_RE.match(m)) and g.group(1) in TENSOR_SOURCES]
    return tuple(m for m in found if not any(o != m and o.startswith(m + "_dst_") for o in found))


def tensor_source(metric: str) -> str:
    """``sm__ops_path_tensor_src_bf16_dst_fp32.sum`` -> ``bf16``."""
    g = _TENSOR_RE.match(metric.removesuffix(".sum"))
    return g.group(1) if g else metric


@functools.lru_cache(maxsize=4)
def available_metrics(ncu: str, timeout_s: float = 120) -> frozenset[str] | None:
    """Metric base names ``ncu --query-metrics`` lists for the first GPU; None if it cannot say."""
    try:
        p = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    names = {ln.split()[0] for ln in p.stdout.splitlines() if re.match(r"^[a-z0-9]+__[a-z0-9_]+\s", ln)}
    return frozenset(names) or None


def metric_list(available: set[str] | None) -> tuple[str, ...]:
    """The ``--metrics`` list: time, DRAM bytes, SASS FLOP counters, one tensor family (``.sum``)."""
    base = [TIME, DRAM_READ, DRAM_WRITE, *SASS]
    if available is not None:
        base = [m for m in base if m.removesuffix(".sum") in available]
    return tuple(base) + tuple(f"{m}.sum" for m in tensor_family(available))


def command(ncu: str, metrics: tuple[str, ...], log_file: str, target_json: str, nvtx_range: str) -> list[str]:
    """The ``ncu`` argv profiling one step of the target process (see module docstring)."""
    return [
        ncu,
        "--nvtx",
        "--nvtx-include",
        f"{nvtx_range}/",
        "--graph-profiling",
        "node",
        "--target-processes",
        "application-only",
        "--clock-control",
        "none",
        "--metrics",
        ",".join(metrics),
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--print-kernel-base",
        "demangled",
        "--log-file",
        log_file,
        sys.executable,
        "-m",
        "accelbench.scenarios.profile.target",
        target_json,
    ]


def diagnose(output: str, returncode: int) -> str | None:
    """A one-line reason from ncu's and the target's output, None when the run looks fine."""
    if "ERR_NVGPUCTRPERM" in output:
        return (
            "ncu has no permission to read the GPU performance counters (ERR_NVGPUCTRPERM): run as root "
            "or allow profiling for all users (https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
        )
    m = re.search(r"accelbench target failed: (.*)", output)
    if m:
        return f"the profiled step failed: {m.group(1).strip()}"
    if "No kernels were profiled" in output:
        return "ncu profiled no kernels: no kernel ran inside the NVTX range"
    if returncode != 0:
        errs = [ln.strip() for ln in output.splitlines() if "==ERROR==" in ln]
        return f"ncu exited with status {returncode}: " + (errs[-1] if errs else "no error message")
    return None


def run(
    spec, case, warmup: int = 2, timeout_s: float = 1800, ncu: str | None = None, keep_csv: str | None = None
) -> NcuProfile:
    """Profile one step of a profile ``case`` with ncu in a child process and parse the result.

    ``keep_csv``: a file to write ncu's raw output to before it is parsed (kept even if parsing fails).

    Raises:
        NcuError: ncu missing, no counter permission, the step failed, no kernels, or a timeout.
    """
    ncu = ncu or find_ncu()
    metrics = metric_list(available_metrics(ncu))
    with tempfile.TemporaryDirectory(prefix="accelbench-ncu-") as tmp:
        log = os.path.join(tmp, "ncu.csv")
        cmd = command(ncu, metrics, log, payload(spec, case, warmup), NVTX_RANGE)
        t0 = time.perf_counter()
        try:
            p = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout_s, env=TARGET_ENV | dict(os.environ)
            )
        except subprocess.TimeoutExpired:
            raise NcuError(f"ncu did not finish within {timeout_s:.0f} s") from None
        wall = time.perf_counter() - t0
        text = open(log, errors="replace").read() if os.path.exists(log) else ""
    if keep_csv and (text or p.stdout):
        os.makedirs(os.path.dirname(keep_csv) or ".", exist_ok=True)
        with open(keep_csv, "w") as fh:
            fh.write(text or p.stdout)
    reason = diagnose("\n".join((text, p.stdout, p.stderr)), p.returncode)
    if reason:
        raise NcuError(reason)
    return parse(text or p.stdout, metrics, wall_s=wall)


def parse(text: str, metrics: tuple[str, ...] = (), wall_s: float = 0.0) -> NcuProfile:
    """Parse ncu ``--csv --page raw`` output (one row per kernel) into an :class:`NcuProfile`.

    Columns are found by their header names, never by position; a units row (empty ``ID``) scales
    values to base units (seconds, bytes). Metrics absent from the header or ``n/a`` count as 0 and
    are listed in ``missing``.

    Raises:
        NcuError: the text holds no ncu CSV table.
    """
    rows, units = read_table(text)
    wanted = metrics or _known_metrics(rows[0] if rows else {})
    missing: set[str] = {m for m in wanted if rows and m not in rows[0]}
    kernels = []
    for i, row in enumerate(rows):
        val = _valuer(row, units, missing)
        by_src: dict[str, float] = {}
        for m in wanted:
            if m.startswith("sm__ops_path_tensor_src_"):
                by_src[tensor_source(m)] = by_src.get(tensor_source(m), 0.0) + val(m)
        flops = {"fp32": 0.0, "fp16": 0.0, "fp64": 0.0}
        for m, (kind, w) in SASS.items():
            if m in wanted:
                flops[kind] += w * val(m)
        name = row.get("Kernel Name") or row.get("Function Name") or "?"
        kernels.append(
            KernelMetrics(
                index=i,
                name=name,
                family=classify(name),
                time_s=val(TIME),
                dram_read_bytes=val(DRAM_READ),
                dram_write_bytes=val(DRAM_WRITE),
                flops_fp32=flops["fp32"],
                flops_fp16=flops["fp16"],
                flops_fp64=flops["fp64"],
                flops_tensor=sum(by_src.values()),
                tensor_ops_by_source=by_src,
            )
        )
    return NcuProfile(
        kernels=kernels, wall_s=wall_s, metrics=tuple(wanted), missing=tuple(sorted(missing)), csv_text=text
    )


def _known_metrics(columns) -> tuple[str, ...]:
    """The metrics of :func:`metric_list` present among ``columns`` (a CSV header)."""
    bases = {c.removesuffix(".sum") for c in columns if c.endswith(".sum")}
    return tuple(m for m in metric_list(frozenset(bases)) if m in columns)


def read_table(text: str) -> tuple[list[dict[str, str]], dict[str, str]]:
    """The kernel rows (header name -> cell) and the units row of an ncu CSV.

    Raises:
        NcuError: no line starting with the ``"ID"`` header.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise NcuError('no ncu CSV table in the output (expected a header row starting with "ID")')
    table = list(csv.reader(ln for ln in lines[start:] if ln and not ln.startswith("==")))
    header, body = table[0], table[1:]
    units: dict[str, str] = {}
    if body and body[0] and body[0][0] == "":
        units = dict(zip(header, body[0]))
        body = body[1:]
    return [dict(zip(header, r)) for r in body if len(r) == len(header)], units


def unit_scale(unit: str) -> float:
    """Factor to base units: ``ns``/``nsecond`` -> 1e-9, ``Kbyte`` -> 1e3, ``byte``/``inst``/``""`` -> 1."""
    unit = (unit or "").strip()
    for base in _BASE_UNITS:
        if unit.endswith(base):
            prefix = unit[: -len(base)]
            if prefix and prefix not in _PREFIX:
                continue
            return _PREFIX[prefix] if prefix else 1.0
    if unit and unit[0] in _PREFIX and unit[1:] in _BASE_UNITS:
        return _PREFIX[unit[0]]
    return 1.0


def number(cell: str) -> float | None:
    """``"1,234.5"`` -> 1234.5; ``""``/``n/a`` -> None."""
    s = (cell or "").strip().replace(",", "")
    try:
        return float(s)
    except ValueError:
        return None


def _valuer(row: dict[str, str], units: dict[str, str], missing: set[str]):
    def val(metric: str) -> float:
        v = number(row.get(metric, ""))
        if v is None:
            missing.add(metric)
            return 0.0
        return v * unit_scale(units.get(metric, ""))

    return val

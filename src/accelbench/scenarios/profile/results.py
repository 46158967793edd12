"""Profile records: flat dicts of base-unit numbers (unit in every name) from analytic counts, timings,
ceilings and Nsight Compute kernels. Pure code, no torch.

Which ceiling bounds what:
    the step (analytic and measured): the roof its precision names (:attr:`accelbench.precisions.Precision.ceiling`:
        ``amp-bf16`` -> bf16, ``fp8-tensor`` -> fp8, ``int8-dynamic`` -> int8, ...), falling back to fp32 only where
        the device has no measurement of that roof (a CPU measures fp32 alone); the row's ``ceiling_name`` says which;
    a kernel or kernel family: the tensor-core ceiling of its main tensor source type when tensor
        operations are most of its FLOPs, else the fp32 ceiling (CUDA-core SASS arithmetic).
"""

from __future__ import annotations

from accelbench.ceilings.measure import Ceilings
from accelbench.core import roofline as rl
from accelbench.core.kernels import FAMILIES, KernelMetrics, Totals, by_family, total

TENSOR_CEILING = {"bf16": "bf16", "fp16": "fp16", "tf32": "tf32", "fp8": "fp8", "int8": "int8"}


def step_ceiling(ceilings: Ceilings, precision: str) -> tuple[str, float]:
    """``(name, FLOP/s)`` of the ceiling that bounds a step in ``precision``: the roof the precision table names.

    Raises:
        ConfigError: no such precision.
        ValueError: neither that roof nor fp32 was measured.
    """
    from accelbench import precisions

    return roof(ceilings, precisions.get(precision).ceiling)


def roof(ceilings: Ceilings, name: str) -> tuple[str, float]:
    """``(name, FLOP/s)`` of the measured roof ``name`` (one of :data:`accelbench.precisions.ROOFS`), else fp32's
    (the device measured no such roof).

    Raises:
        ValueError: neither was measured.
    """
    for cand in (name, "fp32"):
        if ceilings.matmul_flops_per_s.get(cand):
            return cand, ceilings.matmul_flops_per_s[cand]
    raise ValueError(f"no measured compute ceiling {name} (nor fp32) on {ceilings.device_name}")


def work_ceiling(ceilings: Ceilings, w: KernelMetrics | Totals) -> tuple[str, float]:
    """``(name, FLOP/s)`` bounding a kernel or family (module docstring)."""
    src = w.tensor_source
    name = TENSOR_CEILING.get(src) if src and w.flops_tensor >= w.flops - w.flops_tensor else "fp32"
    return roof(ceilings, name or "fp32")


def analytic_fields(counts, ceilings: Ceilings, precision: str, step_times_ms: list[float], batch_size: int) -> dict:
    """Analytic counts vs the measured step time, against the step's ceiling."""
    from accelbench.core.stats import summarize

    st = summarize(step_times_ms)
    t = st.latency_p50_ms / 1e3
    cname, peak = step_ceiling(ceilings, precision)
    bw = ceilings.dram_bytes_per_s
    theo = rl.theoretical_time_s(counts.flops, counts.min_bytes, peak, bw)
    intensity = rl.arithmetic_intensity(counts.flops, counts.min_bytes)
    achieved = rl.ratio(counts.flops, t)
    return {
        "params": counts.params,
        "param_bytes": counts.param_bytes,
        "analytic_flops": counts.flops,
        "analytic_forward_flops": counts.forward_flops,
        "analytic_min_bytes": counts.min_bytes,
        "analytic_activation_bytes": counts.activation_bytes,
        "analytic_input_bytes": counts.input_bytes,
        "analytic_intensity_flop_per_byte": intensity,
        "analytic_flops_by_op": counts.flops_by_op,
        "analytic_uncounted_ops": counts.uncounted_ops,
        "ceiling_name": cname,
        "ceiling_flops_per_s": peak,
        "ceiling_dram_bytes_per_s": bw,
        "ridge_point_flop_per_byte": rl.ridge_point(peak, bw),
        "datasheet_flops_per_s": ceilings.datasheet_flops_per_s.get(cname),
        "datasheet_dram_bytes_per_s": ceilings.datasheet_dram_bytes_per_s,
        "theoretical_time_s": theo,
        "theoretical_compute_time_s": counts.flops / peak,
        "theoretical_memory_time_s": counts.min_bytes / bw,
        "analytic_bound": rl.bound(counts.flops, counts.min_bytes, rl.ridge_point(peak, bw)),
        "step_time_s": t,
        "step_time_mean_s": st.latency_mean_ms / 1e3,
        "step_time_min_s": st.latency_min_ms / 1e3,
        "step_time_p99_s": st.latency_p99_ms / 1e3,
        "step_time_spread": st.spread,
        "steps_timed": st.n,
        "throughput_samples_per_s": rl.ratio(batch_size, t),
        "measured_vs_theoretical": rl.ratio(t, theo),
        "achieved_flops_per_s": achieved,
        "achieved_bytes_per_s": rl.ratio(counts.min_bytes, t),
        "roof_fraction": rl.roof_fraction(achieved, intensity, peak, bw),
    }


def totals_fields(prefix: str, tot: Totals, ceilings: Ceilings) -> dict:
    """Time, FLOPs by kind, DRAM bytes, intensity, achieved rates and bound of a kernel set."""
    cname, peak = work_ceiling(ceilings, tot)
    bw = ceilings.dram_bytes_per_s
    intensity = tot.intensity_flop_per_byte
    return {
        f"{prefix}_kernels": tot.kernels,
        f"{prefix}_time_s": tot.time_s,
        f"{prefix}_time_share": tot.time_share,
        f"{prefix}_flops": tot.flops,
        f"{prefix}_flops_fp32": tot.flops_fp32,
        f"{prefix}_flops_fp16": tot.flops_fp16,
        f"{prefix}_flops_fp64": tot.flops_fp64,
        f"{prefix}_flops_tensor": tot.flops_tensor,
        f"{prefix}_dram_read_bytes": tot.dram_read_bytes,
        f"{prefix}_dram_write_bytes": tot.dram_write_bytes,
        f"{prefix}_dram_bytes": tot.dram_bytes,
        f"{prefix}_intensity_flop_per_byte": intensity,
        f"{prefix}_achieved_flops_per_s": tot.achieved_flops_per_s,
        f"{prefix}_achieved_bytes_per_s": tot.achieved_bytes_per_s,
        f"{prefix}_ceiling_name": cname,
        f"{prefix}_bound": rl.bound(tot.flops, tot.dram_bytes, rl.ridge_point(peak, bw)),
        f"{prefix}_roof_fraction": rl.roof_fraction(tot.achieved_flops_per_s, intensity, peak, bw),
    }


def _gemm_runs(kernels: list[KernelMetrics]) -> list[list[KernelMetrics]]:
    """Runs of consecutive GEMM/convolution kernels (launch order), e.g. one FFT convolution's five kernels."""
    runs: list[list[KernelMetrics]] = []
    prev = None
    for k in kernels:
        if k.family == "gemm_conv":
            if prev == "gemm_conv":
                runs[-1].append(k)
            else:
                runs.append([k])
        prev = k.family
    return runs


def pair_layers(kernels: list[KernelMetrics], flop_calls) -> list[tuple[list[KernelMetrics], float]] | None:
    """Pair the counted op calls (layers, in call order) with the GEMM/convolution kernels that ran them.

    One kernel per layer when the counts match; else one run of consecutive GEMM/convolution kernels
    per layer (a layer run as several kernels, such as an FFT convolution); else None (fused or
    reordered work: no pairing).

    Returns:
        ``[(kernels of the layer, analytic FLOPs of the layer), ...]`` or None.
    """
    if not flop_calls:
        return None
    gemm = [k for k in kernels if k.family == "gemm_conv"]
    if len(gemm) == len(flop_calls):
        return [([k], f) for k, (_, f) in zip(gemm, flop_calls)]
    runs = _gemm_runs(kernels)
    if len(runs) == len(flop_calls):
        return [(run, f) for run, (_, f) in zip(runs, flop_calls)]
    return None


def layer_fields(paired) -> dict:
    """Per-layer measured/analytic FLOPs ratios: count, layers within 2 %, median, the largest deviation."""
    import statistics

    ratios = [(rl.ratio(sum(k.flops for k in ks), f), ks, f) for ks, f in paired or ()]
    ratios = [x for x in ratios if x[0] is not None]
    if not ratios:
        return {"layers_paired": 0}
    r_max, ks_max, f_max = max(ratios, key=lambda x: abs(x[0] - 1))
    return {
        "layers_paired": len(ratios),
        "layers_within_2pct": sum(abs(r - 1) <= 0.02 for r, _, _ in ratios),
        "layer_flops_ratio_median": statistics.median(r for r, _, _ in ratios),
        "layer_flops_ratio_max": r_max,
        "layer_flops_ratio_max_kernel": ks_max[0].name[:160],
        "layer_flops_ratio_max_analytic_flops": f_max,
    }


def kernel_layers(paired) -> dict[int, tuple[int, float | None]]:
    """Kernel index -> (layer number, the layer's analytic FLOPs on its first kernel, else None)."""
    out = {}
    for layer, (ks, f) in enumerate(paired or ()):
        for j, k in enumerate(ks):
            out[k.index] = (layer, f if j == 0 else None)
    return out


def ncu_fields(
    kernels: list[KernelMetrics],
    ceilings: Ceilings,
    precision: str,
    analytic_flops: float | None,
    families: tuple[str, ...] = FAMILIES,
    gemm: str = "gemm_conv",
) -> dict:
    """Measured step totals (``ncu_*``), the step's bound against its precision's ceiling, per-family
    totals (``family_<name>_*``, for each of ``families``) and the measured-vs-analytic FLOPs agreement.

    ``flops_agreement`` compares the ``gemm`` family's tensor + SASS FLOPs (GEMM/convolution kernels of an image
    step, GEMM/GEMV of a transformer step) with the analytic count (which, like those kernels, covers matrix
    products and convolutions only; a transformer step's also counts attention).
    """
    step = total(kernels)
    out = totals_fields("ncu", step, ceilings)
    cname, peak = step_ceiling(ceilings, precision)  # the step is bounded by its precision's ceiling
    bw = ceilings.dram_bytes_per_s
    out.update(
        ncu_ceiling_name=cname,
        ncu_bound=rl.bound(step.flops, step.dram_bytes, rl.ridge_point(peak, bw)),
        ncu_roof_fraction=rl.roof_fraction(step.achieved_flops_per_s, step.intensity_flop_per_byte, peak, bw),
        ncu_tensor_source=step.tensor_source,
        ncu_zero_dram_kernels=sum(1 for k in kernels if k.dram_bytes == 0),
    )
    fams = {t.name: t for t in by_family(kernels, families)}
    for fam in families:
        if fam in fams:
            out.update(totals_fields(f"family_{fam}", fams[fam], ceilings))
    matmuls = fams.get(gemm)
    out["ncu_gemm_conv_flops"] = matmuls.flops if matmuls else 0.0
    out["flops_agreement"] = rl.relative_error(out["ncu_gemm_conv_flops"], analytic_flops)
    out["ncu_flops_vs_analytic"] = rl.relative_error(step.flops, analytic_flops)
    return out


def kernel_row(k: KernelMetrics, ceilings: Ceilings, layer: tuple[int, float | None] | None = None) -> dict:
    """One kernel with its derived intensity, achieved rates, ceiling, bound, and its paired layer
    (number, and the layer's analytic FLOPs on the layer's first kernel), from :func:`kernel_layers`."""
    cname, peak = work_ceiling(ceilings, k)
    return {
        "idx": k.index,
        "name": k.name,
        "family": k.family,
        "time_s": k.time_s,
        "dram_read_bytes": k.dram_read_bytes,
        "dram_write_bytes": k.dram_write_bytes,
        "flops_fp32": k.flops_fp32,
        "flops_fp16": k.flops_fp16,
        "flops_fp64": k.flops_fp64,
        "flops_tensor": k.flops_tensor,
        "tensor_source": k.tensor_source,
        "intensity_flop_per_byte": k.intensity_flop_per_byte,
        "achieved_flops_per_s": rl.ratio(k.flops, k.time_s),
        "achieved_bytes_per_s": rl.ratio(k.dram_bytes, k.time_s),
        "ceiling_name": cname,
        "bound": rl.bound(k.flops, k.dram_bytes, rl.ridge_point(peak, ceilings.dram_bytes_per_s)),
        "layer": layer[0] if layer else None,
        "analytic_flops": layer[1] if layer else None,
    }

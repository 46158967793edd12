"""Re-derive a stored profile case's measured fields from ncu's raw CSV (``--ncu-csv`` keeps it).

For a case whose ncu run finished but whose derived numbers are missing or stale (an older
accelbench, a crash after the run), nothing needs to run again on the GPU: the CSV holds every
counter, and the stored record holds the analytic counts and the ordered FLOPs of each layer.
"""

from __future__ import annotations

from accelbench.scenarios.profile import ncu, results, storage


def reprocess(store, case_id: int, csv_text: str, ceilings, flop_calls=None) -> dict:
    """Parse ``csv_text`` for stored case ``case_id``, update its ``ncu_*``/family/layer fields and replace
    its kernel rows. ``flop_calls`` (ordered ``(op, FLOPs)``) defaults to the stored ones.

    Returns:
        The fields written.
    """
    rec = store.case(case_id)
    prof = ncu.parse(csv_text)
    calls = flop_calls if flop_calls is not None else rec.get("analytic_flop_calls") or ()
    # measured fields from an earlier derivation are cleared first (a family may no longer exist)
    stale = {k: None for k in rec if k.startswith(("family_", "ncu_", "layer", "flops_agreement"))}
    fields = {
        **stale,
        "ncu_status": "ok",
        "ncu_error": None,
        "ncu_missing_metrics": list(prof.missing) or None,
        "ncu_metrics": list(prof.metrics),
    }
    fields.update(results.ncu_fields(prof.kernels, ceilings, rec["precision"], rec.get("analytic_flops")))
    paired = results.pair_layers(prof.kernels, calls)
    fields.update(results.layer_fields(paired))
    layers = results.kernel_layers(paired)
    if flop_calls is not None:
        fields["analytic_flop_calls"] = [list(c) for c in flop_calls]
    store.update_case(case_id, fields)
    storage.replace_kernels(
        store, case_id, [results.kernel_row(k, ceilings, layers.get(k.index)) for k in prof.kernels]
    )
    return fields

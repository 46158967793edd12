"""Correct the energy of generate rows measured before the warm-up moved out of the telemetry window.

Until commit "generate: warm-up before the telemetry monitor", ``accelbench generate`` started its telemetry monitor
before the warm-up generations (the first compiles and captures CUDA graphs), so a row's ``energy_j`` (and the
energy per token derived from it) covered the warm-up too. The timed generations are the last part of that window,
and the monitor stores the NVML total-energy counter as a series (``nvml_energy_mj`` at ``nvml_t_s``, every
~100 ms), so the timed generations' energy is the counter's rise over the window's last ``timed_wall_s`` seconds
(the sum of their end-to-end times; the gaps between them are a few host microseconds): the counter, read by linear
interpolation between samples at both ends, each end uncertain by one counter step (~100 ms of power).

Rewrites, for each such row of the store given: ``energy_j``, ``energy_window_s``, ``energy_method``,
``energy_uncertainty_pct``, ``energy_confidence`` (ok under 5 %), ``power_mean_w`` (energy / window),
``energy_per_sample_j`` (per output token), ``energy_above_idle_j`` and ``energy_above_idle_per_sample_j``.
Other telemetry columns (utilisation, clocks, their flags) still cover the whole window and are left as measured.

Run: ``python3 benchmarks/llm_energy_tail.py llm.db`` (a store; the exports in ``benchmarks/results/language-models`` carry the corrected columns)
"""

from __future__ import annotations

import sqlite3
import sys

import numpy as np

METHOD = "counter series, last timed_wall_s of the window (recomputed: the window held the warm-up)"


def correct(path: str) -> int:
    con = sqlite3.connect(path)
    rows = con.execute(
        "select case_id, timed_wall_s, telemetry_window_s, samples_timed, idle_power_w from cases "
        "where status = 'ok' and workload = 'generate' and energy_j is not null and "
        "(energy_method is null or energy_method != ?)",
        (METHOD,),
    ).fetchall()
    done = 0
    for case_id, wall, window, samples, idle_w in rows:
        if not wall or not window or window < 1.05 * wall:
            continue
        t, e = (
            np.array(
                [
                    v
                    for (v,) in con.execute(
                        "select value from samples where case_id = ? and series = ? order by idx", (case_id, s)
                    )
                ]
            )
            for s in ("nvml_t_s", "nvml_energy_mj")
        )
        if len(t) < 3 or len(t) != len(e):
            continue
        end = t[-1]
        energy = float(np.interp(end, t, e) - np.interp(end - wall, t, e)) / 1e3
        step_s = float(np.median(np.diff(t)))
        unc = 100 * 2 * step_s * (energy / wall) / energy if energy > 0 else None
        above = energy - idle_w * wall if idle_w is not None else None
        con.execute(
            "update cases set energy_j = ?, energy_window_s = ?, energy_method = ?, energy_uncertainty_pct = ?, "
            "energy_confidence = ?, power_mean_w = ?, energy_per_sample_j = ?, energy_above_idle_j = ?, "
            "energy_above_idle_per_sample_j = ? where case_id = ?",
            (
                energy,
                wall,
                METHOD,
                unc,
                "ok" if unc is not None and unc < 5 else "low",
                energy / wall,
                energy / samples,
                above,
                above / samples if above is not None else None,
                case_id,
            ),
        )
        done += 1
    con.commit()
    return done


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(p, correct(p), "rows corrected")

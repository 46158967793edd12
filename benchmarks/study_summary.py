"""Markdown tables of the H100 vs H200 and CPU vs GPU studies (benchmarks/gpu_study.sh), from the two stores.

    python benchmarks/study_summary.py H100_STORE H200_STORE

Prints: H100 vs H200 at each batch size (throughput, power, energy per image, $/1k images) per precision and mode,
and the CPU vs GPU table of the H100 host (runs 2-6 of the H100 store).
"""

import sys

from accelbench.store import Store


def rows(store: Store, run_id: int) -> dict[tuple, dict]:
    df = store.cases(run_id)
    return {(c["precision"], c["mode"], c["batch_size"]): c for c in df[df.status == "ok"].to_dict("records")}


def gpu_table(a: dict, b: dict) -> None:
    print(
        "| precision | mode | batch | H100 img/s | H200 img/s | H200/H100 | H100 W | H200 W | H100 mJ/img | H200 mJ/img "
        "| H100 $/1M img | H200 $/1M img |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for key in sorted(a, key=lambda k: (k[0], k[1], k[2])):
        if key not in b or key[2] not in (1, 8, 32, 128, 256, 1024):
            continue
        x, y = a[key], b[key]
        print(
            f"| {key[0]} | {key[1]} | {key[2]} | {x['throughput_samples_per_s']:,.0f} | {y['throughput_samples_per_s']:,.0f} "
            f"| {y['throughput_samples_per_s'] / x['throughput_samples_per_s']:.3f}x | {x.get('power_mean_w', 0):.0f} "
            f"| {y.get('power_mean_w', 0):.0f} | {1e3 * x.get('energy_per_sample_j', 0):.1f} "
            f"| {1e3 * y.get('energy_per_sample_j', 0):.1f} | {1e3 * x.get('cost_per_1000_samples_usd', 0):.3f} "
            f"| {1e3 * y.get('cost_per_1000_samples_usd', 0):.3f} |"
        )


def cpu_gpu_table(store: Store) -> None:
    print("| device | workload | precision | mode | batch | img/s | energy/img (mJ) | $/1M img |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: |")
    for run in store.runs():
        df = store.cases(run["run_id"])
        df = df[df.status == "ok"]
        picked = (df[df.batch_size.isin([32, 256])] if run["run_id"] == 1 else df).to_dict("records")
        for c in picked:
            e = c.get("energy_per_sample_j")
            e = None if e != e else e  # NaN: no energy reading (CPU without RAPL access)
            print(
                f"| {c.get('device_name', run.get('device_name', '?'))} | {run['kind']} | {c['precision']} | {c['mode']} "
                f"| {c['batch_size']} | {c['throughput_samples_per_s']:,.1f} | {'-' if e is None else f'{1e3 * e:.1f}'} "
                f"| {1e3 * c.get('cost_per_1000_samples_usd', 0):.3f} |"
            )


if __name__ == "__main__":
    h100, h200 = Store(sys.argv[1]), Store(sys.argv[2])
    gpu_table(rows(h100, 1), rows(h200, 1))
    print()
    cpu_gpu_table(h100)

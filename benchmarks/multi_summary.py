"""Markdown tables of a multi-GPU proof run (benchmarks/multi_gpu_proof.sh output folder).

python benchmarks/multi_summary.py OUT  # the $OUT folder of a multi_gpu_proof.sh call (it holds multi.db)
"""

import json
import sqlite3
import sys
from pathlib import Path


def main(folder: str) -> None:
    d = Path(folder)
    db = sqlite3.connect(d / "multi.db")
    db.row_factory = sqlite3.Row
    base = [json.loads(line) for line in (d / "baselines.jsonl").read_text().splitlines() if line.strip()]
    hand = {b["world_size"]: b["throughput_samples_per_s"] for b in base if b["bench"] == "ddp_hand_loop"}
    plain = {b["size_bytes"]: b["busbw_bytes_per_s"] for b in base if b["bench"] == "allreduce_plain"}
    print(
        "| workload | GPUs | samples/s | per GPU | speed-up | efficiency | straggler gap | comm share | hand loop | accelbench / hand |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in db.execute(
        "SELECT * FROM cases WHERE aggregate=1 AND workload IN ('train-ddp','inference-dp') "
        "AND run_id IN (SELECT run_id FROM runs WHERE kind='scale') ORDER BY workload DESC, world_size"
    ):
        r = dict(r)
        h = hand.get(r["world_size"]) if r["workload"] == "train-ddp" else None
        comm = f"{100 * r['comm_exposed_share']:.1f} %" if r.get("comm_exposed_share") is not None else "-"
        hand_s = f"{h:,.1f}" if h else "-"
        ratio = f"{100 * r['throughput_samples_per_s'] / h:.1f} %" if h else "-"
        print(
            f"| {r['workload']} | {r['world_size']} | {r['throughput_samples_per_s']:,.1f} | "
            f"{r['throughput_per_gpu_samples_per_s']:,.1f} | {r['speedup']:.3f}x | {100 * r['scaling_efficiency']:.1f} % | "
            f"{100 * r['straggler_gap_share']:.2f} % | {comm} | {hand_s} | {ratio} |"
        )
    if "size_bytes" not in {c[1] for c in db.execute("PRAGMA table_info(cases)")}:
        return  # no interconnect run in this folder
    print()
    print("| op | size | time (us) | algbw (GB/s) | busbw (GB/s) | plain loop busbw (GB/s) | accelbench / plain |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in db.execute(
        "SELECT * FROM cases WHERE workload='collective' AND size_bytes >= 1048576 ORDER BY op, size_bytes"
    ):
        r = dict(r)
        if r["size_bytes"] not in (2**20, 2**24, 2**26, 2**28, 2**30):
            continue
        p = plain.get(r["size_bytes"]) if r["op"] == "all_reduce" else None
        plain_s = f"{p / 1e9:,.1f}" if p else "-"
        ratio = f"{100 * r['busbw_bytes_per_s'] / p:.1f} %" if p else "-"
        print(
            f"| {r['op']} | {r['size_bytes'] / 2**20:,.0f} MiB | {r['time_s'] * 1e6:,.1f} | {r['algbw_bytes_per_s'] / 1e9:,.1f} | "
            f"{r['busbw_bytes_per_s'] / 1e9:,.1f} | {plain_s} | {ratio} |"
        )
    print()
    for r in db.execute("SELECT * FROM cases WHERE workload='p2p' ORDER BY src_device, dst_device"):
        r = dict(r)
        print(
            f"p2p GPU{r['src_device']} -> GPU{r['dst_device']}: {r['bandwidth_bytes_per_s'] / 1e9:,.1f} GB/s, link {r['link']}, "
            f"{r['size_bytes'] / 2**20:.0f} MiB x {r['iters']}"
        )


if __name__ == "__main__":
    main(sys.argv[1])

"""Columns of multi-process work: a rank's identity and window, the aggregate row of a ``--gpus`` case (its common
window, straggler, scaling against a baseline), collectives and GPU pair copies, concurrent jobs, a tune's final
rounds."""

from __future__ import annotations

from accelbench.core.columns.column import BOOL, FLOAT, INT, MAX, MIN, RANK, STR, col

DP = "inference train_step scale concurrent"  # scenarios and studies with rank rows and aggregate rows
IC = "interconnect"

DECLARED = (
    # the job and each rank
    col("world_size", INT, "GPUs", "int", titles=(("collective", "Ranks"),), doc="Processes (ranks) of the case."),
    col("nnodes", INT, "Nodes", "int"),
    col("backend", STR, "Backend", doc="torch.distributed's backend: nccl or gloo."),
    col(
        "scaling_mode",
        STR,
        "Scaling",
        scenarios=DP,
        levels="weak strong",
        doc="weak (the batch size per rank) or strong (a global batch split over the ranks).",
    ),
    col("rank_batch_size", INT, "Batch/GPU", "int", short="B/GPU", scenarios=DP),
    col("rank_images", INT, "Images per rank", "int", scenarios=DP),
    col("rank", INT, "Rank", "int", combine=RANK, scenarios=DP, doc="The rank of a rank row (None: the aggregate)."),
    col("local_rank", INT, "Local rank", "int", combine=RANK, scenarios=DP),
    col("node_rank", INT, "Node rank", "int", combine=RANK, scenarios=DP),
    col(
        "aggregate",
        BOOL,
        "Aggregate",
        "yesno",
        combine=RANK,
        scenarios=DP,
        doc="True: the case's aggregate row; False: one rank's row; None: a one-process row.",
    ),
    col("window_start_epoch_s", FLOAT, "Window start (epoch s)", "number", combine=MIN, scenarios=DP),
    col("window_end_epoch_s", FLOAT, "Window end (epoch s)", "number", combine=MAX, scenarios=DP),
    col("rank_window_s", FLOAT, "Rank window (s)", "number", combine=RANK, scenarios=DP),
    col("barrier_window_s", FLOAT, "Barrier window (s)", "number", combine=RANK, scenarios=DP),
    # the aggregate row
    col("global_batch_size", INT, "Global batch", "int", scenarios=DP),
    col("hosts", INT, "Hosts", "int", scenarios=DP),
    col(
        "window_s",
        FLOAT,
        "Common window (s)",
        "number",
        scenarios=DP,
        doc="Earliest start to latest end of the ranks' timed windows.",
    ),
    col("throughput_per_gpu_samples_per_s", FLOAT, "Per GPU", "rate", scenarios=DP),
    col("straggler_rank", INT, "Straggler rank", "int", scenarios=DP),
    col(
        "straggler_gap_share",
        FLOAT,
        "Straggler gap",
        "pct:1",
        scenarios=DP,
        doc="(longest - shortest rank window) / longest.",
    ),
    col("rank_window_max_s", FLOAT, "Longest rank window (s)", "number", scenarios=DP),
    col("rank_window_min_s", FLOAT, "Shortest rank window (s)", "number", scenarios=DP),
    col(
        "comm_exposed_share",
        FLOAT,
        "Comm share",
        "pct:1",
        scenarios="train_step scale",
        doc="Share of a DDP step spent in communication computation did not hide.",
    ),
    col("speedup", FLOAT, "Speed-up", "times:2", scenarios=DP, doc="Throughput over the baseline's."),
    col(
        "scaling_efficiency",
        FLOAT,
        "Efficiency",
        "pct:1",
        scenarios=DP,
        doc="(T(n) / n) / (T(b) / b) against the baseline on b processes.",
    ),
    col("baseline_throughput_samples_per_s", FLOAT, "Baseline throughput (samples/s)", "rate", scenarios=DP),
    col("baseline_world_size", INT, "Baseline GPUs", "int", scenarios=DP),
    col("baseline_case_id", INT, "Baseline case", "int", scenarios=DP),
    # collectives and GPU pair copies
    col("op", STR, "Op", scenarios=IC, doc="all_reduce, all_gather, broadcast, ..."),
    col("size_bytes", INT, "Size", "ibytes", scenarios=IC),
    col("requested_bytes", INT, "Requested size", "ibytes", scenarios=IC),
    col("dtype", STR, "Data type", scenarios=IC),
    col("time_s", FLOAT, "Time (us)", "fixed:,.1f", scale=1e6, scenarios=IC, doc="One op's time, the slowest rank's."),
    col("time_min_rank_s", FLOAT, "Fastest rank time (s)", "number", scenarios=IC),
    col("algbw_bytes_per_s", FLOAT, "algbw (GB/s)", "number", scale=1e-9, scenarios=IC),
    col(
        "busbw_bytes_per_s",
        FLOAT,
        "busbw (GB/s)",
        "number",
        scale=1e-9,
        scenarios=IC,
        doc="algbw times nccl-tests' factor of the op.",
    ),
    col("warmup", INT, "Warm-up iterations", "int", scenarios=IC),
    col("iters", INT, "Iterations", "int", scenarios=IC),
    col("sizes", INT, "Sizes", "int", scenarios=IC),
    col("best_busbw_bytes_per_s", FLOAT, "Best busbw (GB/s)", "number", scale=1e-9, scenarios=IC),
    col("worst_busbw_bytes_per_s", FLOAT, "Worst busbw (GB/s)", "number", scale=1e-9, scenarios=IC),
    col("src_device", INT, "Source GPU", "int", scenarios=IC),
    col("dst_device", INT, "Destination GPU", "int", scenarios=IC),
    col("bandwidth_bytes_per_s", FLOAT, "Bandwidth (GB/s)", "fixed:,.1f", scale=1e-9, scenarios=IC),
    col("peer_access", BOOL, "Peer access", "yesno", scenarios=IC),
    col("link", STR, "Link", scenarios=IC, doc="NVLink xN, PCIe or the path NVML reports."),
    col("nvlink_links", INT, "NVLinks", "int", scenarios=IC),
    col("nvlink_p2p", BOOL, "NVLink P2P", "yesno", scenarios=IC),
    col("pcie_path", STR, "PCIe path", scenarios=IC),
    # concurrent jobs: one summary row per schedule and their comparison
    col("makespan_s", FLOAT, "Makespan (s)", "fixed:.1f", scenarios="concurrent"),
    col("makespan_speedup", FLOAT, "Makespan speed-up", "times:2", scenarios="concurrent"),
    col("work_time_s", FLOAT, "Work time (s)", "fixed:.1f", scenarios="concurrent"),
    col("work_speedup", FLOAT, "Work speed-up", "times:2", scenarios="concurrent"),
    col("overlap_fraction", FLOAT, "Overlap", "pct:0", scenarios="concurrent"),
    # a tune's final rounds
    col("final_windows", INT, "Final windows", "int", scenarios="tune"),
    col("final_rounds", INT, "Final rounds", "int", scenarios="tune"),
)

"""The tracked tree stays small: a clone stays quick, and the GPU machine's copy of the working tree (64 MiB at most)
has room. Results go in as compact exports (``benchmarks/results/``), generated reports stay out of git."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 50_000_000


def tracked_sizes(root: Path) -> dict[str, int]:
    """Bytes of every file ``git ls-files`` lists under ``root`` (a file deleted but not yet staged counts 0)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    sizes = {}
    for name in out.decode().split("\0"):
        if name:
            p = root / name
            sizes[name] = p.stat().st_size if p.is_file() else 0
    return sizes


def biggest_folders(sizes: dict[str, int], depth: int = 2, n: int = 8) -> list[tuple[str, int]]:
    """The ``n`` folders (their first ``depth`` path parts) holding the most bytes."""
    per = Counter()
    for name, size in sizes.items():
        parts = name.split("/")[:-1][:depth]
        per["/".join(parts) or "."] += size
    return per.most_common(n)


def test_biggest_folders_sum_by_leading_path_parts():
    sizes = {"a/b/c.bin": 5, "a/b/d/e.bin": 3, "a/f.bin": 2, "top.txt": 1}
    assert biggest_folders(sizes, depth=2) == [("a/b", 8), ("a", 2), (".", 1)]


def test_tracked_tree_is_at_most_50_mb():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no tracked files to measure")
    try:
        sizes = tracked_sizes(ROOT)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"git ls-files failed here: {exc}")
    total = sum(sizes.values())
    folders = ", ".join(f"{name} {size / 1e6:.2f} MB" for name, size in biggest_folders(sizes))
    assert total <= LIMIT_BYTES, (
        f"the tracked tree is {total:,} bytes, over {LIMIT_BYTES:,}; biggest folders: {folders}. "
        "Commit results as exports (accelbench export -f parquet), not stores, logs or reports"
    )

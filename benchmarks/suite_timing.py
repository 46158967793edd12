"""Time the README's test command and record the run in benchmarks/results/suite-under-load/suite-runs.json.

Runs ``python -m pytest -q -n auto --dist loadfile`` (what ``.ci/run`` runs after ruff) with a JUnit XML report,
and stores the wall time, the CPU time of the run's processes (user + system: less sensitive than the wall time to
what else shares the machine), the test counts, the machine's load average before and after, and the slowest files
and tests, under ``--name``. Run it from the repository root on a clean checkout, with nothing else running, unless the
run is meant to measure the suite under load (say so in ``--how``).

Usage: ``python benchmarks/suite_timing.py --name xdist-lean --how "-n auto --dist loadfile, nothing else running"``
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "suite-under-load" / "suite-runs.json"


def junit_summary(xml_path: Path) -> dict:
    """Counts, the sum of test seconds, the 10 slowest files and the 15 slowest tests of a JUnit XML report."""
    cases = list(ET.parse(xml_path).getroot().iter("testcase"))
    by_file: dict[str, float] = defaultdict(float)
    tests = []
    for c in cases:
        s = float(c.get("time", 0))
        module = c.get("classname", "").split(".")[-1]
        by_file[module] += s
        tests.append((round(s, 1), f"{module}::{c.get('name')}"))
    tags = [{child.tag for child in c} for c in cases]
    return {
        "tests": len(cases),
        "failures": sum("failure" in t for t in tags),
        "errors": sum("error" in t for t in tags),
        "skipped": sum("skipped" in t for t in tags),
        "sum_of_test_s": round(sum(s for s, _ in tests), 1),
        "slowest_files_s": {k: round(v, 1) for k, v in sorted(by_file.items(), key=lambda kv: -kv[1])[:10]},
        "slowest_tests_s": sorted(tests, reverse=True)[:15],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True, help="the run's key in suite-runs.json")
    ap.add_argument("--how", required=True, help="how it ran: workers, what else ran beside it")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        load_before = os.getloadavg()
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-n", "auto", "--dist", "loadfile", f"--junitxml={xml}"]
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the test processes, once waited for
        cpu = (after.ru_utime - cpu_before.ru_utime) + (after.ru_stime - cpu_before.ru_stime)
        load_after = os.getloadavg()
        summary = junit_summary(xml)
    run = {
        "commit": commit,
        "how": args.how,
        "exit_code": p.returncode,
        "date": datetime.date.today().isoformat(),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "loadavg_1_5_15_before": [round(x, 2) for x in load_before],
        "loadavg_1_5_15_after": [round(x, 2) for x in load_after],
        **summary,
    }
    data = json.loads(RESULTS.read_text())
    data["runs"][args.name] = run
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps({k: v for k, v in run.items() if not k.startswith("slowest")}, indent=1))
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())

"""Every command reads at 80 columns: at ``COLUMNS=80`` no line of ``run``, ``results``,
``compare``, ``tune``, ``profile`` or ``loadgen`` is longer than 80 characters, and no number is in exponent
form. Also ``--json -`` (item 20): the JSON alone on stdout, everything else on stderr, no file named ``-``."""

from __future__ import annotations

import json
import re

import pytest
from conftest import flags, run_cli, tiny_case

TINY = flags(tiny_case(model=None, batch_sizes=None))
RUN = ["run", *flags(tiny_case(batch_sizes="1,2"))]
NARROW = {"COLUMNS": "80", "OMP_NUM_THREADS": "1"}
EXPONENT = re.compile(r"\b\d+(?:\.\d+)?e[+-]\d+\b")


def _fits(p, stream: str = "stdout") -> str:
    """``p``'s text on ``stream``, after asserting it exited 0 and fits 80 columns without exponent forms."""
    assert p.returncode == 0, p.stdout + p.stderr
    text = getattr(p, stream)
    lines = text.splitlines()
    assert lines, "no output"
    long = [line for line in lines if len(line) > 80]
    assert not long, "\n".join(long)
    assert not EXPONENT.search(text), EXPONENT.search(text)
    assert "…" not in text, text  # nothing cut
    return text


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A store with two tiny inference runs: run 1 printed at 80 columns, run 2 with ``--json -``."""
    tmp = tmp_path_factory.mktemp("narrow")
    db = tmp / "n.db"
    first = run_cli(*RUN, "--db", str(db), env=NARROW, cwd=tmp)
    second = run_cli(*RUN, "--db", str(db), "--json", "-", env=NARROW, cwd=tmp)
    return tmp, db, first, second


def test_run_fits_80_columns(two_runs):
    _, _, first, _ = two_runs
    text = _fits(first)
    assert "img/s" in text and "Status" in text
    words = " ".join(text.split())  # lines broke between words only
    assert "cifar-resnet20: cheapest precision meeting the target" in words and "fp32 (eager, batch" in words


def test_json_dash_writes_the_run_to_stdout_and_the_rest_to_stderr(two_runs):
    tmp, _, _, second = two_runs
    assert second.returncode == 0, second.stderr
    doc = json.loads(second.stdout)  # stdout holds the JSON only
    assert doc["run_id"] == 2 and len(doc["results"]) == 2
    assert "Run 2 (inference)" in second.stderr and "wrote the JSON to stdout" in second.stderr
    assert not (tmp / "-").exists()


def test_results_fits_80_columns_by_default_and_wide_has_every_column(two_runs):
    _, db, _, _ = two_runs
    text = _fits(run_cli("results", "--run", "1", "--db", str(db), env=NARROW))
    assert "img/s" in text and "Inference Time (s)" not in text
    wide = run_cli("results", "--run", "1", "--db", str(db), "--wide", env=NARROW)
    assert wide.returncode == 0 and "Inference Time (s)" in wide.stdout  # piped: no pager, the natural width
    old = run_cli("results", "--run", "1", "--db", str(db), "--compact", env=NARROW)  # old scripts still work
    assert old.returncode == 0 and old.stdout == run_cli("results", "--run", "1", "--db", str(db), env=NARROW).stdout


def test_compare_fits_80_columns_and_its_json_goes_to_stdout(two_runs):
    tmp, db, _, _ = two_runs
    text = _fits(run_cli("compare", "1", "2", "--db", str(db), env=NARROW))
    assert "Throughput" in text and "Latency p50" in text and "B/A" in text
    p = run_cli("compare", "1", "2", "--db", str(db), "--json", "-", env=NARROW, cwd=tmp)
    doc = json.loads(p.stdout)
    assert doc[0]["a"] == "run 1" and len(doc[0]["cases"]) == 2 and not (tmp / "-").exists()


def test_tune_fits_80_columns(tmp_path):
    p = run_cli(
        "tune",
        "-m",
        "cifar-resnet20",
        "-p",
        "fp32",
        "--modes",
        "eager",
        "-b",
        "2",
        "--final-rounds",
        "1",
        "--final-repeats",
        "2",
        "--screen-time-s",
        "0",
        *TINY,
        "--telemetry-period-ms",
        "0",
        "--db",
        str(tmp_path / "t.db"),
        env=NARROW,
    )
    text = _fits(p)
    assert "winner (throughput)" in text and "run it: accelbench run" in text
    assert " \\\n    --" in text  # the command is continued for the shell, not cut mid-word


def test_profile_fits_80_columns(tmp_path):
    p = run_cli(
        "profile",
        "-m",
        "cifar-resnet20",
        "-b",
        "2",
        "--device",
        "cpu",
        "--idle-s",
        "0",
        "--telemetry-period-ms",
        "0",
        "--warmup-steps",
        "0",
        "--timed-steps",
        "1",
        "--db",
        str(tmp_path / "p.db"),
        env=NARROW,
    )
    text = _fits(p)
    assert "Ceilings of" in text and "Meas/Th" in text


def test_loadgen_fits_80_columns(tmp_path):
    pytest.importorskip("mlperf_loadgen")
    p = run_cli(
        "loadgen",
        "--model",
        "helpers:tiny_conv_net",
        "--device",
        "cpu",
        "--images",
        "64",
        "--idle-s",
        "0",
        "--min-duration-s",
        "0.2",  # the layout is the point, not the measurement: Offline's test lasts many times what is asked
        "--max-batch",
        "16",
        "--scenarios",
        "SingleStream,Offline",
        "--db",
        str(tmp_path / "l.db"),
        env=NARROW,
    )
    text = _fits(p)
    assert "SingleStream" in text and "samples/s" in text and " p90" in text

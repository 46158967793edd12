"""The history view (``accelbench report --history``, :func:`accelbench.api.history`): three real runs of one case,
the third doing 30 times the work, in time order, with intervals from the windows and the steps judged exactly as
``compare`` judges them."""

from __future__ import annotations

import pytest
from conftest import run_cli, single_torch_thread, tiny_case

from accelbench import api
from accelbench.core.errors import AccelbenchError
from accelbench.core.history import matches, parse_filter
from accelbench.store import Store

MODEL = "helpers:work_net"


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory):
    """Runs 1 and 2 of the case at work 1, run 3 at work 30 (truly slower); 5 windows each (a compare verdict) of
    at least 40 batches: a window of a few batches lasts ~1 ms, shorter than one scheduler time slice, so on a
    loaded machine (a CPU-heavy process beside the suite) one descheduling made a work-1 window as slow as a
    work-30 one and compare rightly found no significant step."""
    db = tmp_path_factory.mktemp("history") / "h.db"
    st = Store(db)
    mp = pytest.MonkeyPatch()
    # one torch thread: with two, beside a burner and another xdist worker, the tiny layers' threads waited on each
    # other so long that a work-1 run measured 2x slower than the work-30 one
    try:
        with single_torch_thread():
            for name, work in (("first", "1"), (None, "1"), ("slow", "30")):
                mp.setenv("ACCELBENCH_TEST_WORK", work)
                api.run(
                    api.spec("inference", tiny_case(model=MODEL, repeats=5, images=8, min_timed_batches=40)),
                    st,
                    name=name,
                )
    finally:
        mp.undo()
        st.close()
    return db


def test_filters_parse_and_match():
    assert parse_filter("model=m, batch_size=8") == {"model": "m", "batch_size": "8"}
    key = (("model", "m"), ("batch_size", 8), ("precision", "fp32"))
    assert matches(key, []) and matches(key, [{"batch_size": "8"}]) and matches(key, [{"model": "x"}, {"model": "m"}])
    assert not matches(key, [{"model": "m", "batch_size": "2"}])
    for bad in ("model", "colour=red"):
        with pytest.raises(AccelbenchError, match="invalid --case"):
            parse_filter(bad)


def test_history_has_three_points_in_time_order_and_compare_s_verdicts(three_runs):
    st = Store(three_runs)
    found = api.history(st, cases=[f"model={MODEL}"])
    assert [s.metric for s in found] == ["throughput"]
    pts = found[0].points
    assert [p.run_id for p in pts] == [1, 2, 3]
    assert pts[0].created_at < pts[1].created_at < pts[2].created_at
    assert [p.label for p in pts] == ["run 1 'first'", "run 2", "run 3 'slow'"]
    rows = {r["run_id"]: r for r in st.records()}
    assert len(rows) == 3
    for p in pts:
        assert p.value == rows[p.run_id]["throughput_samples_per_s"]
        assert p.ci_low < p.value < p.ci_high
    assert pts[0].verdict is None
    for prev, p in zip(pts, pts[1:]):
        (c,) = api.compare(st, prev.run_id, [p.run_id])
        assert (
            p.verdict == c.cases[0].metrics["throughput"].verdict and p.ratio == c.cases[0].metrics["throughput"].ratio
        )
    assert pts[2].verdict == "slower" and pts[2].ratio < 0.5
    assert api.history(st, cases=["model=resnet50"]) == []


def test_report_history_writes_the_charts_table_and_flagged_step(three_runs, tmp_path):
    out = tmp_path / "h.html"
    p = run_cli(
        "report",
        "--history",
        "--case",
        f"model={MODEL},batch_size=2",
        "--html",
        str(out),
        "--db",
        str(three_runs),
        check=True,
    )
    assert "1 sections" in p.stdout
    html = out.read_text()
    assert html.count("<svg") == 1 and "run 3 &#39;slow&#39; is slower than the run before" in html
    assert html.count("<tr>") == 4  # the header and one row per run
    p = run_cli("report", "--case", "model=x", "--html", str(out), "--db", str(three_runs))
    assert p.returncode == 2 and "--case applies to --history" in p.stderr
    p = run_cli("report", "--history", "--case", "colour=red", "--html", str(out), "--db", str(three_runs))
    assert p.returncode == 2 and "invalid --case 'colour=red'" in p.stderr

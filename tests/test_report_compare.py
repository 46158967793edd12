"""The comparison in the report: its headline counts compare's own verdicts, A and B overlaid against batch size with
the ratio B/A and its interval, charts that show every batch (log axes, no single-dot charts, titles that say what
they are), the latency histograms, and a printed PDF that keeps every column of the widest table."""

import json

import numpy as np
import pytest

from accelbench import api
from accelbench.store import Store
from conftest import run_cli

TINY = {"device": "cpu", "idle_s": 0, "telemetry_period_ms": 0}


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A store with two runs of one inference sweep (batch 1, 2 and 4, five windows a case): runs 1 and 2."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    db = tmp_path_factory.mktemp("compare") / "pair.db"
    try:
        st = Store(db)
        for _ in range(2):
            api.run(api.spec("inference", {**TINY, "model": "cifar-resnet20", "batch_sizes": "1,2,4", "images": 8,
                                           "repeats": 5}, cuda=False), st)
    finally:
        torch.set_num_threads(threads)
    return db


@pytest.fixture(scope="module")
def pair_report(pair):
    html, md = pair.parent / "pair.html", pair.parent / "pair.md"
    run_cli("report", "--db", str(pair), "--run", "1", "--run", "2", "--html", str(html), "--markdown", str(md),
            check=True)
    return html, md


def test_headline_counts_are_compares_verdicts(pair, pair_report, tmp_path):
    out = tmp_path / "c.json"
    run_cli("compare", "1", "2", "--db", str(pair), "--json", str(out), check=True)
    cases = json.loads(out.read_text())[0]["cases"]
    assert len(cases) == 3
    verdicts = [c["metrics"]["throughput"]["verdict"] for c in cases]
    count = {w: verdicts.count(w) for w in ("faster", "slower", "within noise")}
    undecided = sum(v in ("too few windows", "not measured") for v in verdicts)
    from accelbench.report.headline import headline

    comparison = api.compare(Store(pair), "1", ["2"])[0]
    head = headline(comparison)
    rows = dict(head["rows"])
    for word, label in (("faster", "Faster"), ("slower", "Slower")):
        assert (rows[label].startswith(f"{count[word]} of 3") if count[word] else label not in rows), (word, rows)
    assert (rows["Equivalent (within 2%)"] == f"{count['within noise']} of 3") if count["within noise"] else True
    assert (rows["Undecided (too few windows)"] == f"{undecided} of 3") if undecided else True
    assert head["line"].startswith(f"run 2 against run 1: faster on {count['faster']} of 3 matched cases")
    faster = [c["metrics"]["throughput"]["ratio"] for c in cases if c["metrics"]["throughput"]["verdict"] == "faster"]
    if faster:  # the range printed is the range of the faster cases' ratios
        assert f"{min(faster):.2f}" in rows["Faster"] and f"{max(faster):.2f}" in rows["Faster"]
    html, md = pair_report
    text = html.read_text()
    # the headline heads the page (a link to its section) and its comparison
    assert text.count(head["line"].replace("'", "&#39;")) == 2
    assert text.index(head["line"]) < text.index("<h2>Run 1: inference")
    assert f"**{head['line']}**" in md.read_text()


def test_overlay_and_ratio_chart_plot_compares_figures(pair):
    from accelbench.report.compare_charts import comparison_charts, figure, groups

    comparison = api.compare(Store(pair), "1", ["2"])[0]
    found = groups(comparison)
    assert list(found) == ["cifar-resnet20 fp32 eager"]
    cases = found["cifar-resnet20 fp32 eager"]
    fig = figure(comparison, "g", cases)
    thr, lat, energy, ratio = fig.axes
    a_line, b_line = thr.get_lines()[:2]
    assert list(a_line.get_xdata()) == [1, 2, 4] and list(a_line.get_ydata()) == [c.metrics["throughput"].a for c in cases]
    assert list(b_line.get_ydata()) == [c.metrics["throughput"].b for c in cases]
    assert thr.get_xscale() == "linear"  # 1..4 is not a sweep of decades
    lines = {ln.get_label(): ln for ln in ratio.get_lines()}
    assert list(lines["Throughput"].get_ydata()) == [c.metrics["throughput"].ratio for c in cases]
    assert any(abs(y - 1.0) < 1e-12 for ln in ratio.get_lines() for y in ln.get_ydata())  # the line at 1
    band = ratio.collections[-2].get_paths()[0].vertices[:, 1]  # the throughput interval: lows then highs
    lows = [c.metrics["throughput"].ci_low for c in cases]
    assert all(any(abs(v - lo) < 1e-9 for v in band) for lo in lows)
    from accelbench.report.plots import pyplot

    pyplot().close(fig)
    items = comparison_charts(comparison)
    assert len(items) == 1 and items[0]["svg"].startswith("<svg") and items[0]["wide"]

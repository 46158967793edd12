"""The comparison in the report: its headline counts compare's own verdicts, A and B overlaid against batch size with
the ratio B/A and its interval, charts that show every batch (log axes, no single-dot charts, titles that say what
they are), the latency histograms, and a printed PDF that keeps every column of the widest table."""

import json

import numpy as np
import pytest
from conftest import run_cli

from accelbench import api
from accelbench.store import Store

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
            api.run(
                api.spec(
                    "inference",
                    {**TINY, "model": "cifar-resnet20", "batch_sizes": "1,2,4", "images": 8, "repeats": 5},
                    cuda=False,
                ),
                st,
            )
    finally:
        torch.set_num_threads(threads)
    return db


@pytest.fixture(scope="module")
def pair_report(pair):
    html, md = pair.parent / "pair.html", pair.parent / "pair.md"
    run_cli(
        "report", "--db", str(pair), "--run", "1", "--run", "2", "--html", str(html), "--markdown", str(md), check=True
    )
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
        assert rows[label].startswith(f"{count[word]} of 3") if count[word] else label not in rows, (word, rows)
    for label, k in (("Equivalent (within 2%)", count["within noise"]), ("Undecided (too few windows)", undecided)):
        assert rows[label].startswith(f"{k} of 3") if k else label not in rows, (label, rows)
    said = [
        f"{w} on {count[k]}"
        for k, w in (("faster", "faster"), ("slower", "slower"), ("within noise", "equivalent"))
        if count[k]
    ] + ([f"undecided on {undecided}"] if undecided else [])
    assert head["line"].startswith("run 2 against run 1, 3 matched cases (throughput B/A): ")
    assert [part.split(" (")[0] for part in head["line"].split(": ", 1)[1].split("; ")[0].split(", ")] == said
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
    assert list(a_line.get_xdata()) == [1, 2, 4] and list(a_line.get_ydata()) == [
        c.metrics["throughput"].a for c in cases
    ]
    assert list(b_line.get_ydata()) == [c.metrics["throughput"].b for c in cases]
    assert thr.get_xscale() == "linear"  # 1..4 is not a sweep of decades
    lines = {ln.get_label(): ln for ln in ratio.get_lines()}
    assert list(lines["Throughput"].get_ydata()) == [c.metrics["throughput"].ratio for c in cases]
    assert any(abs(y - 1.0) < 1e-12 for ln in ratio.get_lines() for y in ln.get_ydata())  # the line at 1
    from matplotlib.colors import to_rgb

    from accelbench.report.compare_charts import RATIO_COLORS

    bands = [c for c in ratio.collections if tuple(c.get_facecolor()[0][:3]) == to_rgb(RATIO_COLORS[0])]
    assert len(bands) == 1  # the throughput interval, drawn in the throughput line's colour
    band = bands[0].get_paths()[0].vertices[:, 1]
    lows = [c.metrics["throughput"].ci_low for c in cases]
    assert len(lows) == 3 and all(lo is not None for lo in lows)
    assert all(any(abs(v - lo) < 1e-9 for v in band) for lo in lows)
    from accelbench.report.plots import pyplot

    pyplot().close(fig)
    items = comparison_charts(comparison)
    assert len(items) == 1 and items[0]["svg"].startswith("<svg") and items[0]["natural"]


def _rows(sizes, values, **fields):
    return [
        {"status": "ok", "model": "m", "precision": "fp32", "mode": "eager", "batch_size": b, "y": v, **fields}
        for b, v in zip(sizes, values)
    ]


def test_batch_charts_show_every_batch():
    from accelbench.report.charts import batch_chart, batch_figure
    from accelbench.report.plots import pyplot

    # batch 1 to 1024, latency from 2 ms to 900 ms: log x and log y, so batch 1 does not sit on the axis
    fig = batch_figure(
        _rows([1, 8, 64, 1024], [2.0, 9.0, 70.0, 900.0]), "y", "ms", "Latency p50", context="m on NVIDIA H200, run 3"
    )
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert "m on NVIDIA H200, run 3" in ax.get_title()
    pyplot().close(fig)
    fig = batch_figure(_rows([1, 2, 4], [100.0, 120.0, 130.0]), "y", "ms", "t")  # within a decade: linear
    assert (fig.axes[0].get_xscale(), fig.axes[0].get_yscale()) == ("linear", "linear")
    pyplot().close(fig)
    assert batch_chart(_rows([8], [1.0]), "y", "ms", "t") is None  # one batch size: a table row, not a chart
    two = _rows([8], [1.0], mode="compile") + _rows([1, 8], [1.0, 2.0])
    fig = batch_figure(two, "y", "ms", "t")
    assert [ln.get_label() for ln in fig.axes[0].get_lines()] == ["m fp32 eager"]  # the single point left out
    pyplot().close(fig)


def test_roofline_legend_leaves_no_blank_band():
    from accelbench.ceilings.measure import Ceilings
    from accelbench.report.plots import pyplot
    from accelbench.report.roofline import Point, figure

    ceil = Ceilings(
        device_name="NVIDIA H200",
        matmul_flops_per_s={"fp32": 5.1e13, "bf16": 8.1e14},
        dram_bytes_per_s=4.25e12,
        datasheet_flops_per_s={"bf16": 9.895e14},
        datasheet_dram_bytes_per_s=4.8e12,
    )
    pts = [Point(label=f"decode bs={2**i}", intensity=2.0**i, flops_per_s=1e11 * 2**i) for i in range(10)]
    fig = figure(ceil, pts, "Roofline: m on NVIDIA H200, run 1")
    fig.canvas.draw()
    box = fig.axes[0].get_position()  # figure fractions
    legend = fig.legends[0].get_window_extent().transformed(fig.transFigure.inverted())
    assert box.x1 > 0.9 and box.x0 < 0.15  # the axes span the width: no blank band beside them
    assert legend.y1 <= box.y0 + 1e-6  # the legend sits below the axes
    pyplot().close(fig)


def test_pareto_chart_names_model_device_run_and_objective():
    from accelbench.report.tune import front_title

    trials = [{"model": "resnet50", "device_name": "NVIDIA H200", "run_id": 4, "status": "ok"}]
    title = front_title(trials, "cost")
    assert "objective cost" in title and "resnet50 on NVIDIA H200 (run 4)" in title


def test_latency_histograms_plot_numpys_bin_counts(pair, pair_report):
    from accelbench.report.distributions import case_latencies, histogram_figure
    from accelbench.report.plots import pyplot

    st = Store(pair)
    cases, shared = case_latencies(st, st.records(1))
    # a panel names what differs between the cases; what they share is said once, in the grid's title
    assert [label for label, _ in cases] == ["bs=1", "bs=2", "bs=4"] and shared == "fp32 eager"
    fig = histogram_figure(cases, "t")
    for ax, (label, values) in zip(fig.axes, cases):
        v = np.asarray(values, dtype=float)
        assert v.size >= 5
        edges = np.histogram_bin_edges(v, bins="auto")
        edges = edges if len(edges) <= 21 else np.histogram_bin_edges(v, bins=20)
        counts, _ = np.histogram(v, bins=edges)
        plotted = ax.patches[0].get_data()
        assert plotted.values.tolist() == counts.tolist() and np.allclose(plotted.edges, edges), label
        assert plotted.values.sum() == v.size  # every stored batch latency is in a bin
    pyplot().close(fig)
    assert pair_report[0].read_text().count("<h3>Latency distributions</h3>") == 2  # one per run


def test_printed_report_keeps_every_column_of_the_widest_table(pair, tmp_path):
    """Headless Chromium prints the report to PDF: every header of the widest table is in the PDF's text (a table
    that scrolled inside its card lost its right-hand columns on paper)."""
    import re
    import shutil
    import subprocess

    pypdf = pytest.importorskip("pypdf", reason="pypdf is not installed (pip install 'accelbench[test]')")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if not binary:
        pytest.skip("chromium not found (Debian: apt-get install chromium)")
    html, pdf = tmp_path / "r.html", tmp_path / "r.pdf"
    doc = api.report(Store(pair), ["1", "2"], html=html)
    tables = [b for s in doc["sections"] for b in s["blocks"] if b["type"] == "table"]
    widest = max(tables, key=lambda b: len(b["headers"]))
    assert len(widest["headers"]) > 12  # wider than one column group
    subprocess.run(
        [
            binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-pdf-header-footer",
            f"--print-to-pdf={pdf}",
            html.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )
    text = re.sub(r"\s+", "", "".join(page.extract_text() for page in pypdf.PdfReader(pdf).pages))
    missing = [h for h in widest["headers"] if re.sub(r"\s+", "", h) not in text]
    assert not missing, missing
    assert "Latencyp50B/A(95%CI)" in text and "Verdict" in text  # the comparison's columns past the first screen

"""accelbench report: one self-contained HTML file (and markdown) over a store holding an inference, a training,
a convergence and a profile run (tiny CPU runs), escaping, and a real headless Chromium opening the file."""

import re
import shutil
import time
from pathlib import Path

import pytest
from conftest import run_cli

from accelbench import api
from accelbench.store import Store

TINY = {"device": "cpu", "idle_s": 0, "telemetry_period_ms": 0}
EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    db = tmp_path_factory.mktemp("report") / "all.db"
    st = Store(db)
    try:
        for _ in range(2):  # two inference runs of the same sweep: the report compares them
            api.run(
                api.spec(
                    "inference",
                    {**TINY, "model": "cifar-resnet20", "batch_sizes": "2,4", "images": 8, "repeats": 5},
                    cuda=False,
                ),
                st,
            )
        api.train(
            api.spec(
                "train_step",
                {**TINY, "model": "cifar-resnet20", "batch_sizes": "4", "images": 8, "repeats": 2},
                cuda=False,
            ),
            st,
        )
        api.train(
            api.spec(
                "converge",
                {
                    **TINY,
                    "model": "cifar-resnet20",
                    "batch_sizes": "32",
                    "epochs": 2,
                    "images": 64,
                    "eval_images": 50,
                    "warmup_epochs": 0,
                    "checkpoint_dir": str(db.parent / "ck"),
                },
                cuda=False,
            ),
            st,
        )
        api.profile(
            api.spec(
                "profile",
                {**TINY, "model": "helpers:tiny_conv_net", "batch_size": 2, "ncu": "off", "timed_steps": 2},
                cuda=False,
            ),
            st,
        )
        run = st.begin_run(
            "inference", {"scenario": "inference", "models": [EVIL]}, "h", {"device_name": "<b>host</b>", "host": EVIL}
        )
        st.add_case(
            run,
            {
                "case_key": "evil",
                "workload": "inference",
                "status": "error",
                "model": EVIL,
                "batch_size": 1,
                "precision": "fp32",
                "mode": "eager",
                "error": f"RuntimeError: {EVIL}",
            },
        )
        st.finish_run(run, "complete")
    finally:
        torch.set_num_threads(threads)
    return db


@pytest.fixture(scope="module")
def report_files(store_path):
    html, md = store_path.parent / "report.html", store_path.parent / "report.md"
    t0 = time.perf_counter()
    p = run_cli("report", "--db", str(store_path), "--html", str(html), "--markdown", str(md), check=True)
    return html, md, time.perf_counter() - t0, p


def test_report_holds_every_kind_and_the_comparison(report_files):
    html, md, seconds, p = report_files
    text = html.read_text()
    assert "wrote" in p.stdout and seconds < 60
    for needle in (
        "Run 1: inference",
        "Run 3: training",
        "Run 4: convergence",
        "Run 5: profile",
        "Throughput 95% CI",
        "Time to accuracy per batch size",
        "Accuracy per epoch",
        "Profiled steps",
        "Roofline",
        "Git commit",
        "Utilisation, power, energy and cost",
        "<svg",
        "data:image/png;base64,",
    ):
        assert needle in text, needle
    assert "Comparison" not in text  # several runs: a comparison only when asked for
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)  # nothing fetched from the network
    assert "| Model |" in md.read_text() and "Charts (Throughput" in md.read_text()


def test_two_runs_are_compared_in_the_report(store_path, tmp_path):
    out = tmp_path / "two.html"
    run_cli("report", "--db", str(store_path), "--run", "1", "--run", "2", "--html", str(out), check=True)
    text = out.read_text()
    assert "Comparison: run 2 (B) against run 1 (A)" in text
    assert re.search(r"within noise|faster|slower", text) and "B/A (95% CI)" in text


def test_runs_of_two_stores_in_one_report(store_path, tmp_path):
    """Runs measured on two machines live in two stores: ``--run PATH:ID`` puts them in one report, compared."""
    other = tmp_path / "other.db"
    shutil.copy(store_path, other)
    out = tmp_path / "both.html"
    run_cli("report", "--db", str(store_path), "--run", "1", "--run", f"{other}:2", "--html", str(out), check=True)
    text = out.read_text()
    assert f"accelbench report: run 1, {other}:2" in text
    # two stores: each section names its store, so two runs with one id are told apart
    assert f"Run 1 ({store_path.parent.name}/{store_path.name}): inference" in text
    assert (
        f"Run 2 ({tmp_path.name}/other.db): inference" in text
        and f"Comparison: {other}:2 (B) against run 1 (A)" in text
    )
    p = run_cli("report", "--db", str(store_path), "--run", f"{tmp_path}/missing.db:1", "--html", str(out))
    assert p.returncode == 2 and "no results store at" in p.stderr


def test_user_strings_are_escaped(report_files):
    html, md, _, _ = report_files
    text, mdtext = html.read_text(), md.read_text()
    assert EVIL not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "<b>host</b>" not in text and "&lt;b&gt;host&lt;/b&gt;" in text
    assert EVIL not in mdtext and "&lt;script&gt;alert(1)&lt;/script&gt;" in mdtext


def test_bad_report_input_is_one_line(store_path, tmp_path):
    p = run_cli("report", "--db", str(store_path), "--run", "99", "--html", str(tmp_path / "x.html"))
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 2 and len(lines) == 1 and "no run 99" in lines[0]
    p = run_cli("report", "--db", str(store_path))
    assert p.returncode == 2 and "give --html FILE and/or --markdown FILE" in p.stderr


def _chromium():
    """A headless Chromium driven by selenium, or a skip naming what is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip install 'accelbench[test]')")
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not binary or not driver:
        pytest.skip("chromium / chromedriver not found (Debian: apt-get install chromium chromium-driver)")
    opts = Options()
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1800",
    ):
        opts.add_argument(arg)
    opts.binary_location = binary
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


def test_the_report_renders_in_a_real_browser(report_files, tmp_path):
    from PIL import Image

    html = report_files[0]
    drv = _chromium()
    try:
        drv.get(Path(html).resolve().as_uri())
        severe = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
        images = drv.execute_script("return [...document.images].map(i => [i.complete, i.naturalWidth])")
        assert images and all(done and width > 0 for done, width in images), images
        boxes = drv.execute_script(
            "return [...document.querySelectorAll('svg')].map(s => {"
            "const r = s.getBoundingClientRect(); return [r.width, r.height]; })"
        )
        assert len(boxes) >= 5 and all(w > 0 and h > 0 for w, h in boxes), boxes
        assert drv.execute_script("return document.querySelectorAll('script').length") == 0  # the evil model is text
        shot = tmp_path / "report.png"
        drv.save_screenshot(str(shot))
    finally:
        drv.quit()
    im = Image.open(shot).convert("RGB")
    small = im.resize((200, 200))
    colours = len(set(small.getdata()))
    non_white = sum(1 for px in small.getdata() if sum(px) < 720) / (200 * 200)
    # A blank page is one colour (the background counts as white); the header bar alone is ~3 % of the shot.
    assert im.size[0] >= 1000 and colours > 50 and non_white > 0.08, (colours, non_white)
    shutil.copy(shot, Path(html).with_suffix(".png"))  # beside the report, to look at


def test_serve_runs_of_one_store_share_axes_in_the_report(tmp_path):
    """Two engines' serve runs (the committed H200 study's llama.cpp and transformers serve exports, imported): the
    report puts them on shared axes, a line a run, beside each run's own section."""
    from accelbench.report.document import build

    results = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "serve-engines"
    store = Store(tmp_path / "engines.db")
    for name in ("h200-llamacpp-1b.json.gz", "h200-transformers-1b.json.gz"):
        api.import_run(store, results / name)
    doc = build(store)
    (shared,) = [s for s in doc["sections"] if s["id"].startswith("serve-engines")]
    assert "llama.cpp hf:llama-3.2-1b" in shared["title"] and "transformers hf:llama-3.2-1b" in shared["title"]
    (charts,) = shared["blocks"]
    items = charts["items"]
    assert [item["title"] for item in items] == [
        "Throughput against TPOT p50",
        "Energy per output token against the load",
    ]
    assert items and all(item["svg"].count("<path") > 2 for item in items)
    assert len(doc["sections"]) == 3  # the two runs' own sections stay

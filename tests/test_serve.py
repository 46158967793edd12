"""accelbench serve end to end against one real ``transformers serve`` of the bundled model (the module's server,
:func:`serve_server.served`): load levels stored as rows with their latencies, the SLO search's probes and its
answer, the faults a user meets (an unreachable URL, a launch that exits or never answers), and the built-in launch
whose server dies between levels (the finished level stored, the run interrupted, the process group gone)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from conftest import run_cli
from serve_server import free_port, served, server_process, write_stub  # noqa: F401  (the module's server fixtures)

from accelbench.core import kinds
from accelbench.scenarios.serve.search import bisect_load
from accelbench.store import Store

pytestmark = pytest.mark.usefixtures("server_process")  # the server loads while the tests without it run
SERVER_PRELOADS = False  # the module's transformers serve is started as a user starts it: no model, no hub cache
FAST = ["--device", "cpu", "--idle-s", "0", "--warmup-requests", "0", "--telemetry-period-ms", "50"]


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (a killed orphan may stay a zombie until init reaps it)."""
    import psutil

    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error):
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                return True
    return False


def _last_run(store: Store) -> int:
    return max(r["run_id"] for r in store.runs())


def _rows(db, workload: str = kinds.SERVE) -> list[dict]:
    store = Store(db)
    return store.records(_last_run(store), workload=workload)


def test_the_search_bisects_to_the_boundary():
    limit = 5.3
    found = bisect_load(lambda x: (x <= limit, x), 1, 16, steps=6, integer=True)
    assert [x for x, _ in found.probes] == [16, 1, 8, 4, 6, 5]  # stops when no integer lies between 5 and 6
    assert found.best == 5 and found.lowest_missed == 6
    rates = bisect_load(lambda x: (x <= limit, x), 1.0, 9.0, steps=3)
    assert [x for x, _ in rates.probes] == [9.0, 1.0, 5.0, 7.0, 6.0] and rates.best == 5.0
    assert bisect_load(lambda x: (True, x), 1, 8).probes == [(8, True)]


def test_a_client_limited_level_is_flagged_with_its_worst_delay():
    from accelbench.core.validity import assess
    from accelbench.report.notes import _flags

    row = assess({"client_limited": True, "send_slip_p99_ms": 25.25, "loop_lag_p99_ms": 3.0}, "none")
    assert (
        row["validity"] == "client-limited" and "send slip p99 25.2 ms, loop lag p99 3.0 ms" in row["validity_reason"]
    )
    assert _flags(row)[0][1] == "25.2"  # the note under the table shows the worst delay
    assert assess({"client_limited": False}, "none")["validity"] == "ok"


@pytest.mark.parametrize(
    "args, words",
    [
        ((), "--url URL, --launch COMMAND or --engine llama.cpp|transformers"),
        (("--url", "http://x", "--concurrency", "1", "--request-rate", "2"), "one kind of load a run"),
        (("--url", "http://x", "--slo-search"), "missing slo: allowed an objective to search against"),
        (("--url", "http://x", "--request-rate", "0"), "invalid request_rate 0.0: allowed request rates > 0"),
        (
            ("--url", "http://x", "-m", "hf:tiny-shakespeare", "--input-len", "500", "--output-len", "64"),
            "invalid output_len 64: allowed at most 12 after a 500-token prompt: hf:tiny-shakespeare's maximum context",
        ),
        (("--url", "http://x", "-m", "hf:tiny-shakespeare", "--input-len", "5000"), "invalid input_len 5000"),
        (("--url", "http://x", "--slo", "ttft=3"), "invalid slo"),
        (("--engine", "transformers"), "one model for --engine transformers"),
        (("--url", "http://x", "--ceiling", "vllm"), "an in-process engine (hf-generate, static-cache"),
        (("--engine", "vllm", "-m", "hf:tiny-shakespeare"), "invalid engine 'vllm': allowed llama.cpp, transformers"),
        (
            ("--url", "http://x", "--served-precision", "int4"),
            "invalid served_precision 'int4': allowed bf16, fp32, q8_0",
        ),
        (
            ("--url", "http://x", "--server-bin", "/x"),
            "invalid server_bin '/x': allowed nothing without --engine llama.cpp",
        ),
        (
            ("--engine", "transformers", "-m", "hf:tiny-shakespeare", "--served-precision", "q8_0"),
            "invalid served_precision 'q8_0': allowed one of bf16, fp32 for transformers",
        ),
    ],
)
def test_a_settings_mistake_is_one_line_before_anything_runs(db, args, words):
    p = run_cli("serve", *args, "--db", str(db), *FAST)
    assert p.returncode == 2 and words in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not db.exists()


def test_an_architecture_is_served_from_a_random_checkpoint_written_once(tmp_path, monkeypatch):
    from accelbench.backends.servers.transformers import checkpoint_folder, transformers_command
    from accelbench.models import hf

    tiny = hf.Architecture(
        config_class="LlamaConfig",
        values=dict(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2),
    )
    monkeypatch.setitem(hf.ARCHITECTURES, "tiny-test", tiny)
    folder = checkpoint_folder("hf:tiny-test", tmp_path, "float32")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {f.name for f in folder.iterdir()}
    written = (folder / "model.safetensors").stat().st_mtime_ns
    assert checkpoint_folder("hf:tiny-test", tmp_path, "float32") == folder  # the second launch reuses it
    assert (folder / "model.safetensors").stat().st_mtime_ns == written
    bundled = checkpoint_folder("hf:tiny-shakespeare", tmp_path, "float32")
    assert bundled == hf.BUNDLED / "tiny-shakespeare"  # served as it is
    command = transformers_command(folder, 8123, "cpu", continuous_batching=True)
    assert command.startswith("exec ") and " serve " in command and str(folder) in command
    assert "--port 8123" in command and "--device cpu" in command and command.endswith("--continuous-batching")


def test_an_unreachable_url_is_one_line_before_anything_is_stored(db):
    p = run_cli("serve", "--url", f"http://127.0.0.1:{free_port()}", "--db", str(db), *FAST)
    assert p.returncode == 2
    assert p.stderr.startswith("error:") and len(p.stderr.strip().splitlines()) == 1 and "cannot reach" in p.stderr
    assert not db.exists()


def test_a_launch_that_exits_is_exit_2_with_its_log_tail(db):
    p = run_cli("serve", "--launch", "echo no-such-model-here; exit 3", "--db", str(db), *FAST)
    assert p.returncode == 2
    assert "exited with code 3" in p.stderr and "no-such-model-here" in p.stderr


def test_a_launch_that_never_answers_is_stopped_with_its_whole_group(db, tmp_path):
    pidfile = tmp_path / "pid"
    command = f"echo $$ > {pidfile}; sleep 60 & sleep 60"  # the shell and a child of it: one process group
    p = run_cli("serve", "--launch", command, "--launch-timeout-s", "2", "--db", str(db), *FAST)
    assert p.returncode == 2 and "did not answer" in p.stderr and "within 2 s" in p.stderr
    assert not _group_alive(int(pidfile.read_text()))


def test_a_server_started_without_a_model_is_measured_for_the_folder_given_to_m(served, db):  # noqa: F811
    """``transformers serve`` started with no model lists none until a request names one (transformers 5.17 with no
    hub cache answers its /v1/models HTTP 500): ``-m FOLDER`` (no ``hf:``) is accelbench's model and the id requests
    name, the server checked by one short completion (the first request here; tests/test_serve_faults.py has a server
    that never lists one); the folder's in-process ceiling is taken."""
    url, model = served
    args = ["--url", url, "-m", model, "--concurrency", "1", "--requests", "2", "--ceiling", "static-cache"]
    p = run_cli("serve", *args, "--db", str(db), *FAST)
    assert p.returncode == 0, p.stderr
    (row,) = _rows(db)
    assert row["model"] == f"hf:{model}" and row["served_model"] == model and row["server_engine"] == "transformers"
    assert row["ceiling_batch"] == 1 and row["ceiling_tpot_p50_ms"] > 0, row.get("ceiling_note")  # the folder's
    assert row["status"] == "ok" and row["requests_ok"] == 2 and row["output_tokens_mismatch"] == 0
    env = Store(db).run(row["run_id"])["env"]
    assert env["served_model"] == model and env["server_models"].startswith("HTTP 200, ")


def test_two_concurrency_levels_store_two_rows_with_their_latencies(served, db):  # noqa: F811
    url, model = served
    p = run_cli(
        *("serve", "--url", url, "--served-model-name", model, "--concurrency", "1,2", "--requests", "4"),
        *("--output-len", "8", "--db", str(db), *FAST),
    )
    assert p.returncode == 0, p.stderr
    rows = _rows(db)
    assert [r["concurrency"] for r in rows] == [1, 2]
    for r in rows:
        assert r["status"] == "ok" and r["requests_ok"] == 4 and r["requests_failed"] == 0
        assert r["served_model"] == model and r["server_engine"] == "transformers"
        assert r["output_tokens_timed"] == 4 * 8 and r["output_tokens_mismatch"] == 0  # the length asked is served
        assert 0 < r["ttft_p50_ms"] <= r["e2e_latency_p50_ms"] and r["ttft_mean_ms"] <= r["e2e_latency_mean_ms"]
        assert r["tpot_p50_ms"] > 0 and r["itl_p99_ms"] >= r["itl_p50_ms"] > 0
        assert r["output_tokens_per_s"] == pytest.approx(r["output_tokens_timed"] / r["measured_wall_s"])
        assert r["cost_per_1000_samples_usd"] > 0  # a sample of a serve row is an output token
        store = Store(db)
        assert len(store.series(r["case_id"], "ttft_ms")) == 4 and len(store.series(r["case_id"], "itl_ms")) == 4 * 7


def test_compare_of_two_serve_runs_gives_a_verdict_per_level(served, db):  # noqa: F811
    """Two runs of the same levels: ``compare`` matches them level by level, over the levels' five request groups
    (batch means) with bootstrap intervals, and gives each metric a verdict."""
    url, model = served
    for name in ("a", "b"):
        args = ["--url", url, "--served-model-name", model, "--concurrency", "1,2", "--requests", "10"]
        args += ["--output-len", "8", "--name", name]
        p = run_cli("serve", *args, "--db", str(db), *FAST)
        assert p.returncode == 0, p.stderr
    p = run_cli("compare", "--baseline", "a", "--db", str(db))
    assert p.returncode == 0, p.stderr
    assert "2 matched cases" in p.stdout and "concurrency=1" in p.stdout and "concurrency=2" in p.stdout
    lines = [line for line in p.stdout.splitlines() if "Output tok/s" in line]
    assert len(lines) == 2 and all("5/5" in line and ".." in line for line in lines)
    verdicts = ("faster", "slower", "within noise", "equivalent")
    assert all(any(v in line for v in verdicts) for line in lines)
    for metric in ("TPOT p50", "TTFT p50"):  # each level's decode and prefill latency under its throughput
        assert len([line for line in p.stdout.splitlines() if metric in line and ".." in line]) == 2, p.stdout


def test_a_request_rate_is_one_open_loop_level(served, db):  # noqa: F811
    url, model = served
    p = run_cli(
        *("serve", "--url", url, "--served-model-name", model, "--request-rate", "50", "--requests", "3"),
        *("--output-len", "4", "--db", str(db), *FAST),
    )
    assert p.returncode == 0, p.stderr
    (row,) = _rows(db)
    assert row["request_rate_per_s"] == 50 and row["arrival"] == "poisson" and row.get("concurrency") is None
    assert row["requests_ok"] == 3 and row["send_slip_p50_ms"] is not None


def test_the_slo_search_stores_each_probe_and_its_answer(served, db):  # noqa: F811
    url, model = served
    common = [
        "--url",
        url,
        "--served-model-name",
        model,
        "--concurrency",
        "1,2",
        "--requests",
        "2",
        "--output-len",
        "4",
        "--slo-search",
        *FAST,
    ]
    # an objective no level can meet: the upper bound, then the lower, both missed: no answer
    p = run_cli("serve", *common, "--slo", "ttft_ms=0.001,tpot_ms=0.001", "--db", str(db))
    assert p.returncode == 0, p.stderr
    probes = _rows(db, kinds.SERVE_PROBE)
    assert [(r["concurrency"], bool(r["slo_met"])) for r in probes] == [(2, False), (1, False)]
    (answer,) = _rows(db)
    assert answer.get("slo_max_concurrency") is None and not answer["slo_met"] and answer["slo_search_probes"] == 2
    assert "no concurrency searched meets it" in p.stdout + p.stderr
    # one every level meets: the upper bound is the answer after one probe
    p = run_cli("serve", *common, "--slo", "ttft_ms=600000,tpot_ms=600000", "--db", str(db))
    assert p.returncode == 0, p.stderr
    (answer,) = _rows(db)
    assert answer["slo_max_concurrency"] == 2 and answer["slo_met"] and answer["slo_search_probes"] == 1
    assert "the highest concurrency meeting it is 2" in p.stdout + p.stderr


def test_a_run_whose_server_dies_resumes_with_the_server_started_again(db, tmp_path):
    import sys

    stub = write_stub(tmp_path)
    tokenizer = str(Path(__file__).resolve().parents[1] / "src/accelbench/assets/llm/tiny-shakespeare")
    args = ["serve", "--launch", f"{sys.executable} {stub} {{port}} ok 6", "--tokenizer", tokenizer]
    args += ["--concurrency", "1,2", "--requests", "4", "--output-len", "4", "--db", str(db), *FAST]
    first = run_cli(*args)  # 4 requests answered, then the server exits during the second level
    assert first.returncode == 130 and "server" in first.stderr, first.stderr
    store = Store(db)
    run_id = _last_run(store)
    assert store.run(run_id)["status"] == "interrupted"
    assert [r["concurrency"] for r in store.records(run_id)] == [1]
    again = run_cli(*args, "--resume")  # the same run, its server launched again: the second level only
    assert again.returncode == 0, again.stderr
    assert _last_run(store) == run_id and store.run(run_id)["status"] == "complete"
    rows = store.records(run_id)
    assert [r["concurrency"] for r in rows] == [1, 2] and all(r["requests_ok"] == 4 for r in rows)
    assert {r["served_model"] for r in rows} == {"stub"} and rows[1]["server_engine"] == "openai"
    # the server's /metrics scraped around each level: its counter rose by the level's requests
    assert [r["server_metrics_json"]["stub_completions_total"] for r in rows] == [4, 4]
    running = store.series(rows[1]["case_id"], "server_vllm_num_requests_running")  # its gauge, a scrape each
    assert len(running) == len(store.series(rows[1]["case_id"], "server_t_s")) >= 2
    assert running[0] == running[-1] == 0 and max(running) <= 2  # idle before and after; at most 2 at c=2
    assert 0 <= rows[1]["server_metrics_json"]["vllm:num_requests_running"] <= 2
    from accelbench.report.serve import server_timeline_figure

    assert server_timeline_figure(store, rows) is not None


def test_the_built_in_launch_whose_server_dies_between_levels_stores_the_finished_level(db):
    """The bundled model served by ``--engine transformers``; once the first level's row is stored its server's
    process group is killed: that level stays stored, the run is interrupted (exit 130), no server is left."""
    killed: list[int] = []

    def kill_after_first_row() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not killed:
            if db.exists():
                store = Store(db)
                if store.runs() and store.records(_last_run(store)):
                    pid = store.run(_last_run(store))["env"]["server_pid"]
                    os.killpg(pid, signal.SIGKILL)
                    killed.append(pid)
                    return
            time.sleep(0.05)  # a poll interval of the store, not a wait for a state

    watcher = threading.Thread(target=kill_after_first_row, daemon=True)
    watcher.start()
    p = run_cli(
        "serve",
        *("--engine", "transformers", "-m", "hf:tiny-shakespeare", "--concurrency", "1,2,3"),
        *("--requests", "4", "--output-len", "8", "--db", str(db), *FAST),
        env={"OMP_NUM_THREADS": "1"},  # the launched server's: one intra-op thread serves the tiny model fastest
    )
    watcher.join(timeout=5)
    assert killed, p.stderr
    assert p.returncode == 130, p.stderr
    store = Store(db)
    run = store.run(_last_run(store))
    assert run["status"] == "interrupted" and "transformers serve" in run["env"]["server_command"]
    assert run["env"]["server_version"] == importlib.metadata.version("transformers")  # the built-in launch's own
    rows = store.records(run["run_id"])
    assert rows and rows[0]["concurrency"] == 1 and rows[0]["status"] == "ok" and len(rows) < 3
    assert "server stopped" in p.stderr or "server exited" in p.stderr
    assert not _group_alive(killed[0])


# the bundled model's weights as a decode step reads them in fp32 (the served precision on a CPU), by hand from its
# config.json: hidden 192, 4 layers of q, o (192 x 192), k, v (192 x 2 x 48), gate/up/down (3 x 192 x 512) and two
# norms (192), the final norm (192), the tied LM head (1024 x 192, the embedding table counted once, as the head)
TINY_WEIGHT_BYTES = 4 * (4 * (2 * 192 * 192 + 2 * 192 * 96 + 3 * 192 * 512 + 2 * 192) + 192 + 1024 * 192)
TINY_KV_BYTES_PER_TOKEN = 2 * 4 * 2 * 48 * 4  # keys and values x layers x kv heads x head dim x fp32


@pytest.fixture(scope="module")
def ceiling_rows(served, tmp_path_factory):  # noqa: F811
    """Two closed-loop levels of the module's server, -m hf:tiny-shakespeare, with the static-cache ceiling."""
    url, _ = served
    db = tmp_path_factory.mktemp("ceiling") / "ceiling.db"
    args = ["--url", url, "-m", "hf:tiny-shakespeare", "--concurrency", "1,2", "--requests", "4", "--output-len", "8"]
    p = run_cli(
        "serve", *args, "--ceiling", "static-cache", "--slo", "ttft_ms=600000,tpot_ms=600000", "--db", str(db), *FAST
    )
    assert p.returncode == 0, p.stderr
    return _rows(db)


def test_each_level_has_the_in_process_ceiling_at_its_batch(ceiling_rows):
    assert [r["concurrency"] for r in ceiling_rows] == [1, 2]
    for r in ceiling_rows:
        assert r["ceiling_mode"] == "static-cache" and r["ceiling_batch"] == r["concurrency"], r.get("ceiling_note")
        assert r["ceiling_tpot_p50_ms"] > 0 and r["ceiling_output_tokens_per_s"] > 0
        assert r["engine_share_of_ceiling"] == pytest.approx(
            r["output_tokens_per_s"] / r["ceiling_output_tokens_per_s"], rel=1e-12
        )


def test_the_served_decodes_mbu_is_its_step_bytes_over_tpot_over_the_bandwidth(ceiling_rows):
    r = ceiling_rows[-1]
    assert r["weight_bytes"] == TINY_WEIGHT_BYTES and r["kv_bytes_per_token"] == TINY_KV_BYTES_PER_TOKEN
    assert 0 < r["mean_decode_batch"] <= r["mean_in_flight_requests"] <= 2
    prompt = r["input_tokens_per_s"] * r["measured_wall_s"] / r["requests_ok"]  # mean prompt tokens
    output = r["output_tokens_timed"] / r["requests_ok"]  # mean output tokens
    step_bytes = TINY_WEIGHT_BYTES + r["mean_decode_batch"] * TINY_KV_BYTES_PER_TOKEN * (prompt + output / 2)
    assert r["decode_step_bytes"] == pytest.approx(step_bytes, rel=1e-9)
    assert r["mbu"] == pytest.approx(step_bytes / (r["tpot_mean_ms"] / 1e3) / r["memory_bandwidth_bytes_per_s"])
    assert r.get("mbu_datasheet") is None  # a CPU has no datasheet bandwidth


def test_the_reports_reading_says_where_the_time_goes_and_what_the_device_could_do(ceiling_rows):
    from accelbench.report.serve import ceiling_figure, levels, reading

    lines = reading(ceiling_rows)
    best = max(ceiling_rows, key=lambda r: r["output_tokens_per_s"])
    load = f"concurrency {best['concurrency']}"
    assert lines and all(line.startswith("hf:tiny-shakespeare: ") for line in lines)
    (time_line,) = [x for x in lines if "Time: at " + load in x]
    assert f"TTFT is {100 * best['ttft_mean_ms'] / best['e2e_latency_mean_ms']:.1f} %" in time_line
    if best["concurrency"] != 1:
        assert "queueing adds" in time_line and "over the unloaded" in time_line
    (device,) = [x for x in lines if "Device at " + load in x]
    assert f"delivers {100 * best['engine_share_of_ceiling']:.1f} % of the" in device
    assert "MBU, mean decode batch" in device and f"{100 * best['mbu']:.1f} %" in device
    assert any(x.endswith("SLO ttft_ms=600000,tpot_ms=600000: met up to concurrency 2.") for x in lines)
    fig = ceiling_figure(levels(ceiling_rows))
    assert fig is not None and len(fig.axes[0].lines) == 2  # served and ceiling, one model

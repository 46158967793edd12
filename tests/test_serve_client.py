"""The serving client: its pure parts against hand computation (the arrival schedule, SLOs, chunk spreading, the
level's columns, SSE parsing, request bodies, workloads), then load levels against one real ``transformers serve``
of the bundled tiny model (module-scoped: :mod:`serve_server`)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from serve_server import MODEL_DIR, free_port, served, server_process  # noqa: F401  (the module's server fixtures)

from accelbench.backends.openai_api import (
    DONE,
    OpenAICompatible,
    RequestError,
    ServerError,
    ServerInfo,
    chunk_event,
    parse_sse_line,
)
from accelbench.core.errors import ConfigError
from accelbench.scenarios.serve import load, metrics, workloads
from accelbench.scenarios.serve.load import LevelResult, RequestResult, chunk_tokens, send_times, token_times

# the server loads from the module's first test on, while the tests that need none run
pytestmark = pytest.mark.usefixtures("server_process")

# --- the schedule --------------------------------------------------------------------------------------------------


def test_send_times_are_absolute_cumulative_gaps_of_the_seed():
    # numpy.random.default_rng(7): exponential gaps of mean 0.5 s, and gamma gaps of shape 0.5, scale 1/(2 x 0.5)
    assert send_times(4, 2.0, "poisson", 1.0, 7) == pytest.approx(
        [0.35376462789596075, 0.8663663020434133, 1.150640630735039, 1.5981955625326205], rel=1e-12
    )
    assert send_times(4, 2.0, "gamma", 0.5, 7) == pytest.approx(
        [0.41469522451592433, 1.2260997081939058, 1.3161995067913128, 1.316227230223481], rel=1e-12
    )
    assert send_times(4, 2.0, "poisson", 1.0, 7) == send_times(4, 2.0, "poisson", 1.0, 7)  # pure
    assert send_times(4, 2.0, "poisson", 1.0, 8) != send_times(4, 2.0, "poisson", 1.0, 7)
    assert send_times(3, float("inf")) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("arrival, burstiness", [("poisson", 1.0), ("gamma", 0.5), ("gamma", 4.0)])
def test_mean_gap_is_one_over_the_rate_and_burstiness_sets_the_spread(arrival, burstiness):
    times = send_times(2000, 8.0, arrival, burstiness, seed=3)
    gaps = np.diff([0.0, *times])
    assert len(gaps) == 2000 and np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(1 / 8.0, rel=0.08)
    # gamma of shape k: coefficient of variation 1/sqrt(k) (exponential: 1)
    cv = gaps.std() / gaps.mean()
    assert cv == pytest.approx(1 / np.sqrt(burstiness if arrival == "gamma" else 1.0), rel=0.1)


def test_a_bad_schedule_is_a_config_error():
    for kwargs in (
        {"rate": 0.0},
        {"rate": 1.0, "arrival": "uniform"},
        {"rate": 1.0, "arrival": "gamma", "burstiness": 0},
    ):
        with pytest.raises(ConfigError):
            send_times(3, **kwargs)


# --- SLOs ----------------------------------------------------------------------------------------------------------


def test_slo_presets_and_custom_text():
    assert metrics.parse_slo("mlperf-server") == metrics.Slo(2000.0, 100.0, 99.0)
    assert metrics.parse_slo("mlperf-interactive") == metrics.Slo(500.0, 30.0, 99.0)
    assert metrics.parse_slo("ttft_ms=250, tpot_ms=20") == metrics.Slo(250.0, 20.0, 99.0)
    assert metrics.parse_slo("tpot_ms=40,percentile=90") == metrics.Slo(None, 40.0, 90.0)
    for bad in ("", "fast", "ttft_ms=", "ttft_ms=-1", "ttft=3", "percentile=99", "ttft_ms=5,percentile=95", "x=1,y"):
        with pytest.raises(ConfigError, match="invalid slo"):
            metrics.parse_slo(bad)


# --- chunks, tokens and a level's columns by hand ----------------------------------------------------------------


def test_a_chunk_of_k_tokens_spreads_its_gap_over_k_tokens():
    assert chunk_tokens(8, 3) == [3, 3, 2]
    assert chunk_tokens(2, 4) == [1, 0, 1, 0]  # fewer tokens than chunks: token j in chunk j*4//2
    assert chunk_tokens(5, 2, hints=[1, 4]) == [1, 4] and chunk_tokens(5, 2, hints=[1, 1]) == [3, 2]
    assert token_times([0.1, 0.4], [1, 3]) == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert token_times([0.1, 0.4], [2, 1]) == pytest.approx([0.1, 0.1, 0.4])  # the first chunk's tokens arrive at once


def _result(i, scheduled, chunks, end, tokens, **kw):
    r = RequestResult(index=i, scheduled_s=scheduled, sent_s=scheduled, end_s=end, ok=True, prompt_tokens=10, **kw)
    r.first_token_s, r.output_tokens, r.usage_tokens = chunks[0][0], tokens, tokens
    r.token_times_s = token_times([t for t, _ in chunks], [k for _, k in chunks])
    return r


def _level(slip_p99_ms=1.0):
    rs = [
        _result(0, 0.0, [(0.1, 1), (0.15, 1), (0.2, 1), (0.3, 1)], 0.3, 4, output_len=4),
        _result(1, 0.5, [(0.7, 1), (1.0, 3)], 1.0, 4, output_len=4),  # a chunk of 3 tokens: 3 gaps of 100 ms
        RequestResult(index=2, scheduled_s=1.0, sent_s=1.0, end_s=1.25, error="http 422", prompt_tokens=10),
    ]
    rs[1].tokenizer_tokens = 5  # usage says 4: a mismatch, counted
    return LevelResult(rs, warmup=0, wall_s=1.25, started_at=0.0, loop_lag_p99_ms=2.0, send_slip_p50_ms=0.5,
                       send_slip_p99_ms=slip_p99_ms, client_cpu_percent=12.0)  # fmt: skip


def test_level_columns_by_hand():
    cols, series = metrics.level_columns(_level(), metrics.Slo(ttft_ms=150.0, tpot_ms=80.0))
    assert (cols["requests"], cols["requests_ok"], cols["requests_failed"]) == (3, 2, 1)
    assert json.loads(cols["errors_json"]) == {"http 422": 1}
    assert series["ttft_ms"] == pytest.approx([100.0, 200.0])
    assert series["e2e_latency_ms"] == pytest.approx([300.0, 500.0])
    assert series["tpot_ms"] == pytest.approx([(300 - 100) / 3, (500 - 200) / 3])
    assert series["itl_ms"] == pytest.approx([50, 50, 100, 100, 100, 100])
    assert cols["ttft_mean_ms"] == pytest.approx(150.0) and cols["ttft_p50_ms"] == pytest.approx(150.0)
    assert cols["ttft_p99_ms"] == pytest.approx(100 + 0.99 * 100)
    assert cols["itl_p50_ms"] == pytest.approx(100.0) and cols["itl_mean_ms"] == pytest.approx(500 / 6)
    window = 1.25  # the first scheduled send (0) to the last end
    assert cols["measured_wall_s"] == pytest.approx(window)
    assert cols["request_throughput_per_s"] == pytest.approx(2 / window)
    assert cols["output_tokens_per_s"] == pytest.approx(8 / window)
    assert cols["input_tokens_per_s"] == pytest.approx(20 / window)
    # request 0 meets 150 ms / 80 ms (100, 66.7); request 1 misses (200, 100); the failed one misses
    assert cols["goodput_requests_per_s"] == pytest.approx(1 / window)
    assert cols["slo_met_fraction"] == pytest.approx(1 / 3)
    assert cols["output_tokens_mismatch"] == 1 and cols["output_tokens_timed"] == 8
    assert cols["client_limited"] is False and cols["send_slip_p99_ms"] == 1.0
    assert metrics.level_columns(_level(slip_p99_ms=25.0), None)[0]["client_limited"] is True
    assert metrics.level_columns(_level(), None)[0]["goodput_requests_per_s"] is None


def test_meets_reads_the_slo_percentile_and_refuses_failures():
    cols, _ = metrics.level_columns(_level(), None)
    assert not metrics.meets(cols, metrics.Slo(1e6, 1e6))  # a failed request
    ok = {**cols, "requests_failed": 0}
    assert metrics.meets(ok, metrics.Slo(200.0, 100.0))
    assert not metrics.meets(ok, metrics.Slo(150.0, None))  # p99 TTFT 199 ms
    assert metrics.meets(ok, metrics.Slo(150.0, None, percentile=50.0))  # p50 TTFT 150 ms


def test_finish_counts_usage_and_tokenizer_and_spreads_chunks(tokenizer):
    st = load._Stream(times=[0.1, 0.3], texts=["\n", "I'll be"], tokens=[None, None], usage={"completion_tokens": 4})
    r = load.finish(RequestResult(index=0, scheduled_s=0.0, ok=True, output_len=4), st, tokenizer)
    assert (r.usage_tokens, r.tokenizer_tokens, r.output_tokens) == (4, 4, 4)
    assert r.token_times_s == pytest.approx([0.1, 0.1 + 0.2 / 3, 0.1 + 0.4 / 3, 0.3])  # "I'll be": 3 tokens
    empty = load.finish(RequestResult(index=1, scheduled_s=0.0, ok=True), load._Stream(), None)
    assert (empty.ok, empty.error) == (False, "no output")


# --- the protocol's pieces -------------------------------------------------------------------------------------------


def test_sse_lines_and_chunks():
    assert parse_sse_line('data: {"choices": [{"text": "a"}]}') == {"choices": [{"text": "a"}]}
    assert parse_sse_line("data: [DONE]") is DONE
    assert parse_sse_line("") is None and parse_sse_line(": keep-alive") is None and parse_sse_line("event: x") is None
    for bad in ("data: {not json", "data: [1, 2]", "<html>"):
        with pytest.raises(RequestError, match="malformed sse"):
            parse_sse_line(bad)
    ev = chunk_event({"choices": [{"delta": {"content": "hi"}, "finish_reason": None}]}, "chat")
    assert (ev.text, ev.usage) == ("hi", None)
    ev = chunk_event({"choices": [], "usage": {"completion_tokens": 3}}, "completions")
    assert (ev.text, ev.usage, ev.output) == ("", {"completion_tokens": 3}, False)
    # a generated token that decodes to no text is still output; a role announcement or a bare closing chunk is not
    assert chunk_event({"choices": [{"text": "", "finish_reason": None}]}, "completions").output
    assert chunk_event({"choices": [{"text": "a", "finish_reason": "length"}]}, "completions").output
    assert not chunk_event({"choices": [{"text": "", "finish_reason": "length"}]}, "completions").output
    assert not chunk_event({"choices": [{"delta": {"role": "assistant", "content": ""}}]}, "chat").output
    assert chunk_event({"choices": [{"delta": {"content": ""}, "finish_reason": None}]}, "chat").output
    with pytest.raises(RequestError, match="server error"):
        chunk_event({"error": {"message": "out of memory"}}, "completions")


@pytest.mark.parametrize(
    "kind, fixed",
    [
        ("transformers", {"generation_config": '{"min_new_tokens": 7, "max_new_tokens": 7}'}),
        ("vllm", {"ignore_eos": True, "min_tokens": 7, "stream_options": {"include_usage": True}}),
        ("sglang", {"ignore_eos": True, "min_tokens": 7, "stream_options": {"include_usage": True}}),
        (
            "llama.cpp",
            {
                "ignore_eos": True,
                "cache_prompt": False,
                "temperature": 0.0,
                "stream_options": {"include_usage": True},
                "logit_bias": [[5, False]],
            },
        ),
        ("openai", {"stream_options": {"include_usage": True}}),
    ],
)
def test_a_body_asks_a_fixed_length_in_its_servers_words(kind, fixed):
    """Each server kind's entry words the body; banned ids reach only a kind that must be told (llama.cpp)."""
    engine = OpenAICompatible("http://127.0.0.1:1/v1/", api="chat", banned_ids=(5,))
    engine.info = ServerInfo(base_url="", model="m", models=("m",), kind=kind, version=None, has_metrics=False)
    body = engine.body("hello", 7)
    assert body == {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello"}],
                    "max_tokens": 7, **fixed}  # fmt: skip
    assert engine.base_url == "http://127.0.0.1:1" and engine.path == "/v1/chat/completions"
    assert "max_tokens" not in engine.body("hello", None)


# --- workloads -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer():
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(str(MODEL_DIR))


def test_random_and_text_requests_are_seeded_with_their_lengths(tokenizer):
    a = workloads.make_requests("random", 4, tokenizer=tokenizer, input_len=12, output_len=(2, 5), seed=1)
    assert a == workloads.make_requests("random", 4, tokenizer=tokenizer, input_len=12, output_len=(2, 5), seed=1)
    assert len(a) == 4 and all(2 <= r.output_len <= 5 for r in a)
    assert all(r.prompt_tokens == len(tokenizer.encode(r.prompt, add_special_tokens=False)) for r in a)
    t = workloads.make_requests("text", 3, tokenizer=tokenizer, input_len=16, output_len=4, seed=0)
    assert len(t) == 3 and all(r.output_len == 4 and 12 <= r.prompt_tokens <= 20 for r in t)


def test_file_workloads_and_their_errors(tokenizer, tmp_path):
    conv = [{"conversations": [{"from": "human", "value": "Who art thou?"}, {"from": "gpt", "value": "A king."}]}]
    (tmp_path / "s.json").write_text(json.dumps(conv))
    (tmp_path / "p.jsonl").write_text('{"prompt": "O Romeo", "output_len": 3}\n\n{"prompt": "Speak"}\n')
    (tmp_path / "bad.jsonl").write_text('{"prompt": "ok"}\n{"text": "no prompt"}\n')
    s = workloads.make_requests("sharegpt", 2, tokenizer=tokenizer, seed=0, path=str(tmp_path / "s.json"))
    assert [r.prompt for r in s] == ["Who art thou?"] * 2
    assert s[0].output_len == len(tokenizer.encode("A king.", add_special_tokens=False))
    j = workloads.make_requests("jsonl", 2, tokenizer=tokenizer, seed=0, path=str(tmp_path / "p.jsonl"))
    assert sorted((r.prompt, r.output_len) for r in j) == [("O Romeo", 3), ("Speak", None)]
    fixed = workloads.make_requests(
        "jsonl", 2, tokenizer=tokenizer, output_len=6, seed=0, path=str(tmp_path / "p.jsonl")
    )
    assert [r.output_len for r in fixed] == [6, 6]
    with pytest.raises(ConfigError, match="bad.jsonl:2"):
        workloads.make_requests("jsonl", 1, tokenizer=tokenizer, seed=0, path=str(tmp_path / "bad.jsonl"))
    with pytest.raises(ConfigError, match="missing.json"):
        workloads.make_requests("sharegpt", 1, tokenizer=tokenizer, seed=0, path=str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match="dataset"):
        workloads.make_requests("hub", 1, tokenizer=tokenizer, seed=0)


# --- against a real server -----------------------------------------------------------------------------------------


def test_an_unreachable_url_is_one_line():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ServerError, match=f"cannot reach {url}") as err:
        OpenAICompatible(url).probe(timeout_s=2)
    assert "\n" not in str(err.value) and err.value.exit_code == 2


def test_a_server_that_is_not_openai_compatible_is_one_line(tmp_path):
    import functools
    import http.server
    import threading

    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as httpd:  # a file server: /v1/models is 404
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        try:
            with pytest.raises(ServerError, match=f"{url} is not an OpenAI-compatible server.*HTTP 404") as err:
                OpenAICompatible(url).probe(timeout_s=5)
        finally:
            httpd.shutdown()
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def engine(served):  # noqa: F811  (the fixture imported above)
    base_url, model = served
    e = OpenAICompatible(base_url, model)
    info = e.probe(timeout_s=10)
    assert (info.kind, info.model) == ("transformers", model) and model in info.models
    return e


def test_closed_loop_level_against_transformers_serve(engine, tokenizer):
    reqs = workloads.make_requests("text", 5, tokenizer=tokenizer, input_len=8, output_len=4, seed=0)
    before, t0 = time.time(), time.perf_counter()
    level = load.run_level(engine, reqs, concurrency=2, tokenizer=tokenizer)
    wall = time.perf_counter() - t0
    assert before <= level.started_at <= time.time() and level.wall_s <= wall
    assert len(level.results) == 5 and [r.index for r in level.results] == list(range(5))
    for r in level.results:
        assert r.ok, r.error
        assert (r.output_tokens, r.usage_tokens, r.tokenizer_tokens, len(r.token_times_s)) == (4, 4, 4, 4)
        ttft, e2e = r.first_token_s - r.scheduled_s, r.end_s - r.scheduled_s
        assert 0 < ttft <= e2e <= wall and r.scheduled_s <= r.sent_s <= r.first_token_s
        assert r.token_times_s == sorted(r.token_times_s) and r.token_times_s[0] == r.first_token_s
    in_flight = max(sum(a.sent_s <= b.sent_s < a.end_s for a in level.results) for b in level.results)
    assert in_flight == 2  # two workers: never more than two requests open
    cols, series = metrics.level_columns(level, metrics.parse_slo("ttft_ms=60000,tpot_ms=60000"))
    assert (cols["requests_ok"], cols["output_tokens_mismatch"], cols["output_tokens_timed"]) == (5, 0, 20)
    assert cols["goodput_requests_per_s"] == pytest.approx(cols["request_throughput_per_s"])
    assert len(series["itl_ms"]) == 5 * 3 and cols["client_cpu_percent"] > 0


def test_open_loop_level_sends_on_the_schedule(engine, tokenizer):
    reqs = workloads.make_requests("random", 3, tokenizer=tokenizer, input_len=6, output_len=2, seed=2)
    level = load.run_level(engine, reqs, request_rate=4.0, seed=5, tokenizer=tokenizer)
    assert [r.scheduled_s for r in level.results] == send_times(3, 4.0, "poisson", 1.0, 5)
    assert all(r.ok and r.output_tokens == 2 and r.sent_s >= r.scheduled_s for r in level.results)
    assert level.send_slip_p50_ms is not None and 0 <= level.send_slip_p50_ms <= level.send_slip_p99_ms


class _Rejected(OpenAICompatible):
    def body(self, prompt, output_len):
        return {**super().body(prompt, output_len), "no_such_field": 1}


def test_a_rejected_request_and_a_timeout_are_per_request_errors(engine, tokenizer):
    bad = _Rejected(engine.base_url, engine.model)
    bad.info = engine.info
    reqs = workloads.make_requests("random", 2, tokenizer=tokenizer, input_len=4, output_len=2, seed=0)
    level = load.run_level(bad, reqs, concurrency=1)
    assert [r.error for r in level.results] == ["http 422", "http 422"] and "no_such_field" in level.results[0].detail
    cols, _ = metrics.level_columns(level, metrics.parse_slo("mlperf-server"))
    assert json.loads(cols["errors_json"]) == {"http 422": 2} and cols["goodput_requests_per_s"] == 0
    late = load.run_level(engine, reqs[:1], concurrency=1, timeout_s=1e-4)
    assert (late.results[0].ok, late.results[0].error) == (False, "timeout")
    broken = _Broken(engine.base_url, engine.model)
    broken.info = engine.info
    r = load.run_level(broken, reqs[:1], concurrency=1).results[0]
    assert (r.ok, r.error, r.detail) == (False, "client error", "RuntimeError: a bug past the first chunk")


class _Broken(OpenAICompatible):
    async def stream(self, request):
        async for event in super().stream(request):
            yield event
            raise RuntimeError("a bug past the first chunk")


def test_pools_lend_at_most_their_connections_each():
    from accelbench.backends.openai_api import POOL_CONNECTIONS, _Pools

    made = []
    pools = _Pools(lambda: made.append(object()) or made[-1])
    lent = [pools.lend() for _ in range(POOL_CONNECTIONS + 1)]
    assert len(made) == 2 and lent.count(made[0]) == POOL_CONNECTIONS and lent[-1] is made[1]
    pools.give_back(lent[0])
    assert pools.lend() is made[1] and len(made) == 2  # a free connection of a pool made before: no new pool
    pools.reserve(3 * POOL_CONNECTIONS + 1)  # a level's concurrency: its pools made before its requests
    assert len(made) == 4


class _Interrupted(OpenAICompatible):
    """Ctrl-C once the first chunk of the level has arrived (a state, not a delay)."""

    chunks = 0

    async def stream(self, request):
        import os
        import signal

        async for event in super().stream(request):
            self.chunks += 1
            os.kill(os.getpid(), signal.SIGINT)
            yield event


def test_ctrl_c_cancels_the_requests_in_flight_and_re_raises(engine, tokenizer):
    import signal

    ctrl_c = _Interrupted(engine.base_url, engine.model)
    ctrl_c.info = engine.info
    reqs = workloads.make_requests("random", 4, tokenizer=tokenizer, input_len=4, output_len=64, seed=0)
    # Ctrl-C's handler as in a terminal: a test runner started in the background (``cmd &`` in a script) inherits
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler (signal_helpers.takes_ctrl_c)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            load.run_level(ctrl_c, reqs, concurrency=2)
    finally:
        signal.signal(signal.SIGINT, previous)
    # the requests stopped where they were (4 x 64 chunks had they run to their end) and the pools were closed
    assert 1 <= ctrl_c.chunks < 64 and ctrl_c._pools is None


def test_a_levels_requests_cut_into_batch_means_windows_in_completion_order():
    # ten requests, each 3 tokens, finishing every 0.5 s from t=1 (the level started at 0): 5 windows of 2 requests
    rs = [_result(i, 0.0, [(0.4 * i + 0.1, 1), (0.4 * i + 0.3, 2)], 1.0 + 0.5 * i, 3) for i in range(10)]
    w = metrics.request_windows(rs[::-1], 0.0)  # any order in: completion order out
    assert w is not None and len(w["window_wall_s"]) == 5
    assert w["window_wall_s"] == pytest.approx([1.5, 1.0, 1.0, 1.0, 1.0])  # first from the level's start
    assert w["window_samples"] == [6.0] * 5  # two requests of 3 tokens a window
    want = [(r.end_s - r.scheduled_s - (r.first_token_s - r.scheduled_s)) * 1e3 / 2 for r in rs]  # (E2E - TTFT)/(n-1)
    assert w["window_tpot_ms"] == pytest.approx(want)
    assert metrics.request_windows(rs[:9], 0.0) is None  # fewer than two requests a window


# --- the server's Prometheus metrics -----------------------------------------------------------------------------


def test_a_servers_metrics_are_gauge_means_and_counter_increases_over_the_window():
    """A real exposition (``prometheus_client.generate_latest`` of a registry the test moves) served over HTTP and
    scraped by hand, one scrape per state the test sets."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    from accelbench.scenarios.serve.scrape import Scraper, reduce

    registry = CollectorRegistry()
    running = Gauge("vllm:num_requests_running", "running", ["model_name"], registry=registry)
    tokens = Counter("vllm:generation_tokens", "tokens", ["model_name"], registry=registry)
    ttft = Histogram("vllm:time_to_first_token_seconds", "ttft", registry=registry)

    class Metrics(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = generate_latest(registry)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        scraper = Scraper(f"http://127.0.0.1:{server.server_address[1]}", period=3600.0)  # no tick: scrapes by hand
        running.labels("m").set(2)
        tokens.labels("m").inc(10)
        with scraper:  # a scrape before: running 2, 10 tokens so far
            for value, more in ((4, 5), (9, 20)):
                running.labels("m").set(value)
                tokens.labels("m").inc(more)
                ttft.observe(0.5)
                scraper.scrape()
            running.labels("m").set(1)  # and the scrape after
    finally:
        server.shutdown()
    times = [t for t, _ in scraper.scrapes]
    assert len(times) == 4 and scraper.errors == 0
    # the window holds the two middle scrapes: running's mean over them; counters from the first scrape to the last
    window = (times[1] - times[0] - 1e-6, times[2] - times[0] + 1e-6)
    got, series = reduce(scraper.scrapes, times[0], window)
    assert got['vllm:num_requests_running{model_name="m"}'] == pytest.approx((4 + 9) / 2)
    assert got['vllm:generation_tokens_total{model_name="m"}'] == 25  # the 10 before the first scrape left out
    assert got["vllm:time_to_first_token_seconds_count"] == 2 and got["vllm:time_to_first_token_seconds_sum"] == 1.0
    assert not any(k.endswith(("_bucket", "_created")) or "_bucket{" in k for k in got)
    assert series["server_vllm_num_requests_running"] == [2.0, 4.0, 9.0, 1.0]
    assert series["server_t_s"] == pytest.approx([t - times[0] for t in times])


def test_a_random_checkpoints_tokenizer_decodes_every_id_of_its_vocabulary(tmp_path):
    """A random model generates ids from its whole vocabulary; the built-in launch's tokenizer must decode each to
    text, or the server streams nothing for it."""
    from tokenizers import Tokenizer

    from accelbench.backends.servers.transformers import write_covering_tokenizer
    from accelbench.models import hf

    bundled = hf.BUNDLED / hf.BUNDLED_MODELS[0]
    write_covering_tokenizer(bundled, tmp_path, 1100)
    tok = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    known = Tokenizer.from_file(str(bundled / "tokenizer.json")).get_vocab_size()
    assert known < 1100 and tok.get_vocab_size() == 1100
    assert all(tok.decode([i]) for i in range(known, 1100))
    assert tok.encode("To be").ids == Tokenizer.from_file(str(bundled / "tokenizer.json")).encode("To be").ids


def test_a_gpu_serve_levels_compact_table_fits_80_columns():
    """Every column of the serve scenario's compact table filled as on a GPU (the ceiling's share and the energy per
    token too), at their widest plausible figures: the table needs no more than 80 columns."""
    from rich.console import Console

    from accelbench.report.runs import table_for
    from accelbench.report.table import natural_width

    row = {
        "workload": "serve",
        "model": "hf:llama-3.1-8b",
        "concurrency": 256,
        "ttft_p50_ms": 12345.6,
        "tpot_p50_ms": 123.4,
        "output_tokens_per_s": 123456.7,
        "request_throughput_per_s": 1234.5,
        "engine_share_of_ceiling": 0.123,
        "energy_per_sample_j": 12.345,
        "status": "ok",
        "validity": "flagged",
    }
    table = table_for("serve")([row], compact=True)
    console = Console(width=80)
    assert natural_width(table, console) <= 80
    with console.capture() as out:
        console.print(table)
    assert "Of ceiling" in out.get() and "Status" in out.get() and "ok, flagged" in out.get()

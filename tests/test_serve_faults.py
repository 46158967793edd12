"""accelbench serve against servers that fail: requests that fail (flagged levels, ``error`` levels), streams it does
not understand, a character split across chunks, a server by URL that dies mid-level (the level not stored, the run
resumable), a server that lists no model (checked by one completion instead), a launched server that lists none and
no model named (refused at once), and a launched server that dies with accelbench killed by SIGKILL.

The servers are :data:`serve_server.STUB` processes (the standard library: each starts in a fraction of a second);
``tests/test_serve.py`` measures a real ``transformers serve`` started as a user starts it (no model, no hub cache).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import cli_env, run_cli
from serve_server import MODEL_DIR, free_port, stub_server, write_stub

from accelbench.backends.openai_api import NoModelError, OpenAICompatible, ServerError
from accelbench.store import Store

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")
FAST = ["--device", "cpu", "--idle-s", "0", "--warmup-requests", "0", "--telemetry-period-ms", "50"]
TOKENIZER = ["--tokenizer", str(MODEL_DIR)]


def _rows(db) -> list[dict]:
    store = Store(db)
    return store.records(max(r["run_id"] for r in store.runs()))


def _serve(url: str, db, *more: str):
    return run_cli("serve", "--url", url, *TOKENIZER, "--output-len", "4", "--db", str(db), *FAST, *more)


def test_a_level_with_failed_requests_is_flagged_and_shows_them(tmp_path, db):
    with stub_server(tmp_path, "half") as (url, _):
        p = _serve(url, db, "--concurrency", "1", "--requests", "4", "--ceiling", "static-cache")
    assert p.returncode == 0, p.stderr
    (row,) = _rows(db)
    assert "no in-process ceiling (static-cache): no -m model" in p.stdout + p.stderr  # not only in the row
    assert row["ceiling_note"].startswith("no in-process ceiling (static-cache)")
    assert row["status"] == "ok" and row["requests_ok"] == 2 and row["requests_failed"] == 2
    assert (
        "failed-requests" in row["validity"].split(",")
        and "2 of 4 requests failed (http 500: 2)" in row["validity_reason"]
    )
    (line,) = [ln for ln in p.stdout.splitlines() if ln.lstrip().startswith("1 ")]  # the level's line: c=1
    assert line.split()[1] == "2" and "flagged" in line  # the Failed column, and the flag in the status
    assert "flagged: requests failed (their reasons in errors_json): 1 case" in p.stdout  # the note says which flag


def test_a_level_whose_requests_mostly_fail_is_an_error_with_the_servers_words(tmp_path, db):
    with stub_server(tmp_path, "http500") as (url, _):
        p = _serve(url, db, "--concurrency", "2", "--requests", "4")
    assert p.returncode == 1, p.stderr  # a run with an error case (README, "Exit codes")
    (row,) = _rows(db)
    words = '4 of 4 requests failed; the first: http 500: {"message": "the stub failed on purpose"}'
    assert row["status"] == "error" and row["error"] == words
    assert row["requests_failed"] == 4 and row["requests"] == 4  # what was measured stays in the row
    assert "the stub failed on purpose" in p.stdout + p.stderr


def _stream(url: str):
    from accelbench.backends.openai_api import RequestError

    engine = OpenAICompatible(url)

    async def events():
        return [ev async for ev in engine.stream(engine.body("Hello", 3))]

    try:
        return asyncio.run(events())
    except RequestError as exc:
        return exc


@pytest.mark.parametrize(
    "mode, reason, detail",
    [
        ("html", "malformed sse", "<html><body>not a stream not a stream"),  # the response's first bytes
        ("cut", "connection", "RemoteProtocolError"),  # a chunk promised, then the connection closed
    ],
)
def test_a_stream_cut_short_or_not_understood_is_a_failed_request_with_its_first_bytes(tmp_path, mode, reason, detail):
    with stub_server(tmp_path, mode) as (url, _):
        err = _stream(url)
    assert err.reason == reason and err.detail.startswith(detail), err


def test_a_character_split_across_chunks_is_one_character(tmp_path):
    with stub_server(tmp_path, "split") as (url, _):
        got = [ev.text for ev in _stream(url)]
    assert "".join(got) == "\u00e9" * 3 and got[:2] == ["", "\u00e9"]  # each first byte alone: a token, no text yet


def test_a_server_that_lists_no_model_is_checked_by_one_completion(tmp_path):
    with stub_server(tmp_path, "nolist") as (url, _):
        with pytest.raises(NoModelError, match="HTTP 500, not a model list.*--served-model-name") as err:
            OpenAICompatible(url).probe(5.0)
        assert err.value.definitive
        info = OpenAICompatible(url, model="my-model").probe(5.0)
        assert info.model == "my-model" and info.models == () and info.listing == "HTTP 500, not a model list"
        folder = OpenAICompatible(url, guess=("ckpt", "/abs/ckpt")).probe(5.0)  # a checkpoint folder's path as typed
        assert folder.model == "ckpt"
    with stub_server(tmp_path, "ok") as (url, _):
        with pytest.raises(ServerError, match="does not serve 'other': it lists stub"):
            OpenAICompatible(url, model="other").probe(5.0)
        assert OpenAICompatible(url, guess=("ckpt",)).probe(5.0).model == "stub"  # the only model it lists


def test_a_launched_server_that_lists_no_model_is_refused_at_once(tmp_path, db):
    stub = write_stub(tmp_path)
    started = time.monotonic()
    p = run_cli(
        "serve",
        "--launch",
        f"{sys.executable} {stub} {{port}} empty",
        "--launch-timeout-s",
        "120",
        *TOKENIZER,
        "--db",
        str(db),
    )
    assert p.returncode == 2 and "lists no model" in p.stderr and "--served-model-name" in p.stderr, p.stderr
    assert time.monotonic() - started < 60  # not the whole --launch-timeout-s
    named = ["--served-model-name", "tiny", "--concurrency", "1", "--requests", "2", "--output-len", "4"]
    p = run_cli("serve", "--launch", f"{sys.executable} {stub} {{port}} empty", *TOKENIZER, *named, "--db", str(db))
    assert p.returncode == 0, p.stderr
    (row,) = _rows(db)
    assert row["served_model"] == "tiny" and row["requests_ok"] == 2
    env = Store(db).run(row["run_id"])["env"]
    assert env["served_model"] == "tiny" and env["server_models"] == "HTTP 200, 0 models"


def test_a_url_server_that_dies_mid_level_leaves_the_level_to_resume(tmp_path, db):
    """The server answers 6 completions and exits: the first level (4) is stored, the second is cut after 2 and not
    stored; the run is interrupted, and --resume against the server started again measures the second level."""
    port = free_port()
    args = ("--concurrency", "1,2", "--requests", "4")
    with stub_server(tmp_path, "ok", die_after=6, port=port) as (url, proc):
        first = _serve(url, db, *args)
        assert proc.wait(timeout=30) == 3  # it died on its own, on its 7th completion
    assert first.returncode == 130 and "stopped answering" in first.stderr, first.stderr
    store = Store(db)
    run_id = max(r["run_id"] for r in store.runs())
    assert store.run(run_id)["status"] == "interrupted"
    assert [r["concurrency"] for r in store.records(run_id)] == [1]
    with stub_server(tmp_path, "ok", port=port) as (url, _):
        again = _serve(url, db, *args, "--resume")
    assert again.returncode == 0, again.stderr
    rows = store.records(run_id)
    assert store.run(run_id)["status"] == "complete"
    assert [(r["concurrency"], r["requests_ok"], r["requests_failed"]) for r in rows] == [(1, 4, 0), (2, 4, 0)]


def _alive(pids: list[int]) -> list[int]:
    import psutil

    out = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
    return out


SLEEPER = "import time; time.sleep(600)"


def test_a_launched_server_dies_with_accelbench_killed_by_sigkill(tmp_path, db):
    """The launch's shell forks the server and a second child (no exec): SIGKILL of accelbench ends them all."""
    import psutil

    stub = write_stub(tmp_path)
    command = f"{sys.executable} {stub} {{port}} ok & {sys.executable} -c '{SLEEPER}' & wait"
    args = ["serve", "--launch", command, *TOKENIZER, "--concurrency", "1", "--requests", "100000"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", *args, "--output-len", "4", "--db", str(db), *FAST],
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the launch's group: the tether, the shell, the server and the sleeper
            with contextlib.suppress(psutil.Error):
                group = psutil.Process(proc.pid).children(recursive=True)
                argvs = [p.cmdline() for p in group]
                if any(a[1:2] == [str(stub)] for a in argvs) and any(a[-1:] == [SLEEPER] for a in argvs):
                    pids = [p.pid for p in group]
                    break
            time.sleep(0.05)  # a poll interval of the process tree, not a wait for a state
        assert len(pids) >= 4, pids
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 20
        while _alive(pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pids)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in _alive(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

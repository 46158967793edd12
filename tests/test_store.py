import json

import pytest

from accelbench.store import SCHEMA_VERSION, Store, StoreError


def test_round_trip_columns_and_series(db):
    with Store(db) as st:
        rid = st.begin_run("inference", {"models": ["m"]}, "abc", {"torch": "x"})
        cid = st.add_case(
            rid,
            {
                "case_key": "k1",
                "workload": "inference",
                "status": "ok",
                "latency_p99_ms": 1.5,
                "peak_mem_bytes": 123,
                "noisy": False,
            },
            {"latency_ms": [1.0, 2.0, 1.5]},
        )
        st.add_case(
            rid, {"case_key": "k2", "workload": "inference", "status": "oom", "error": "boom", "new_metric_j": 2.0}
        )
        st.finish_run(rid, "complete")
    with Store(db) as st:
        df = st.cases(rid)
        assert list(df["case_key"]) == ["k1", "k2"] and df.loc[0, "latency_p99_ms"] == 1.5
        assert df.loc[1, "new_metric_j"] == 2.0 and df.loc[0, "peak_mem_bytes"] == 123
        assert st.series(cid, "latency_ms") == [1.0, 2.0, 1.5]
        run = st.run(rid)
        assert run["spec"] == {"models": ["m"]} and run["env"]["torch"] == "x" and run["status"] == "complete"
        assert st.done_keys(rid) == {"k1", "k2"}
        assert st.conn.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)


def test_column_first_seen_as_none_keeps_numbers(db):
    st = Store(db)
    rid = st.begin_run("inference", {}, "h", {})
    st.add_case(rid, {"case_key": "a", "workload": "inference", "status": "ok", "compile_s": None, "top1": None})
    st.add_case(rid, {"case_key": "b", "workload": "inference", "status": "ok", "compile_s": 12.5, "top1": 0.9173})
    raw = st.conn.execute("SELECT typeof(compile_s), typeof(top1) FROM cases WHERE case_key='b'").fetchone()
    assert tuple(raw) == ("real", "real")
    df = st.cases(rid)
    assert df["compile_s"].tolist()[1] == 12.5 and df["top1"].dtype.kind == "f"


def test_a_row_reads_in_the_tables_order_whatever_order_the_store_added_its_columns(tmp_path):
    """A store adds a column when a first row has it, so two stores holding the same rows can order their
    columns differently (an import, a flagged case first); records() reads every row in the table's order."""
    first = {"case_key": "a", "workload": "inference", "status": "ok", "validity_reason": None, "zz_theirs": 1}
    second = {
        "case_key": "b",
        "workload": "inference",
        "status": "ok",
        "validity_reason": "spread",
        "aa_theirs": 2,
        "latency_p99_ms": 1.5,
        "throughput_samples_per_s": 10.0,
    }
    keys = []
    for name, order in (("x.db", (first, second)), ("y.db", (second, first))):
        with Store(tmp_path / name) as st:
            rid = st.begin_run("inference", {}, "h", {})
            for rec in order:
                st.add_case(rid, rec if name == "x.db" else dict(reversed(list(rec.items()))))
            keys.append([list(r) for r in sorted(st.records(rid), key=lambda r: r["case_key"])])
    assert keys[0] and keys[0] == keys[1]
    row = keys[0][1]
    assert row.index("status") < row.index("latency_p99_ms") < row.index("validity_reason")
    assert row[-2:] == ["aa_theirs", "zz_theirs"]  # undeclared columns last, by name


def test_resumable_run_only_unfinished(db):
    st = Store(db)
    a = st.begin_run("inference", {}, "h", {})
    st.finish_run(a, "complete")
    assert st.resumable_run("inference", "h") is None
    b = st.begin_run("inference", {}, "h", {})
    st.finish_run(b, "interrupted")
    assert st.resumable_run("inference", "h") == b and st.resumable_run("training", "h") is None


def test_not_a_database(tmp_path):
    p = tmp_path / "junk.db"
    p.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not an accelbench database"):
        Store(p)


def test_newer_schema_refused(db):
    st = Store(db)
    st.conn.execute("UPDATE meta SET value='999' WHERE key='schema_version'")
    st.conn.commit()
    st.close()
    with pytest.raises(StoreError, match="newer"):
        Store(db)


def test_missing_run(db):
    with pytest.raises(KeyError):
        Store(db).run(5)
    assert json.loads(json.dumps(Store(db).runs())) == []


def _set_lease(db, run_id, pid, heartbeat, host=None):
    import socket
    import sqlite3

    with sqlite3.connect(db) as con:
        con.execute(
            "UPDATE runs SET lease_pid=?, lease_host=?, lease_token='other', lease_heartbeat=? WHERE run_id=?",
            (pid, host or socket.gethostname(), heartbeat, run_id),
        )


def test_one_row_per_case_key(db):
    st = Store(db)
    rid = st.begin_run("inference", {}, "h", {})
    st.add_case(rid, {"case_key": "k", "workload": "inference", "status": "ok"})
    with pytest.raises(StoreError, match="UNIQUE"):
        st.add_case(rid, {"case_key": "k", "workload": "inference", "status": "ok"})
    other = st.begin_run("inference", {}, "h", {})
    st.add_case(other, {"case_key": "k", "workload": "inference", "status": "ok"})  # unique per run only
    assert st.delete_cases(rid, ["k"]) == 1 and st.done_keys(rid) == set()


def test_a_live_lease_refuses_a_second_writer_and_a_stale_one_is_taken_over(db):
    import os
    import subprocess
    import time

    from accelbench.store import STALE_S, RunBusyError

    st = Store(db)
    rid = st.begin_run("inference", {}, "h", {})
    st.finish_run(rid, "interrupted")
    _set_lease(db, rid, os.getpid(), time.time())  # this test's process: alive, fresh heartbeat
    with pytest.raises(RunBusyError, match=f"run {rid} is being run by pid {os.getpid()}"):
        Store(db).reopen_run(rid)
    dead = subprocess.Popen(["true"])
    dead.wait()
    _set_lease(db, rid, dead.pid, time.time())  # fresh heartbeat, but its process is gone
    Store(db).reopen_run(rid)
    _set_lease(db, rid, os.getpid(), time.time() - STALE_S - 1, host="elsewhere")  # another host, silent too long
    taker = Store(db)
    taker.reopen_run(rid)
    assert taker.lease(rid)["pid"] == os.getpid() and taker.run(rid)["status"] == "running"
    taker.finish_run(rid, "complete")
    assert taker.lease(rid) == {"host": None, "pid": None, "heartbeat": None}


def test_a_schema_1_store_is_migrated_without_losing_rows(tmp_path):
    """A store written before schema 2 (no lease columns, duplicate case keys from two resumes) opens,
    gains the lease columns and the uniqueness, and keeps every row."""
    import sqlite3

    p = tmp_path / "v1.db"
    with sqlite3.connect(p) as con:
        con.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema_version', '1');
        CREATE TABLE runs (run_id INTEGER PRIMARY KEY AUTOINCREMENT, created_at REAL NOT NULL, finished_at REAL,
            kind TEXT NOT NULL, status TEXT NOT NULL, spec_hash TEXT NOT NULL, spec_json TEXT NOT NULL, env_json TEXT NOT NULL);
        CREATE TABLE cases (case_id INTEGER PRIMARY KEY AUTOINCREMENT, run_id INTEGER NOT NULL, case_key TEXT NOT NULL,
            workload TEXT NOT NULL, status TEXT NOT NULL, error TEXT, throughput_samples_per_s REAL);
        CREATE TABLE samples (case_id INTEGER NOT NULL, series TEXT NOT NULL, idx INTEGER NOT NULL, value REAL);
        INSERT INTO runs VALUES (1, 0, 1, 'inference', 'complete', 'h', '{}', '{}');
        INSERT INTO cases VALUES (1, 1, 'a', 'inference', 'ok', NULL, 10.0), (2, 1, 'a', 'inference', 'ok', NULL, 11.0),
                                 (3, 1, 'b', 'inference', 'ok', NULL, 12.0);
        """)
    st = Store(p)
    assert st.conn.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
    df = st.cases(1)
    assert list(df["case_key"]) == ["a", "a|dup=2", "b"] and list(df["throughput_samples_per_s"]) == [10.0, 11.0, 12.0]
    assert st.lease(1) == {"host": None, "pid": None, "heartbeat": None}

import json

import pytest

from accelbench.store import SCHEMA_VERSION, Store, StoreError


def test_round_trip_columns_and_series(db):
    with Store(db) as st:
        rid = st.begin_run("inference", {"models": ["m"]}, "abc", {"torch": "x"})
        cid = st.add_case(rid, {"case_key": "k1", "workload": "inference", "status": "ok",
                                "latency_p99_ms": 1.5, "peak_mem_bytes": 123, "noisy": False},
                          {"latency_ms": [1.0, 2.0, 1.5]})
        st.add_case(rid, {"case_key": "k2", "workload": "inference", "status": "oom", "error": "boom",
                          "new_metric_j": 2.0})
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

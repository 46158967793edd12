"""A case key holds what tells the cases of its scenario apart: an image scenario's keeps its memory format
(``|cl=auto``), a generate key has none, and a generate run stored with the earlier ``|cl=auto`` keys resumes
without measuring its stored cases again."""

from __future__ import annotations

import pytest

from accelbench import api, scenarios
from accelbench.core.errors import INTERRUPTED
from accelbench.core.spec import current_key
from accelbench.launchers import INLINE
from accelbench.store import Store
from accelbench.sweep import loop

GEN = {
    "device": "cpu",
    "models": "hf:tiny-shakespeare",
    "batch_sizes": "1,2",
    "prompt_lens": 8,
    "new_tokens": 4,
    "modes": "hf-generate",
    "idle_s": 0,
}


def test_generate_keys_have_no_memory_format_and_image_keys_keep_theirs():
    gen = scenarios.get("generate")
    keys = [c.key for c in gen.cases(api.spec("generate", GEN), "cpu")]
    assert keys == [
        "hf:tiny-shakespeare|bs=1|fp32|hf-generate|p=8|n=4",
        "hf:tiny-shakespeare|bs=2|fp32|hf-generate|p=8|n=4",
    ]
    inf = scenarios.get("inference")
    spec = api.spec("inference", {"models": "cifar-resnet20", "batch_sizes": "2", "device": "cpu"})
    assert [c.key for c in inf.cases(spec, "cpu")] == ["cifar-resnet20|bs=2|fp32|eager|cl=auto"]
    assert current_key("cifar-resnet20|bs=2|fp32|eager|cl=auto", inf.extras_type).endswith("|cl=auto")


def test_generate_refuses_the_image_fields_and_its_rows_carry_no_memory_format():
    gen = scenarios.get("generate")
    for field, value in (("channels_last", True), ("images", 4), ("warmup_batches", 2), ("cudnn_benchmark", True)):
        with pytest.raises(Exception, match=f"invalid config key '{field}'"):
            api.spec("generate", {**GEN, field: value})
    case = gen.cases(api.spec("generate", GEN), "cpu")[0]
    assert "channels_last_setting" not in gen.base_record(case, "cpu")
    inf = scenarios.get("inference")
    spec = api.spec("inference", {"models": "cifar-resnet20", "batch_sizes": "2", "device": "cpu"})
    assert inf.base_record(inf.cases(spec, "cpu")[0], "cpu")["channels_last_setting"] == "auto"


def test_a_generate_run_stored_with_the_earlier_keys_resumes_its_cases(tmp_path, monkeypatch):
    gen = scenarios.get("generate")
    spec = api.spec("generate", GEN)
    cases = gen.cases(spec, "cpu")
    assert len(cases) == 2
    store = Store(tmp_path / "old.db")
    spec_hash = spec.spec_hash(**INLINE.identity())
    run_id = store.begin_run(INLINE.kind(gen), spec.to_dict(), spec_hash, {})
    for case in cases:  # the rows as the earlier key format stored them
        old = case.key.replace("|hf-generate|", "|hf-generate|cl=auto|")
        store.add_case(run_id, {"case_key": old, "status": "ok", "workload": gen.workload, "model": case.model})
    store.finish_run(run_id, INTERRUPTED)
    monkeypatch.setattr(type(gen), "check", lambda self, spec: None)  # no model read: nothing is measured
    monkeypatch.setattr(type(gen), "prepare", lambda self, spec, device, store: None)
    out = loop.run(gen, spec, store, resume=True)
    assert out.run_id == run_id and out.skipped_done == 2
    assert len(store.records(run_id)) == 2  # nothing measured again

"""Every model declares its kind, and each command refuses a model of the wrong kind before anything runs: exit 2,
one line naming the command that measures it, no store. Suggestions for an unknown name stay within its kind;
``accelbench models`` lists every kind with its source; ``results --runs`` keeps its words whole at 80 columns.

In-process (:func:`conftest.run_cli`) and through the API: every exit code here is decided before measuring.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from conftest import old_store, run_cli

from accelbench.core.errors import UnknownModelError
from accelbench.models import IMAGE, LM, ModelKindError, check_model, lookup

DATA = Path(__file__).resolve().parent / "data"
LM_NAMES = "(hf:<architecture>, hf:tiny-shakespeare, hf:/path/to/checkpoint)"
TO_GENERATE = "hf:tiny-shakespeare is a language model: accelbench {} takes image classifiers; measure it with accelbench generate (or train, or serve)"


def _refused(p, db: Path) -> str:
    """The one stderr line of a command refused before anything ran (exit 2, no store file)."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stdout, p.stderr)
    assert not db.exists() and not Path(f"{db}-journal").exists()
    return lines[0]


@pytest.mark.parametrize(
    "args, line",
    [
        (["run"], "error: " + TO_GENERATE.format("run")),
        (["loadgen"], "error: " + TO_GENERATE.format("loadgen")),
        (["tune"], "error: " + TO_GENERATE.format("tune")),  # its scenario is run's: named as typed
    ],
)
def test_an_image_command_refuses_a_language_model(tmp_path, args, line):
    db = tmp_path / "r.db"
    p = run_cli(*args, "-m", "hf:tiny-shakespeare", "--device", "cpu", "--db", str(db))
    assert line in _refused(p, db)


@pytest.mark.parametrize("model", ["resnet50", "cifar-resnet20", "timm:resnet18"])
def test_generate_refuses_an_image_classifier(tmp_path, model):
    db = tmp_path / "r.db"
    p = run_cli("generate", "-m", model, "--device", "cpu", "--db", str(db))
    assert _refused(p, db) == (
        f"error: {model} is an image classifier: accelbench generate takes language models {LM_NAMES}; "
        "measure it with accelbench run"
    )


def test_profile_refuses_a_step_of_the_other_kind(tmp_path):
    """A profile takes the kind of model its steps profile: prefill/decode a language model, else an image one."""
    db = tmp_path / "r.db"
    p = run_cli("profile", "-m", "resnet50", "--step", "decode", "--device", "cpu", "--ncu", "off", "--db", str(db))
    assert "invalid step 'decode': allowed inference, train for resnet50" in _refused(p, db)


@pytest.mark.parametrize(
    "command, model, meant",
    [
        ("generate", "llama-3.2-1b", "hf:llama-3.2-1b"),
        ("generate", "hf:llama-3.1-8c", "hf:llama-3.1-8b"),
        ("generate", "hf:tiny-shakespear", "hf:tiny-shakespeare"),
        ("run", "resnet5O", "resnet50"),
        ("run", "cifar-resnet2O", "cifar-resnet20"),
    ],
)
def test_suggestions_stay_within_the_kind(tmp_path, command, model, meant):
    db = tmp_path / "r.db"
    line = _refused(run_cli(command, "-m", model, "--device", "cpu", "--db", str(db)), db)
    assert f"(did you mean '{meant}'?)" in line, line
    suggested = re.search(r"\(did you mean (.*?)\?\)", line).group(1)
    assert ("hf:" in suggested) == (command == "generate"), line  # only names of the command's kind


@pytest.mark.parametrize("model", ["hf:ckpt", "ckpt"])
def test_an_existing_folder_is_suggested_as_hf_path(tmp_path, model):
    (tmp_path / "ckpt").mkdir()
    db = tmp_path / "r.db"
    p = run_cli("generate", "-m", model, "--device", "cpu", "--db", str(db), cwd=tmp_path)
    assert "(did you mean 'hf:./ckpt'?)" in _refused(p, db)


def test_lookup_says_what_each_name_is():
    seen = {n: (lookup(n).kind, lookup(n).source) for n in ("resnet50", "cifar-resnet20", "timm:resnet18")}
    assert seen == {
        "resnet50": (IMAGE, "torchvision"),
        "cifar-resnet20": (IMAGE, "bundled"),
        "timm:resnet18": (IMAGE, "timm"),
    }
    assert (lookup("hf:tiny-shakespeare").kind, lookup("hf:tiny-shakespeare").source) == (LM, "bundled")
    assert (lookup("hf:llama-3.2-1b").kind, lookup("hf:llama-3.2-1b").source) == (LM, "config")
    assert (lookup("hf:/some/folder").kind, lookup("hf:/some/folder").source) == (LM, "folder")
    assert (lookup("helpers:tiny_conv_net").kind, lookup("helpers:tiny_conv_net").source) == (None, "user")
    with pytest.raises(UnknownModelError, match="empty model name"):
        lookup("")


def test_a_user_factory_that_declares_its_kind_is_refused_by_the_other_commands(tmp_path, monkeypatch):
    """A factory's kind is known once its module is imported (not called): ``model_kind`` on the factory or module."""
    (tmp_path / "kinded_lm_factory.py").write_text(
        'model_kind = "lm"\n\n\ndef make():\n    raise RuntimeError("not called")\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "kinded_lm_factory", raising=False)
    with pytest.raises(ModelKindError, match=r"^kinded_lm_factory:make is a language model: accelbench run takes"):
        check_model("kinded_lm_factory:make", IMAGE, "accelbench run")
    found = check_model("kinded_lm_factory:make", LM, "accelbench generate")
    assert (found.kind, found.source) == (LM, "user")
    assert check_model("helpers:tiny_conv_net", LM, "accelbench generate").kind is None  # undeclared: taken by all


def test_models_lists_language_models_with_kind_and_source():
    out = run_cli("models", env={"COLUMNS": "80"}, check=True).stdout
    assert max(map(len, out.splitlines())) <= 80
    rows = {ln.split()[0]: " ".join(ln.split()[1:]) for ln in out.splitlines() if ln.strip()}
    assert rows["hf:tiny-shakespeare"] == "language model bundled trained"
    assert rows["hf:llama-3.2-1b"] == "language model config only"
    assert rows["hf:/path/to/checkpoint"] == "language model local folder"
    assert rows["cifar-resnet20"] == "image classifier bundled trained"
    lm = run_cli("models", "--kind", "lm", check=True).stdout
    assert "hf:tiny-shakespeare" in lm and "cifar-resnet20" not in lm and "resnet50" not in lm
    image = run_cli("models", "--kind", "image", check=True).stdout
    assert "resnet50" in image and "hf:" not in image
    bad = run_cli("models", "--kind", "llm")
    assert bad.returncode == 2 and "(did you mean 'lm'?)" in bad.stderr


def test_results_runs_keeps_words_whole_at_80_columns(tmp_path):
    """Every word of the runs list at 80 columns is a whole word of a cell, or a prefix of one ending in an
    ellipsis: none is broken across lines."""
    from accelbench.store import Store

    db = tmp_path / "runs.db"
    old_store("store-before-columns", db)
    with Store(db) as st:
        rid = st.begin_run(
            "inference",
            {"models": ["cifar-resnet20", "hf:tiny-shakespeare"]},
            "h",
            {"device_name": "NVIDIA H100 80GB HBM3"},
        )
        st.finish_run(rid, "complete")
        runs = st.runs()
    out = run_cli("results", "--runs", "--db", str(db), env={"COLUMNS": "80"}, check=True).stdout
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80 and "inference" in out
    words = {w for r in runs for v in r.values() if isinstance(v, (str, int)) for w in str(v).replace(",", " ").split()}
    body = lines[lines.index(next(ln for ln in lines if ln.startswith("─"))) + 1 :]
    printed = [w for ln in body for w in ln.replace(",", " ").split()]
    assert printed
    for w in printed:
        whole = w in words or re.fullmatch(r"\d{4}-\d\d-\d\d|\d\d:\d\d|-", w)
        assert whole or (w.endswith("…") and any(x.startswith(w[:-1]) for x in words)), (w, out)


def test_the_api_refuses_through_the_scenarios_declaration():
    """A notebook user's ``api.check`` refuses as the command does: the scenario declares the kind it takes."""
    from accelbench import api, scenarios

    assert scenarios.get("generate").model_kind == LM and scenarios.get("inference").model_kind == IMAGE
    with pytest.raises(ModelKindError, match=r"^resnet50 is an image classifier: accelbench generate takes"):
        api.check(api.spec("generate", {"model": "resnet50", "device": "cpu"}))
    with pytest.raises(ModelKindError, match=r"^hf:gpt2 is a language model: accelbench run takes image classifiers"):
        api.check(api.spec("inference", {"model": "hf:gpt2", "device": "cpu"}))

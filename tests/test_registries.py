"""The registries are the only truth: the roofline ceiling comes from the precision table, what differs between
backends is their attributes (workloads, compiles, ...), and help, completion, tune's search space and the
documentation's tables follow the registries.

``ACCELBENCH_WRITE_DOCS=1 python -m pytest tests/test_registries.py -k docs`` rewrites the generated tables of
``docs/reference.md`` after a registry changed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch

from accelbench import backends, precisions
from accelbench.backends import generation
from accelbench.backends.base import Backend, register
from accelbench.backends.engine import ENGINES
from accelbench.ceilings.measure import MATMUL_PRECISIONS, Ceilings
from accelbench.core.errors import ConfigError
from accelbench.scenarios.profile import results

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference.md"
CPU = torch.device("cpu")


def _ceilings() -> Ceilings:
    """Every roof measured, each at its own figure (1e12 FLOP/s x its place)."""
    flops = {roof: (i + 1) * 1e12 for i, roof in enumerate(MATMUL_PRECISIONS)}
    return Ceilings(device_name="test GPU", matmul_flops_per_s=flops, dram_bytes_per_s=1e12)


def test_every_precision_is_placed_under_its_own_roof():
    c = _ceilings()
    placed = {name: results.step_ceiling(c, name) for name in precisions.PRECISIONS}
    assert len(placed) == len(precisions.PRECISIONS) >= 10
    for name, (roof, flops) in placed.items():
        assert roof == precisions.get(name).ceiling and flops == c.matmul_flops_per_s[roof], name
    assert {
        n: placed[n][0]
        for n in ("amp-bf16", "bf16", "amp-fp16", "fp16", "fp8", "fp8-tensor", "int8", "int8-dynamic", "tf32", "fp32")
    } == {
        "amp-bf16": "bf16",
        "bf16": "bf16",
        "amp-fp16": "fp16",
        "fp16": "fp16",
        "fp8": "fp8",
        "fp8-tensor": "fp8",
        "int8": "int8",
        "int8-dynamic": "int8",
        "tf32": "tf32",
        "fp32": "fp32",
    }
    # the analytic placement of a step reads the same roof
    assert results.analytic_fields(_Counts(), c, "fp8-tensor", [1.0, 1.0, 1.0], 8)["ceiling_name"] == "fp8"


class _Counts:
    params, param_bytes, flops, forward_flops, min_bytes = 10, 40, 2e9, 1e9, 1e6
    activation_bytes, input_bytes, flops_by_op, uncounted_ops = 5e5, 1e5, {}, {}


def test_a_roof_the_device_did_not_measure_falls_back_to_fp32_and_says_so():
    cpu = Ceilings(device_name="a CPU", matmul_flops_per_s={"fp32": 1e11}, dram_bytes_per_s=1e10)
    assert results.step_ceiling(cpu, "amp-bf16") == ("fp32", 1e11)  # the row's ceiling_name says fp32


def test_a_precision_without_a_roof_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="precision fp4"):
        precisions.Precision("fp4")
    with pytest.raises(ConfigError, match="precision fp4.*fp64"):
        precisions.Precision("fp4", ceiling="fp64")
    with pytest.raises(ConfigError, match="precision"):
        results.step_ceiling(_ceilings(), "fp4")  # not registered: no silent fp32 roof


def test_the_backends_say_what_they_are():
    by = backends.BACKENDS
    images = {n: b for n, b in by.items() if "inference" in b.workloads}
    assert [n for n, b in images.items() if not b.compiles] == ["eager"] == [backends.reference()]
    assert [n for n, e in ENGINES.items() if not e.capabilities.compiles] == ["hf-generate", "static-cache"]
    assert not set(by) & set(ENGINES) and backends.names("generate") == tuple(ENGINES)
    assert (
        set(backends.names("train")) == {n for n, b in by.items() if b.trainable} >= {"eager", "compile", "cudagraphs"}
    )
    assert not any(by[n].trainable for n in by if n.endswith("-freeze"))
    assert {n for n, b in by.items() if b.graph_capture} >= {"cudagraphs", "compile-cudagraphs", "reduce-overhead"}
    assert {n for n, b in by.items() if b.step_graph} == {"cudagraphs", "compile-cudagraphs"}
    assert "not a training mode" in by["compile-freeze"].unsupported_reason(CPU, "train")
    assert by["compile"].unsupported_reason(CPU, "train") is None


class Plain(Backend):
    """A backend that compiles nothing and trains, under a name no code knows."""

    name, about, workloads, compiles = "toy-plain", "the module itself", ("inference", "train"), False

    def build(self, module, example, device):
        return module, None

    def wrap_training(self, model):
        return model


class Generator(Backend):
    """A backend of a later workload only (the generation backends)."""

    name, about, workloads = "toy-generate", "generation only", ("generate",)


@pytest.fixture
def toys():
    added = [register(Plain()), register(Generator())]
    yield
    for b in added:
        del backends.BACKENDS[b.name]


def test_what_compiles_is_an_attribute_not_a_name(toys):
    """A backend that compiles nothing, under any name: no compile_s on its training step, no compile in tune's cost
    model (both were decided by ``mode == "eager"``)."""
    from accelbench.studies import tune_budget as tb
    from accelbench.training.step import StepConfig, build_step

    step = build_step(torch.nn.Linear(4, 3), StepConfig(mode="toy-plain"), CPU)
    step(torch.randn(2, 4), torch.tensor([0, 2]))
    assert step.first_step_s > 0 and step.compile_s is None
    costs = tb.CostModel(warmup=1, min_steps=1, images=8)
    costs.fixed[("fp32", "eager")] = 2.0
    assert costs.fixed_s(("bf16", "toy-plain")) == 2.0
    assert costs.fixed_s(("bf16", "compile")) == 2.0 + tb.COMPILE_PRIOR_S


def test_help_completion_and_tune_offer_a_backend_for_its_workloads(toys):
    from accelbench.cli.help import backend_names, complete_backends
    from accelbench.studies import tune_search as ts
    from accelbench.studies.tune_space import configs, default_space

    assert "toy-generate" not in backend_names("run") and "toy-plain" in backend_names("run")
    assert set(backend_names("train")) == set(backends.names("train")) and "toy-plain" in backend_names("train")
    assert "compile-freeze" not in backend_names("train") and "compile-freeze" in backend_names("run")
    assert "toy-generate" in backend_names()  # a command we do not know: every backend

    class Ctx:  # what click hands a completion callback
        command, info_name, params = None, "train", {}

    assert complete_backends("toy-", Ctx()) == ["toy-plain"]
    Ctx.info_name, Ctx.params = "tune", {"workload": "inference"}
    assert complete_backends("compile-f", Ctx()) == ["compile-freeze"]
    for cuda in (True, False):
        for workload in ts.WORKLOADS:
            modes = default_space(cuda, "throughput", workload)[1]
            assert "toy-plain" in modes and "toy-generate" not in modes  # tried where it fits, without an edit
    assert configs(ts.TuneSettings(), cuda=False)[0] == ("fp32", "eager")
    why = Generator().unsupported_reason(CPU, "inference")
    assert "toy-generate does not run inference cases (it serves generate" in why


def test_shell_completion_of_modes_follows_the_command_workload():

    from conftest import run_cli

    def complete(words: str) -> list[str]:
        p = run_cli(
            env={
                "_ACCELBENCH_COMPLETE": "complete_bash",
                "COMP_WORDS": words,
                "COMP_CWORD": str(len(words.split()) - 1),
            },
            timeout=120,
        )
        assert p.returncode == 0, p.stderr
        return p.stdout.split()

    assert complete("accelbench train --modes compile") == ["compile", "compile-cudagraphs"]
    assert complete("accelbench tune --workload train --modes compile") == ["compile", "compile-cudagraphs"]
    assert "compile-freeze" in complete("accelbench run --modes compile")


def test_tune_searches_what_the_attributes_say():
    from accelbench.studies.tune_space import default_space

    assert default_space(True, "throughput") == (
        ("amp-fp16", "amp-bf16", "fp16", "bf16"),
        ("compile", "compile-freeze", "reduce-overhead-freeze"),
    )
    assert set(default_space(True, "latency")[1]) == {"cudagraphs", "reduce-overhead-freeze", "compile-freeze"}
    assert default_space(True, "cost") == default_space(True, "throughput")
    precs, modes = default_space(True, "throughput", "train")
    assert set(precs) == {"amp-bf16", "amp-fp16", "bf16"}  # fp16 does not train
    assert set(modes) == {"eager", "compile", "reduce-overhead", "cudagraphs", "compile-cudagraphs"}
    assert default_space(False, "latency") == (("fp32", "bf16"), ("eager", "compile"))
    assert default_space(False, "throughput", "train") == (("fp32", "bf16"), ("eager", "compile"))


# --- the documentation's tables --------------------------------------------------------------------------------------


def _yes(v: bool) -> str:
    return "yes" if v else ""


def _tune_words(tune) -> str:
    return "wherever it runs" if tune is None else "; ".join(tune) if tune else "when asked"


def backends_table() -> str:
    rows = [
        "| backend | what | workloads | builds first | GPU only | CUDA graphs | one shape per build | "
        "tune tries it by default |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows += [
        f"| `{n}` | {b.about} | {', '.join(b.workloads)} | {_yes(b.compiles)} | {_yes(b.needs_cuda)} | "
        f"{_yes(b.graph_capture)} | {_yes(b.static_shapes)} | {_tune_words(b.tune)} |"
        for n, b in backends.BACKENDS.items()
    ]
    return "\n".join(rows)


def engines_table() -> str:
    rows = [
        "| engine | what | steps timed one by one | prefill and decode compiled | CUDA graphs | fused projections | "
        "weight-only kernels |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    rows += [
        f"| `{n}` | {e.about} | {_yes(e.capabilities.steps)} | {_yes(e.capabilities.compiles)} | "
        f"{_yes(e.capabilities.cuda_graphs)} | {_yes(e.capabilities.fused_projections)} | "
        f"{_yes(e.capabilities.weight_only_kernels)} |"
        for n, e in ENGINES.items()
    ]
    return "\n".join(rows)


def _runs_on(p) -> str:
    if p.needs_cpu:
        return "CPU"
    cc = f" (compute capability >= {p.min_capability[0]}.{p.min_capability[1]})" if p.min_capability else ""
    return f"CUDA{cc}" if p.needs_cuda else "CPU, CUDA"


def precisions_table() -> str:
    rows = [
        "| precision | computes in | trains | runs on | roofline ceiling | tune tries it by default |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    rows += [
        f"| `{n}` | {p.about} | {_yes(p.trainable)} | {_runs_on(p)} | {p.ceiling} | {_tune_words(p.tune or ())} |"
        for n, p in precisions.PRECISIONS.items()
    ]
    return "\n".join(rows)


def _lm_shape(values: dict, *keys: str):
    return next((values[k] for k in keys if k in values), "")


def language_models_table() -> str:
    from accelbench.models import hf

    rows = [
        "| model | architecture | layers | hidden size | attention heads (KV heads) | vocabulary | configuration |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for n, a in hf.ARCHITECTURES.items():
        v = a.values
        heads = _lm_shape(v, "num_attention_heads", "n_head")
        kv = _lm_shape(v, "num_key_value_heads")
        rows.append(
            f"| `hf:{n}` | {a.config_class} | {_lm_shape(v, 'num_hidden_layers', 'n_layer')} | "
            f"{_lm_shape(v, 'hidden_size', 'n_embd')} | {heads}{f' ({kv})' if kv else ''} | {v.get('vocab_size', '')} | "
            f"{a.source} |"
        )
    rows += [
        f"| `hf:{n}` | bundled, trained weights |  |  |  |  | `src/accelbench/assets/llm/README.md` |"
        for n in hf.BUNDLED_MODELS
    ]
    return "\n".join(rows)


def _options_table(module: str):
    """The option table of ``accelbench.core.options.<module>``'s declarations."""

    def table() -> str:
        import importlib

        from accelbench.core.options import Option, markdown_table

        mod = importlib.import_module(f"accelbench.core.options.{module}")
        declared = [
            v for v in vars(mod).values() if isinstance(v, dict) and v and isinstance(next(iter(v.values())), Option)
        ]
        assert len(declared) == 1, f"accelbench.core.options.{module} declares one table"
        return markdown_table(declared[0])

    return table


TABLES = {
    "backends": backends_table,
    "engines": engines_table,
    "precisions": precisions_table,
    "language models": language_models_table,
    "run options": _options_table("inference"),
    "generate options": _options_table("generate"),
    "loadgen options": _options_table("loadgen"),
    "profile options": _options_table("profile"),
    "serve options": _options_table("serve"),
    "evaluation options": _options_table("evaluation"),
}


def _block(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- {name} table: generated[^\n]*-->\n)(.*?)(\n<!-- end of the {name} table -->)", re.S)


@pytest.mark.parametrize("name", TABLES)
def test_the_docs_tables_are_the_registries(name):
    text = REFERENCE.read_text()
    found = _block(name).search(text)
    assert found, f"docs/reference.md has no generated {name} table"
    want = TABLES[name]()
    if os.environ.get("ACCELBENCH_WRITE_DOCS") and found.group(2) != want:
        REFERENCE.write_text(text[: found.start(2)] + want + text[found.end(2) :])
        return
    assert found.group(2) == want, (
        f"docs/reference.md's {name} table is not the registry's: "
        "ACCELBENCH_WRITE_DOCS=1 python -m pytest tests/test_registries.py -k docs"
    )


def _first_column(doc: str) -> set[str]:
    rows = [line for line in doc.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    return {row.split("|")[1].strip() for row in rows[1:]}


@pytest.mark.parametrize(
    "module, registry",
    [(backends, backends.BACKENDS), (generation, ENGINES), (precisions, precisions.PRECISIONS)],
)
def test_the_docstring_tables_name_every_registry_entry(module, registry):
    built_in = {n for n, v in registry.items() if type(v).__module__.startswith("accelbench.")}
    assert len(built_in) >= 4
    assert _first_column(module.__doc__) == built_in

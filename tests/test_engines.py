"""Generation engines: every ``generate`` mode is an :class:`~accelbench.backends.engine.Engine` (its own protocol and
registry, not a backend) whose capabilities are what its row and help say, and an engine registered from outside
accelbench is one more ``--modes`` name that accelbench's own loop times."""

import pytest

pytest.importorskip("transformers")

from accelbench import backends  # noqa: E402
from accelbench.backends import engine as engine_registry  # noqa: E402
from accelbench.backends.engine import ENGINES, Capabilities, Engine, LoadedModel, engines  # noqa: E402

NEW, REPEATS = 3, 2


def _overrides(engine: Engine, verb: str) -> bool:
    return getattr(type(engine), verb) is not getattr(Engine, verb)


def test_every_generate_mode_is_an_engine_its_capabilities_describe():
    """The options a row carries (``compile_mode``, ``fused_projections``), what the telemetry reads
    (``host_bound``) and the warm-up count follow the capabilities, and each engine implements the verbs they
    promise. An engine is no backend: ``--modes`` finds it through the shared namespace, not in ``BACKENDS``."""
    names = backends.names("generate")
    assert names and engines() == names == tuple(ENGINES)
    for name in names:
        engine = backends.mode(name)
        caps = engine.capabilities
        assert isinstance(engine, Engine) and isinstance(caps, Capabilities), name
        assert not isinstance(engine, backends.Backend) and name not in backends.BACKENDS, name
        options = engine.options()
        assert options["fused_projections"] == caps.fused_projections, name
        assert (options["compile_mode"] is not None) == caps.compiles, name
        assert engine.host_bound == (caps.in_process and not caps.compiles)
        assert engine.warmup == (2 if caps.compiles else 1), name
        if caps.steps:
            assert _overrides(engine, "load") and _overrides(engine, "session"), name
        elif caps.in_process:
            assert _overrides(engine, "load") and _overrides(engine, "generate"), name
        else:
            assert _overrides(engine, "stream"), name
    assert engines(steps=True) == tuple(n for n in names if ENGINES[n].capabilities.steps)
    assert "hf-generate" in engines(steps=False)


def test_an_engine_and_a_backend_never_share_a_name_and_a_plugin_of_either_kind_lands_in_its_registry():
    from accelbench.backends.modes import adopt

    class Clash(Engine):
        name = "eager"

    with pytest.raises(ValueError, match="mode eager is registered already"):
        engine_registry.register(Clash())
    adopt("test-adopted", AdoptedStaticCache)  # an entry point naming an engine class
    try:
        assert isinstance(ENGINES["test-adopted-static-cache"], AdoptedStaticCache)
        assert "test-adopted-static-cache" not in backends.BACKENDS
    finally:
        del ENGINES["test-adopted-static-cache"]
    with pytest.raises(TypeError, match="Backend"):
        adopt("not-a-mode", object())

    class EngineNamedBackend(backends.Backend):
        name = "static-cache"

    with pytest.raises(ValueError, match="mode static-cache is registered already"):
        adopt("clash", EngineNamedBackend)  # a backend plugin never takes an engine's name
    assert "static-cache" not in backends.BACKENDS


class CountingSession:
    """A static-cache session that counts the verbs accelbench's loop calls."""

    def __init__(self, inner, calls: dict):
        self.inner, self.calls = inner, calls

    def prefill(self, prompts):
        self.calls["prefill"] += 1
        return self.inner.prefill(prompts)

    def decode(self, token, i: int):
        self.calls["decode"] += 1
        return self.inner.decode(token, i)

    def rewind(self, position: int) -> None:
        self.inner.rewind(position)

    def reset(self) -> None:
        self.calls["reset"] += 1
        self.inner.reset()


class WrappedStaticCache(Engine):
    """A third-party engine: the static-cache engine's model and session behind its own name."""

    name = "test-wrapped-static-cache"
    about = "language models: the static-cache engine behind another name (a test's engine)"
    capabilities = Capabilities()

    def __init__(self):
        self.calls = {"load": 0, "prefill": 0, "decode": 0, "reset": 0}

    def load(self, model, precision, device, seed) -> LoadedModel:
        self.calls["load"] += 1
        return engine_registry.get("static-cache").load(model, precision, device, seed)

    def session(self, loaded, batch_size, prompt_len, new_tokens):
        return CountingSession(
            engine_registry.get("static-cache").session(loaded, batch_size, prompt_len, new_tokens), self.calls
        )


class AdoptedStaticCache(WrappedStaticCache):
    name = "test-adopted-static-cache"


@pytest.fixture
def wrapped():
    engine = engine_registry.register(WrappedStaticCache())
    yield engine
    del ENGINES[engine.name]


def _generate(tmp_path, modes: str) -> list[dict]:
    """``hf:tiny-shakespeare`` at batch 1, an 8-token prompt, in fp32 on the CPU through ``accelbench.api.generate``,
    the CPU's ceilings given (1e11 FLOP/s, 1e10 B/s): the rows' MBU and TTFT floor need them, these tests time none."""
    from accelbench import api
    from accelbench.ceilings.cache import save_ceilings
    from accelbench.ceilings.measure import Ceilings
    from accelbench.core.device import cpu_model
    from accelbench.store import Store

    store = Store(tmp_path / "g.db")
    save_ceilings(store, Ceilings(device_name=cpu_model(), matmul_flops_per_s={"fp32": 1e11}, dram_bytes_per_s=1e10))
    spec = api.spec(
        "generate",
        {
            "models": "hf:tiny-shakespeare",
            "batch_sizes": "1",
            "prompt_lens": "8",
            "new_tokens": str(NEW),
            "precisions": "fp32",
            "modes": modes,
            "repeats": REPEATS,
            "perplexity": False,
            "idle_s": 0,
            "device": "cpu",
        },
        cuda=False,
    )
    return api.generate(spec, store).records


def test_a_registered_engine_is_one_more_mode(wrapped, tmp_path):
    """One case through ``accelbench.api.generate``: an ``ok`` row under the engine's name, timed by accelbench's step
    loop (a prefill and ``new_tokens - 1`` decode steps a generation: one warm-up, then the timed ones)."""
    rows = _generate(tmp_path, wrapped.name)
    assert [(r["status"], r["mode"]) for r in rows] == [("ok", wrapped.name)], rows
    generations = 1 + REPEATS
    assert wrapped.calls == {"load": 1, "prefill": generations, "decode": generations * (NEW - 1), "reset": generations}
    assert rows[0]["generations_timed"] == REPEATS and rows[0]["compile_s"] is None
    assert rows[0]["compile_prefill_s"] is None and rows[0]["compile_decode_s"] is None


def test_a_compiling_engines_row_times_each_steps_compile_and_places_ttft_over_its_floor(tmp_path):
    """``static-compile`` on the CPU: the first (untimed) generation's prefill and first decode step carry the
    compiles, each stored apart and both inside ``compile_s``; the row's TTFT floor is the roofline time of its
    prefill counts under the stored ceilings, and its ratio the median TTFT over it."""
    from accelbench.core import roofline

    [row] = _generate(tmp_path, "static-compile")
    assert row["status"] == "ok" and row["compile_mode"] == "reduce-overhead on CUDA, default on CPU"
    assert 0 < row["compile_prefill_s"] < row["compile_s"] and 0 < row["compile_decode_s"] < row["compile_s"]
    assert row["compile_prefill_s"] + row["compile_decode_s"] <= row["compile_s"]
    assert row["compile_prefill_s"] > 10 * row["ttft_p50_ms"] / 1e3  # the compile, not a compiled prefill's run
    floor_s = roofline.theoretical_time_s(row["prefill_flops"], row["prefill_min_bytes"], 1e11, 1e10)
    assert row["ttft_floor_ms"] == pytest.approx(floor_s * 1e3)
    assert row["ttft_over_floor"] == pytest.approx(row["ttft_p50_ms"] / row["ttft_floor_ms"])


def test_the_serving_ceiling_runs_the_engines_compiled_steps_and_the_engine_releases_them(monkeypatch):
    """``serve``'s in-process ceiling through ``static-compile``: its prefill and decode step are both compiled (two
    graphs at least, one a step), its figures are measured, and the engine's own ``release`` hands the model back once
    (the one place that does)."""
    import torch
    from torch._dynamo.utils import counters

    from accelbench.scenarios.serve import ceiling

    engine, released = engine_registry.get("static-compile"), []
    monkeypatch.setattr(engine, "release", lambda: released.append(True))
    torch._dynamo.reset()
    counters.clear()
    out = ceiling.measure(
        "hf:tiny-shakespeare", [1], 8, NEW, mode=engine.name, shape=None, device=torch.device("cpu"), seed=0
    )
    assert out[1].note is None and out[1].tpot_p50_ms > 0 and out[1].output_tokens_per_s > 0
    assert counters["stats"]["unique_graphs"] >= 2 and released == [True]
    torch._dynamo.reset()

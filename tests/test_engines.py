"""Generation engines: every ``generate`` backend is an :class:`~accelbench.backends.engine.Engine` whose capabilities
are what its row and help say, and an engine registered from outside accelbench is one more ``--modes`` name that
accelbench's own loop times."""

import pytest

pytest.importorskip("transformers")

from accelbench import backends  # noqa: E402
from accelbench.backends.engine import Capabilities, Engine, engines  # noqa: E402

NEW, REPEATS = 3, 2


def _overrides(engine: Engine, verb: str) -> bool:
    return getattr(type(engine), verb) is not getattr(Engine, verb)


def test_every_generate_backend_is_an_engine_its_capabilities_describe():
    """The options a row carries (``compile_mode``, ``fused_projections``) and the backend attributes everyone else
    reads (``compiles``, ``graph_capture``, ``host_bound``) follow the capabilities, and each engine implements the
    verbs they promise."""
    names = backends.names("generate")
    assert names and engines() == names
    for name in names:
        engine = backends.get(name)
        caps = engine.capabilities
        assert isinstance(engine, Engine) and isinstance(caps, Capabilities), name
        options = engine.options()
        assert options["fused_projections"] == caps.fused_projections, name
        assert (options["compile_mode"] is not None) == caps.compiles == engine.compiles, name
        assert engine.graph_capture == caps.cuda_graphs and engine.host_bound == (caps.in_process and not caps.compiles)
        if caps.steps:
            assert _overrides(engine, "load") and _overrides(engine, "session"), name
        elif caps.in_process:
            assert _overrides(engine, "load") and _overrides(engine, "generate"), name
        else:
            assert _overrides(engine, "stream"), name
    assert engines(steps=True) == tuple(n for n in names if backends.get(n).capabilities.steps)
    assert "hf-generate" in engines(steps=False)


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

    def load(self, model, precision, device, seed):
        self.calls["load"] += 1
        return backends.get("static-cache").load(model, precision, device, seed)

    def session(self, loaded, batch_size, prompt_len, new_tokens):
        return CountingSession(
            backends.get("static-cache").session(loaded, batch_size, prompt_len, new_tokens), self.calls
        )


@pytest.fixture
def wrapped():
    engine = backends.register(WrappedStaticCache())
    yield engine
    del backends.BACKENDS[engine.name]


def test_a_registered_engine_is_one_more_mode(wrapped, tmp_path):
    """One case through ``accelbench.api.generate``: an ``ok`` row under the engine's name, timed by accelbench's step
    loop (a prefill and ``new_tokens - 1`` decode steps a generation: one warm-up, then the timed ones)."""
    from accelbench import api
    from accelbench.ceilings.cache import save_ceilings
    from accelbench.ceilings.measure import Ceilings
    from accelbench.core.device import cpu_model
    from accelbench.store import Store

    store = Store(tmp_path / "g.db")  # the CPU's ceilings given: the row's MBU needs one, this test times none
    save_ceilings(store, Ceilings(device_name=cpu_model(), matmul_flops_per_s={"fp32": 1e11}, dram_bytes_per_s=1e10))
    spec = api.spec(
        "generate",
        {
            "models": "hf:tiny-shakespeare",
            "batch_sizes": "1",
            "prompt_lens": "8",
            "new_tokens": str(NEW),
            "precisions": "fp32",
            "modes": wrapped.name,
            "repeats": REPEATS,
            "perplexity": False,
            "idle_s": 0,
            "device": "cpu",
        },
        cuda=False,
    )
    out = api.generate(spec, store)
    rows = out.records
    assert [(r["status"], r["mode"]) for r in rows] == [("ok", wrapped.name)], rows
    generations = 1 + REPEATS
    assert wrapped.calls == {"load": 1, "prefill": generations, "decode": generations * (NEW - 1), "reset": generations}
    assert rows[0]["generations_timed"] == REPEATS and rows[0]["compile_s"] is None

"""The serve scenario (``accelbench serve``): an OpenAI-compatible LLM server measured under load, with the GPU's
telemetry, energy and cost beside every latency.

A case is one load level of one model: a closed loop of N requests always in flight (``concurrency``) or an open
loop of requests at a rate (``request_rates``: Poisson or gamma arrivals on absolute send times,
:mod:`~accelbench.scenarios.serve.load`). Per run: the server is probed before anything (unreachable or not
OpenAI-compatible: one line, exit 2), or launched and waited for (:mod:`accelbench.launchers.server`); the
requests are built once (:mod:`~accelbench.scenarios.serve.workloads`). Per level
(:mod:`~accelbench.scenarios.serve.level`): warm-up requests untimed, then the measured requests under the telemetry
monitor (the GPU's power, utilisation, memory and clocks on the same clock as the requests; energy over the level),
turned into TTFT, TPOT, ITL, end-to-end latency, throughput and goodput (:mod:`~accelbench.scenarios.serve.metrics`).
With ``slo_search`` one case searches the highest load that meets the SLO (:mod:`~accelbench.scenarios.serve.search`),
each probe a stored detail row.

A server that stops answering mid-run ends the run as interrupted (the finished levels are stored; ``--resume``
continues it, a launched server started again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import ConfigError
from accelbench.core.options import aliases as declared_aliases
from accelbench.core.options import check_declared, device_defaults
from accelbench.core.options.serve import OPTIONS
from accelbench.core.spec import Case, Extras, Settings
from accelbench.models.base import LM
from accelbench.scenarios.base import Scenario, register
from accelbench.scenarios.serve.loads import Load, level_loads  # noqa: F401  (level_loads: the levels, re-exported)

GPU_DEFAULTS: dict[str, Any] = {"models": (), "data": None, "idle_s": 3.0, **device_defaults(OPTIONS, cuda=True)}
CPU_DEFAULTS: dict[str, Any] = {"models": (), "data": None, "idle_s": 0.0, **device_defaults(OPTIONS, cuda=False)}
DATASET_LENGTH = "dataset"  # output_len: each request's own (a ShareGPT reply's, a JSONL line's)


@dataclass(frozen=True, kw_only=True, slots=True)
class ServeSettings(Settings):
    """The settings of :data:`accelbench.core.options.serve.OPTIONS` (defaults, help and checks from there).

    Attributes:
        url / launch / engine: the server: one running at ``url``, one ``launch`` starts (``{port}``: a free port),
            or the built-in launch of server kind ``engine`` (``transformers``, ``llama.cpp``:
            :func:`accelbench.backends.servers.launchable`) serving the run's ``hf:`` model.
        server_bin, served_precision: the binary of a kind that runs one (llama.cpp); the precision the server holds
            its weights in (the built-in launch writes it; MBU counts it).
        served_model_name: the model id requests name, apart from the run's model (accelbench's: tokenizer,
            ceiling, shape); None: derived (:func:`accelbench.backends.openai_api.request_model`).
        api: ``completions`` or ``chat``.
        concurrency / request_rates: the levels, closed loop or open loop (one kind a run; neither: the device's
            default concurrencies).
        arrival, burstiness, max_concurrency: the open loop's arrivals (Poisson or gamma of shape ``burstiness``) and
            its cap of requests in flight.
        requests, duration_s, warmup_requests: a level's measured requests (or its duration) and untimed ones.
        workload, dataset, input_len, output_len, tokenizer: the requests (see :meth:`lengths`).
        slo, slo_search, search_steps: the objective, and the search of the highest load meeting it.
        continuous_batching, launch_timeout_s: of a launched server; request_timeout_s: of one request.
        ceiling: the in-process engine of the ceiling beside each level, or ``none``
            (:mod:`~accelbench.scenarios.serve.ceiling`).
        ceiling_gpus: the GPUs that ceiling splits the model over (> 1: tensor parallel, in its own
            ``accelbench generate`` command: :mod:`~accelbench.scenarios.serve.ceiling_split`).
    """

    volatile = ("launch_timeout_s",)
    url: str | None = OPTIONS["url"].field()
    launch: str | None = OPTIONS["launch"].field()
    engine: str | None = OPTIONS["engine"].field()
    server_bin: str | None = OPTIONS["server_bin"].field()
    served_precision: str | None = OPTIONS["served_precision"].field()
    served_model_name: str | None = OPTIONS["served_model_name"].field()
    api: str = OPTIONS["api"].field()
    concurrency: tuple[int, ...] | None = OPTIONS["concurrency"].field()
    request_rates: tuple[float, ...] | None = OPTIONS["request_rates"].field()
    arrival: str = OPTIONS["arrival"].field()
    burstiness: float = OPTIONS["burstiness"].field()
    max_concurrency: int | None = OPTIONS["max_concurrency"].field()
    requests: int = OPTIONS["requests"].field()
    duration_s: float | None = OPTIONS["duration_s"].field()
    warmup_requests: int = OPTIONS["warmup_requests"].field()
    workload: str = OPTIONS["workload"].field()
    dataset: str | None = OPTIONS["dataset"].field()
    input_len: str = OPTIONS["input_len"].field()
    output_len: str = OPTIONS["output_len"].field()
    tokenizer: str | None = OPTIONS["tokenizer"].field()
    slo: str | None = OPTIONS["slo"].field()
    slo_search: bool = OPTIONS["slo_search"].field()
    search_steps: int = OPTIONS["search_steps"].field()
    continuous_batching: bool = OPTIONS["continuous_batching"].field()
    launch_timeout_s: float = OPTIONS["launch_timeout_s"].field()
    request_timeout_s: float = OPTIONS["request_timeout_s"].field()
    ceiling: str = OPTIONS["ceiling"].field()
    ceiling_gpus: int = OPTIONS["ceiling_gpus"].field()

    def __post_init__(self) -> None:
        check_declared(self)
        if self.engine is not None and self.launch is not None:
            raise ConfigError("engine", self.engine, "nothing with --launch (the command starts the server)")
        for name in ("url", "launch", "dataset", "tokenizer", "slo", "served_model_name"):
            v = getattr(self, name)
            if v is not None and not v.strip():
                raise ConfigError(name, v, "a non-empty text")
        if any(not r > 0 for r in self.request_rates or ()):
            raise ConfigError("request_rate", self.request_rates, OPTIONS["request_rates"].allowed)
        if self.concurrency and self.request_rates:
            raise ConfigError("request_rate", self.request_rates, "nothing with --concurrency (one kind of load a run)")
        for name in ("burstiness", "duration_s", "launch_timeout_s", "request_timeout_s"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                raise ConfigError(name, getattr(self, name), "a number > 0")
        self.lengths("input_len")
        self.lengths("output_len")
        if self.workload in ("sharegpt", "jsonl") and self.dataset is None:
            raise ConfigError("dataset", None, f"a local file (--dataset PATH) for the {self.workload} workload")
        if self.slo_search and self.slo is None:
            raise ConfigError(
                "slo", None, "an objective to search against (--slo mlperf-server, ttft_ms=..,tpot_ms=..)"
            )
        if self.slo is not None:
            from accelbench.scenarios.serve.metrics import parse_slo

            parse_slo(self.slo)
        from accelbench.scenarios.serve.ceiling import NONE

        if self.ceiling_gpus != 1 and self.ceiling == NONE:
            raise ConfigError("ceiling_gpus", self.ceiling_gpus, "1 with --ceiling none (no ceiling to split)")

    def lengths(self, name: str) -> int | tuple[int, int] | None:
        """``input_len``/``output_len`` as the workloads take it: ``"128"`` -> 128, ``"64:256"`` -> ``(64, 256)``
        (uniform), ``dataset`` -> None (each request's own).

        Raises:
            ConfigError: any other text.
        """
        text = getattr(self, name).strip()
        if text == DATASET_LENGTH and name == "output_len":
            return None
        parts = text.split(":")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            nums = []
        if len(nums) not in (1, 2) or min(nums) < 1 or nums[0] > nums[-1]:
            raise ConfigError(name, text, OPTIONS[name].allowed)
        return nums[0] if len(nums) == 1 else (nums[0], nums[1])

    def longest(self, name: str) -> int | None:
        """The most tokens ``input_len``/``output_len`` asks of a request (a range's high end); None where each
        request has its own (a ``sharegpt``/``jsonl`` file's prompts, ``--output-len dataset``): unknown before the
        requests are read."""
        n = self.lengths(name) if name == "output_len" or self.workload in ("random", "text") else None
        return n[1] if isinstance(n, tuple) else n


@dataclass(frozen=True, kw_only=True, slots=True)
class ServeExtras(Extras):
    """One level: its :class:`~accelbench.scenarios.serve.load.Load` kept as the two fields rows and keys have
    always had (``concurrency``: closed loop, or ``request_rate_per_s``: open loop; :meth:`of` and :meth:`load`
    convert); ``slo_search``: the case searches instead (its row is the highest level meeting the SLO)."""

    memory_format = False  # the key: model, level (no memory format)
    concurrency: int | None = None
    request_rate_per_s: float | None = None
    slo_search: bool = False

    @classmethod
    def of(cls, load: Load, slo_search: bool = False) -> ServeExtras:
        """The extras of a level at ``load`` (its arrivals and cap are the settings', not the case's)."""
        return cls(concurrency=load.concurrency, request_rate_per_s=load.rate_per_s, slo_search=slo_search)

    def load(self, settings: ServeSettings | None = None) -> Load:
        """The level's load, an open loop's arrivals, burstiness and cap from ``settings`` (None: the defaults)."""
        return Load.of_level(self.concurrency, self.request_rate_per_s, settings)

    def key_suffix(self) -> str:
        load = self.load()
        return "|slo-search" + load.search_key_suffix() if self.slo_search else load.key_suffix()


def _numbers(name: str, value, kind: type) -> tuple:
    """``("2", "4.5")`` (a list option's items as typed), ``[1, 8]`` or ``8`` as a tuple of ``kind``, repeats
    dropped (a bad item: one line naming ``name``)."""
    items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value
    out = []
    for v in items if isinstance(items, (list, tuple)) else [items]:
        try:
            x = float(v) if not isinstance(v, bool) else None
        except (TypeError, ValueError):
            x = None
        if x is None or (kind is int and not x.is_integer()):
            what = "integers" if kind is int else "numbers"
            raise ConfigError(name, value, f"a comma-separated list of {what}")
        out.append(int(x) if kind is int else x)
    return tuple(dict.fromkeys(out))


def _checkpoint_name(model: str) -> str:
    """A local folder given to ``-m`` without ``hf:`` is that checkpoint (``hf:PATH``): accelbench's model (tokenizer,
    ceiling, shape), and the id its server is guessed to serve it under (:func:`request_model`)."""
    from pathlib import Path

    if not model.startswith("hf:") and ("/" in model or model.startswith(".")) and Path(model).expanduser().is_dir():
        return f"hf:{model}"
    return model


def _check_installed(modules: tuple[str, ...]) -> None:
    """Each of ``modules`` importable (found, not imported: a launch imports them in its own process).

    Raises:
        MissingDependencyError: the first missing one, naming the ``serve`` extra.
    """
    import importlib.util

    from accelbench.core.errors import MissingDependencyError

    for name in modules:
        if importlib.util.find_spec(name) is None:
            raise MissingDependencyError(name, "serve")


class Serve(Scenario):
    name = kind = workload = kinds.SERVE
    model_kind, command = LM, "accelbench serve"
    backend_workload = "serve"
    uses_models = False
    settings_type, extras_type = ServeSettings, ServeExtras
    image_inputs = False  # no images: the image fields are refused as one group, the rows carry no memory format
    rejects = ("batch_sizes", "precisions", "modes")
    aliases = declared_aliases(OPTIONS)
    # energy and cost per output token over the level's measured window (first scheduled send to last completion);
    # a level's latency varies by design (its percentiles are the result): no spread check
    derived_keys = {
        "samples_key": "output_tokens_timed",
        "work_seconds_key": "measured_wall_s",
        "work_samples_key": "output_tokens_timed",
        "spread_key": "none",
    }
    gpu_defaults, cpu_defaults = GPU_DEFAULTS, CPU_DEFAULTS

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        if merged.get("request_rates") is not None:  # a list of numbers kept as the text typed
            merged["request_rates"] = _numbers("request_rate", merged["request_rates"], float)
        if isinstance(merged.get("models"), tuple):
            merged["models"] = tuple(_checkpoint_name(m) for m in merged["models"] if m)
        return merged

    def validate(self, spec) -> None:
        from accelbench.backends import servers

        st = spec.settings
        kinds_launched = "|".join(sorted(servers.launchable()))
        if st.url is None and st.launch is None and st.engine is None:
            raise ConfigError(
                "url", None, f"a server to measure: --url URL, --launch COMMAND or --engine {kinds_launched}"
            )
        if st.engine is not None and st.engine not in servers.launchable():
            raise ConfigError("engine", st.engine, kinds_launched.replace("|", ", "))
        served = sorted({p for k in servers.KINDS.values() for p in k.precisions})
        if st.served_precision is not None and st.served_precision not in served:
            raise ConfigError("served_precision", st.served_precision, ", ".join(served))
        if st.server_bin is not None and (st.engine is None or servers.get(st.engine).binary is None):
            runs = [k for k in servers.launchable() if servers.get(k).binary]
            raise ConfigError("server_bin", st.server_bin, f"nothing without --engine {' or '.join(runs)}")
        if st.engine is not None and len(spec.models) != 1:
            raise ConfigError(
                "model", ",".join(spec.models), f"one model for --engine {st.engine}, e.g. -m hf:tiny-shakespeare"
            )
        if len(spec.models) > 1 and st.launch is not None:
            raise ConfigError("model", ",".join(spec.models), "one model a launched server")
        from accelbench.scenarios.serve.ceiling import NONE, engines

        if st.ceiling != NONE and st.ceiling not in engines():
            raise ConfigError("ceiling", st.ceiling, f"an in-process engine ({', '.join(engines())}) or none")

    def levels(self, spec, device: str) -> list[ServeExtras]:
        """The load levels of ``spec`` (:func:`level_loads`); with ``slo_search``, one case at the highest."""
        loads = level_loads(spec.settings, device)
        if spec.settings.slo_search:
            return [ServeExtras.of(max(loads, key=lambda x: x.value), slo_search=True)]
        return [ServeExtras.of(x) for x in loads]

    def cases(self, spec, device: str) -> list[Case]:
        """model x load level (one case a level; one search case with ``slo_search``)."""
        models = spec.models or (None,)
        return [
            Case(scenario=self.name, model=m, device=device, extras=ex, name=m or "served")
            for m in models
            for ex in self.levels(spec, device)
        ]

    def check(self, spec) -> None:
        """A server given by URL answers as an OpenAI-compatible server; a built-in launch's model resolves;
        the dataset of a ``sharegpt``/``jsonl`` workload is a readable file.

        Raises:
            ServerError: unreachable, or not OpenAI-compatible (one line, exit 2).
            UnknownModelError, MissingDependencyError, ConfigError: one line each.
        """
        from pathlib import Path

        from accelbench.backends import servers

        st = spec.settings
        kind = servers.get(st.engine) if st.engine is not None else None
        _check_installed(("httpx",) + (kind.requires if kind is not None else ()))
        if kind is not None:
            kind.precision(st.served_precision, "cuda")
            if not spec.models[0].endswith(".gguf"):  # a kind's own file (llama.cpp's) is checked by its launch
                self.check_models(spec)
                from accelbench.models import hf

                hf.check_lm(spec.models[0])
            if kind.preflight is not None:  # e.g. no binary: one line saying how to build one, before anything runs
                kind.preflight(st)
        if st.dataset is not None and not Path(st.dataset).expanduser().is_file():
            raise ConfigError("dataset", st.dataset, "a readable local file")
        self.check_lengths(spec)
        if st.url is not None and st.launch is None:
            from accelbench.backends.openai_api import OpenAICompatible, request_model

            model, guess = request_model(st.served_model_name, spec.models[0] if spec.models else None)
            OpenAICompatible(st.url, model=model, api=st.api, guess=guess).probe(10.0)

    def check_lengths(self, spec) -> None:
        """Each ``hf:`` model's context holds the longest prompt plus the longest output asked (the check ``generate``
        and ``train`` make; a context that is not known here is not checked).

        Raises:
            UnknownModelError: an unusable ``hf:`` model; ConfigError: naming ``input_len`` or ``output_len``.
        """
        from accelbench.models import hf
        from accelbench.models.lm_checks import check_fits, check_model_name

        st = spec.settings
        longest = (st.longest("input_len") or 1, st.longest("output_len") or 1)  # unknown: not checked here
        for name in spec.models:
            if hf.is_lm_name(name):
                context, _ = check_model_name(name)
                check_fits(name, context, *longest, fields=("input_len", "output_len"))

    def unsupported_reason(self, case, device) -> str | None:
        return None

    def cudnn_benchmark(self, case, spec) -> bool | None:
        return None

    def prepare(self, spec, device, store, server=None):
        """The engine of each model, its tokenizer and its requests, built once (see
        :func:`accelbench.scenarios.serve.level.prepare`); ``server``: the launched server, if any."""
        from accelbench.scenarios.serve.level import prepare

        return prepare(spec, device, server, store, self.levels(spec, str(device))[-1])

    def base_record(self, case, device) -> dict[str, Any]:
        rec = super().base_record(case, device)
        for k in ("batch_size", "precision", "mode", "channels_last_setting", "data", "images"):
            rec.pop(k, None)
        return rec

    def oom_group(self, case) -> tuple | None:
        return None

    def measure(self, case, spec, state, rank, sink):
        from accelbench.scenarios.serve.level import measure_level, search_levels

        while state.notes:
            sink.note(state.notes.pop(0))
        if case.extras.slo_search:
            return search_levels(case, spec, state, rank, sink)
        return measure_level(case, spec, state, rank, sink)


register(Serve())

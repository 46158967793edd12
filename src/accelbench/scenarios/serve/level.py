"""One serve run's state and one load level measured: the engine, tokenizer and requests built once
(:func:`prepare`); warm-up, then the measured requests under the telemetry monitor, into the row's columns
(:func:`measure_level`); the SLO search's probes, each a detail row (:func:`search_levels`).

Telemetry: the monitor (:func:`accelbench.scenarios.base.case_monitor`) samples the device's power, utilisation,
memory and clocks while the level's measured requests run, on the clock the requests are stamped with; its energy is
the counter's difference over that window, so the derived energy per output token (``energy_per_sample_j`` of this
scenario's rows) is the level's own. The warm-up requests run before the monitor starts. A launched server's
processes are the job's own (``pids``), not "other processes" of the validity checks.
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import OK, ConfigError, StopSweep


@dataclass
class Served:
    """What the cases of one model share: its engine, the model id requests name, its requests (warm-up first)."""

    engine: Any
    model: str
    requests: list
    warmup: list


@dataclass
class ServeState:
    """Per-run state (:meth:`accelbench.scenarios.serve.Serve.prepare`).

    Attributes:
        info: the server's :class:`accelbench.backends.openai_api.ServerInfo` (its engine, version, served model).
        server: the launched server (:class:`accelbench.launchers.server.Launched`), or None (a server by URL).
        tokenizer: the tokenizer requests are built and counted with.
        served: per case model name (None: the server's own model), its :class:`Served`.
        store: the run's store (None: rows go nowhere this process reads); last_level: the extras of each model's
            last level, after which its in-process ceiling is taken (:mod:`~accelbench.scenarios.serve.ceiling`).
        shapes: per model, its :class:`~accelbench.core.lm_analytic.Shape` in the served precision (None: unknown);
            bandwidth: the device's (:func:`accelbench.scenarios.serve.roof.bandwidth`), read once a run.
        notes: one-line notes for the user, shown once (by the first level).
        precision: the precision the server holds its weights in (a built-in launch's, or ``--served-precision``;
            None: :func:`accelbench.scenarios.serve.roof.served_precision` of the device).
    """

    info: Any
    server: Any = None
    tokenizer: Any = None
    served: dict[str | None, Served] = field(default_factory=dict)
    store: Any = None
    last_level: Any = None
    shapes: dict[str | None, Any] = field(default_factory=dict)
    bandwidth: Any = None
    notes: list[str] = field(default_factory=list)
    precision: str | None = None

    def shape(self, model: str | None, device) -> Any:
        from accelbench.backends.servers import served_bytes_per_weight
        from accelbench.scenarios.serve.roof import served_precision, shape_for

        if model not in self.shapes:
            precision = self.precision or served_precision(device)
            per_weight = served_bytes_per_weight(getattr(self.info, "kind", None), precision)
            self.shapes[model] = shape_for(model, precision, per_weight)
        return self.shapes[model]

    def bandwidth_of(self, device) -> Any:
        from accelbench.scenarios.serve.roof import bandwidth

        if self.bandwidth is None:
            self.bandwidth = bandwidth(device, self.store)
        return self.bandwidth

    def pids(self) -> tuple[int, ...]:
        return self.server.pids() if self.server is not None else ()


def load_tokenizer(spec, info, server=None) -> Any:
    """The tokenizer of the run: ``tokenizer`` (a local folder), the built-in launch's (``server.plan``), the model's
    checkpoint folder (``hf:`` names), or the served model's where its id is a local folder or a hub id in the local
    cache (the built-in launch's random checkpoint of an architecture holds the tokenizer covering its vocabulary);
    else, for an architecture, the bundled tokenizer.

    Raises:
        ConfigError: none is found here (no download, ever): one line asking for ``--tokenizer``.
    """
    from accelbench.models import hf

    st = spec.settings
    candidates = [st.tokenizer] if st.tokenizer else []
    launched = getattr(getattr(server, "plan", None), "tokenizer_dir", None)
    if launched is not None:  # the built-in launch's (a GGUF file's tokenizer folder beside it)
        candidates.append(str(launched))
    bundled = []
    for name in spec.models[:1]:
        if hf.is_lm_name(name):
            folder = hf.checkpoint_dir(name)
            (candidates if folder is not None else bundled).append(str(folder or hf.BUNDLED / hf.BUNDLED_MODELS[0]))
    served = getattr(info, "model", None)
    if served:
        candidates.append(served)
    candidates += bundled
    for c in candidates:
        try:
            return _tokenizer(c)
        except (OSError, ValueError):
            if c == st.tokenizer:
                raise ConfigError("tokenizer", c, "a local tokenizer folder (nothing is downloaded)") from None
    raise ConfigError(
        "tokenizer", None, f"a local tokenizer folder (--tokenizer PATH): none found for {served or 'the model'}"
    )


@functools.lru_cache(maxsize=8)
def _tokenizer(name: str) -> Any:
    """The tokenizer of a local folder, or of a hub id already in the local cache; loaded once a process (a
    tokenizer is read-only: the runs of one process share it)."""
    from pathlib import Path

    from accelbench.models import hf

    transformers = hf.require_transformers()
    local = Path(name).expanduser()
    if local.is_dir():
        return transformers.AutoTokenizer.from_pretrained(local, trust_remote_code=False)
    return transformers.AutoTokenizer.from_pretrained(name, local_files_only=True, trust_remote_code=False)


def prepare(spec, device, server=None, store=None, last_level=None) -> ServeState:
    """Probe the server (or take the launched one's answer), load the tokenizer, build each model's requests once.

    Raises:
        ServerError: the server does not answer (one line).
        ConfigError: no tokenizer; a missing or malformed dataset (one line naming it).
    """
    from accelbench.backends import servers
    from accelbench.backends.openai_api import OpenAICompatible, request_model
    from accelbench.scenarios.serve.workloads import make_requests

    st = spec.settings
    first = spec.models[0] if spec.models else None
    url = server.base_url if server is not None else st.url
    if url is None:  # a spec that launches its server, run without the launcher that starts it
        raise ConfigError("launch", st.launch or st.engine, "a server started by accelbench.api.serve (or --url)")
    if server is not None:
        info = server.info
    else:
        model, guess = request_model(st.served_model_name, first)
        info = OpenAICompatible(url, model, st.api, guess=guess).probe(10.0)
    state = ServeState(
        info=info, server=server, tokenizer=load_tokenizer(spec, info, server), store=store, last_level=last_level
    )
    kind = servers.get(info.kind)
    plan = getattr(server, "plan", None)
    state.precision = getattr(plan, "precision", None) or st.served_precision
    from accelbench.scenarios.serve import scrape

    if getattr(info, "has_metrics", False) and not scrape.available():
        state.notes.append(
            "the server has /metrics; no scrape without prometheus-client (pip install 'accelbench[serve]')"
        )
    n = st.warmup_requests + st.requests
    built = make_requests(
        st.workload,
        n,
        tokenizer=state.tokenizer,
        input_len=st.lengths("input_len"),
        output_len=st.lengths("output_len"),
        seed=spec.seed,
        path=st.dataset,
    )
    for name in spec.models or (None,):
        # -m is accelbench's model (tokenizer, ceiling, shape); the id requests name is --served-model-name, a name
        # that is no hf: one, or found by the probe (a launched server serves the one model it was started with)
        model, guess = request_model(st.served_model_name, name)
        # a random-weight model samples every id: on a kind that needs it, the ids whose text is not whole UTF-8 are
        # banned (a trained model's own choices are left alone)
        banned = servers.random_weight_bans(state.tokenizer) if kind.banned_tokens and _random(name) else ()
        engine = OpenAICompatible(url, model=model, api=st.api, guess=guess, banned_ids=banned)
        if server is not None or name == first:  # what the probe above (or the launch's) answered for this model
            engine.info = info
        else:  # another model of the server (ServerError: one line); bodies need its kind
            engine.probe(10.0)
        model = engine.info.model
        state.served[name] = Served(
            engine=engine, model=model, requests=built[st.warmup_requests :], warmup=built[: st.warmup_requests]
        )
    return state


def _random(name: str | None) -> bool:
    """Whether ``name`` is an architecture served with random weights (``hf:llama-3.2-1b``)."""
    from accelbench.models import hf

    return bool(name) and hf.is_lm_name(name) and name[len(hf.PREFIX) :] in hf.ARCHITECTURES


def run_load(served: Served, spec, requests: list, load, tokenizer=None):
    """:func:`accelbench.scenarios.serve.load.run_level` of ``requests`` at ``load`` (a
    :class:`~accelbench.scenarios.serve.load.Load`), with the spec's settings."""
    from accelbench.scenarios.serve.load import run_level

    st = spec.settings
    return run_level(
        served.engine,
        requests,
        load,
        warmup=0,
        duration_s=st.duration_s,
        timeout_s=st.request_timeout_s,
        seed=spec.seed,
        tokenizer=tokenizer,
    )


def level_row(case, spec, state: ServeState, rank, load) -> tuple[dict, dict]:
    """One level measured at ``load`` (a :class:`~accelbench.scenarios.serve.load.Load`): warm-up, then the measured
    requests under telemetry; the row's columns (the load's among them) and series.

    Raises:
        StopSweep: the server stopped answering (a launched server exited, or requests failed unanswered and the
            server no longer answers its probe): the run ends interrupted, the finished levels stored, this one not.
        CaseFailed: more than half the requests failed (an ``error`` row with the columns).
    """
    from accelbench.scenarios.base import case_monitor
    from accelbench.scenarios.serve.metrics import level_columns, meets, parse_slo
    from accelbench.scenarios.serve.roof import mbu_columns

    served = state.served[case.model]
    st = spec.settings
    if served.warmup:
        run_load(served, spec, served.warmup, load)
    scraper = metrics_scraper(served, spec)
    with case_monitor(spec, case, rank.device, state.pids()) as mon, scraper or contextlib.nullcontext():
        level = run_load(served, spec, served.requests, load, tokenizer=state.tokenizer)
    slo = parse_slo(st.slo) if st.slo else None
    rec, series = level_columns(level, slo)
    if slo is not None:
        rec["slo_met"] = meets(rec, slo)
    if scraper is not None:
        rec_metrics, metric_series = server_metrics(scraper, level, rec)
        rec["server_metrics_json"] = json.dumps(rec_metrics, sort_keys=True)
        series.update(metric_series)
    _check_alive(state, served, rec)
    shape = state.shape(case.model, rank.device)
    rec.update(mbu_columns(rec, level.results, shape, state.bandwidth_of(rank.device) if shape else None))
    info = state.info
    rec.update(mon.record())
    rec.update(
        **load.columns(),
        api=st.api,
        prompt_source=st.workload,
        server_engine=st.engine or getattr(info, "kind", None),
        server_version=getattr(info, "version", None),
        model=case.model or served.model,
        served_model=served.model,
        server_url=served.engine.base_url if hasattr(served.engine, "base_url") else None,
        slo=st.slo,
        samples_timed=rec.get("output_tokens_timed"),
        throughput_samples_per_s=rec.get("output_tokens_per_s"),  # a sample of text generation is an output token
    )
    _check_failures(rec, level)
    return rec, {**series, **mon.series()}


def metrics_scraper(served: Served, spec) -> Any:
    """A :class:`~accelbench.scenarios.serve.scrape.Scraper` of the server's ``/metrics`` when its probe found
    one and ``prometheus_client`` is installed (else None: no scrape)."""
    from accelbench.scenarios.serve import scrape

    info = getattr(served.engine, "info", None)
    if not getattr(info, "has_metrics", False) or not scrape.available():
        return None
    return scrape.Scraper(served.engine.base_url, scrape.period_s(spec.telemetry_period_ms))


def server_metrics(scraper, level, rec: dict) -> tuple[dict, dict]:
    """The scrapes reduced to the level's measured window (first scheduled send to last completion)."""
    from accelbench.scenarios.serve.scrape import reduce

    starts = [r.scheduled_s for r in level.results]
    start = min(starts) if starts else 0.0
    return reduce(scraper.scrapes, level.started_at, (start, start + (rec.get("measured_wall_s") or 0.0)))


def _check_alive(state: ServeState, served: Served, rec: dict) -> None:
    """A level cut short by its server is no result: raise StopSweep when the launched server exited, or when
    requests failed for want of an answer (``connection``, ``timeout``; or none succeeded) and the server no longer
    answers its probe. The row is then not stored, the run ends interrupted and ``--resume`` measures the level."""
    server = state.server
    if server is not None and not server.alive():
        raise StopSweep(
            f"the launched server exited (code {server.process.returncode}) during the level; the level is not "
            f"stored, the finished levels are, and --resume continues (its log: {server.log_path})"
        )
    errors = json.loads(rec.get("errors_json") or "{}")
    if rec.get("requests_ok") and not any(errors.get(k) for k in UNANSWERED):
        return
    from accelbench.core.errors import AccelbenchError

    try:
        served.engine.probe(5.0)
    except AccelbenchError as exc:
        raise StopSweep(
            f"the server stopped answering during the level ({exc}); the level is not stored, the finished levels "
            "are, and --resume continues"
        ) from None


UNANSWERED = ("connection", "timeout")  # request errors of a server that may have stopped answering


def _check_failures(rec: dict, level) -> None:
    """A level whose requests mostly failed (more than half) is an ``error`` row: its first failure's words as the
    one-line error, its columns kept. Fewer failures flag the row (``failed-requests``: :mod:`accelbench.core.validity`).

    Raises:
        CaseFailed: more than half the level's requests failed.
    """
    failed = [r for r in level.results if not r.ok]
    if not failed or 2 * len(failed) <= len(level.results):
        return
    from accelbench.core.errors import CaseFailed

    first = failed[0]
    words = f"{first.error}: {first.detail}" if first.detail else first.error
    raise CaseFailed(f"{len(failed)} of {len(level.results)} requests failed; the first: {words}", rec)


def measure_level(case, spec, state: ServeState, rank, sink=None) -> tuple[dict, dict]:
    """The row of one level case (the load of its extras); after a model's last level, the in-process ceilings of all
    its levels (:func:`add_ceilings`)."""
    from accelbench.scenarios.serve.ceiling import NONE

    ex = case.extras
    rec, series = level_row(case, spec, state, rank, ex.load(spec.settings))
    if ex == state.last_level and spec.settings.ceiling != NONE:
        add_ceilings(case, spec, state, rank, sink, rec)
    return rec, series


def add_ceilings(case, spec, state: ServeState, rank, sink, rec: dict) -> None:
    """The in-process ceiling at each distinct batch of the model's levels (this one's ``rec`` and those already
    stored in the run), set on each level row (:mod:`accelbench.scenarios.serve.ceiling`; split over
    ``ceiling_gpus`` GPUs: :mod:`accelbench.scenarios.serve.ceiling_split`). A launched server is stopped first: its
    GPU memory is the in-process model's."""
    from accelbench.models import hf
    from accelbench.scenarios.serve import ceiling, ceiling_split

    mode, model = spec.settings.ceiling, case.model
    stored = []
    if state.store is not None and sink is not None and sink.run_id is not None:
        stored = [
            r
            for r in state.store.records(sink.run_id, workload=kinds.SERVE)
            if r.get("model") == rec.get("model") and r.get("status") == OK and not r.get("slo_search")
        ]
    rows = [*stored, rec]
    if not model or not hf.is_lm_name(model):
        what = f"-m {model} is no hf: model" if model else "no -m model"
        note = f"no in-process ceiling ({mode}): {what} (-m hf:<architecture or checkpoint folder>, or --ceiling none)"
        updates = [{"ceiling_mode": mode, "ceiling_note": note} for _ in rows]
        if sink is not None:
            sink.note(note)  # where the user reads the result, not only in the rows
    else:
        if state.server is not None:
            state.server.stop()
        served = state.served[case.model]
        prompt_len, new_tokens = ceiling.lengths(served.requests)
        batches = [b for b in (ceiling.batch_of(r) for r in rows) if b is not None]
        gpus = spec.settings.ceiling_gpus
        shape, device = state.shape(model, rank.device), rank.device
        if gpus > 1:  # a model larger than one GPU: split, in its own generate command
            found = ceiling_split.measure_split(
                model, batches, prompt_len, new_tokens, mode=mode, gpus=gpus, shape=shape, device=device, seed=spec.seed
            )
        else:
            found = ceiling.measure(
                model, batches, prompt_len, new_tokens, mode=mode, shape=shape, device=device, seed=spec.seed
            )
        updates = [ceiling.columns(mode, found.get(ceiling.batch_of(r)), r.get("output_tokens_per_s")) for r in rows]
    for r, cols in zip(stored, updates, strict=False):
        state.store.update_case(r["case_id"], cols)
    rec.update(updates[-1])


def search_levels(case, spec, state: ServeState, rank, sink) -> tuple[dict, dict]:
    """The highest load meeting the SLO between the given levels' lowest and highest
    (:func:`accelbench.scenarios.serve.search.bisect_load`); each probe a ``serve-probe`` detail row. The case's row
    is the best probe's (or, when none met the SLO, the last probe's), with the search's answer.
    """
    from accelbench.scenarios.serve.loads import level_loads
    from accelbench.scenarios.serve.metrics import meets, parse_slo
    from accelbench.scenarios.serve.search import bisect_load

    st = spec.settings
    slo = parse_slo(st.slo)
    load = case.extras.load(st)
    lo, hi = load.search_bounds([x.value for x in level_loads(st, case.device)], st.search_steps)
    measured: dict[float, tuple[dict, dict]] = {}

    def probe(value: float):
        at = load.with_value(value)
        started = time.time()
        rec, series = level_row(case, spec, state, rank, at)
        met = bool(meets(rec, slo))
        measured[value] = (rec, series)
        key = case.key + at.key_suffix()
        row = {**rec, "case_key": key, "workload": kinds.SERVE_PROBE, "row_type": "server-probe", "slo_met": met}
        sink.add({**row, "device": str(rank.device), "status": OK, "error": None, "started_at": started}, series)
        return met, value

    found = bisect_load(probe, lo, hi, st.search_steps, integer=load.integer)
    last = found.best if found.best is not None else found.probes[-1][0]
    rec, series = measured[last]
    rec = {
        **rec,
        f"slo_max_{load.column}": found.best,
        f"slo_lowest_missed_{load.column}": found.lowest_missed,
        "slo_met": found.best is not None,
        "slo_search_probes": len(found.probes),
    }
    return rec, series

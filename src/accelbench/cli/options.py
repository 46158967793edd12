"""The options the commands share, declared once, in groups: one group per concern (what to measure, the inputs,
how to measure, telemetry and cost, where to store, the torchrun launch), each shown in its help panel.

A group is a frozen dataclass whose fields are options: a field's metadata holds its typer declaration and the
spec field it sets (its own name unless ``spec=`` says otherwise). A command takes a group by a parameter whose
default is ``Group.take(...)`` (all of the group's options, ``only=`` some, ``omit=`` some, or ``name=typer.Option(...)``
to word one for this command); :func:`expand` (applied by :func:`accelbench.cli.common.command`) puts the group's
options into the command's signature in its place, and calls the command with one instance of the group::

    @command()
    def run(what: What = What.take(), how: How = How.take(omit=("repeats",)), ...):
        flags = {**what.fields(), **how.fields()}       # spec fields, None where not given

so an option is written once, its place in a call cannot slip (a value in another's slot), and a new shared
option is one field here.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from accelbench.cli.help import (
    ACCURACY,
    COST,
    DIST,
    HOW,
    STORE,
    WHAT,
    complete_backends,
    complete_models,
    complete_precisions,
    typer_option,
)
from accelbench.cli.terminal import json_to_stdout
from accelbench.core.options.evaluation import EVALUATION

# {precisions} and {backends} are filled in from the registries, and the scenario's defaults appended, when help
# is shown (cli/help.py).
MODEL = typer.Option(
    None,
    "--model",
    "-m",
    rich_help_panel=WHAT,
    autocompletion=complete_models,
    help="Model(s), comma-separated: resnet50, cifar-resnet20, timm:<name>, pkg.mod:factory (accelbench models lists them).",
)
BATCH = typer.Option(
    None,
    "--batch-sizes",
    "-b",
    rich_help_panel=WHAT,
    help="Batch sizes, e.g. 1,8,32 (per GPU with --gpus, global with --global-batch).",
)
PREC = typer.Option(
    None,
    "--precisions",
    "-p",
    rich_help_panel=WHAT,
    autocompletion=complete_precisions,
    help="Precisions, comma-separated: {precisions}.",
)
MODES = typer.Option(
    None,
    "--modes",
    rich_help_panel=WHAT,
    autocompletion=complete_backends,
    help="Backends (execution modes), comma-separated: {backends}.",
)
CUDNN = typer.Option(
    None,
    "--cudnn-benchmark/--no-cudnn-benchmark",
    rich_help_panel=HOW,
    help="torch.backends.cudnn.benchmark during each case (default: torch's, off); recorded in every row.",
)
CL = typer.Option(
    None,
    "--channels-last/--no-channels-last",
    rich_help_panel=WHAT,
    help="Default: where it helps (convolutions on CUDA below fp32).",
)
IMAGES = typer.Option(
    None, "--images", "-n", rich_help_panel=WHAT, help="Images per pass (split over the ranks with --gpus)."
)
DATA = typer.Option(
    None,
    "--data",
    rich_help_panel=ACCURACY,
    help="cifar10-test, cifar10-train-5k, synthetic, or an ImageFolder dir/.tar/.tar.gz.",
)
SIZE = typer.Option(None, "--image-size", rich_help_panel=ACCURACY, help="Input side in pixels (default: the model's).")
DEVICE = typer.Option(
    None, "--device", rich_help_panel=WHAT, help="auto, cpu, cuda, cuda:N (default auto: the GPU if there is one)."
)
WARM = typer.Option(None, "--warmup-batches", rich_help_panel=HOW, help="Untimed steps before timing.")
MIN_B = typer.Option(None, "--min-timed-batches", rich_help_panel=HOW, help="Timed steps run until this many steps ...")
MIN_T = typer.Option(None, "--min-time-s", rich_help_panel=HOW, help="... and this many seconds are reached.")
REPEATS = typer.Option(
    None,
    "--repeats",
    rich_help_panel=HOW,
    help="Timed windows per case (default 1); 2 or more give 95% confidence intervals, 5 or more a compare verdict.",
)
TELEMETRY = typer.Option(
    None,
    "--telemetry-period-ms",
    rich_help_panel=COST,
    help="Telemetry sampling period (default 100; 0 = sampler off).",
)
ISOLATION = typer.Option(
    None,
    "--telemetry-isolation",
    rich_help_panel=COST,
    help="Where the telemetry sampler runs: thread (of the measured process), process (a sampler process: a host-bound loop keeps its GIL), auto (default: process for host-bound backends).",
)
IDLE = typer.Option(
    None, "--idle-s", rich_help_panel=COST, help="Idle-power measurement before the sweep, s (default 3; 0 = skip)."
)
PRICE = typer.Option(
    None, "--price-per-hour", rich_help_panel=COST, help="USD per device-hour (default: the shipped price list)."
)
KWH = typer.Option(None, "--kwh-price", rich_help_panel=COST, help="USD per kWh: adds the electricity cost.")
SKIP_BAD = typer.Option(
    None,
    "--skip-bad-images",
    rich_help_panel=ACCURACY,
    help="Drop image files that do not decode (counted) instead of stopping.",
)
SEED = typer.Option(
    None, "--seed", rich_help_panel=HOW, help="Seed for weights, synthetic data and labels (default 0)."
)
LABEL_SPACE, LABELS, MEAN, STD, RESIZE, CROP_PCT = (typer_option(o) for o in EVALUATION.values())
DB = typer.Option("accelbench.db", "--db", rich_help_panel=STORE, help="SQLite results store.")
JSON = typer.Option(
    None,
    "--json",
    rich_help_panel=STORE,
    callback=json_to_stdout,
    help="Also write the run (spec, environment, results) as JSON; - for stdout (the rest goes to stderr).",
)

NAME = typer.Option(
    None,
    "--name",
    rich_help_panel=STORE,
    help="Name the run (e.g. nightly): compare --baseline NAME and name:NAME find it; TOML key name.",
)
TAG = typer.Option(
    None,
    "--tag",
    rich_help_panel=STORE,
    help="A key=value tag stored with the run (repeat for several); TOML table tags.",
)


def config_option(table: str):
    """``--config``/``-c``: a TOML file whose ``[table]`` (or top level) the command reads."""
    return typer.Option(
        None,
        "--config",
        "-c",
        rich_help_panel=WHAT,
        help=f"TOML file (top level or a [{table}] table); flags override it.",
    )


CONFIG = config_option("sweep")
RESUME = typer.Option(
    False, "--resume", rich_help_panel=STORE, help="Continue the newest unfinished run with the same settings."
)
WIDE = typer.Option(
    False,
    "--wide",
    rich_help_panel=STORE,
    help="Every column (default: a compact table that fits 80 columns; a pager when wider than the terminal).",
)
GPUS = typer.Option(
    None,
    "--gpus",
    rich_help_panel=DIST,
    help="Data parallel over N GPUs (N CPU processes without GPUs) through torchrun.",
)
NNODES = typer.Option(
    1, "--nnodes", rich_help_panel=DIST, help="With --gpus: nodes (torchrun --nnodes); run the same command on each."
)
NODE_RANK = typer.Option(
    0, "--node-rank", rich_help_panel=DIST, help="With --gpus: this node's index (torchrun --node-rank)."
)
RDZV = typer.Option(
    None, "--rdzv-endpoint", rich_help_panel=DIST, help="With --gpus: rendezvous host:port (torchrun --rdzv-endpoint)."
)
GLOBAL = typer.Option(
    False,
    "--global-batch",
    rich_help_panel=DIST,
    help="With --gpus: batch sizes are global, split over the ranks (strong scaling).",
)
TIMEOUT = typer.Option(
    900.0, "--timeout-s", rich_help_panel=DIST, help="With --gpus: seconds a case may run before its ranks are stopped."
)


def option(info, spec: str | None = None):
    """A group's field: the option ``info`` (``typer.Option``), setting spec field ``spec`` (default: its name)."""
    return field(default=info.default, metadata={"option": info, "spec": spec})


@dataclass(frozen=True)
class Take:
    """The options of ``group`` a command takes (:meth:`Group.take`)."""

    group: type
    names: tuple[str, ...]
    overrides: dict[str, Any]

    def parameters(self) -> list[inspect.Parameter]:
        """The options as keyword parameters of the command (typer reads their defaults as declarations)."""
        hints = typing.get_type_hints(self.group)
        decl = {f.name: f.metadata["option"] for f in dataclasses.fields(self.group)}
        return [
            inspect.Parameter(
                n, inspect.Parameter.KEYWORD_ONLY, default=self.overrides.get(n, decl[n]), annotation=hints[n]
            )
            for n in self.names
        ]

    def build(self, values: dict[str, Any]) -> Any:
        """What the command gets in this parameter: one instance of the group."""
        return self.group(**values)


class Group:
    """Base of the option groups (frozen dataclasses whose fields are :func:`option` s)."""

    __slots__ = ()

    @classmethod
    def take(cls, *, only: tuple[str, ...] | None = None, omit: tuple[str, ...] = (), **overrides) -> Take:
        """This group's options for a command: every one, ``only`` these or all but ``omit``; ``overrides`` word an
        option for the command (``images=typer.Option(...)``).

        Raises:
            KeyError: a name the group does not have (a typo in a command module fails at import).
        """
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [n for n in (*(only or ()), *omit, *overrides) if n not in names]
        if unknown:
            raise KeyError(f"{cls.__name__} has no option {', '.join(unknown)}")
        kept = tuple(n for n in names if (only is None or n in only) and n not in omit)
        return Take(group=cls, names=kept, overrides=dict(overrides))

    def fields(self) -> dict[str, Any]:
        """The options given (not None) as spec fields, a layer of :func:`accelbench.api.spec`."""
        return {
            f.metadata.get("spec") or f.name: v
            for f in dataclasses.fields(self)
            if (v := getattr(self, f.name)) is not None
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class What(Group):
    """What to measure: models, batch sizes, precisions, backends, memory format, images, device."""

    model: str | None = option(MODEL, spec="models")
    batch_sizes: str | None = option(BATCH)
    precisions: str | None = option(PREC)
    modes: str | None = option(MODES)
    channels_last: bool | None = option(CL)
    images: int | None = option(IMAGES)
    device: str | None = option(DEVICE)


@dataclass(frozen=True, kw_only=True, slots=True)
class Inputs(Group):
    """The inputs and how accuracy is read: data, input size, bad files, label space and labels, normalisation,
    the evaluation transform."""

    data: str | None = option(DATA)
    image_size: int | None = option(SIZE)
    label_space: str | None = option(LABEL_SPACE)
    labels: str | None = option(LABELS)
    mean: str | None = option(MEAN)
    std: str | None = option(STD)
    resize: int | None = option(RESIZE)
    crop_pct: float | None = option(CROP_PCT)
    skip_bad_images: bool | None = option(SKIP_BAD)


@dataclass(frozen=True, kw_only=True, slots=True)
class How(Group):
    """How to measure: warm-up, the timed window, repeated windows, cuDNN autotuning, the seed."""

    warmup_batches: int | None = option(WARM)
    min_timed_batches: int | None = option(MIN_B)
    min_time_s: float | None = option(MIN_T)
    repeats: int | None = option(REPEATS)
    cudnn_benchmark: bool | None = option(CUDNN)
    seed: int | None = option(SEED)


@dataclass(frozen=True, kw_only=True, slots=True)
class Cost(Group):
    """Telemetry and cost: the sampler's period and where it runs, the idle-power window, prices."""

    telemetry_period_ms: float | None = option(TELEMETRY)
    telemetry_isolation: str | None = option(ISOLATION)
    idle_s: float | None = option(IDLE)
    price_per_hour: float | None = option(PRICE)
    kwh_price: float | None = option(KWH)


@dataclass(frozen=True, kw_only=True, slots=True)
class Output(Group):
    """Where to store: the results store, the JSON copy, resuming, the wide table."""

    db: Path = option(DB)
    json_path: Path | None = option(JSON)
    resume: bool = option(RESUME)
    wide: bool = option(WIDE)


@dataclass(frozen=True, kw_only=True, slots=True)
class Label(Group):
    """The run's name and tags (``--name``, repeatable ``--tag key=value``; TOML keys ``name`` and ``tags``)."""

    name: str | None = option(NAME)
    tag: list[str] | None = option(TAG)

    def of(self, layers: list[dict] = ()):
        """The run's :class:`accelbench.core.runlabel.RunLabel`: the TOML layers' ``name`` and ``tags`` (taken out
        of them: they are no spec fields), then these flags over them.

        Raises:
            ConfigError: a bad name or tag (``--tag novalue``): one line, exit 2.
        """
        from accelbench.core.runlabel import run_label

        toml = [{k: layer.pop(k) for k in ("name", "tags") if k in layer} for layer in layers]
        return run_label(self.name, self.tag, *toml)


@dataclass(frozen=True, kw_only=True, slots=True)
class Launch(Group):
    """The torchrun launch of ``--gpus N``: nodes, rendezvous, global batch, the per-case timeout."""

    gpus: int | None = option(GPUS)
    nnodes: int = option(NNODES)
    node_rank: int = option(NODE_RANK)
    rdzv_endpoint: str | None = option(RDZV)
    global_batch: bool = option(GLOBAL)
    timeout_s: float = option(TIMEOUT)

    def options(self, device: str | None, gpus: int | None = None):
        """:func:`launch_options` of these options (``gpus`` given: that many processes instead of ``--gpus``)."""
        return launch_options(
            self.gpus if gpus is None else gpus,
            nnodes=self.nnodes,
            node_rank=self.node_rank,
            rdzv_endpoint=self.rdzv_endpoint,
            global_batch=self.global_batch,
            timeout_s=self.timeout_s,
            device=device,
        )


def launch_options(
    gpus: int | None,
    *,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
    global_batch: bool = False,
    timeout_s: float = 900.0,
    device: str | None = None,
):
    """The torchrun options of ``--gpus N`` and friends, or None for one process.

    Raises:
        ConfigError: ``gpus`` below 1.
    """
    from accelbench.core.errors import ConfigError
    from accelbench.launchers.torchrun.job import DistOptions

    if gpus is not None and gpus < 1:
        raise ConfigError("--gpus", gpus, "1 or more")
    if gpus is None and nnodes == 1 and rdzv_endpoint is None and not global_batch:
        return None
    dev = "auto" if device in (None, "auto") else ("cpu" if device == "cpu" else "cuda")
    return DistOptions(
        gpus=gpus or 1,
        nnodes=nnodes,
        node_rank=node_rank,
        rdzv_endpoint=rdzv_endpoint,
        global_batch=global_batch,
        timeout_s=timeout_s,
        device=dev,
    )


def int_list(name: str, text: str, allowed: str = "a comma-separated list of integers") -> tuple[int, ...]:
    """``"1,2,4"`` as a tuple of ints; a :class:`ConfigError` naming ``name`` (the option typed) otherwise."""
    from accelbench.core.config import parse_list
    from accelbench.core.errors import ConfigError

    try:
        return parse_list("batch_sizes", text)  # the integer-list parser; its error would name batch sizes
    except ConfigError:
        raise ConfigError(name, text, allowed) from None


def expand(fn):
    """``fn`` with each parameter whose default is a :class:`Take` replaced by that group's options; called with
    them, it gets one group instance in that parameter.

    Raises:
        TypeError: two options of one command with the same name.
    """
    sig, hints = inspect.signature(fn), typing.get_type_hints(fn)
    params, takes = [], {}
    for p in sig.parameters.values():
        if isinstance(p.default, Take):
            takes[p.name] = p.default
            params += p.default.parameters()
        else:  # keyword-only, as the groups' options (typer calls with keywords): the order shown stays
            params.append(p.replace(annotation=hints.get(p.name, p.annotation), kind=inspect.Parameter.KEYWORD_ONLY))
    if not takes:
        return fn
    names = [p.name for p in params]
    if len(set(names)) < len(names):
        raise TypeError(f"{fn.__name__}: options named twice: {sorted({n for n in names if names.count(n) > 1})}")

    @functools.wraps(fn)
    def wrapped(**kwargs):
        for name, take in takes.items():
            kwargs[name] = take.build({n: kwargs.pop(n) for n in take.names})
        return fn(**kwargs)

    wrapped.__signature__ = sig.replace(parameters=params)
    wrapped.__annotations__ = {p.name: p.annotation for p in params}
    return wrapped

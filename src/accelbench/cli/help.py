"""Help and shell completion of the command line.

- Commands are listed in the order a user meets them (measure, search and scale, read results, utilities),
  each group a rich help panel; options are grouped in panels too (:data:`WHAT`, :data:`HOW`, ...).
- Help texts name the registries' values and the scenario's defaults, filled in only when help is shown:
  ``{precisions}`` and ``{backends}`` in a help text become the registered names (the backends serving the
  command's workload: :func:`backend_names`), ``{tune_precisions}`` / ``{tune_modes}`` tune's default spaces
  (:func:`accelbench.studies.tune_space.describe_defaults`), and an option of a spec field
  whose help states no default gets ``(default: GPU ...; CPU ...)`` from the command's scenario. Nothing is
  imported for that until then, so ``accelbench --help`` and completion stay fast, and no list can drift.
- Help text is rich markup for typer's panels; ours is escaped first, so ``accelbench[timm]`` prints as written.
- Completion of ``--model``, ``--precisions`` and ``--modes`` reads the registries (a comma-separated list
  completes its last item; ``--modes`` offers the backends serving the command's workload).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typer.core import TyperCommand, TyperGroup

WHAT = "What to measure"
ACCURACY = "Inputs and accuracy"
HOW = "How to measure"
COST = "Telemetry and cost"
STORE = "Where to store"
DIST = "Distributed (torchrun)"
# a declared option's panel (accelbench.core.options.PANELS) -> its title
PANEL_TITLES = {"what": WHAT, "accuracy": ACCURACY, "how": HOW, "cost": COST, "store": STORE, "dist": DIST}

COMMAND_PANELS: dict[str, tuple[str, ...]] = {
    "Measure": ("run", "train", "generate", "input-pipeline", "profile", "loadgen", "serve"),
    "Search and scale": ("tune", "scale", "interconnect", "concurrent"),
    "Read results": ("results", "compare", "report", "export", "import", "schema", "telemetry", "cost"),
    "Utilities": ("models",),
}
ORDER = [name for names in COMMAND_PANELS.values() for name in names]
PANEL_OF = {name: panel for panel, names in COMMAND_PANELS.items() for name in names}

# the scenario whose defaults a command's help states (commands not named here state their own)
SCENARIO_OF = {
    "run": "inference",
    "train": "train_step",
    "loadgen": "loadgen",
    "profile": "profile",
    "generate": "generate",
    "scale": "inference",
    "concurrent": "inference",
    "input-pipeline": "input_pipeline",
}
# how a command's help names the defaults it states (train's are the step sweep's; --epochs has its own)
DEFAULT_WORDS = {"train": "default of the step sweep"}
# option (parameter) name -> spec field, where they differ
FIELD_OF = {"model": "models", "max_batch": "batch_sizes"}
# commands whose backends serve more than their scenario's workload (profile --step, tune --workload)
WORKLOADS_OF = {"profile": ("inference", "train"), "tune": ("inference", "train")}


def _escape(text: str | None) -> str | None:
    """``text`` as rich markup that prints as written, its paragraphs' line breaks joined (rich keeps them)."""
    import inspect
    import re

    from rich.markup import escape

    return None if text is None else escape(re.sub(r"(?<!\n)\n(?!\n)", " ", inspect.cleandoc(text)))


def _shown(value: Any) -> str:
    """A default as a user types it: ``(1, 2, 4, ..., 1024)`` -> ``1,2,4,8,...,1024``."""
    if isinstance(value, (tuple, list)):
        items = [str(v) for v in value]
        return ",".join(items[:4] + ["..."] + items[-1:]) if len(items) > 6 else ",".join(items) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def default_text(scenario: str, field: str, words: str = "default") -> str | None:
    """``(default: GPU a; CPU b)`` (or ``(default: a)`` when they agree) of ``field`` in ``scenario``, or None."""
    from accelbench import scenarios

    sc = scenarios.get(scenario)
    gpu, cpu = sc.defaults(True).get(field), sc.defaults(False).get(field)
    if gpu is None and cpu is None:
        return None
    if gpu == cpu:
        return f"({words}: {_shown(gpu)})"
    return f"({words}: GPU {_shown(gpu)}; CPU {_shown(cpu)})"


def command_workloads(command: str | None, params: dict | None = None) -> tuple[str, ...] | None:
    """The workloads a command's cases ask of a backend: its scenario's (``train``: train), profile's steps and
    tune's workloads (its ``--workload`` when ``params`` holds it); None: every backend (a command we do not know)."""
    from accelbench import scenarios

    if command == "tune" and (params or {}).get("workload"):
        return (params["workload"],)
    if command in WORKLOADS_OF:
        return WORKLOADS_OF[command]
    return (scenarios.get(SCENARIO_OF[command]).backend_workload,) if command in SCENARIO_OF else None


def backend_names(command: str | None = None, params: dict | None = None) -> list[str]:
    """The modes (backends and engines) a command takes (:func:`command_workloads`), in registry order."""
    from accelbench import backends

    workloads = command_workloads(command, params)
    return [n for n in backends.names() if workloads is None or set(workloads) & set(backends.mode(n).workloads)]


def registry_words(command: str | None = None) -> dict[str, str]:
    """The ``{name}`` placeholders of help texts: the registered precisions, the backends ``command`` takes and
    tune's default spaces."""
    from accelbench import precisions

    workloads = command_workloads(command)
    taken = [n for n, p in precisions.PRECISIONS.items() if workloads is None or set(workloads) & set(p.workloads)]
    words = {"{precisions}": ", ".join(taken), "{backends}": ", ".join(backend_names(command))}
    if command == "tune":
        from accelbench.studies.tune_space import describe_defaults

        words.update({"{tune_precisions}": describe_defaults("precisions"), "{tune_modes}": describe_defaults("modes")})
    return words


def _fill(param, command: str, words: dict[str, str]) -> str:
    """``param``'s help with the registries' names filled in and, when it states no default (neither in its text
    nor as typer's ``[default: ...]``), the scenario's."""
    text = param.help
    for key, value in words.items():
        text = text.replace(key, value)
    stated = "default" in text.lower() or param.default not in (None, False)
    field = FIELD_OF.get(param.name or "", param.name or "")
    scenario = SCENARIO_OF.get(command)
    extra = default_text(scenario, field, DEFAULT_WORDS.get(command, "default")) if scenario and not stated else None
    return text + (" " + extra if extra else "")


def _prepare_text(command) -> None:
    """Escape a command's own help once (its docstring is rich markup to typer)."""
    if not getattr(command, "_help_escaped", False):
        command._help_escaped = True
        command.help, command.short_help = _escape(command.help), _escape(command.short_help)


def prepare(command) -> None:
    """Fill in and escape a command's help texts once (placeholders, defaults; markup escaped)."""
    _prepare_text(command)
    if getattr(command, "_params_filled", False):
        return
    command._params_filled = True
    words = registry_words(command.name)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = _escape(_fill(param, command.name or "", words))


class HelpCommand(TyperCommand):
    """A typer command whose help is completed (:func:`prepare`) when it is shown."""

    def format_help(self, ctx, formatter) -> None:
        prepare(self)
        return super().format_help(ctx, formatter)


class OrderedGroup(TyperGroup):
    """The app: commands listed in :data:`ORDER` (typer lists them in registration order)."""

    def list_commands(self, ctx) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))

    def format_help(self, ctx, formatter) -> None:
        _prepare_text(self)
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None:
                _prepare_text(cmd)
        return super().format_help(ctx, formatter)


def complete_list(names: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """A completion callback for a comma-separated list: completes its last item from ``names(ctx)`` (``ctx``:
    the command's click context, None when called directly)."""

    def complete(incomplete: str, ctx=None) -> list[str]:
        head, comma, last = incomplete.rpartition(",")
        return [head + comma + n for n in names(ctx) if n.startswith(last)]

    return complete


def _models(ctx=None) -> list[str]:
    from accelbench.models import list_models

    return list_models()


def _precisions(ctx=None) -> list[str]:
    from accelbench import precisions

    return list(precisions.PRECISIONS)


def _backends(ctx=None) -> list[str]:
    """The backends the command being completed takes (every backend without a context)."""
    if ctx is None:
        return backend_names()
    return backend_names(ctx.command.name if ctx.command else ctx.info_name, ctx.params)


complete_models = complete_list(_models)
complete_precisions = complete_list(_precisions)
complete_backends = complete_list(_backends)


def typer_option(opt) -> Any:
    """The typer declaration of a declared option (:class:`accelbench.core.options.Option`): its flags, its panel, its
    help with its default stated; None when not given (the spec's layers decide)."""
    import typer

    return typer.Option(None, *opt.flags, rich_help_panel=PANEL_TITLES[opt.panel], help=opt.help_text())

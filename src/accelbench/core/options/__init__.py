"""Options declared once: an :class:`Option` names a scenario setting, its type, unit, default (per device where
the GPU and CPU defaults differ), help, validation, TOML key and aliases, and help panel; everything else is
generated from it.

How a scenario declares an option:

1. Declare it beside the scenario's other options, in a module of this package (``core/options/<scenario>.py``:
   the command line builds its flags when imported, and ``accelbench --help`` imports no scenario)::

       OPTIONS = declare(
           Option(name="new_tokens", type=int, many=True, low=2, default=(128,), gpu=(128,), cpu=(32,),
                  unit="tokens", help="Tokens generated a sequence", aliases=("max_new_tokens",)),
       )

2. Store it in the scenario's settings dataclass: ``new_tokens: tuple[int, ...] = OPTIONS["new_tokens"].field()``,
   and validate with :func:`check_declared` in ``__post_init__``; the spec defaults are :func:`device_defaults`,
   the scenario's ``aliases`` :func:`aliases`.
3. Take it in the command: ``settings: Given = declared(OPTIONS)`` (:func:`accelbench.cli.options.declared`) makes
   each option a flag (``--new-tokens``), and ``settings.fields()`` the flags' spec layer.

From one declaration come: the flag and its short form, the TOML key (the name; ``-`` spells ``_``) and its aliases,
the settings field's default and check (one-line :class:`~accelbench.core.errors.ConfigError` naming the field and
what is allowed), the help text with its default, and the docs' option table (``docs/reference.md``).

Pure code: imports nothing of accelbench outside ``core``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.core.config import INT_MAX, is_int, is_number, parse_list
from accelbench.core.errors import ConfigError

UNSET: Any = object()
# the help panels an option is listed in (``cli/help.py`` titles them)
PANELS = ("what", "accuracy", "how", "cost", "store", "dist")


@dataclass(frozen=True, kw_only=True, slots=True)
class Option:
    """One setting of a scenario, declared once.

    Attributes:
        name: the settings field, the TOML key and (``_`` as ``-``) the flag: ``prompt_lens`` -> ``--prompt-lens``.
        type: ``int``, ``float``, ``str`` or ``bool`` (of each item when ``many``).
        default: the settings dataclass's default (what :func:`accelbench.api.spec` gets when nothing says more).
        help: one sentence, no default in it (the default is stated from the declaration).
        many: a comma-separated list (``"128,2048"``), stored as a tuple; empty is refused.
        unit: the unit of a number, as help and docs name it (``tokens``, ``s``, ``ms``).
        gpu / cpu: the spec's default on a GPU / on a CPU where it differs from ``default``.
        low / high: the range of a number (of each item when ``many``); None: unbounded.
        choices: the allowed strings.
        allowed: what the error message says is allowed, where the derived words would not do.
        flag: the long flag where it is not ``--`` + the name; short: a short flag (``-n``); more_flags: other long
            spellings (``--prompt-lens`` beside ``--prompt-len``).
        negatable: a ``bool`` flag also has ``--no-`` (``--perplexity/--no-perplexity``).
        aliases: other TOML keys and flag spellings for the same field.
        panel: the help panel (one of :data:`PANELS`).
        default_text: the default in words where it is no value (``the model's``).
        raw: a list handed to the scenario's ``normalize`` as typed (``--mean imagenet``: a preset name).
        item: the name a list's error gives one bad item (``scenario`` for an item of ``scenarios``).
    """

    name: str
    type: type
    default: Any
    help: str
    many: bool = False
    unit: str = ""
    gpu: Any = UNSET
    cpu: Any = UNSET
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    allowed: str = ""
    flag: str = ""
    short: str = ""
    more_flags: tuple[str, ...] = ()
    negatable: bool = True
    aliases: tuple[str, ...] = ()
    panel: str = "what"
    default_text: str = ""
    raw: bool = False
    item: str = ""

    def __post_init__(self) -> None:
        if self.panel not in PANELS:
            raise ValueError(f"option {self.name}: panel {self.panel!r} is not one of {', '.join(PANELS)}")
        if self.default is not None:
            self.check(self.default)  # a declaration whose own default it refuses fails at import

    # --- what the declaration generates ----------------------------------------------------------------------------
    @property
    def flags(self) -> tuple[str, ...]:
        """The flag declarations typer takes: ``("--perplexity/--no-perplexity",)``, ``("--images", "-n")``."""
        long = self.flag or "--" + self.name.replace("_", "-")
        if self.type is bool and self.negatable:
            long = f"{long}/--no-{long[2:]}"
        return (long, *self.more_flags, *((self.short,) if self.short else ()))

    def field(self) -> Any:
        """The settings dataclass field: this default, the declaration in its metadata (:func:`check_declared`)."""
        return dataclasses.field(default=self.default, metadata={"option": self})

    def default_for(self, cuda: bool) -> Any:
        """The spec's default on a GPU (``cuda``) or a CPU."""
        value = self.gpu if cuda else self.cpu
        return self.default if value is UNSET else value

    def default_words(self) -> str:
        """``(default: GPU 128,2048; CPU 64)``, or ``(default: 256)`` where the devices agree; ``""`` for none."""
        gpu, cpu = self.default_for(True), self.default_for(False)
        if gpu is None and cpu is None:
            return f"(default: {self.default_text})" if self.default_text else ""
        if gpu == cpu:
            every = self.many and self.choices and set(gpu) == set(self.choices)
            return "(default: all)" if every else f"(default: {shown(gpu)})"
        return f"(default: GPU {shown(gpu)}; CPU {shown(cpu)})"

    def help_text(self) -> str:
        """The help of the flag and of the docs: the sentence, the unit, the choices, the default."""
        text = self.help.rstrip(".")
        if self.unit:
            text += f", in {self.unit}"
        if self.choices:
            text += f": {', '.join(self.choices)}"
        words = self.default_words()
        return f"{text} {words}." if words else f"{text}."

    # --- reading and checking a value ------------------------------------------------------------------------------
    def parse(self, value: Any) -> Any:
        """A flag's or a TOML value as the field holds it: ``"128,2048"`` -> ``(128, 2048)`` for a list of ints.

        Raises:
            ConfigError: a list item that is not of the type.
        """
        if not self.many or self.raw or value is None:
            return value
        if self.type is not int:
            return parse_list(self.name, value, str)  # float and bool lists are no use yet; their check names them
        try:
            return parse_list(self.name, value, int)
        except ConfigError:
            raise ConfigError(self.name, value, "a comma-separated list of integers") from None

    def allowed_words(self) -> str:
        """What the error message says is allowed: ``integers >= 2``, ``random, text``, ``a number in 0..1``."""
        if self.allowed:
            return self.allowed
        if self.choices:
            return ", ".join(self.choices)
        if self.type is bool:
            return "true or false"
        kind = {int: "an integer", float: "a number", str: "a string"}[self.type]
        if self.many:
            kind = {int: "integers", float: "numbers", str: "strings"}[self.type]
        low, high = self.low, self.high if self.high not in (None, INT_MAX) else None
        if low is not None and high is not None:
            return f"{kind} in {low:g}..{high:g}"
        return f"{kind} >= {low:g}" if low is not None else f"{kind} <= {high:g}" if high is not None else kind

    def _item_ok(self, v: Any) -> bool:
        low = -float("inf") if self.low is None else self.low
        high = float("inf") if self.high is None else self.high
        if self.type is bool:
            return isinstance(v, bool)
        if self.type is int:
            return is_int(v, int(max(low, -(2**63))), int(min(high, INT_MAX)))
        if self.type is float:
            return is_number(v, low, high)
        return isinstance(v, str) and (not self.choices or v in self.choices)

    def check(self, value: Any) -> None:
        """Refuse a value the declaration does not allow (None where the default is None is allowed).

        Raises:
            ConfigError: one line naming the field, the value and :meth:`allowed_words`.
        """
        if value is None and self.default is None:
            return
        if self.many:
            if not isinstance(value, tuple) or not value:
                raise ConfigError(self.name, value, self.allowed_words())
            bad = next((v for v in value if not self._item_ok(v)), UNSET)
            if bad is not UNSET:
                raise ConfigError(self.item or self.name, bad, self.allowed_words())
        elif not self._item_ok(value):
            raise ConfigError(self.name, value, self.allowed_words())


def shown(value: Any) -> str:
    """A default as a user types it: ``(1, 2, 4, ..., 1024)`` -> ``1,2,4,8,...,1024`` (names: ``a, b``); a float
    without exponent; a bool as on or off."""
    if isinstance(value, (tuple, list)):
        items = [str(v) for v in value]
        sep = ", " if any(isinstance(v, str) for v in value) else ","  # names wrap in a narrow help; numbers stay typed
        return sep.join(items[:4] + ["..."] + items[-1:]) if len(items) > 6 else sep.join(items) or "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, float) else str(value)


def declare(*options: Option) -> dict[str, Option]:
    """The options by name, in the order given (the order of help and docs).

    Raises:
        ValueError: a name, flag or alias declared twice.
    """
    out: dict[str, Option] = {}
    spelled: set[str] = set()
    for opt in options:
        words = {opt.name, *opt.aliases, *opt.flags}
        if opt.name in out or words & spelled:
            raise ValueError(f"option {opt.name}: {', '.join(sorted(words & spelled)) or opt.name} declared twice")
        spelled |= words
        out[opt.name] = opt
    return out


def device_defaults(options: Mapping[str, Option], cuda: bool) -> dict[str, Any]:
    """The spec defaults of ``options`` on a GPU (``cuda``) or a CPU: name -> value (a scenario's defaults)."""
    return {name: opt.default_for(cuda) for name, opt in options.items()}


def aliases(options: Mapping[str, Option]) -> dict[str, str]:
    """Every alias of ``options`` -> its option's name (a scenario's ``aliases``)."""
    return {alias: name for name, opt in options.items() for alias in opt.aliases}


def declared_fields(cls: type) -> dict[str, Option]:
    """The declared options of the dataclass ``cls`` (fields made by :meth:`Option.field`), by field name."""
    return {f.name: f.metadata["option"] for f in dataclasses.fields(cls) if "option" in f.metadata}


def check_declared(settings: Any) -> None:
    """Check every declared field of a settings dataclass instance against its declaration.

    Raises:
        ConfigError: the first field whose value its declaration refuses.
    """
    for name, opt in declared_fields(type(settings)).items():
        opt.check(getattr(settings, name))


def parse_declared(cls: type, key: str, value: Any) -> Any:
    """``value`` of the settings field ``key`` of ``cls`` as the field holds it (:meth:`Option.parse`); a field
    without a declaration: as given."""
    opt = declared_fields(cls).get(key)
    return value if opt is None else opt.parse(value)


def markdown_table(options: Mapping[str, Option]) -> str:
    """The options as a markdown table (``docs/reference.md``): flag, TOML key and aliases, type, default, allowed
    values, help; every cell from the declaration."""
    rows = ["| flag | TOML key (aliases) | type | default | allowed | what |", "| --- | --- | --- | --- | --- | --- |"]
    for opt in options.values():
        flags = " ".join(f"`{f}`" for f in opt.flags)
        key = f"`{opt.name}`" + (f" ({', '.join(f'`{a}`' for a in opt.aliases)})" if opt.aliases else "")
        kind = ("list of " if opt.many else "") + opt.type.__name__ + (f", {opt.unit}" if opt.unit else "")
        default = opt.default_words().removeprefix("(default: ").removesuffix(")") or "none"
        cells = (default, opt.allowed_words(), opt.help.rstrip("."))
        default, allowed, text = (c.replace("|", "\\|").replace("<", "\\<") for c in cells)  # markdown as written
        rows.append(f"| {flags} | {key} | {kind} | {default} | {allowed} | {text} |")
    return "\n".join(rows)

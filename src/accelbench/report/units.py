"""Numbers for people: the one place that turns a value in its base unit into text.

Every terminal table and note formats through here, so a number reaches the user with a few significant
digits, thousands separators and an SI prefix on its unit, never in exponent form (``1.07e+03 ms`` is
``1.07 s``; ``$9.39e-05`` is ``$93.9µ``). Values come in base units (s, B, W, J, USD, FLOP/s, samples/s:
the unit in the stored column's name); only the text is rounded. Missing values (None, NaN) are ``-``.
"""

from __future__ import annotations

import math
from typing import Any

# (scale, prefix), largest first: engineering notation (exponents that are multiples of 3)
PREFIXES = (
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
    (1.0, ""),
    (1e-3, "m"),
    (1e-6, "µ"),
    (1e-9, "n"),
    (1e-12, "p"),
)
# Units shown with an SI prefix; any other unit (samples/s, QPS, img/s) is a count: digits and separators only.
PREFIXED = ("s", "B", "B/s", "W", "J", "FLOP", "FLOP/s", "OP/s", "Hz")
MISSING = "-"


def missing(v: Any) -> bool:
    """True for None, NaN and anything that is not a number."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return True
    return math.isnan(v) or math.isinf(v)


def number(v: float, digits: int = 3) -> str:
    """``v`` with ``digits`` significant digits (more when the integer part needs them), thousands separated,
    never in exponent form: ``1070.4 -> "1,070"``, ``8.417 -> "8.42"``, ``0.01234 -> "0.0123"``."""
    if missing(v):
        return MISSING
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    decimals = max(0, digits - 1 - mag)
    rounded = round(v, decimals)
    if rounded and decimals and math.floor(math.log10(abs(rounded))) > mag:  # 9.996 -> 10.0, not 10.00
        decimals -= 1
    return f"{v:,.{decimals}f}"


def si(v: float, unit: str = "", digits: int = 3, *, largest: str = "P") -> str:
    """``v`` in engineering notation with an SI prefix on ``unit``: ``7.9e14, "FLOP/s" -> "790 TFLOP/s"``,
    ``9.39e-5 -> "93.9µ"``, ``0.00107, "s" -> "1.07 ms"``.

    Args:
        largest: the largest prefix to use (``""`` for seconds: ``1,070 s``, not ``1.07 ks``).
    """
    if missing(v):
        return MISSING
    if v == 0:
        return f"0 {unit}" if unit else "0"
    scales = PREFIXES[[p for _, p in PREFIXES].index(largest) :]
    i = next((i for i, (s, _) in enumerate(scales) if abs(v) >= s), len(scales) - 1)
    if i > 0 and abs(float(f"{v / scales[i][0]:.{digits}g}")) >= 1000:  # 999.96 k rounds to 1.00 M
        i -= 1
    scale, prefix = scales[i]
    mantissa = v / scale
    text = number(mantissa, digits)
    return f"{text} {prefix}{unit}" if unit else f"{text}{prefix}"


def usd(v: float) -> str:
    """Dollars: ``$12.34``, ``$0.0939``, and below a tenth of a cent with a prefix: ``$93.9µ``."""
    if missing(v):
        return MISSING
    sign = "-" if v < 0 else ""
    v = abs(v)
    if v >= 1:
        return f"{sign}${v:,.2f}"
    return f"{sign}${number(v)}" if v >= 1e-3 or v == 0 else f"{sign}${si(v, largest='')}"


def rate(v: float) -> str:
    """A count per second (samples/s, QPS) for a table: no decimals from 1,000 up (the spread is larger)."""
    if missing(v):
        return MISSING
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.1f}"


def quantity(v: float, unit: str, digits: int = 3) -> str:
    """``v`` (in base unit ``unit``) as text with its unit: SI-prefixed for the units in :data:`PREFIXED`
    (seconds at most ``s``), dollars for ``USD``, digits and separators for counts (``samples/s``).

    ``quantity(1.0704, "s") -> "1.07 s"``, ``quantity(9.39e-5, "USD") -> "$93.9µ"``,
    ``quantity(3.2e9, "B") -> "3.2 GB"``, ``quantity(1234.5, "samples/s") -> "1,234 samples/s"``.
    """
    if missing(v):
        return MISSING
    if unit == "USD":
        return usd(v)
    if unit in PREFIXED:
        return si(v, unit, digits, largest="" if unit == "s" else "P")
    return f"{rate(v)} {unit}"


def ms(v_ms: float) -> str:
    """A duration stored in milliseconds (``latency_p99_ms``) as text: ``1070.4 -> "1.07 s"``, ``8.4 -> "8.4 ms"``."""
    return MISSING if missing(v_ms) else quantity(v_ms / 1e3, "s")


def binary_bytes(n: float) -> str:
    """``1024 -> "1 KiB"``, ``1073741824 -> "1 GiB"`` (binary prefixes, as message sizes are chosen)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if float(n).is_integer() else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _decimals(arg: str, default: int) -> int:
    return int(arg) if arg else default


# A column's display format (``Column.fmt`` of accelbench.core.columns): kind -> (value, argument) -> text.
FORMATS = {
    "text": lambda v, a: str(v),
    "int": lambda v, a: str(int(v)),
    "yesno": lambda v, a: "yes" if v else "no",
    "YESno": lambda v, a: "YES" if v else "no",
    "number": lambda v, a: number(v, _decimals(a, 3)),
    "rate": lambda v, a: rate(v),
    "usd": lambda v, a: usd(v),
    "ms": lambda v, a: ms(v),
    "si": lambda v, a: si(v, a),
    "ibytes": lambda v, a: binary_bytes(v),
    "fixed": lambda v, a: format(v, a),
    "pct": lambda v, a: f"{100 * v:.{_decimals(a, 1)}f}%",
    "spct": lambda v, a: f"{100 * v:+.{_decimals(a, 2)}f}%",
    "signed": lambda v, a: f"{v:+.{_decimals(a, 2)}f}",
    "times": lambda v, a: f"{v:.{_decimals(a, 2)}f}x",
    "interval": lambda v, a: f"{v[0]:,.1f}..{v[1]:,.1f}" if v[0] >= 100 else f"{v[0]:.2f}..{v[1]:.2f}",
}
_TEXT_KINDS = ("text", "yesno", "YESno", "interval")


def formatter(fmt: str, scale: float = 1.0):
    """The function that turns a value into text for format ``fmt`` (``kind`` or ``kind:argument``, a
    :data:`FORMATS` kind), the value multiplied by ``scale`` first (1e3: J shown as mJ).

    Raises:
        ValueError: an unknown kind.
    """
    kind, _, arg = fmt.partition(":")
    if kind not in FORMATS:
        raise ValueError(f"unknown display format {fmt!r}: one of {', '.join(FORMATS)}")
    fn = FORMATS[kind]
    if kind in _TEXT_KINDS or scale == 1.0:
        return lambda v: fn(v, arg)
    return lambda v: fn(v * scale, arg)

"""The requests a serving benchmark sends: prompts with their token counts and the output length each asks for.

Sources (none downloads anything):

| source | prompt | output length |
| --- | --- | --- |
| ``random`` | random token ids (special tokens left out) decoded with the model's tokenizer (vLLM's ``random`` dataset) | ``output_len`` |
| ``text`` | windows of the shipped held-out text (:func:`accelbench.data.text.held_out_text`) | ``output_len`` |
| ``sharegpt`` | the first human turn of each conversation of a local ShareGPT-format JSON (vLLM's ``sharegpt``) | the reply's token count, unless ``output_len`` is given |
| ``jsonl`` | ``{"prompt": ..., "output_len": ...}`` lines of a local file | the line's ``output_len``, unless ``output_len`` is given |

``input_len`` and ``output_len`` are an int (fixed) or a ``(low, high)`` pair (drawn uniformly, both ends included,
from ``random.Random(seed)``). A file with fewer usable entries than ``n`` is cycled; ``sharegpt`` and ``jsonl``
entries are shuffled with the seed first (vLLM's sampling).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core.errors import ConfigError

SOURCES = ("random", "text", "sharegpt", "jsonl")
Length = int | tuple[int, int] | None


@dataclass(frozen=True, kw_only=False, slots=True)
class Request:
    """One request.

    Attributes:
        prompt: the text sent.
        prompt_tokens: its token count by the model's tokenizer (no special tokens added).
        output_len: output tokens asked for (fixed), or None (the server decides when to stop).
    """

    prompt: str
    prompt_tokens: int
    output_len: int | None


def draw(length: Length, rng: random.Random) -> int | None:
    """``length`` itself, or a uniform draw from its ``(low, high)`` range (both included)."""
    if length is None or isinstance(length, int):
        return length
    low, high = length
    return rng.randint(low, high)


def _check_length(name: str, length: Length, required: bool) -> None:
    ok = length is None and not required
    if isinstance(length, int) and not isinstance(length, bool):
        ok = length >= 1
    elif isinstance(length, tuple) and len(length) == 2 and all(isinstance(v, int) for v in length):
        ok = 1 <= length[0] <= length[1]
    if not ok:
        raise ConfigError(name, length, "a token count >= 1 or a (low, high) range")


def _count(tokenizer: Any, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False))


def _random(n: int, tokenizer: Any, input_len: Length, output_len: Length, rng: random.Random) -> list[Request]:
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    vocab = [i for i in range(len(tokenizer)) if i not in special]
    out = []
    for _ in range(n):
        prompt = tokenizer.decode([rng.choice(vocab) for _ in range(draw(input_len, rng))])
        out.append(Request(prompt, _count(tokenizer, prompt), draw(output_len, rng)))
    return out


def _text(n: int, tokenizer: Any, input_len: Length, output_len: Length, rng: random.Random) -> list[Request]:
    from accelbench.data.text import held_out_text

    # the whole text is longer than the model's context: verbose=False keeps the tokenizer from warning so
    ids = tokenizer.encode(held_out_text(), add_special_tokens=False, verbose=False)
    out = []
    for _ in range(n):
        length = min(draw(input_len, rng), len(ids))
        start = rng.randrange(len(ids) - length + 1)
        prompt = tokenizer.decode(ids[start : start + length])
        out.append(Request(prompt, _count(tokenizer, prompt), draw(output_len, rng)))
    return out


def _read(path: str | None, source: str, what: str) -> str:
    if path is None:
        raise ConfigError("dataset path", path, f"a local {what} file (--dataset {source} reads one)")
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("dataset path", path, f"a readable {what} file ({type(exc).__name__})") from None


def _sharegpt_pairs(path: str | None) -> list[tuple[str, str | None]]:
    what = "ShareGPT-format JSON (a list of {'conversations': [{'from': 'human', 'value': ...}, ...]})"
    try:
        data = json.loads(_read(path, "sharegpt", what))
        pairs = []
        for entry in data:
            turns = entry["conversations"]
            human = next(i for i, t in enumerate(turns) if t["from"] == "human")
            reply = turns[human + 1]["value"] if human + 1 < len(turns) else None
            pairs.append((turns[human]["value"], reply))
    except (ValueError, KeyError, TypeError, StopIteration, IndexError):
        raise ConfigError("dataset path", path, what) from None
    if not pairs:
        raise ConfigError("dataset path", path, f"{what} with at least one conversation")
    return pairs


def _jsonl_pairs(path: str | None) -> list[tuple[str, int | None]]:
    what = 'JSON-lines file of {"prompt": ..., "output_len": ...}'
    pairs = []
    for number, line in enumerate(_read(path, "jsonl", what).splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            prompt, length = obj["prompt"], obj.get("output_len")
            if not isinstance(prompt, str) or not (length is None or (isinstance(length, int) and length >= 1)):
                raise TypeError
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ConfigError("dataset path", f"{path}:{number}", what) from None
        pairs.append((prompt, length))
    if not pairs:
        raise ConfigError("dataset path", path, f"{what} with at least one line")
    return pairs


def _from_file(source: str, path: str | None, n: int, tokenizer: Any, output_len: Length, rng: random.Random):
    pairs: list[tuple[str, Any]] = _sharegpt_pairs(path) if source == "sharegpt" else _jsonl_pairs(path)
    rng.shuffle(pairs)
    out = []
    for i in range(n):
        prompt, given = pairs[i % len(pairs)]
        if output_len is not None:
            length = draw(output_len, rng)
        elif source == "sharegpt":
            length = max(1, _count(tokenizer, given)) if given else None
        else:
            length = given
        out.append(Request(prompt, _count(tokenizer, prompt), length))
    return out


def make_requests(
    source: str,
    n: int,
    *,
    tokenizer: Any,
    input_len: Length = None,
    output_len: Length = None,
    seed: int,
    path: str | None = None,
) -> list[Request]:
    """``n`` requests from ``source`` (module docstring), the same for the same arguments.

    Args:
        tokenizer: the served model's tokenizer (``encode(text, add_special_tokens=False)``, ``decode(ids)``,
            ``len()``): counts prompt tokens and builds ``random``/``text`` prompts.
        input_len: prompt tokens (``random``, ``text``; required there).
        output_len: output tokens asked for; None keeps a file's own lengths.
        path: the local file of ``sharegpt`` and ``jsonl``.

    Raises:
        ConfigError: an unknown source, a bad length, or a missing or malformed file (naming it).
    """
    if source not in SOURCES:
        raise ConfigError("dataset", source, ", ".join(SOURCES))
    if not isinstance(n, int) or n < 1:
        raise ConfigError("requests", n, "an integer >= 1")
    _check_length("input length", input_len, required=source in ("random", "text"))
    _check_length("output length", output_len, required=False)
    rng = random.Random(seed)
    if source == "random":
        return _random(n, tokenizer, input_len, output_len, rng)
    if source == "text":
        return _text(n, tokenizer, input_len, output_len, rng)
    return _from_file(source, path, n, tokenizer, output_len, rng)

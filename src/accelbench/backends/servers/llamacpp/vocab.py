"""A Hugging Face byte-level BPE tokenizer folder as GGUF tokenizer metadata (``tokenizer.ggml.*``), token for token.

What ``convert_hf_to_gguf.py`` writes for a GPT-2-style BPE vocabulary (``_set_vocab_gpt2``: model ``gpt2``, the
tokens in id order, their types, the merges, the special ids), read from ``tokenizer.json`` and
``tokenizer_config.json`` directly rather than through ``AutoTokenizer``: the converter names the pre-tokenizer by
hashing how a known model tokenizes a test string and refuses a tokenizer trained elsewhere ("BPE pre-tokenizer was
not recognized"), where the pre-tokenizer is readable from the file itself.

Token types follow the converter: a vocabulary entry is NORMAL, an added token CONTROL when ``special`` else
USER_DEFINED (llama.cpp splits user-defined tokens out of any text before BPE, as ``tokenizers`` does with added
tokens, and renders them as their text), an id with no token UNUSED (``[PAD{id}]``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelbench.core.errors import UnknownModelError

# tokenizer.json's pre-tokenizer -> the ``tokenizer.ggml.pre`` whose regex llama.cpp applies (src/llama-vocab.cpp):
# a ByteLevel pre-tokenizer with its regex and no prefix space is GPT-2's split ('s|'t|... ?\p{L}+| ?\p{N}+|...)
_GPT2_SPLIT = "gpt-2"


def pre_tokenizer_name(doc: dict[str, Any]) -> str:
    """The ``tokenizer.ggml.pre`` of a ``tokenizer.json`` document whose split llama.cpp reproduces.

    Raises:
        UnknownModelError: a pre-tokenizer other than byte-level GPT-2 splitting (no name of llama.cpp is known to
            split the same way).
    """
    pre = doc.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space", False):
        return _GPT2_SPLIT
    raise UnknownModelError(
        f"tokenizer pre-tokenizer {json.dumps(pre)[:120]} has no llama.cpp equivalent known to accelbench "
        "(byte-level GPT-2 splitting without a prefix space is)"
    )


def _adds_bos(doc: dict[str, Any]) -> bool:
    """Whether the tokenizer puts a special token before a single sequence (its TemplateProcessing post-processor)."""
    post = doc.get("post_processor") or {}
    single = (post.get("single") or []) if post.get("type") == "TemplateProcessing" else []
    return bool(single) and "SpecialToken" in single[0]


def vocabulary(folder: Path, vocab_size: int) -> dict[str, Any]:
    """The GGUF tokenizer fields of the tokenizer in ``folder`` for a model of ``vocab_size`` embedding rows.

    Returns:
        ``model``, ``pre``, ``tokens`` (``vocab_size`` strings in id order), ``types`` (gguf ``TokenType`` values),
        ``merges`` (``"a b"``), ``special`` (``bos``/``eos``/``unk``/``pad`` -> id, those the config names) and
        ``add_bos``.

    Raises:
        UnknownModelError: not a BPE ``tokenizer.json``, an unknown pre-tokenizer, or more tokens than ``vocab_size``.
    """
    from gguf import TokenType

    doc = json.loads((folder / "tokenizer.json").read_text())
    model = doc.get("model") or {}
    if model.get("type") != "BPE":
        raise UnknownModelError(f"{folder}: a {model.get('type')} tokenizer, not BPE: no GGUF vocabulary written")
    pre = pre_tokenizer_name(doc)
    ids: dict[str, int] = dict(model["vocab"])
    tokens: list[str | None] = [None] * vocab_size
    types = [int(TokenType.UNUSED)] * vocab_size
    entries = [(i, text, int(TokenType.NORMAL)) for text, i in ids.items()]
    for t in doc.get("added_tokens", []):
        ids[t["content"]] = t["id"]
        entries.append((t["id"], t["content"], int(TokenType.CONTROL if t["special"] else TokenType.USER_DEFINED)))
    for i, text, kind in entries:
        if i >= vocab_size:
            raise UnknownModelError(f"{folder}: token id {i} is past the model's vocabulary of {vocab_size}")
        tokens[i], types[i] = text, kind
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    special = {}
    for kind in ("bos", "eos", "unk", "pad"):
        token = config.get(f"{kind}_token")
        token = token.get("content") if isinstance(token, dict) else token
        if isinstance(token, str) and token in ids:
            special[kind] = ids[token]
    return {
        "model": "gpt2",
        "pre": pre,
        "tokens": [t if t is not None else f"[PAD{i}]" for i, t in enumerate(tokens)],
        "types": types,
        "merges": [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])],
        "special": special,
        "add_bos": _adds_bos(doc),
    }


def _byte_of_char() -> dict[str, int]:
    """GPT-2's byte-level alphabet inverted: the character ``tokenizers``' ByteLevel writes for each byte -> the byte
    (printable bytes stand for themselves, the others for 256 + their rank)."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]  # "!".."~", "¡".."¬", "®".."ÿ"
    others = [b for b in range(256) if b not in printable]
    return {chr(b): b for b in printable} | {chr(256 + n): b for n, b in enumerate(others)}


def incomplete_utf8_ids(folder: Path | dict[str, Any]) -> tuple[int, ...]:
    """The ids of the byte-level BPE tokenizer in ``folder`` (or of its ``tokenizer.json`` document) whose bytes are
    not whole UTF-8 text (a lone byte of a multi-byte character: 128 of the bundled tokenizer's 1,024).

    Why: ``llama-server`` parses its output as text after every token, also for ``/v1/completions``, and ends a
    stream with ``{"error": {"code": 500, "message": "The model produced output that does not match the expected
    Content-only format"}}`` on bytes that are not UTF-8; a trained model rarely emits such a token out of its
    character, a random one does (about one token in a thousand over Llama 3's 128,256 ids, so most requests of a
    thousand output tokens would fail). Text made of whole-UTF-8 tokens is whole UTF-8, so banning these ids from
    sampling keeps every stream whole. A tokenizer that is not byte-level BPE gives ``()``.
    """
    doc = folder if isinstance(folder, dict) else json.loads((folder / "tokenizer.json").read_text())
    if (doc.get("model") or {}).get("type") != "BPE" or (doc.get("pre_tokenizer") or {}).get("type") != "ByteLevel":
        return ()
    table, out = _byte_of_char(), []
    for text, i in doc["model"]["vocab"].items():
        try:
            bytes(table[c] for c in text).decode("utf-8")
        except (KeyError, UnicodeDecodeError):  # KeyError: a character outside the alphabet (an added token's)
            out.append(i)
    added = {t["id"] for t in doc.get("added_tokens", [])}
    return tuple(sorted(i for i in out if i not in added))


def add_vocabulary(writer: Any, folder: Path, vocab_size: int) -> None:
    """Add :func:`vocabulary` of ``folder`` to a ``gguf.GGUFWriter`` (before its KV data is written)."""
    v = vocabulary(folder, vocab_size)
    writer.add_tokenizer_model(v["model"])
    writer.add_tokenizer_pre(v["pre"])
    writer.add_token_list(v["tokens"])
    writer.add_token_types(v["types"])
    writer.add_token_merges(v["merges"])
    adders = {
        "bos": writer.add_bos_token_id,
        "eos": writer.add_eos_token_id,
        "unk": writer.add_unk_token_id,
        "pad": writer.add_pad_token_id,
    }
    for kind, token_id in v["special"].items():
        adders[kind](token_id)
    writer.add_add_bos_token(v["add_bos"])
    writer.add_add_eos_token(False)

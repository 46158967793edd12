"""A checkpoint folder (``hf:/path/to/folder``) checked before a run, from its files' text and headers alone: no
weights read, no tokenizer built, no code from the folder run.

In order, each a one-line :class:`CheckpointError` naming the file and what is wrong (exit 2):

1. ``config.json`` parses (the JSON error's line and column);
2. no ``auto_map`` in ``config.json`` or ``tokenizer_config.json``: custom model code, which accelbench never runs;
3. its ``model_type`` is a causal language model ``transformers`` knows (``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``);
4. the tokenizer's JSON files (``tokenizer.json``, ``tokenizer_config.json``) and a weight index parse;
5. every safetensors file's header (8-byte little-endian length, then that many bytes of JSON: the safetensors
   format, https://huggingface.co/docs/safetensors) parses, and the file holds every byte its header's data
   offsets name (a truncated download fails here);
6. the weights' shapes are the config's (:mod:`accelbench.models.lm_layout`, for the families it describes);
7. the tokenizer's tokens fit the embedding table (a token id past its rows has no embedding).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from accelbench.core.errors import UnknownModelError
from accelbench.models import lm_layout

# bytes an element of each safetensors dtype takes (the format's dtype names)
DTYPE_BYTES = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}
HEADER_MAX_BYTES = 100_000_000  # the safetensors library's own limit on a header


class CheckpointError(UnknownModelError):
    """A checkpoint folder that cannot be run as it is: the message names the file and what is wrong."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Tensor:
    """One tensor of a safetensors header: its dtype name, shape and the file it is in."""

    dtype: str
    shape: tuple[int, ...]
    file: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    """What :func:`validate` read of a checkpoint folder.

    Attributes:
        config: ``config.json``'s values.
        tensors: every tensor of its safetensors files, by name.
        tokenizer_tokens: tokens of ``tokenizer.json`` (its largest id + 1), or None without one.
    """

    config: dict
    tensors: dict[str, Tensor]
    tokenizer_tokens: int | None


def read_json(path: Path, folder: Path | None = None) -> dict:
    """A JSON object file's values.

    Raises:
        CheckpointError: the file does not parse (its line and column), or is not a JSON object.
    """
    where = path if folder is None else f"checkpoint {folder}: {path.name}"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{where} cannot be read: {exc}") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{where} is not a JSON object")
    return data


def _check_code(folder: Path, config: dict) -> None:
    tok_config = folder / "tokenizer_config.json"
    for file, values in (("config.json", config), ("tokenizer_config.json", _maybe(tok_config, folder))):
        if values.get("auto_map"):
            raise CheckpointError(
                f"checkpoint {folder}: {file} has an auto_map (model code shipped with the checkpoint): "
                "accelbench never runs code read from disk; use a checkpoint of an architecture transformers has"
            )


def _maybe(path: Path, folder: Path) -> dict:
    return read_json(path, folder) if path.is_file() else {}


def _check_model_type(folder: Path, config: dict) -> None:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = config.get("model_type")
    if model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        what = "names no model_type" if model_type is None else f"has model_type {model_type!r}"
        raise CheckpointError(
            f"checkpoint {folder}: config.json {what}, not a causal language model transformers knows "
            f"(e.g. llama, mistral, qwen2, gpt2)"
        )


def tokenizer_tokens(data: dict) -> int:
    """Tokens of a ``tokenizer.json`` document: its largest id + 1 over the model's vocabulary (a token -> id map,
    or Unigram's ``[token, score]`` list, ids by position) and its added tokens."""
    vocab = (data.get("model") or {}).get("vocab") or {}
    ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
    ids += [t.get("id", -1) for t in data.get("added_tokens") or () if isinstance(t, dict)]
    ids = [i for i in ids if isinstance(i, int)]
    return max(ids) + 1 if ids else 0


def read_header(path: Path, folder: Path) -> dict[str, Tensor]:
    """The tensors of one safetensors file, from its header only.

    Raises:
        CheckpointError: a header that does not parse, or a file shorter than its header says (truncated).
    """
    size = path.stat().st_size
    where = f"checkpoint {folder}: {path.name}"
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(f"{where} is truncated: {size} bytes, shorter than a safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > min(HEADER_MAX_BYTES, size - 8):
            raise CheckpointError(f"{where} is truncated or not safetensors: a {n}-byte header in a {size}-byte file")
        raw = f.read(n)
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{where} has a header that is not valid JSON ({exc})") from None
    tensors, end = {}, 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        try:
            shape, (begin, stop), dtype = tuple(int(s) for s in t["shape"]), t["data_offsets"], str(t["dtype"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{where} has a header entry {name!r} without dtype, shape and offsets") from None
        if dtype in DTYPE_BYTES and stop - begin != lm_layout.numel(shape) * DTYPE_BYTES[dtype]:
            raise CheckpointError(f"{where}: tensor {name} {list(shape)} {dtype} has {stop - begin} bytes of data")
        tensors[name] = Tensor(dtype=dtype, shape=shape, file=path.name)
        end = max(end, stop)
    if 8 + n + end > size:
        raise CheckpointError(
            f"{where} is truncated: its header names {8 + n + end} bytes, the file has {size} (download it again)"
        )
    return tensors


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a checkpoint: the shards its index names, else ``model.safetensors``."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = read_json(index, folder).get("weight_map") or {}
        return [folder / s for s in sorted(set(weight_map.values()))]
    return [folder / "model.safetensors"]


def read_tensors(folder: Path) -> dict[str, Tensor]:
    """Every tensor of a checkpoint's safetensors files, from their headers (:func:`read_header`)."""
    tensors: dict[str, Tensor] = {}
    for path in weight_files(folder):
        tensors.update(read_header(path, folder))
    return tensors


def _check_shapes(folder: Path, config: dict, tensors: dict[str, Tensor]) -> None:
    expected = lm_layout.layout(config.get("model_type"), config) or {}
    for name, t in tensors.items():
        want = expected.get(lm_layout.local_name(name))
        if want is not None and tuple(want[0]) != t.shape:
            raise CheckpointError(
                f"checkpoint {folder}: {t.file} has {name} of shape {list(t.shape)}, config.json implies "
                f"{list(want[0])}"
            )


def embedding_rows(config: dict, tensors: dict[str, Tensor]) -> int | None:
    """Rows of the input embedding table: the weights' (a known family's table), else the config's vocab size."""
    expected = lm_layout.layout(config.get("model_type"), config) or {}
    for name, t in tensors.items():
        want = expected.get(lm_layout.local_name(name))
        if want is not None and want[1] == lm_layout.EMBEDDING and name.endswith(("embed_tokens.weight", "wte.weight")):
            return t.shape[0]
    return lm_layout.dims(config).vocab


def validate(folder: Path) -> Checkpoint:
    """Check a checkpoint folder that has a ``config.json`` and safetensors weights (see the module docstring).

    Raises:
        CheckpointError: one line naming the file and what is wrong.
    """
    config = read_json(folder / "config.json", folder)
    _check_code(folder, config)
    _check_model_type(folder, config)
    tokens = None
    if (folder / "tokenizer.json").is_file():
        tokens = tokenizer_tokens(read_json(folder / "tokenizer.json", folder))
    tensors = read_tensors(folder)
    _check_shapes(folder, config, tensors)
    rows = embedding_rows(config, tensors)
    if tokens and rows and tokens > rows:
        raise CheckpointError(
            f"checkpoint {folder}: tokenizer.json has {tokens} tokens, the embedding {rows} rows "
            "(a tokenizer of another model?)"
        )
    return Checkpoint(config=config, tensors=tensors, tokenizer_tokens=tokens)

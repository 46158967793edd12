"""The GGUF file ``llama-server`` loads for an ``hf:`` model name, and the Hugging Face tokenizer that counts its
tokens on the client.

- an architecture (``hf:llama-3.2-1b``, ``hf:llama-3.1-8b``, ``hf:mistral-7b``): random weights written once into a
  cache (:func:`write_gguf`), with the bundled tokenizer made to cover the whole vocabulary
  (:func:`accelbench.backends.servers.transformers.write_covering_tokenizer`, the same folder the ``transformers`` launch uses);
  the GGUF vocabulary is that folder's, token for token (:mod:`.vocab`), so a prompt of N tokens by the client's
  count is N tokens for the server;
- the bundled ``hf:tiny-shakespeare``: its trained weights, through the same writer (the vendored converter refuses
  its locally trained tokenizer);
- a local folder ``hf:/path``: converted by llama.cpp's ``convert_hf_to_gguf.py`` (:func:`convert_folder`), its
  tokenizer the folder's own;
- a ``.gguf`` path: used as it is (its tokenizer, for counting, is the caller's business).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.backends.servers.llamacpp import weights
from accelbench.core.errors import AccelbenchError, MissingDependencyError, UnknownModelError

CONVERTER_ENV = "ACCELBENCH_LLAMA_CPP_SRC"  # llama.cpp's source folder (convert_hf_to_gguf.py, gguf-py/)


class ConversionError(AccelbenchError):
    """llama.cpp's converter refused a checkpoint folder: its reason in one line (exit 2)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    """A GGUF file ready for ``llama-server -m``.

    Attributes:
        gguf: the ``.gguf`` file.
        tokenizer_dir: the Hugging Face tokenizer folder whose token counts the server's match (None: unknown, a
            ``.gguf`` given as it is).
        precision: the file's precision (:data:`weights.PRECISIONS`), None when not written here.
        file_bytes: the file's size.
        weights: ``random``, ``bundled``, the converted folder or the given file.
        banned_ids: token ids whose bytes are not whole UTF-8 (:func:`.vocab.incomplete_utf8_ids`), for
            :func:`.server.banned_body`: a random model emits them and llama-server then fails the request.
    """

    gguf: Path
    tokenizer_dir: Path | None
    precision: str | None
    file_bytes: int
    weights: str
    banned_ids: tuple[int, ...] = ()


def _require_gguf() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise MissingDependencyError("gguf", "serve") from None


def _config(name: str) -> tuple[Any, Path | None]:
    """The transformers config of an architecture or of the bundled model, and the bundled model's folder."""
    from accelbench.models import hf

    hf.check_lm(name)
    folder = hf.checkpoint_dir(name)
    if folder is None:
        return hf.architecture_config(name[len(hf.PREFIX) :]), None
    return hf.require_transformers().AutoConfig.from_pretrained(folder), folder


def write_gguf(name: str, out_dir: Path, precision: str = "bf16", seed: int = 0, device: Any = "cpu") -> Checkpoint:
    """The GGUF file of an architecture (random weights, seeded) or of the bundled model, written once under
    ``out_dir`` as ``<arch>-<precision>-seed<seed>.gguf`` (the bundled model: ``<name>-<precision>.gguf``) beside its
    tokenizer folder (``<same stem>.tokenizer``); each through a ``.partial`` name then renamed, so an interrupted
    write is never loaded.

    Args:
        name: ``hf:<architecture>`` (:data:`accelbench.models.hf.ARCHITECTURES`, a llama or mistral one) or
            ``hf:tiny-shakespeare``.
        out_dir: the cache folder.
        precision: ``bf16`` or ``q8_0`` (:data:`weights.PRECISIONS`).
        seed: the random weights' seed (ignored for the bundled model's trained weights).
        device: where the weights are drawn and encoded (a GPU draws an 8B model's in seconds).

    Raises:
        UnknownModelError: an unknown name, a folder (use :func:`convert_folder`), or an architecture llama.cpp's
            ``llama`` loader does not take as written here.
        ConfigError: an unknown precision.
        MissingDependencyError: ``gguf`` or ``transformers`` is not installed.
    """
    from accelbench.models import hf

    weights.precision(precision)
    _require_gguf()
    config, folder = _config(name)
    if folder is not None and folder.parent != hf.BUNDLED:
        raise UnknownModelError(f"{name} is a checkpoint folder: convert it with llama.cpp's converter")
    return write_config_gguf(config, name[len(hf.PREFIX) :], out_dir, precision, seed, device, trained=folder)


def write_config_gguf(
    config: Any,
    label: str,
    out_dir: Path,
    precision: str = "bf16",
    seed: int = 0,
    device: Any = "cpu",
    *,
    trained: Path | None = None,
) -> Checkpoint:
    """:func:`write_gguf` of a ``transformers`` Llama config (an architecture's, the bundled model's, or one a test
    defines), named ``label``: random weights, or ``trained``'s ``model.safetensors``; the tokenizer the bundled
    model's, covering ``config.vocab_size`` ids.

    Raises:
        UnknownModelError: a config :func:`weights.check_config` refuses.
    """
    from accelbench.backends.servers.llamacpp.vocab import add_vocabulary, incomplete_utf8_ids
    from accelbench.backends.servers.transformers import write_covering_tokenizer
    from accelbench.models import hf

    p = weights.precision(precision)
    weights.check_config(label, config)
    stem = f"{label}-{p.name}" if trained is not None else f"{label}-{p.name}-seed{seed}"
    out_dir.mkdir(parents=True, exist_ok=True)
    target, tok = out_dir / f"{stem}.gguf", out_dir / f"{stem}.tokenizer"
    if not tok.is_dir():
        partial = tok.with_name(tok.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        write_covering_tokenizer(hf.BUNDLED / hf.BUNDLED_MODELS[0], partial, config.vocab_size)
        partial.replace(tok)
    if not target.is_file():
        partial = target.with_name(target.name + ".partial")
        source = weights.checkpoint_source(trained, device) if trained else weights.random_source(config, seed, device)
        weights.write_file(partial, label, config, p, source, lambda w: add_vocabulary(w, tok, config.vocab_size))
        partial.replace(target)
    return Checkpoint(
        gguf=target,
        tokenizer_dir=tok,
        precision=p.name,
        file_bytes=target.stat().st_size,
        weights="bundled" if trained else "random",
        banned_ids=incomplete_utf8_ids(tok),
    )


def converter_source(src: str | Path | None = None) -> Path:
    """llama.cpp's source folder holding ``convert_hf_to_gguf.py``: ``src``, else ``$ACCELBENCH_LLAMA_CPP_SRC``.

    Raises:
        ConversionError: neither given, or no converter there.
    """
    given = src or os.environ.get(CONVERTER_ENV)
    if not given:
        raise ConversionError(
            f"converting a checkpoint folder needs llama.cpp's source: set {CONVERTER_ENV} to the folder "
            "holding convert_hf_to_gguf.py"
        )
    path = Path(given).expanduser()
    if not (path / "convert_hf_to_gguf.py").is_file():
        raise ConversionError(f"{path} has no convert_hf_to_gguf.py ({CONVERTER_ENV}: llama.cpp's source folder)")
    return path


def _reason(output: str) -> str:
    """The converter's reason for failing: the last error line of its output (a traceback ends with it)."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln:
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


def convert_folder(folder: Path, out_dir: Path, precision: str = "bf16", src: str | Path | None = None) -> Checkpoint:
    """Convert the Hugging Face checkpoint ``folder`` with llama.cpp's ``convert_hf_to_gguf.py`` (``--outtype``
    bf16 or q8_0; ``gguf-py/`` of the same source first on ``PYTHONPATH``), once, into ``out_dir``.

    Raises:
        ConversionError: no converter (:func:`converter_source`), or it refused the folder: its reason in one
            line (a locally trained BPE tokenizer: "BPE pre-tokenizer was not recognized").
    """
    p = weights.precision(precision)
    code = converter_source(src)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{Path(folder).resolve().name}-{p.name}.gguf"
    if not target.is_file():
        partial = target.with_name(target.name + ".partial")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(code / "gguf-py"), os.environ.get("PYTHONPATH")])),
        }
        args = [sys.executable, str(code / "convert_hf_to_gguf.py"), str(folder), "--outtype", p.name]
        done = subprocess.run([*args, "--outfile", str(partial)], capture_output=True, text=True, env=env)
        if done.returncode != 0:
            partial.unlink(missing_ok=True)
            raise ConversionError(f"llama.cpp's converter refused {folder}: {_reason(done.stdout + done.stderr)}")
        partial.replace(target)
    from accelbench.backends.servers.llamacpp.vocab import incomplete_utf8_ids

    tokenizer = Path(folder) if (Path(folder) / "tokenizer.json").is_file() else None
    return Checkpoint(
        gguf=target,
        tokenizer_dir=tokenizer,
        precision=p.name,
        file_bytes=target.stat().st_size,
        weights=str(folder),
        banned_ids=incomplete_utf8_ids(tokenizer) if tokenizer else (),
    )


def gguf_checkpoint(
    name: str,
    cache_dir: Path,
    precision: str = "bf16",
    seed: int = 0,
    device: Any = "cpu",
    src: str | Path | None = None,
) -> Checkpoint:
    """The :class:`Checkpoint` of a model name (module docstring): a ``.gguf`` path as it is, ``hf:/path`` converted,
    an architecture or the bundled model written (:func:`write_gguf`).

    Raises:
        UnknownModelError, ConversionError, ConfigError, MissingDependencyError: as the functions it calls; a
            ``.gguf`` path that is not a file.
    """
    from accelbench.models import hf

    if name.endswith(".gguf"):
        path = Path(name.removeprefix(hf.PREFIX)).expanduser()
        if not path.is_file():
            raise UnknownModelError(f"no GGUF file {path}")
        return Checkpoint(
            gguf=path, tokenizer_dir=None, precision=None, file_bytes=path.stat().st_size, weights=str(path)
        )
    folder = hf.checkpoint_dir(name) if hf.is_lm_name(name) else None
    if folder is not None and folder.parent != hf.BUNDLED:
        hf.check_checkpoint(folder)
        return convert_folder(folder, cache_dir, precision, src)
    return write_gguf(name, cache_dir, precision, seed, device)

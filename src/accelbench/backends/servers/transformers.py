"""``transformers serve`` (Hugging Face transformers' OpenAI-compatible server) as a server kind: recognised by the
``/load_model`` path of its OpenAPI schema; asked for exactly N tokens through ``generation_config`` (it refuses unknown
fields such as ``ignore_eos`` with HTTP 422, and always sends ``usage`` last); it lists only the models it has loaded or
finds in its hub cache, and loads a named one on its first request.

``--engine transformers -m hf:<name>`` (:func:`launch`): the bundled ``hf:tiny-shakespeare`` or a local ``hf:/path``
folder as it is, an architecture name (``hf:llama-3.2-1b``) as a random-weight checkpoint folder written once into a
cache beside the store (:func:`checkpoint_folder`: config, safetensors weights and the bundled tokenizer made to cover
the vocabulary), served in bf16 on a GPU and fp32 on a CPU, offline.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from accelbench.backends.servers.kind import LaunchPlan, LaunchRequest, ServerKind, register

DTYPES = {"bf16": "bfloat16", "fp32": "float32"}  # the served precision -> the checkpoint's torch dtype


def checkpoint_folder(name: str, cache_dir: Path, dtype: str, seed: int = 0, device="cpu") -> Path:
    """The folder ``transformers serve`` loads for ``hf:<name>``: the bundled model's or a local folder as it is;
    for an architecture (:data:`accelbench.models.hf.ARCHITECTURES`), a random-weight checkpoint written once under
    ``cache_dir`` (config, ``model.safetensors`` in ``dtype``, the bundled model's tokenizer made to cover the
    architecture's vocabulary: :func:`write_covering_tokenizer`). The weights are drawn on ``device`` (the server's GPU draws an 8B
    model's in seconds where a CPU takes minutes) and freed before the server starts.

    Raises:
        UnknownModelError, MissingDependencyError: as :func:`accelbench.models.hf.check_lm`.
    """
    import shutil

    import torch

    from accelbench.models import hf
    from accelbench.models.lm_load import load_lm

    hf.check_lm(name)
    folder = hf.checkpoint_dir(name)
    if folder is not None:
        return folder.resolve()
    arch = name[len(hf.PREFIX) :]
    out = cache_dir / f"{arch}-{dtype}-seed{seed}"
    if (out / "model.safetensors").is_file() or (out / "model.safetensors.index.json").is_file():
        return out
    loaded = load_lm(name, device, getattr(torch, dtype), seed)
    vocab = int(loaded.module.config.vocab_size)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    logging = hf.require_transformers().utils.logging
    shown = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()  # one progress bar a run: accelbench's
    try:
        loaded.module.save_pretrained(tmp, safe_serialization=True)
    finally:
        if shown:
            logging.enable_progress_bar()
        del loaded
        if torch.device(device).type == "cuda":
            torch.cuda.empty_cache()  # the server, another process, needs the memory
    write_covering_tokenizer(hf.BUNDLED / hf.BUNDLED_MODELS[0], tmp, vocab)
    tmp.replace(out)  # a folder is complete or absent: an interrupted write is never loaded
    return out


def write_covering_tokenizer(source: Path, folder: Path, vocab_size: int) -> None:
    """Write ``source``'s tokenizer (``tokenizer.json``, ``tokenizer_config.json``) into ``folder``, its vocabulary
    extended to ``vocab_size`` ids by one added token each (``<t{id}>``), so every id a random-weight model
    generates decodes to text.

    Why: a random model draws its output ids from its whole vocabulary (128,256 for Llama 3) while the bundled
    tokenizer knows 1,024; a server streams a chunk only when the new ids decode to text, so with the bundled
    tokenizer alone most generated tokens would reach the client as no chunk at all (most requests then seem to
    produce nothing, and the TTFT and inter-token gaps would be those of the rare decodable tokens).
    """
    import shutil

    shutil.copy(source / "tokenizer_config.json", folder / "tokenizer_config.json")
    doc = json.loads((source / "tokenizer.json").read_text())
    added = doc.setdefault("added_tokens", [])
    first = 1 + max([*doc["model"]["vocab"].values(), *(t["id"] for t in added)])
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False}
    added += [{"id": i, "content": f"<t{i}>", **flags} for i in range(first, vocab_size)]
    (folder / "tokenizer.json").write_text(json.dumps(doc))


def transformers_command(folder: Path, port: int, device: str | None, continuous_batching: bool) -> str:
    """``transformers serve`` of ``folder`` on ``127.0.0.1:port``: the model as its positional argument where the
    installed CLI takes one (transformers 5: ``force_model``), else ``--force-model`` (read from its signature, not
    its version); ``--device`` as the server takes it (``cuda:0``, ``cpu``)."""
    import shlex

    args = [_transformers_cli(), "serve", *_model_args(str(folder)), "--host", "127.0.0.1", "--port", str(port)]
    if device and device != "auto":
        args += ["--device", device]
    if continuous_batching:
        args.append("--continuous-batching")
    return "exec " + shlex.join(args)  # the server is the group's leader (no shell between: its exit is seen at once)


def _transformers_cli() -> str:
    """The ``transformers`` command of this interpreter's environment (beside ``sys.executable``: a virtual
    environment run without activating it has it there, not on ``PATH``), else the one ``PATH`` finds."""
    import shutil
    import sys

    beside = Path(sys.executable).with_name("transformers")
    return str(beside) if beside.is_file() else shutil.which("transformers") or "transformers"


def _model_args(folder: str) -> list[str]:
    import inspect

    try:
        from transformers.cli.serve import Serve

        param = inspect.signature(Serve.__init__).parameters.get("force_model")
    except Exception:  # another layout of the CLI: the positional form the current one documents
        return [folder]
    if param is None:
        return [folder]
    metadata = getattr(param.annotation, "__metadata__", ())
    is_option = any(type(m).__name__ == "OptionInfo" for m in metadata)
    return ["--force-model", folder] if is_option else [folder]


def server_env() -> dict[str, str]:
    """The environment of a ``transformers serve`` launch: offline (no hub lookups), and a hub cache that exists
    (its ``/v1/models`` lists the cache and fails without one)."""
    cache = os.environ.get("HF_HUB_CACHE") or str(Path.home() / ".cache" / "huggingface" / "hub")
    Path(cache).mkdir(parents=True, exist_ok=True)
    return {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": cache}


def launch(req: LaunchRequest) -> LaunchPlan:
    """The built-in launch of ``transformers serve`` for ``req`` (module docstring). Requests name the folder it
    serves: transformers 5.17's ``/v1/models`` lists only the models in its hub cache (none), 5.24's the forced one
    as well."""
    from importlib.metadata import version

    precision = KIND.precision(req.precision, req.device.type)
    folder = checkpoint_folder(req.model, req.cache_dir, DTYPES[precision], req.seed, req.device)
    return LaunchPlan(
        command=transformers_command(folder, req.port, str(req.device), req.continuous_batching),
        env=server_env(),
        model_id=str(folder),
        tokenizer_dir=folder,
        precision=precision,
        version=version("transformers"),  # it names none on its endpoints: the environment's, which it runs
    )


def _detect(client) -> tuple[bool, str | None]:
    paths = client.get("/openapi.json").json().get("paths", {})
    return "/load_model" in paths and "/v1/completions" in paths, None


KIND = register(
    ServerKind(
        name="transformers",
        about="transformers serve (Hugging Face transformers)",
        fixed_length=lambda n: {
            "max_tokens": n,
            "generation_config": json.dumps({"min_new_tokens": n, "max_new_tokens": n}),
        },
        detect=_detect,
        usage_option=False,
        loads_on_request=True,
        checkpoint="safetensors folder",
        precisions={"bf16": 16.0, "fp32": 32.0},
        cpu_precision="fp32",
        launch=launch,
        requires=("fastapi", "uvicorn", "openai"),
    )
)

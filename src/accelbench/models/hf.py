"""Decoder-only language models through Hugging Face ``transformers`` (the ``llm`` extra).

Names (``--model``):

- ``hf:<architecture>``: a standard architecture of :data:`ARCHITECTURES`, built from its published configuration
  with random weights (no download: the output says the weights are random and no quality is reported);
- ``hf:tiny-shakespeare``: the bundled tiny model, trained by accelbench on the shipped text
  (``assets/llm/tiny-shakespeare``, ``benchmarks/train_tiny_lm.py``): real weights and a tokenizer;
- ``hf:/path/to/checkpoint``: a local directory with ``config.json``, safetensors weights
  (``model.safetensors`` or a ``model.safetensors.index.json`` with its shards) and, for text prompts and
  perplexity, a tokenizer. Pickled ``.bin`` weights are refused (loading them runs code); no remote code runs
  (``trust_remote_code=False``);
- ``package.module:factory``: a user callable returning a ``transformers`` causal LM (``accelbench.models.user``).

Each name registers in the one model registry (:mod:`accelbench.models.base`) as a language model: the architectures
("config only"), the bundled model ("bundled trained") and the ``hf:/path`` family ("local folder").

Architectures are given by the values of their public ``config.json`` (the Hugging Face Hub model cards named
in each entry's ``source``), so their shapes, parameter counts and KV-cache sizes are the real ones.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.core.errors import MissingDependencyError, UnknownModelError
from accelbench.models.base import LM, Family, Model, register, register_family, unknown

PREFIX = "hf:"
BUNDLED = Path(__file__).resolve().parents[1] / "assets" / "llm"
_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Architecture:
    """A standard architecture: ``transformers`` config class name and values, and where they come from."""

    config_class: str
    values: dict[str, Any] = field(default_factory=dict)
    source: str = ""


ARCHITECTURES: dict[str, Architecture] = {
    "llama-3.2-1b": Architecture(
        config_class="LlamaConfig",
        source="meta-llama/Llama-3.2-1B config.json",
        values=dict(
            vocab_size=128256,
            hidden_size=2048,
            intermediate_size=8192,
            num_hidden_layers=16,
            num_attention_heads=32,
            num_key_value_heads=8,
            head_dim=64,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            tie_word_embeddings=True,
            rope_parameters={**_LLAMA3_ROPE, "factor": 32.0},
        ),
    ),
    "llama-3.1-8b": Architecture(
        config_class="LlamaConfig",
        source="meta-llama/Llama-3.1-8B config.json",
        values=dict(
            vocab_size=128256,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            rope_parameters={**_LLAMA3_ROPE, "factor": 8.0},
        ),
    ),
    "llama-3.1-70b": Architecture(
        config_class="LlamaConfig",
        source="meta-llama/Llama-3.1-70B config.json",
        values=dict(
            vocab_size=128256,
            hidden_size=8192,
            intermediate_size=28672,
            num_hidden_layers=80,
            num_attention_heads=64,
            num_key_value_heads=8,
            max_position_embeddings=131072,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            rope_parameters={**_LLAMA3_ROPE, "factor": 8.0},
        ),
    ),
    "qwen2.5-0.5b": Architecture(
        config_class="Qwen2Config",
        source="Qwen/Qwen2.5-0.5B config.json",
        values=dict(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
    ),
    "qwen2.5-7b": Architecture(
        config_class="Qwen2Config",
        source="Qwen/Qwen2.5-7B config.json",
        values=dict(
            vocab_size=152064,
            hidden_size=3584,
            intermediate_size=18944,
            num_hidden_layers=28,
            num_attention_heads=28,
            num_key_value_heads=4,
            max_position_embeddings=131072,
            rms_norm_eps=1e-6,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
    ),
    "mistral-7b": Architecture(
        config_class="MistralConfig",
        source="mistralai/Mistral-7B-v0.3 config.json",
        values=dict(
            vocab_size=32768,
            hidden_size=4096,
            intermediate_size=14336,
            num_hidden_layers=32,
            num_attention_heads=32,
            num_key_value_heads=8,
            max_position_embeddings=32768,
            rms_norm_eps=1e-5,
            sliding_window=None,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
        ),
    ),
    "gpt2": Architecture(
        config_class="GPT2Config",
        source="openai-community/gpt2 config.json (124M)",
        values=dict(vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, tie_word_embeddings=True),
    ),
}
BUNDLED_MODELS = ("tiny-shakespeare",)


@dataclass(frozen=True, kw_only=True, slots=True)
class LMInfo:
    """What the generate scenario needs to know of a language model besides its module.

    Attributes:
        name: the name it was created by.
        source: ``architecture``, ``bundled``, ``checkpoint`` or ``user``.
        pretrained: real trained weights (perplexity means something).
        weights: a one-line description (``random``, a checkpoint directory).
        context_len: the model's context length (``max_position_embeddings`` / ``n_positions``).
        vocab_size: rows of the embedding table.
    """

    name: str
    source: str
    pretrained: bool
    weights: str
    context_len: int
    vocab_size: int


@dataclass(frozen=True, slots=True)
class LoadedLM:
    """A loaded language model: the module (a ``transformers`` ``PreTrainedModel`` in eval mode), its tokenizer (or
    None), what is known of it, and, split by tensor parallelism, the split's columns
    (:func:`accelbench.models.tensor_parallel.apply_tp`; empty otherwise)."""

    module: Any
    tokenizer: Any
    info: LMInfo
    parallel: dict = field(default_factory=dict)


def is_lm_name(name: str) -> bool:
    return isinstance(name, str) and name.startswith(PREFIX)


def require_transformers():
    """``transformers``, or a one-line error naming the extra.

    Raises:
        MissingDependencyError: transformers is not installed.
    """
    try:
        import transformers
    except ImportError:
        raise MissingDependencyError("transformers", "llm") from None
    return transformers


def checkpoint_dir(name: str) -> Path | None:
    """The folder an ``hf:`` name loads from (the bundled model's, or a path), or None (an architecture)."""
    rest = name[len(PREFIX) :]
    if rest in BUNDLED_MODELS:
        return BUNDLED / rest
    return Path(rest).expanduser() if ("/" in rest or rest.startswith(".")) else None


def check_checkpoint(path: Path) -> None:
    """Refuse a checkpoint directory that cannot be loaded safely, with one line.

    Raises:
        UnknownModelError: no such directory, no ``config.json``, no safetensors weights (or only pickled
            ``.bin`` weights, which are refused: unpickling runs code).
    """
    if not path.is_dir():
        raise UnknownModelError(
            f"no checkpoint directory {path} (hf:PATH needs a folder with config.json and safetensors weights)"
        )
    if not (path / "config.json").is_file():
        raise UnknownModelError(f"checkpoint {path} has no config.json")
    if (path / "model.safetensors.index.json").is_file():
        from accelbench.models.checkpoint import weight_files

        missing = [f.name for f in weight_files(path) if not f.is_file()]
        if missing:
            raise UnknownModelError(f"checkpoint {path} misses weight file {missing[0]} named by its index")
        return
    if not (path / "model.safetensors").is_file():
        pickled = sorted(p.name for p in path.glob("*.bin"))
        why = (
            f"only pickled weights ({pickled[0]}), which accelbench does not load (unpickling runs code): "
            "convert them to safetensors"
            if pickled
            else "no model.safetensors"
        )
        raise UnknownModelError(f"checkpoint {path} has {why}")


def check_lm(name: str) -> None:
    """The error :func:`load_hf` would raise for ``name``, without building the model.

    Raises:
        UnknownModelError: an unknown architecture or an unusable checkpoint directory (with a suggestion).
        MissingDependencyError: transformers is not installed.
    """
    require_transformers()
    path = checkpoint_dir(name)
    if path is not None:
        check_checkpoint(path)
        return
    if name[len(PREFIX) :] not in ARCHITECTURES:
        raise unknown(name, LM)


def architecture_config(arch: str):
    """The ``transformers`` config of a standard architecture (:data:`ARCHITECTURES`)."""
    transformers = require_transformers()
    a = ARCHITECTURES[arch]
    return getattr(transformers, a.config_class)(**a.values)


def has_tokenizer(path: Path) -> bool:
    """Whether the checkpoint folder ``path`` holds a tokenizer ``transformers.AutoTokenizer`` can load."""
    return any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"))


def context_len(config) -> int:
    """A ``transformers`` config's context length in tokens (``max_position_embeddings`` or ``n_positions``)."""
    return int(getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", 0) or 0)


@contextmanager
def _no_progress_bar(transformers):
    """``from_pretrained`` without its per-file progress bar (a run prints one progress bar: accelbench's)."""
    logging = transformers.utils.logging
    was = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            logging.enable_progress_bar()


def load_hf(name: str, device, dtype, seed: int = 0, *, random_init: bool = False) -> LoadedLM:
    """Build or load the ``hf:`` language model ``name`` on ``device`` in ``dtype`` (a torch dtype), in eval mode
    (every command loads through :func:`accelbench.models.lm_load.load_lm`, which asks this for ``hf:`` names).

    Random weights of an architecture (or, with ``random_init``, of a checkpoint's) are drawn on ``device`` with
    ``torch.manual_seed(seed)`` (``transformers``' own initialisation; on the ``meta`` device none are drawn). A
    checkpoint's tokenizer is loaded when its directory has one.

    Raises:
        UnknownModelError / MissingDependencyError: as :func:`check_lm`.
    """
    import torch

    transformers = require_transformers()
    check_lm(name)
    path = checkpoint_dir(name)
    if path is None or random_init:
        config = (
            architecture_config(name[len(PREFIX) :])
            if path is None
            else transformers.AutoConfig.from_pretrained(path, trust_remote_code=False)
        )
        tokenizer = None
        if path is not None and has_tokenizer(path):
            tokenizer = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=False)
        torch.manual_seed(seed)
        with torch.device(device):
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
        info = LMInfo(
            name=name,
            source="architecture" if path is None else "checkpoint",
            pretrained=False,
            weights="random",
            context_len=context_len(config),
            vocab_size=config.vocab_size,
        )
        return LoadedLM(model.eval(), tokenizer, info)
    with _no_progress_bar(transformers):
        model = (
            transformers.AutoModelForCausalLM.from_pretrained(
                path, dtype=dtype, use_safetensors=True, trust_remote_code=False
            )
            .to(device)
            .eval()
        )
    tokenizer = None
    if has_tokenizer(path):
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=False)
    bundled = path.parent == BUNDLED
    info = LMInfo(
        name=name,
        source="bundled" if bundled else "checkpoint",
        pretrained=True,
        weights=f"assets/llm/{path.name}" if bundled else str(path),
        context_len=context_len(model.config),
        vocab_size=model.config.vocab_size,
    )
    return LoadedLM(model, tokenizer, info)


def from_module(name: str, module, tokenizer=None) -> LoadedLM:
    """A language model built elsewhere (a user factory's ``transformers`` causal LM, already on its device) as a
    :class:`LoadedLM`: random weights (``pretrained`` False), its context and vocabulary read from its config.

    Raises:
        AttributeError: ``module`` has no ``config`` (not a ``transformers`` model).
    """
    info = LMInfo(
        name=name,
        source="user",
        pretrained=False,
        weights="from the factory",
        context_len=context_len(module.config),
        vocab_size=module.config.vocab_size,
    )
    return LoadedLM(module, tokenizer, info)


def check_tokenizer(loaded: LoadedLM) -> None:
    """A tokenizer whose ids the model cannot embed is refused.

    Raises:
        UnknownModelError: the tokenizer has more tokens than the model's embedding table.
    """
    if loaded.tokenizer is not None and len(loaded.tokenizer) > loaded.info.vocab_size:
        raise UnknownModelError(
            f"{loaded.info.name}: its tokenizer has {len(loaded.tokenizer)} tokens, more than "
            f"the model's {loaded.info.vocab_size} (a tokenizer of another model)"
        )


def _folder_suggestion(name: str) -> list[str]:
    """An existing folder named without its path (``hf:ckpt``, ``ckpt``) as the ``hf:`` name that loads it."""
    rest = name.removeprefix(PREFIX)
    if not rest or not Path(rest).expanduser().is_dir():
        return []
    return [PREFIX + (rest if rest.startswith(("/", ".", "~")) else f"./{rest}")]


def _check(name: str) -> None:
    check_lm(name)


for _arch in ARCHITECTURES:
    register(Model(name=PREFIX + _arch, kind=LM, source="config", check=_check))
for _bundled in BUNDLED_MODELS:
    register(Model(name=PREFIX + _bundled, kind=LM, source="bundled", check=_check))
register_family(
    Family(
        pattern="hf:/path/to/checkpoint",
        kind=LM,
        source="folder",
        prefix=PREFIX,
        claims=lambda name: checkpoint_dir(name) is not None,
        check=_check,
        suggest=_folder_suggestion,
    )
)

"""A language model's name and context, checked before anything is built: what ``accelbench generate`` and
``accelbench profile --step prefill,decode`` refuse in one line before a run exists.

The name resolves (:mod:`accelbench.models.hf`, or a user factory), and every prompt plus its new tokens fits the
model's context, read from the architecture's values or the checkpoint's ``config.json`` (a factory's model is
checked when built: an ``error`` row).
"""

from __future__ import annotations

import json

from accelbench.core.errors import ConfigError


def check_model_name(name: str) -> tuple[int | None, bool | None]:
    """Resolve ``name`` without building it: ``(context length or None, has a tokenizer or None when unknown)``.

    Raises:
        UnknownModelError / MissingDependencyError: as :func:`accelbench.models.hf.check_lm` (or the factory's).
    """
    from accelbench.models import hf

    if not hf.is_lm_name(name):
        from accelbench.models import check_model

        hf.require_transformers()
        check_model(name)  # package.module:factory: imported and looked up, not called
        return None, None
    hf.check_lm(name)
    path = hf.checkpoint_dir(name)
    if path is None:
        values = hf.ARCHITECTURES[name[len(hf.PREFIX) :]].values
        return values.get("max_position_embeddings") or values.get("n_positions"), False
    config = json.loads((path / "config.json").read_text())
    context = config.get("max_position_embeddings") or config.get("n_positions")
    tokenizer = hf.has_tokenizer(path)
    return context, tokenizer


def check_fits(
    name: str,
    context: int | None,
    prompt_len: int,
    new_tokens: int,
    fields: tuple[str, str] = ("prompt_lens", "new_tokens"),
) -> None:
    """Refuse a prompt plus new tokens longer than the model's context (positions past it have no meaning).

    Args:
        fields: the command's names of the prompt's and the new tokens' lengths (``serve``: input_len, output_len).

    Raises:
        ConfigError: naming the field to change (``new_tokens``, unless the prompt alone leaves no room for a decode
            step), how far it may go, and the model's maximum context.
    """
    if not context or prompt_len + new_tokens <= context:
        return
    limit = f"{name}'s maximum context is {context} tokens, prompt and new tokens together"
    least = min(new_tokens, 2)  # a generation's first decode step (a profiled step: its one position)
    if prompt_len + least > context:  # the prompt alone leaves no room
        raise ConfigError(fields[0], prompt_len, f"at most {context - least} tokens: {limit}")
    raise ConfigError(
        fields[1], new_tokens, f"at most {context - prompt_len} after a {prompt_len}-token prompt: {limit}"
    )

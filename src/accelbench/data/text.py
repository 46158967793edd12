"""Text inputs of language-model cases: synthetic token prompts and prompts cut from the shipped text.

- **random** prompts: token ids drawn uniformly from the vocabulary with a seeded generator (what ``vllm bench
  --dataset-name random`` does): speed does not depend on which tokens they are, and no tokenizer is needed.
- **text** prompts: consecutive token windows of the shipped text (``assets/text/tinyshakespeare.txt``: see the
  folder's README for source and licence), tokenized with the model's tokenizer; each prompt of a batch starts
  at a different place of the held-out part.
- **held-out text** for perplexity: the last 10 % of the shipped text's characters (:func:`split`); the bundled
  tiny model was trained on the first 90 % only.
"""

from __future__ import annotations

from pathlib import Path

TEXT = Path(__file__).resolve().parents[1] / "assets" / "text" / "tinyshakespeare.txt"
HELD_OUT_SHARE = 0.10
PROMPT_SOURCES = ("random", "text")


def shipped_text() -> str:
    """The shipped text (1,115,394 characters of Shakespeare's plays)."""
    return TEXT.read_text(encoding="utf-8")


def split(text: str, held_out_share: float = HELD_OUT_SHARE) -> tuple[str, str]:
    """``(train, held_out)``: the first ``1 - held_out_share`` of the characters and the rest, cut at a line
    start so no line is split between the two."""
    cut = int(len(text) * (1 - held_out_share))
    cut = text.find("\n", cut) + 1 or cut
    return text[:cut], text[cut:]


def held_out_text() -> str:
    """The held-out part of the shipped text (perplexity is measured on it)."""
    return split(shipped_text())[1]


def random_prompts(batch_size: int, prompt_len: int, vocab_size: int, seed: int, device=None):
    """``(batch_size, prompt_len)`` int64 token ids drawn uniformly from ``[0, vocab_size)``, seeded.

    Raises:
        ValueError: a size below 1.
    """
    import torch

    if batch_size < 1 or prompt_len < 1 or vocab_size < 1:
        raise ValueError("batch_size, prompt_len and vocab_size must be >= 1")
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (batch_size, prompt_len), generator=gen).to(device or "cpu")


def text_prompts(tokenizer, batch_size: int, prompt_len: int, seed: int, device=None):
    """``(batch_size, prompt_len)`` token windows of the held-out text tokenized by ``tokenizer``, the start of each
    drawn with a seeded generator.

    Raises:
        ValueError: the held-out text holds fewer than ``prompt_len`` tokens for this tokenizer.
    """
    import torch

    ids = torch.tensor(tokenizer(held_out_text())["input_ids"], dtype=torch.long)
    if len(ids) < prompt_len:
        raise ValueError(
            f"the held-out text has {len(ids)} tokens for this tokenizer, fewer than the prompt length {prompt_len}"
        )
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(ids) - prompt_len + 1, (batch_size,), generator=gen)
    return torch.stack([ids[s : s + prompt_len] for s in starts.tolist()]).to(device or "cpu")

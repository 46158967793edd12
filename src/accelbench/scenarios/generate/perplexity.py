"""Perplexity of a causal language model on a token stream: non-overlapping windows.

``perplexity = exp(sum of token NLLs / tokens scored)``, each window of ``window`` tokens scoring its tokens
2..window from their prefix inside the window (Hugging Face docs, "Perplexity of fixed-length models", with a
stride equal to the window: no token is scored twice; a shorter last window is scored too). NLLs are computed in
float32 from the model's logits whatever the model's precision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Perplexity:
    """Attributes: perplexity; nll_sum (nats); tokens (tokens scored); window (tokens a window)."""

    perplexity: float
    nll_sum: float
    tokens: int
    window: int

    @property
    def nll_per_token(self) -> float:
        return self.nll_sum / self.tokens


def windows(n_tokens: int, window: int) -> list[tuple[int, int]]:
    """``(start, end)`` of the non-overlapping windows over ``n_tokens`` (a last window of 1 token is dropped:
    it scores nothing).

    Raises:
        ValueError: a window below 2 tokens.
    """
    if window < 2:
        raise ValueError("a perplexity window needs 2 or more tokens")
    return [(s, min(s + window, n_tokens)) for s in range(0, n_tokens, window) if min(s + window, n_tokens) - s >= 2]


def perplexity(model, ids, *, window: int, batch_size: int = 8, device=None, context=None) -> Perplexity:
    """Perplexity of ``model`` (a Hugging Face causal LM, or a module returning an object with ``.logits``) on the
    1-D int64 token tensor ``ids``.

    Args:
        window: tokens a window, at most the model's context length.
        batch_size: windows a forward pass.
        device: where the windows go (default: the model's parameters' device).
        context: a context manager factory for each forward (a precision's autocast), or None.
    Raises:
        ValueError: fewer than 2 tokens, or a window below 2.
    """
    import contextlib

    import torch
    import torch.nn.functional as F

    if ids.dim() != 1 or len(ids) < 2:
        raise ValueError("perplexity needs a 1-D stream of 2 or more tokens")
    device = device or next(model.parameters()).device
    spans = windows(len(ids), window)
    full = [s for s in spans if s[1] - s[0] == window]
    groups = [full[i : i + batch_size] for i in range(0, len(full), batch_size)] + [[s] for s in spans if s not in full]
    nll, count = 0.0, 0
    with torch.no_grad():
        for group in groups:
            x = torch.stack([ids[a:b] for a, b in group]).to(device)
            with context() if context else contextlib.nullcontext():
                logits = model(input_ids=x).logits
            logp = F.log_softmax(logits[:, :-1].float(), dim=-1)
            nll -= logp.gather(-1, x[:, 1:, None]).sum().item()
            count += x[:, 1:].numel()
    return Perplexity(perplexity=math.exp(nll / count), nll_sum=nll, tokens=count, window=window)

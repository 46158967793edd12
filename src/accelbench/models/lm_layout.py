"""The tensors a decoder-only language model's config implies, read from the config's values alone (no
``transformers`` modeling import, no weights): their names and shapes, and so the parameter count.

Two layouts cover the families accelbench builds and the checkpoints users bring most (``transformers``' modeling
files are the source of each name and shape):

- the Llama layout (``llama``, ``mistral``, ``qwen2``, ``qwen3``, ``gemma``, ``gemma2``): ``embed_tokens``, per
  layer ``q/k/v/o_proj`` (``q``: ``heads x head_dim`` rows, ``k``/``v``: ``kv_heads x head_dim``), ``gate/up/down``
  projections, RMSNorm weights, the final ``norm`` and an ``lm_head`` unless tied. Qwen2 adds q/k/v biases, Qwen3
  per-head ``q_norm``/``k_norm``, Gemma2 two more norms a layer; ``attention_bias``/``mlp_bias`` add biases.
- the GPT-2 layout (``gpt2``): ``wte``, ``wpe``, per block ``c_attn``/``c_proj``/``c_fc`` as ``Conv1D`` (weights
  stored ``(in, out)``) with biases, LayerNorms with biases, ``ln_f``; the LM head tied to ``wte``.

Names are given without the base model's prefix (``model.``, ``transformer.``): :func:`local_name` strips it from
a checkpoint's names before they are compared.
"""

from __future__ import annotations

from dataclasses import dataclass

LLAMA_LIKE = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2")
GPT2 = ("gpt2",)
PREFIXES = ("model.", "transformer.")
# tensor kinds: what a weight-only precision quantizes (``linear``: nn.Linear weights) and what it keeps
LINEAR, CONV1D, EMBEDDING, OTHER = "linear", "conv1d", "embedding", "other"


@dataclass(frozen=True, kw_only=True, slots=True)
class Dims:
    """The sizes of a decoder-only config, under whichever key its family spells them (``hidden_size`` or
    ``n_embd``, ...); None where the config does not say."""

    vocab: int | None
    hidden: int | None
    layers: int | None
    heads: int | None
    kv_heads: int | None
    head_dim: int | None
    intermediate: int | None
    positions: int | None
    tied: bool


def _first(config: dict, *keys: str) -> int | None:
    for k in keys:
        v = config.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None


def dims(config: dict) -> Dims:
    """:class:`Dims` of a config's values (a ``config.json`` or :data:`accelbench.models.hf.ARCHITECTURES` values);
    a multimodal config's ``text_config`` is read when the top level has no hidden size."""
    if _first(config, "hidden_size", "n_embd", "d_model") is None and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    hidden = _first(config, "hidden_size", "n_embd", "d_model")
    heads = _first(config, "num_attention_heads", "n_head")
    head_dim = _first(config, "head_dim") or (hidden // heads if hidden and heads else None)
    return Dims(
        vocab=_first(config, "vocab_size"),
        hidden=hidden,
        layers=_first(config, "num_hidden_layers", "n_layer"),
        heads=heads,
        kv_heads=_first(config, "num_key_value_heads") or heads,
        head_dim=head_dim,
        intermediate=_first(config, "intermediate_size", "n_inner", "ffn_dim") or (4 * hidden if hidden else None),
        positions=_first(config, "max_position_embeddings", "n_positions"),
        tied=bool(config.get("tie_word_embeddings", config.get("model_type") in ("gemma", "gemma2", "gpt2"))),
    )


def local_name(name: str) -> str:
    """A checkpoint tensor's name without its base model's prefix (``model.layers.0...`` -> ``layers.0...``)."""
    for p in PREFIXES:
        if name.startswith(p):
            return name[len(p) :]
    return name


def _llama(model_type: str, config: dict, d: Dims) -> dict[str, tuple[tuple[int, ...], str]]:
    h, q, kv, i = d.hidden, d.heads * d.head_dim, d.kv_heads * d.head_dim, d.intermediate
    attn_bias = bool(config.get("attention_bias", False))
    mlp_bias = bool(config.get("mlp_bias", False))
    out: dict[str, tuple[tuple[int, ...], str]] = {"embed_tokens.weight": ((d.vocab, h), EMBEDDING)}
    for n in range(d.layers):
        a, m = f"layers.{n}.self_attn.", f"layers.{n}.mlp."
        out[a + "q_proj.weight"] = ((q, h), LINEAR)
        out[a + "k_proj.weight"] = ((kv, h), LINEAR)
        out[a + "v_proj.weight"] = ((kv, h), LINEAR)
        out[a + "o_proj.weight"] = ((h, q), LINEAR)
        if attn_bias or model_type == "qwen2":  # Qwen2's q/k/v projections always carry a bias, its o_proj none
            out.update({a + "q_proj.bias": ((q,), OTHER), a + "k_proj.bias": ((kv,), OTHER)})
            out[a + "v_proj.bias"] = ((kv,), OTHER)
        if attn_bias:
            out[a + "o_proj.bias"] = ((h,), OTHER)
        if model_type == "qwen3":
            out.update({a + "q_norm.weight": ((d.head_dim,), OTHER), a + "k_norm.weight": ((d.head_dim,), OTHER)})
        out.update({m + "gate_proj.weight": ((i, h), LINEAR), m + "up_proj.weight": ((i, h), LINEAR)})
        out[m + "down_proj.weight"] = ((h, i), LINEAR)
        if mlp_bias:
            out.update({m + "gate_proj.bias": ((i,), OTHER), m + "up_proj.bias": ((i,), OTHER)})
            out[m + "down_proj.bias"] = ((h,), OTHER)
        norms = ["input_layernorm", "post_attention_layernorm"]
        if model_type == "gemma2":
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        out.update({f"layers.{n}.{norm}.weight": ((h,), OTHER) for norm in norms})
    out["norm.weight"] = ((h,), OTHER)
    return out


def _gpt2(d: Dims) -> dict[str, tuple[tuple[int, ...], str]]:
    h, i = d.hidden, d.intermediate
    out: dict[str, tuple[tuple[int, ...], str]] = {
        "wte.weight": ((d.vocab, h), EMBEDDING),
        "wpe.weight": ((d.positions, h), EMBEDDING),
    }
    for n in range(d.layers):
        b = f"h.{n}."
        for ln in ("ln_1", "ln_2"):
            out.update({f"{b}{ln}.weight": ((h,), OTHER), f"{b}{ln}.bias": ((h,), OTHER)})
        for name, (rows, cols) in (("attn.c_attn", (h, 3 * h)), ("attn.c_proj", (h, h))):
            out.update({f"{b}{name}.weight": ((rows, cols), CONV1D), f"{b}{name}.bias": ((cols,), OTHER)})
        for name, (rows, cols) in (("mlp.c_fc", (h, i)), ("mlp.c_proj", (i, h))):
            out.update({f"{b}{name}.weight": ((rows, cols), CONV1D), f"{b}{name}.bias": ((cols,), OTHER)})
    out.update({"ln_f.weight": ((h,), OTHER), "ln_f.bias": ((h,), OTHER)})
    return out


def layout(model_type: str | None, config: dict) -> dict[str, tuple[tuple[int, ...], str]] | None:
    """Every stored tensor of the model ``config`` describes: local name -> ``(shape, kind)``, the LM head included
    when it is not tied (a tied head is the embedding table: one tensor). None for a family not described here or
    a config missing a size it needs."""
    d = dims(config)
    if None in (d.vocab, d.hidden, d.layers, d.heads, d.head_dim, d.intermediate):
        return None
    if model_type in LLAMA_LIKE:
        out = _llama(model_type, config, d)
    elif model_type in GPT2 and d.positions:
        out = _gpt2(d)
    else:
        return None
    if not d.tied:
        out["lm_head.weight"] = ((d.vocab, d.hidden), LINEAR)
    return out


def numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n

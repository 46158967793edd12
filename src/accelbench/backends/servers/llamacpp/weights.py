"""A Llama-architecture model as one GGUF file for ``llama-server``, written a tensor at a time.

:func:`write_gguf` writes what ``convert_hf_to_gguf.py`` (``conversion/llama.py``, ``conversion/base.py``) would write
for a ``LlamaForCausalLM`` checkpoint: the same metadata keys, tensor names, tensor types (2-D weights in the file's
precision, norms and ``rope_freqs`` in F32), the q/k row permutation the converter applies (Hugging Face's rotate-half
RoPE layout to llama.cpp's interleaved one), the Llama 3 ``rope_freqs`` factors, and no ``output`` tensor when the
embeddings are tied. The weights of an architecture are random (drawn with torch on ``device``, as ``transformers``'
``_init_weights``: normal with ``initializer_range`` std, norms at one); the bundled model's are its own.

Memory: the tensor infos are written first (``add_tensor_info``), then each tensor is drawn, encoded and written
(``write_tensor_data``) before the next is drawn, so an 8B model never needs its size in host memory
(``GGUFWriter.add_tensor`` keeps every tensor until the file is written).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core.errors import ConfigError, UnknownModelError


@dataclass(frozen=True, kw_only=True, slots=True)
class GGUFPrecision:
    """A GGUF file type: how its 2-D weights are stored.

    Attributes:
        name: the name accelbench and the converter's ``--outtype`` use (``bf16``, ``q8_0``).
        weight_type: the ``gguf.GGMLQuantizationType`` name of its 2-D weights.
        file_type: the ``gguf.LlamaFileType`` name written as ``general.file_type``.
        bits_per_weight: storage of one weight (Q8_0: blocks of 32 int8 and one fp16 scale: 8.5 bits;
            ggml ``block_q8_0``).
    """

    name: str
    weight_type: str
    file_type: str
    bits_per_weight: float


PRECISIONS: dict[str, GGUFPrecision] = {
    p.name: p
    for p in (
        GGUFPrecision(name="bf16", weight_type="BF16", file_type="MOSTLY_BF16", bits_per_weight=16.0),
        GGUFPrecision(name="q8_0", weight_type="Q8_0", file_type="MOSTLY_Q8_0", bits_per_weight=8.5),
    )
}
MODEL_TYPES = ("llama", "mistral")  # transformers model types llama.cpp loads as its ``llama`` architecture


def precision(name: str) -> GGUFPrecision:
    """The GGUF precision ``name`` (case-insensitive).

    Raises:
        ConfigError: not one of :data:`PRECISIONS`.
    """
    p = PRECISIONS.get(str(name).lower())
    if p is None:
        raise ConfigError("precision", name, ", ".join(PRECISIONS))
    return p


@dataclass(frozen=True, slots=True)
class _Tensor:
    gguf_name: str
    hf_name: str
    shape: tuple[int, ...]  # torch order (rows, columns)
    init: str  # normal | ones | rope_freqs
    permute_heads: int = 0  # the converter's q/k permutation over this many heads (0: none)


def _plan(c: Any) -> list[_Tensor]:
    """Every tensor of a Llama config ``c`` in the converter's names."""
    hd = _head_dim(c)
    h, kv, d, ff = c.num_attention_heads, c.num_key_value_heads, c.hidden_size, c.intermediate_size
    out = [_Tensor("token_embd.weight", "model.embed_tokens.weight", (c.vocab_size, d), "normal")]
    if _llama3_rope(c) is not None:
        out.append(_Tensor("rope_freqs.weight", "", (hd // 2,), "rope_freqs"))
    for i in range(c.num_hidden_layers):
        b, m = f"blk.{i}.", f"model.layers.{i}."
        out += [
            _Tensor(b + "attn_norm.weight", m + "input_layernorm.weight", (d,), "ones"),
            _Tensor(b + "attn_q.weight", m + "self_attn.q_proj.weight", (h * hd, d), "normal", h),
            _Tensor(b + "attn_k.weight", m + "self_attn.k_proj.weight", (kv * hd, d), "normal", kv),
            _Tensor(b + "attn_v.weight", m + "self_attn.v_proj.weight", (kv * hd, d), "normal"),
            _Tensor(b + "attn_output.weight", m + "self_attn.o_proj.weight", (d, h * hd), "normal"),
            _Tensor(b + "ffn_norm.weight", m + "post_attention_layernorm.weight", (d,), "ones"),
            _Tensor(b + "ffn_gate.weight", m + "mlp.gate_proj.weight", (ff, d), "normal"),
            _Tensor(b + "ffn_up.weight", m + "mlp.up_proj.weight", (ff, d), "normal"),
            _Tensor(b + "ffn_down.weight", m + "mlp.down_proj.weight", (d, ff), "normal"),
        ]
    out.append(_Tensor("output_norm.weight", "model.norm.weight", (d,), "ones"))
    if not c.tie_word_embeddings:
        out.append(_Tensor("output.weight", "lm_head.weight", (c.vocab_size, d), "normal"))
    return out


def _head_dim(c: Any) -> int:
    return int(getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads)


def _rope(c: Any) -> dict[str, Any]:
    return dict(getattr(c, "rope_parameters", None) or {})


def _llama3_rope(c: Any) -> dict[str, Any] | None:
    rope = _rope(c)
    return rope if str(rope.get("rope_type", "")).lower() == "llama3" else None


def rope_factors(c: Any):
    """Llama 3's per-frequency RoPE scaling factors (float32, ``head_dim / 2``), as ``conversion/llama.py``'s
    ``generate_extra_tensors`` computes them from ``rope_parameters`` (``factor``, ``low_freq_factor``,
    ``high_freq_factor``, ``original_max_position_embeddings``)."""
    import torch

    rope, dim = _llama3_rope(c), _head_dim(c)
    base = rope.get("rope_theta", 10000.0)
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    factor, low, high = rope.get("factor", 8.0), rope.get("low_freq_factor", 1.0), rope.get("high_freq_factor", 4.0)
    old = rope.get("original_max_position_embeddings", 8192)
    out = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1.0)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(out, dtype=torch.float32)


def permute_qk(w, n_head: int):
    """The converter's ``LlamaModel.permute``: each head's rows from rotate-half pairs (i, i + d/2) to adjacent
    pairs (2i, 2i + 1), llama.cpp's RoPE layout for the ``llama`` architecture."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def q8_0_bytes(x) -> Any:
    """Q8_0 blocks of a float32 tensor whose last dimension is a multiple of 32, bit-exact with
    ``gguf.quants.quantize`` (ggml-quants.c ``quantize_row_q8_0_ref``: scale ``max|x| / 127`` stored as fp16,
    ``round(x / scale)`` half away from zero as int8), computed with torch on the tensor's device.

    Returns:
        a uint8 torch tensor ``(*x.shape[:-1], x.shape[-1] // 32 * 34)``.
    """
    import torch

    blocks = x.reshape(-1, 32)
    d = blocks.abs().amax(dim=1, keepdim=True) / 127
    inv = torch.where(d == 0, torch.zeros_like(d), 1 / d)
    scaled = blocks * inv
    a = scaled.abs()
    floored = a.floor()
    qs = torch.sign(scaled) * (floored + (2 * (a - floored)).floor())
    packed = torch.cat([d.to(torch.float16).view(torch.uint8), qs.to(torch.int8).view(torch.uint8)], dim=1)
    return packed.reshape(*x.shape[:-1], x.shape[-1] // 32 * 34)


def _encode(x, qtype: str):
    """A float32 torch tensor as the numpy array ``GGUFWriter.write_tensor_data`` writes for ``qtype``."""
    import torch

    if qtype == "F32":
        return x.to(torch.float32).cpu().numpy()
    if qtype == "BF16":  # torch rounds to nearest even, as ggml_compute_fp32_to_bf16
        return x.to(torch.bfloat16).view(torch.uint8).cpu().numpy()
    if qtype == "F16":
        return x.to(torch.float16).cpu().numpy()
    rows = max(1, (1 << 24) // max(1, x.shape[-1]))  # about 64 MiB of float32 a step: bounded temporaries
    parts = [q8_0_bytes(x[i : i + rows]).cpu() for i in range(0, x.shape[0], rows)]
    return torch.cat(parts).numpy()


def _qtype(t: _Tensor, p: GGUFPrecision) -> str:
    """The converter's choice: 1-D tensors and norms F32; Q8_0 of a row not made of 32-blocks falls back to F16."""
    if len(t.shape) <= 1 or t.gguf_name.endswith("_norm.weight"):
        return "F32"
    if p.weight_type == "Q8_0" and t.shape[-1] % 32:
        return "F16"
    return p.weight_type


def _info(t: _Tensor, qtype: str) -> tuple[tuple[int, ...], Any, int]:
    """The shape, numpy dtype and byte count ``add_tensor_info`` takes for ``t`` stored as ``qtype``."""
    import gguf
    import numpy as np

    raw = gguf.GGMLQuantizationType[qtype]
    if qtype in ("F32", "F16"):
        dtype = np.dtype(np.float32 if qtype == "F32" else np.float16)
        return t.shape, dtype, math.prod(t.shape) * dtype.itemsize
    shape = gguf.quant_shape_to_byte_shape(t.shape, raw)
    return tuple(shape), np.dtype(np.uint8), math.prod(shape)


def check_config(name: str, c: Any) -> None:
    """Refuse a config llama.cpp's ``llama`` architecture does not load as written here.

    Raises:
        UnknownModelError: another model type, or attention or MLP biases.
    """
    kind = getattr(c, "model_type", None)
    if kind not in MODEL_TYPES:
        raise UnknownModelError(
            f"{name}: a {kind} model; accelbench writes GGUF files of {', '.join(MODEL_TYPES)} architectures only"
        )
    if getattr(c, "attention_bias", False) or getattr(c, "mlp_bias", False):
        raise UnknownModelError(f"{name}: attention or MLP biases, which llama.cpp's llama architecture has not")


def add_metadata(w: Any, label: str, c: Any, p: GGUFPrecision) -> None:
    """The ``general.*`` and ``llama.*`` keys the converter writes for a ``LlamaForCausalLM`` config ``c``."""
    import gguf

    hd = _head_dim(c)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(label)
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(float(_rope(c).get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(c.rms_norm_eps))
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_file_type(gguf.LlamaFileType[p.file_type])
    w.add_vocab_size(c.vocab_size)
    w.add_rope_dimension_count(hd)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)


def random_source(c: Any, seed: int, device: Any) -> Callable[[_Tensor], Any]:
    """Tensors drawn as ``transformers``' ``_init_weights`` initialises a Llama: Linear and Embedding weights
    normal(0, ``initializer_range``), RMSNorm weights one; one seeded generator on ``device``, drawn in file order."""
    import torch

    gen = torch.Generator(device=device).manual_seed(seed)
    std = float(getattr(c, "initializer_range", 0.02))

    def draw(t: _Tensor):
        if t.init == "ones":
            return torch.ones(t.shape, dtype=torch.float32, device=device)
        return torch.randn(t.shape, generator=gen, dtype=torch.float32, device=device).mul_(std)

    return draw


def checkpoint_source(folder: Path, device: Any) -> Callable[[_Tensor], Any]:
    """Tensors read from ``folder``'s ``model.safetensors`` (a tied model has no ``lm_head.weight``)."""
    import torch
    from safetensors import safe_open

    handle = safe_open(str(folder / "model.safetensors"), framework="pt", device="cpu")
    return lambda t: handle.get_tensor(t.hf_name).to(device=device, dtype=torch.float32)


def tensors(c: Any, p: GGUFPrecision, source: Callable[[_Tensor], Any]) -> Iterator[tuple[_Tensor, str, Any]]:
    """``(tensor, qtype, encoded numpy array)`` of every tensor of ``c`` in file order, one at a time."""
    for t in _plan(c):
        qtype = _qtype(t, p)
        x = rope_factors(c) if t.init == "rope_freqs" else source(t)
        if t.permute_heads:
            x = permute_qk(x, t.permute_heads)
        yield t, qtype, _encode(x, qtype)
        del x


def write_file(path: Path, label: str, c: Any, p: GGUFPrecision, source, vocab: Callable[[Any], None]) -> None:
    """Write the GGUF file ``path`` of config ``c`` in precision ``p``: metadata, ``vocab(writer)`` (the tokenizer
    keys), the tensor infos, then each tensor from ``source`` as it is encoded."""
    import gguf

    w = gguf.GGUFWriter(path=None, arch=gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    add_metadata(w, label, c, p)
    vocab(w)
    for t in _plan(c):
        w.add_tensor_info(t.gguf_name, *_info(t, _qtype(t, p)), raw_dtype=gguf.GGMLQuantizationType[_qtype(t, p)])
    w.write_header_to_file(path=path)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    try:
        for _t, _q, data in tensors(c, p, source):
            w.write_tensor_data(data)
    finally:
        w.close()

"""What the generate scenario checks of its models before anything is built: checkpoint folders
(:mod:`accelbench.models.checkpoint`) and whether a case's memory fits the device.

The estimate of a case's peak memory, from the model's config (and a checkpoint's safetensors headers) alone:

- **weights**: parameters x bytes of the precision's model dtype (float32, or its cast dtype). A weight-only or fp8
  precision quantizes the linears (1 byte a linear weight plus a float32 scale a row, the LM head quantized even when
  tied, the rest in the model dtype). Its peak while loading: random weights are drawn a decoder layer at a time,
  each quantized before the next (:func:`accelbench.models.lm_load.materialize`), so the quantized model plus one
  layer and an untied LM head in the model dtype; a checkpoint is read whole in the model dtype first, so the larger
  of that and the quantized model. Split over N GPUs (``--parallel tp``), all are a GPU's: the embedding table (and a
  tied head's quantized copy) whole, the rest divided by N, each GPU quantizing its own shards; a checkpoint is
  loaded whole first;
- **KV cache**: ``2 x layers x kv_heads x head_dim x (prompt + new tokens) x batch x bytes`` of the model dtype
  (:func:`accelbench.core.lm_analytic.kv_cache_bytes`; the static cache holds every position from the
  start, Hugging Face's dynamic cache grows to the same size);
- **activations** of the prefill: one decoder layer's working set, ``batch x prompt x (4 x hidden + 3 x
  intermediate)`` values (residual, normed input, attention projections and output; the MLP's gate, up and their
  product), the causal mask (``batch x prompt x (prompt + new)`` bytes) and the logits of the last position
  (``batch x vocab`` in the model dtype and a float32 copy: both loops keep one position, ``logits_to_keep=1``:
  :mod:`accelbench.backends.lm_loop`); for a model with real weights the perplexity's forward pass
  (8 windows of ``perplexity_window`` tokens, logits in the model dtype and two float32 copies) where larger;
- **margin**: 10 % of the above plus 256 MiB, for the allocator's rounding, temporaries and the compiled step.

The estimate is compared with what the device has before the run: available RAM on a CPU (``psutil``), free
memory on a CUDA GPU (NVML's, read without a CUDA context: the process that checks may be the one that launches the
ranks of a split model, and a context it created would hold memory on their GPU for the whole run, seen there as
another process; ``torch.cuda.mem_get_info`` where NVML cannot tell). When even the spec's smallest case does not fit, the run is
refused (:class:`DoesNotFitError`, exit 2: one line with the estimate, what is available and what would fit); a
case that does not fit in a run that goes ahead is an ``oom`` row (:class:`EstimatedOutOfMemory`) and its larger
batch sizes ``skipped``, as a measured out-of-memory error is.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.core.errors import AccelbenchError
from accelbench.core.memory import EstimatedOutOfMemory, available_bytes, gb

MARGIN_FRACTION, MARGIN_BYTES = 0.10, 256 << 20
PERPLEXITY_BATCH = 8  # windows a perplexity forward pass (scenarios.generate.model.quality)


class DoesNotFitError(AccelbenchError):
    """Even the smallest case of a spec needs more memory than the device has (exit 2, before anything is built)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Footprint:
    """What the estimate needs of a model, read from its config (and a checkpoint's headers).

    Attributes:
        params: every stored parameter (a tied LM head once).
        linear_params / linear_rows: weights and output rows of the stored ``nn.Linear`` layers a weight-only
            precision quantizes (an untied LM head among them).
        tied_head: the LM head is the embedding table (it is quantized as a copy, the table kept).
        layers, heads, kv_heads, head_dim, hidden, intermediate, vocab: the config's sizes.
        pretrained: real weights (the perplexity is measured).
        checkpoint: read from a checkpoint folder (loaded whole, then split, under tensor parallelism; an
            architecture's random weights are drawn on each GPU's shard only).
    """

    params: int
    linear_params: int
    linear_rows: int
    tied_head: bool
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    intermediate: int
    vocab: int
    pretrained: bool = False
    checkpoint: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    """Peak bytes of one case (see the module docstring); ``total_bytes`` is what is compared.

    Attributes:
        load_bytes: the weights as loaded, in the model dtype (the peak of loading before quantizing).
        weights_bytes: the weights while the case runs (quantized where the precision quantizes).
    """

    load_bytes: int
    weights_bytes: int
    kv_cache_bytes: int
    activations_bytes: int
    margin_bytes: int

    @property
    def total_bytes(self) -> int:
        run = self.weights_bytes + self.kv_cache_bytes + self.activations_bytes
        return max(self.load_bytes, run) + self.margin_bytes

    def text(self) -> str:
        load = f"loading {gb(self.load_bytes)} before quantizing, " if self.load_bytes > self.weights_bytes else ""
        return (
            f"about {gb(self.total_bytes)} ({load}weights {gb(self.weights_bytes)}, KV cache "
            f"{gb(self.kv_cache_bytes)}, activations {gb(self.activations_bytes)}, margin {gb(self.margin_bytes)})"
        )


def estimate(
    fp: Footprint,
    *,
    batch_size: int,
    prompt_len: int,
    new_tokens: int,
    dtype_bytes: int,
    eight_bit: bool = False,
    perplexity_window: int | None = None,
    tp: int = 1,
) -> Estimate:
    """Peak bytes of a generation case of ``fp`` on one GPU (see the module docstring for each term and its
    source).

    Args:
        dtype_bytes: bytes of the model dtype (weights before quantization, KV cache, activations).
        eight_bit: the linear weights are quantized to 8 bits (weight-only int8/fp8, fp8): as they are drawn, a layer
            at a time (random weights), or after a checkpoint is loaded.
        perplexity_window: tokens a perplexity window when the perplexity is measured, else None.
        tp: GPUs the model is split over (:mod:`accelbench.models.tensor_parallel`): each holds ``1 / tp`` of the
            weights but the replicated embedding table (and a tied head, quantized as a copy when ``eight_bit``),
            ``1 / tp`` of the KV cache and of the MLP's activations; a checkpoint is loaded whole before it is
            split, random weights are drawn a shard a GPU in the model dtype and (``eight_bit``) quantized there.
    """
    from accelbench.core.lm_analytic import Shape, kv_cache_bytes

    loaded = weights = fp.params * dtype_bytes
    replicated = fp.vocab * fp.hidden * dtype_bytes  # the embedding table: whole on every GPU
    if eight_bit:
        head, head_rows = (fp.vocab * fp.hidden, fp.vocab) if fp.tied_head else (0, 0)
        kept = (fp.params - fp.linear_params) * dtype_bytes
        weights = kept + fp.linear_params + head + 4 * (fp.linear_rows + head_rows)
        replicated += head + 4 * head_rows  # a tied head's quantized copy, whole on every GPU too
    shape = Shape(
        layers=fp.layers,
        heads=fp.heads,
        kv_heads=fp.kv_heads,
        head_dim=fp.head_dim,
        hidden=fp.hidden,
        vocab=fp.vocab,
        params=fp.params,
        embedding_params=fp.vocab * fp.hidden,
        tied_head=fp.tied_head,
        matmul_params=fp.linear_params,
        lm_head_params=fp.vocab * fp.hidden,
        weight_bytes=weights,
        kv_bytes_per_value=dtype_bytes,
    )
    kv = kv_cache_bytes(shape, batch_size, prompt_len + new_tokens) // tp
    if tp > 1:
        table = fp.vocab * fp.hidden * dtype_bytes
        weights = (weights - replicated) // tp + replicated
        loaded = loaded if fp.checkpoint else (loaded - table) // tp + table  # random: each GPU draws its shards
    if eight_bit and not fp.checkpoint:  # random weights quantized as drawn: one layer and an untied head unquantized
        untied_head = 0 if fp.tied_head else fp.vocab * fp.hidden
        loaded = weights + ((fp.linear_params - untied_head) // fp.layers + untied_head) * dtype_bytes // tp
    tokens = batch_size * prompt_len
    act = (
        tokens * (4 * fp.hidden + 3 * fp.intermediate // tp) * dtype_bytes
        + tokens * (prompt_len + new_tokens)
        + batch_size * fp.vocab * (dtype_bytes + 4)
    )
    if perplexity_window and fp.pretrained:
        act = max(act, PERPLEXITY_BATCH * perplexity_window * fp.vocab * (dtype_bytes + 8))
    margin = int(max(loaded, weights + kv + act) * MARGIN_FRACTION) + MARGIN_BYTES
    return Estimate(
        load_bytes=loaded, weights_bytes=weights, kv_cache_bytes=kv, activations_bytes=act, margin_bytes=margin
    )


def _footprint(
    config: dict, shapes: dict[str, tuple[int, ...]] | None, pretrained: bool, checkpoint: bool = False
) -> Footprint | None:
    """A :class:`Footprint` of a config's values and, for a checkpoint, its tensors' shapes by name (None: the
    shapes the config implies, :mod:`accelbench.models.lm_layout`). None when a size the estimate needs is missing."""
    from accelbench.models import lm_layout

    d = lm_layout.dims(config)
    layout = lm_layout.layout(config.get("model_type"), config) or {}
    if shapes is None:
        shapes = {name: shape for name, (shape, _) in layout.items()} if layout else None
    sizes = (d.layers, d.heads, d.kv_heads, d.head_dim, d.hidden, d.intermediate, d.vocab)
    if shapes is None or None in sizes:
        return None

    def is_linear(name: str, shape: tuple[int, ...]) -> bool:
        if name in layout:
            return layout[name][1] == lm_layout.LINEAR
        return len(shape) == 2 and not any(e in name for e in ("emb", "wte", "wpe"))  # a family not described

    linear = [s for n, s in shapes.items() if is_linear(n, s)]
    return Footprint(
        params=sum(lm_layout.numel(s) for s in shapes.values()),
        linear_params=sum(lm_layout.numel(s) for s in linear),
        linear_rows=sum(s[0] for s in linear),
        tied_head="lm_head.weight" not in shapes,
        layers=d.layers,
        heads=d.heads,
        kv_heads=d.kv_heads,
        head_dim=d.head_dim,
        hidden=d.hidden,
        intermediate=d.intermediate,
        vocab=d.vocab,
        pretrained=pretrained,
        checkpoint=checkpoint,
    )


def footprint(name: str) -> Footprint | None:
    """The :class:`Footprint` of an ``hf:`` model name: an architecture's values, or a checkpoint's ``config.json``
    and safetensors headers. None for a factory's model (known only once built) or a config the estimate cannot
    read."""
    from accelbench.models import hf
    from accelbench.models.checkpoint import read_json, read_tensors
    from accelbench.models.lm_layout import local_name

    if not hf.is_lm_name(name):
        return None
    path = hf.checkpoint_dir(name)
    if path is None:
        arch = hf.ARCHITECTURES.get(name[len(hf.PREFIX) :])
        if arch is None:  # not a name of this family: the model checks have refused it
            return None
        # transformers names a config class after its model type (LlamaConfig: llama, GPT2Config: gpt2); read from
        # the name, not the class, so the check imports no transformers module
        model_type = arch.config_class.removesuffix("Config").lower()
        return _footprint({**arch.values, "model_type": model_type}, None, pretrained=False)
    shapes = {local_name(n): t.shape for n, t in read_tensors(path).items()}
    return _footprint(read_json(path / "config.json", path), shapes, pretrained=hf.has_tokenizer(path), checkpoint=True)


def case_estimate(fp: Footprint, case, spec, *, batch_size: int | None = None, precision: str | None = None):
    """The :class:`Estimate` of ``case`` of ``spec`` (another batch size or precision when given)."""
    from accelbench import precisions
    from accelbench.quant.lm import lm_dtype

    name = precision or case.precision
    p = precisions.get(name)
    st = spec.settings
    return estimate(
        fp,
        batch_size=batch_size or case.batch_size,
        prompt_len=case.extras.prompt_len,
        new_tokens=case.extras.new_tokens,
        dtype_bytes=lm_dtype(name).itemsize,
        eight_bit=bool(p.weight_only) or p.quant == "float8",
        perplexity_window=st.perplexity_window if st.perplexity else None,
        tp=case.extras.tp_degree,
    )


def _per_gpu(tp: int) -> str:
    return f" on each of the {tp} GPUs it is split over" if tp > 1 else ""


def _where(device) -> str:
    return "of RAM available" if device.type == "cpu" else f"free on {device}"


def _what_fits(fp: Footprint, case, spec, device, available: int) -> str:
    """What fits ``available`` bytes: a smaller batch size in the case's precision, else the precisions that run
    on ``device`` and fit at batch size 1 and the fewest GPUs the case fits split over; else a smaller model."""
    from accelbench import precisions

    for b in range(case.batch_size - 1, 0, -1):
        e = case_estimate(fp, case, spec, batch_size=b)
        if e.total_bytes <= available:
            return f"batch size {b} would fit (about {gb(e.total_bytes)})"
    fits = {}
    for name in precisions.names(workload="generate"):
        if precisions.unsupported_reason(name, device) is None:
            e = case_estimate(fp, case, spec, batch_size=1, precision=name)
            if e.total_bytes <= available:
                fits[name] = e.total_bytes
    split = _split_fits(fp, case, spec, available)
    if fits:
        said = f"at batch size 1, --precisions {' or '.join(fits)} would fit (from about {gb(min(fits.values()))})"
        return f"{said}; {split}" if split else said
    return split or "no precision fits it at batch size 1 on this device: try a smaller model"


def _split_fits(fp: Footprint, case, spec, available: int) -> str | None:
    """The fewest GPUs (2, 4 or 8) the case fits split over, as the flags that ask it, or None."""
    import dataclasses

    from accelbench.core.parallel_dims import ParallelDims

    for n in (2, 4, 8):
        if n <= case.extras.tp_degree or ParallelDims(tp=n).tp_reason(fp.heads, fp.kv_heads):
            continue
        split = dataclasses.replace(case, extras=dataclasses.replace(case.extras, tp_degree=n))
        e = case_estimate(fp, split, spec)
        if e.total_bytes <= available:
            return f"--gpus {n} --parallel tp would fit (about {gb(e.total_bytes)} a GPU)"
    return None


def check_split(name: str, tp: int) -> None:
    """A model split over ``tp`` GPUs has whole heads on each (known from its config before anything is built).

    Raises:
        ConfigError: ``tp`` does not divide the model's query or key-value heads (exit 2).
    """
    from accelbench.core.errors import ConfigError
    from accelbench.core.parallel_dims import ParallelDims

    fp = footprint(name) if tp > 1 else None
    why = ParallelDims(tp=tp).tp_reason(fp.heads, fp.kv_heads) if fp is not None else None
    if why:
        raise ConfigError("gpus", tp, f"a number of GPUs that divides {name}'s heads: {why}")


def check_checkpoint(name: str) -> None:
    """An ``hf:`` checkpoint folder resolves and passes :func:`accelbench.models.checkpoint.validate`.

    Raises:
        UnknownModelError: no folder, config.json or safetensors weights (:func:`accelbench.models.hf.check_lm`).
        CheckpointError: a damaged folder (one line naming the file).
    """
    from accelbench.models import hf
    from accelbench.models.checkpoint import read_json, validate

    path = hf.checkpoint_dir(name) if hf.is_lm_name(name) else None
    if path is None:
        return
    index = path / "model.safetensors.index.json"
    if index.is_file():
        read_json(index, path)  # before check_lm reads it: a broken index is one line naming it
    hf.check_lm(name)
    validate(path)


def check_memory(scenario, spec) -> None:
    """Refuse ``spec`` when even its smallest case's estimate exceeds what the device has (see the module
    docstring). Cases of a factory's model, or that cannot run on the device (``unsupported``), are not counted.

    Raises:
        DoesNotFitError: one line with the smallest case's estimate, what is available and what would fit.
    """
    from accelbench.core.device import resolve_device
    from accelbench.telemetry.sources.nvml import free_bytes

    device = resolve_device(spec.device)
    available = free_bytes(device.index or 0) if device.type == "cuda" else None
    available = available if available is not None else available_bytes(device)
    if available is None:
        return
    fps = {name: footprint(name) for name in spec.models}
    sized = [
        (case_estimate(fps[c.model], c, spec), c)
        for c in scenario.cases(spec, str(device))
        if fps[c.model] is not None and scenario.unsupported_reason(c, device) is None
    ]
    if not sized:
        return
    est, case = min(sized, key=lambda t: t[0].total_bytes)
    if est.total_bytes > available:
        ex = case.extras
        raise DoesNotFitError(
            f"{case.model} in {case.precision} at batch size {case.batch_size}, prompt {ex.prompt_len} + "
            f"{ex.new_tokens} new tokens needs {est.text()}{_per_gpu(ex.tp_degree)}, more than the "
            f"{gb(available)} {_where(device)}: "
            f"{_what_fits(fps[case.model], case, spec, device, available)}"
        )


def check_case(case, spec, available: int | None) -> None:
    """Raise before building when ``case`` cannot fit the ``available`` bytes the device had before the run.

    Raises:
        EstimatedOutOfMemory: the case's row is ``oom`` with the estimate (its larger batch sizes are skipped).
    """
    fp = footprint(case.model) if available is not None else None
    if fp is None:
        return
    est = case_estimate(fp, case, spec)
    if est.total_bytes > available:
        raise EstimatedOutOfMemory(f"not built: needs {est.text()}, more than the {gb(available)} available")

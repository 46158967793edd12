"""A Triton kernel for 8-bit weights at 1 to 128 rows (decode, short prefills): ``y = (x @ q.T) * s`` with ``q`` an
``(N, K)`` int8 or float8_e4m3fn weight and ``s`` one scale per output row, dequantized in registers; at one row a
matrix-vector product (GEMV), at more a matrix product over tiles of rows.

Why accelbench has its own kernel. A decode step at batch 1 is a chain of matrix-vector products, memory-bound:
every weight byte is read once a token, so a kernel reading 8-bit weights near the memory roof makes the step up
to ~2x faster than bf16 (half the bytes; gpt-fast's int8 weight-only recipe). The stock paths fall short of that on
Hopper GPUs (``benchmarks/gemv_8bit_probe.py`` times them; figures in docs/results.md, language models): Inductor's
fused multiply-and-sum and ``aten._weight_int8pack_mm`` read int8 far below cuBLAS's bf16 bandwidth, and cuBLASLt's
fp8 GEMM pads the row to a 128-row tile. This kernel is the textbook GEMV: each program owns ``BLOCK_N`` output rows,
walks ``K`` in ``BLOCK_K`` chunks with wide contiguous loads of the weight rows, converts to float32 and accumulates
in registers, then applies the row scales once (the dequantize-in-registers of tinygemm and Marlin, without their
weight repacking). Block sizes are chosen per shape by ``triton.autotune``.

More rows, chosen by measurement. Rows ``M`` from 2 to :data:`MAX_ROWS` (a decode step's batch, or a short
prefill) run as tiles of rows on tensor cores (``tl.dot`` in x's 16-bit dtype, exact for int8 and e4m3 weights; in
float32 for float32 activations): the smallest of :data:`TILES` (16 to 128 rows) holding ``M``, or ``M`` in tiles of
128. The tiles of one weight tile are neighbours in launch order, so each weight byte is read from memory once a call
and from L2 by the other tiles; block sizes are tuned apart for one row and for each tile. A grid of one program a row
read the weight once a row, and its time grew with the rows. Past :data:`MAX_ROWS` the product is compute-bound and the
caller dequantizes for cuBLAS (5 bytes moved a weight against bf16's 2, a cost the compute then hides): on an H200 at
the Llama-3.1-70B shape's projections (``benchmarks/gemv_8bit_probe.py``; docs/results.md, 8-bit weights at more than
one row), the kernel took 53 to 76 ms for a forward's matrix products at 128 rows against 90 ms dequantized and
compiled, and at 256 rows about the same (98 to 101 against 101 to 103 ms), so the kernel stops at 128.

K split, chosen by measurement. A weight of few output rows and long rows (Llama-3.1-8B's o, 4096 x 4096, and down,
4096 x 14,336) gives the GPU's SMs few programs of long loops, too few loads in flight to reach the memory roof:
under Nsight Compute on an H200 (docs/results.md, the compiled prefill) the unsplit kernel read down at 1.0 TB/s and o
at 0.9 TB/s against 3.0 TB/s for the 28,672-row gate/up, and cuBLAS splits these same bf16 shapes over K
(``splitK`` kernels and a ``splitKreduce``). So at one row the kernel can split ``K`` in ``SPLIT_K`` chunks (a second
grid axis), each program writing its float32 partial product, and a small kernel sums the partials into the output
(cuBLAS's split-K with a separate reduction, not atomics, so nothing needs zeroing and the sum's order is fixed). Which
split of :data:`SPLITS` is fastest depends on the shape and the GPU, so it is timed per shape at the first eager call
(:func:`warm`), each split with its own tuned block sizes, and :func:`splits` reports the choice. Weights of more than
:data:`SPLIT_MAX_N` rows and 2 to :data:`MAX_ROWS` rows of ``x`` run unsplit.

int8 conversion, chosen by measurement. The kernel can convert int8 to float32 with the conversion instruction,
which on Hopper issues at 16 a clock an SM (CUDA C++ Programming Guide, arithmetic instruction throughput, compute
capability 9.0): about the rate a full-bandwidth int8 read needs, the likely reason int8 reads below fp8. Or it
converts by bits: a sign extension (64 a clock) and one integer add of ``0x4B000080`` put ``w + 128`` (0..255) into
the low mantissa bits of the float32 2**23 (bits ``0x4B000000``), which is then exactly ``2**23 + 128 + w``, and one
float subtraction of ``2**23 + 128`` leaves ``w`` (the trick of FasterTransformer's and Marlin's int8/int4
dequantizers, there with fp16's 1024.0 and a byte permute); exact for all 256 values (tested on the CPU through
Triton's interpreter). Which is faster depends on the GPU's instruction mix, so neither is hard-wired: the
conversion is one more autotuned parameter (``int8_conversion="auto"``, the default), timed with the block sizes at
each shape, and :func:`int8_conversions` reports what was chosen (a weight-only row's ``quant_kernels`` says it).
``benchmarks/gemv_8bit_probe.py`` times each forced (``int8-gemv-instruction``, ``int8-gemv-bits``) beside the
autotuner's choice (``int8-gemv-auto``; docs/results.md, language models).
fp8 converts two at a time (``cvt.f16x2.e4m3x2``) and needs neither.

The kernel is a ``torch.library`` custom op (``torch.ops.accelbench.gemv_8bit``), so ``torch.compile`` keeps it as one
opaque call and a CUDA graph captures it. Tuning happens at the first call of a shape: :func:`warm` calls it
eagerly for a model's shapes before any graph is compiled or captured.
"""

from __future__ import annotations

import os
from functools import cache, lru_cache

import torch

MAX_ROWS = 128  # rows of x a call may have; more are dequantized for cuBLAS (module docstring: more rows)
TILES = (16, 32, 64, 128)  # the tiles of x's rows a call of 2 rows or more runs in (tl.dot's smallest side is 16)
SPLITS = (1, 2, 4, 8)  # K splits timed per shape at one row (module docstring: K split)
SPLIT_MAX_N = 16384  # weights with more output rows run unsplit: enough programs already (gate/up: 28,672 rows)
_K_CHUNK = 512  # a split's K range is a multiple of this, so of every BLOCK_K the autotuner may choose
_split_chosen: dict[tuple, int] = {}  # (N, K, weight dtype, x dtype, int8 conversion) -> the split timed fastest


@lru_cache(maxsize=1)
def available() -> str | None:
    """Why the kernel cannot run here, or None when it can (Triton importable and a CUDA device present)."""
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        return f"Triton is not installed ({exc})"
    return None if torch.cuda.is_available() else "no CUDA device"


INT8_CONVERSIONS = ("instruction", "bits")  # how int8 weights become float32 (module docstring)


def _graph_bench(fn, quantiles=None):
    """The autotuner's timer: each candidate replayed in a CUDA graph (Triton's ``do_bench_cudagraph``). Timed as
    eager launches, a kernel of a few microseconds is mostly launch cost and the choice between close configs is
    noise (eager timing let the autotuner pick a clearly slower int8 conversion); the compiled decode step replays the
    kernel in a CUDA graph too."""
    import triton.testing

    return triton.testing.do_bench_cudagraph(fn, rep=20, quantiles=quantiles)


def _prune(configs, named_args, **kwargs):
    """The configs a call may use: one row takes the GEMV's (``TILE_ONLY`` false); a tile of ``ROWS`` rows needs 16
    weight rows or more a program (``tl.dot``'s smallest side) and its pipelined operands within the GPU's shared
    memory a block (``stages x (ROWS x BLOCK_K x x's bytes + BLOCK_N x BLOCK_K)``; a config past it would only fail
    to compile)."""
    rows = kwargs.get("ROWS", named_args.get("ROWS", 1))
    if rows == 1:
        return [c for c in configs if not c.kwargs["TILE_ONLY"]]
    x = named_args.get("x_ptr")
    limit = _shared_memory_per_block(x.device.index) if x is not None and x.is_cuda else None
    x_bytes = x.element_size() if x is not None else 2
    return [
        c
        for c in configs
        if c.kwargs["BLOCK_N"] >= 16
        and (limit is None or c.num_stages * (rows * x_bytes + c.kwargs["BLOCK_N"]) * c.kwargs["BLOCK_K"] <= limit)
    ]


@cache
def _shared_memory_per_block(index: int) -> int | None:
    """The shared memory a block may use on CUDA device ``index``, bytes (the opt-in maximum: 227 KiB on Hopper,
    CUDA C++ Programming Guide, technical specifications per compute capability); None where torch does not say."""
    return getattr(torch.cuda.get_device_properties(index), "shared_memory_per_block_optin", None)


# (BLOCK_N, BLOCK_K, warps, stages): the GEMV's block sizes, then the larger weight tiles only a tile of rows may take
_GEMV_BLOCKS = (
    (8, 512, 4, 3),
    (16, 256, 4, 3),
    (16, 512, 4, 3),
    (16, 512, 8, 3),
    (32, 256, 4, 3),
    (32, 512, 8, 3),
    (64, 128, 4, 4),
    (64, 256, 8, 3),
)
_TILE_BLOCKS = ((32, 128, 4, 4), (64, 64, 4, 4), (64, 128, 8, 3), (128, 64, 8, 3), (128, 64, 8, 4), (128, 128, 8, 3))


def _autotune_options(via_bits: tuple[bool, ...]) -> dict:
    """``triton.autotune``'s configs (block sizes x ``via_bits``, the int8 conversions to choose between), pruning
    and timer (:func:`_graph_bench`, where this Triton takes one)."""
    import inspect

    import triton

    configs = [
        triton.Config({"BLOCK_N": n, "BLOCK_K": k, "INT8_VIA_BITS": bits, "TILE_ONLY": tile}, num_warps=w, num_stages=s)
        for bits in via_bits
        for tile, blocks in ((False, _GEMV_BLOCKS), (True, _TILE_BLOCKS))
        for n, k, w, s in blocks
    ]
    timer = {"do_bench": _graph_bench} if "do_bench" in inspect.signature(triton.autotune).parameters else {}
    return {"configs": configs, "prune_configs_by": {"early_config_prune": _prune}, **timer}


@cache
def _kernel(via_bits: tuple[bool, ...]):
    """The kernel autotuned over block sizes x ``via_bits`` (the int8 conversions it may choose between)."""
    import triton
    import triton.language as tl

    # tuned per weight shape and ROWS (1: a GEMV; 16 to 128: a tile of rows); the arguments' dtypes are in the key
    @triton.autotune(key=["N", "K", "ROWS", "SPLIT_K"], **_autotune_options(via_bits))
    @triton.jit
    def gemv_8bit(
        x_ptr,
        w_ptr,
        s_ptr,
        y_ptr,
        M,
        N,
        K,
        K_CHUNK,
        ROWS: tl.constexpr,
        SPLIT_K: tl.constexpr,
        DOT_FLOAT32: tl.constexpr,
        INT8_VIA_BITS: tl.constexpr,
        TILE_ONLY: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        # the row tiles of a weight tile launch side by side: its bytes read once (module docstring: more rows)
        m_blocks = tl.cdiv(M, ROWS)
        rows = (tl.program_id(0) // m_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
        cols = tl.arange(0, BLOCK_K)
        in_rows = rows < N
        if ROWS == 1:  # a float32 tile accumulator, reduced once at the end
            acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=tl.float32)
        else:  # ROWS rows of x, padded with zeros past M, one tensor-core product a step
            ms = (tl.program_id(0) % m_blocks) * ROWS + tl.arange(0, ROWS)
            in_m = ms < M
            acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
        k_lo = tl.program_id(1) * K_CHUNK  # this program's part of K (all of it unsplit: K_CHUNK >= K)
        for k0 in range(k_lo, k_lo + K_CHUNK, BLOCK_K):
            k = k0 + cols
            in_k = k < K
            w = tl.load(
                w_ptr + rows[:, None].to(tl.int64) * K + k[None, :], mask=in_rows[:, None] & in_k[None, :], other=0.0
            )
            if INT8_VIA_BITS:
                # w + 128 (0..255) in the low mantissa bits of the float32 2**23 is exactly 2**23 + 128 + w: one
                # integer add and one float subtraction, no integer-to-float conversion (module docstring)
                wf = (w.to(tl.int32) + 0x4B000080).to(tl.float32, bitcast=True) - 8388736.0
            else:
                wf = w.to(tl.float32)
            if ROWS == 1:
                x = tl.load(x_ptr + k, mask=in_k, other=0.0)
                acc += wf * x.to(tl.float32)[None, :]
            else:
                x = tl.load(
                    x_ptr + ms[:, None].to(tl.int64) * K + k[None, :], mask=in_m[:, None] & in_k[None, :], other=0.0
                )
                if DOT_FLOAT32:  # the exact float32 product; else in x's 16-bit dtype, exact for int8 and e4m3 weights
                    acc = tl.dot(x.to(tl.float32), tl.trans(wf), acc, input_precision="ieee")
                else:
                    acc = tl.dot(x, tl.trans(wf.to(x.dtype)), acc)
        s = tl.load(s_ptr + rows, mask=in_rows, other=0.0).to(tl.float32)
        y_ptr += tl.program_id(1) * M * N  # split: this part's float32 partial product, for _sum_kernel() to sum
        if ROWS == 1:
            y = tl.sum(acc, axis=1) * s
            tl.store(y_ptr + rows, y.to(y_ptr.dtype.element_ty), mask=in_rows)
        else:
            y = acc * s[None, :]
            at = ms[:, None].to(tl.int64) * N + rows[None, :]
            tl.store(y_ptr + at, y.to(y_ptr.dtype.element_ty), mask=in_m[:, None] & in_rows[None, :])

    return gemv_8bit


@cache
def _sum_kernel():
    """``y = sum over s of parts[s]``: the split products' reduction, in float32, stored in ``y``'s dtype. Named as a
    GEMV's kernel, so that a profile counts it in the GEMV's family (:mod:`accelbench.core.kernels`)."""
    import triton
    import triton.language as tl

    @triton.jit
    def gemv_8bit_sum_splits(p_ptr, y_ptr, SIZE, SPLIT_K: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        inside = i < SIZE
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for part in tl.static_range(SPLIT_K):
            acc += tl.load(p_ptr + part * SIZE + i, mask=inside, other=0.0)
        tl.store(y_ptr + i, acc.to(y_ptr.dtype.element_ty), mask=inside)

    return gemv_8bit_sum_splits


def launch(x, weight, scale, out, int8_conversion: str = "auto", split_k: int | None = None) -> None:
    """Run the kernel into ``out`` (shapes as :func:`gemv_8bit`'s).

    ``int8_conversion`` (int8 weights only; fp8 always converts with the instruction): ``"auto"`` lets the
    autotuner choose per shape, ``"instruction"`` or ``"bits"`` forces one (module docstring). ``split_k``: split
    ``K`` in this many parts (one of :data:`SPLITS`); None runs the split timed fastest for the shape (module
    docstring: K split), timed at its first call outside a CUDA graph capture.

    Raises:
        ValueError: an unknown ``int8_conversion`` or ``split_k``.
    """
    if int8_conversion not in ("auto", *INT8_CONVERSIONS):
        raise ValueError(f"int8_conversion must be auto or one of {INT8_CONVERSIONS}: got {int8_conversion!r}")
    if split_k is not None and split_k not in SPLITS:
        raise ValueError(f"split_k must be one of {SPLITS}: got {split_k!r}")
    if split_k is None:
        split_k = _split_for(x, weight, scale, out, int8_conversion)
    _run(x, weight, scale, out, int8_conversion, split_k)


def tile_rows(m: int) -> int:
    """The ``ROWS`` a call of ``m`` rows runs with: 1 (a GEMV), else the smallest of :data:`TILES` holding ``m``
    rows, or the largest (``m`` in tiles of it)."""
    return 1 if m == 1 else next((t for t in TILES if t >= m), TILES[-1])


def _run(x, weight, scale, out, int8_conversion: str, split_k: int) -> None:
    """One product into ``out``: the kernel (``split_k`` > 1: into float32 parts, then their sum)."""
    import triton

    m, k = x.shape
    n = weight.shape[0]
    rows = tile_rows(m)
    if weight.dtype != torch.int8 or int8_conversion == "instruction":
        kernel = _kernel((False,))
    else:
        kernel = _kernel((True,) if int8_conversion == "bits" else (False, True))
    chunk = triton.cdiv(triton.cdiv(k, split_k), _K_CHUNK) * _K_CHUNK
    dst = out if split_k == 1 else torch.empty(split_k, m, n, device=out.device, dtype=torch.float32)
    args = (x, weight, scale, dst, m, n, k, chunk)
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"  # Triton's CPU interpreter (the CPU tests)
    # float32 activations take the exact float32 product; so does the interpreter, whose tl.dot multiplies bf16's bits
    const = {"ROWS": rows, "SPLIT_K": split_k, "DOT_FLOAT32": x.dtype == torch.float32 or interpreted}
    m_blocks = triton.cdiv(m, rows)
    if interpreted:  # nothing to tune on
        meta = _prune(kernel.configs, {}, ROWS=rows)[0].kwargs
        kernel.fn[(triton.cdiv(n, meta["BLOCK_N"]) * m_blocks, split_k)](*args, **const, **meta)
    else:
        kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]) * m_blocks, split_k)](*args, **const)
    if split_k > 1:
        size, block = m * n, 1024
        _sum_kernel()[(triton.cdiv(size, block),)](dst, out, size, SPLIT_K=split_k, BLOCK=block)


def _split_for(x, weight, scale, out, int8_conversion: str) -> int:
    """The split to run: 1 for 2 to MAX_ROWS rows, wide weights, the CPU interpreter and an unseen shape inside a
    CUDA graph capture; else the fastest of :data:`SPLITS` that gives each part at least one ``_K_CHUNK``, timed
    once per shape (each split tuned first, then timed by :func:`_graph_bench`)."""
    n, k = weight.shape
    key = (n, k, weight.dtype, x.dtype, int8_conversion)
    if key in _split_chosen:
        return _split_chosen[key]
    if x.shape[0] != 1 or n > SPLIT_MAX_N or os.environ.get("TRITON_INTERPRET") == "1":
        return 1
    if torch.cuda.is_current_stream_capturing():  # no timing inside a capture: warm() times it before
        return 1
    candidates = [s for s in SPLITS if s == 1 or k >= s * _K_CHUNK]
    if len(candidates) == 1:  # K too short to split: nothing to time
        _split_chosen[key] = 1
        return 1
    timed = {}
    for split in candidates:

        def run(split=split):
            _run(x, weight, scale, out, int8_conversion, split)

        run()  # this split's block sizes tuned, outside the timing
        timed[split] = _graph_bench(run)
    _split_chosen[key] = min(timed, key=timed.get)
    return _split_chosen[key]


def splits(int8_conversion: str = "auto") -> dict[tuple[int, int], int]:
    """The K split timed fastest at one row for each ``(N, K)`` timed so far with ``int8_conversion`` (the mode a
    model's weight-only linears run; :func:`_split_for`; empty before any 8-bit weight ran here; a shape of several
    dtypes keeps the last): ``{(N, K): split}``."""
    return {(key[0], key[1]): split for key, split in _split_chosen.items() if key[4] == int8_conversion}


def int8_conversions() -> dict[tuple[int, int], str]:
    """The int8 conversion the autotuner chose at one row (decode's batch 1) for each ``(N, K)`` tuned so far in
    ``"auto"`` mode (empty before any int8 weight was run here): ``{(N, K): "instruction" | "bits"}``."""
    if available() is not None:
        return {}
    split = splits()
    return {
        (key[0], key[1]): INT8_CONVERSIONS[cfg.kwargs["INT8_VIA_BITS"]]
        for key, cfg in _kernel((False, True)).cache.items()
        if key[2] == 1 and key[3] == split.get((key[0], key[1]), 1)
    }


@torch.library.custom_op(
    "accelbench::gemv_8bit", mutates_args=(), schema="(Tensor x, Tensor weight, Tensor scale) -> Tensor"
)
def _op(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty(x.shape[0], weight.shape[0], device=x.device, dtype=x.dtype)
    launch(x, weight.contiguous(), scale.contiguous(), out)
    return out


@_op.register_fake
def _(x, weight, scale):
    return x.new_empty(x.shape[0], weight.shape[0])


def gemv_8bit(x, weight, scale):
    """``(x @ weight.T) * scale`` through the kernel, as the custom op ``torch.ops.accelbench.gemv_8bit`` (opaque
    to ``torch.compile``, captured by CUDA graphs).

    Shapes: ``x`` ``(M, K)`` bf16/fp16/fp32, ``M <= MAX_ROWS``; ``weight`` ``(N, K)`` int8 or float8_e4m3fn;
    ``scale`` ``(N,)``; the result ``(M, N)`` in ``x``'s dtype. All on one CUDA device.

    Raises:
        ValueError: more rows than :data:`MAX_ROWS`, or ``K`` of ``x`` and ``weight`` differ.
    """
    if x.shape[0] > MAX_ROWS or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"gemv_8bit takes at most {MAX_ROWS} rows of {weight.shape[1]}: got {tuple(x.shape)}")
    return _op(x, weight, scale)


def warm(weights, dtype) -> int:
    """Tune the kernel for each distinct ``(N, K)`` of ``weights`` (8-bit ``(N, K)`` tensors on a CUDA device) at one
    row and at each tile of rows up to :data:`MAX_ROWS`, and compile it for the row counts Triton specializes apart
    (1, a multiple of 16, any other), with activations of ``dtype``: the autotuner's timing runs and Triton's compiles
    happen here, eagerly, not inside a compiled or captured step. Returns the number of shapes tuned."""
    shapes = {}
    for w in weights:
        shapes.setdefault((tuple(w.shape), w.dtype), w)
    counts = sorted(m for m in {1, 2, MAX_ROWS, *TILES, *(t - 1 for t in TILES)} if m <= MAX_ROWS)
    for w in shapes.values():
        scale = torch.ones(w.shape[0], device=w.device, dtype=dtype)
        for m in counts:
            gemv_8bit(torch.zeros(m, w.shape[1], device=w.device, dtype=dtype), w, scale)
    return len(shapes)

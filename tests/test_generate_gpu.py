"""The generate scenario on a CUDA GPU: the compiled, graph-captured prefill and decode step generate what the eager
loops generate, the weight-only kernels run, every backend and precision gives an ok row."""

import pytest
from conftest import run_cli

pytestmark = pytest.mark.gpu
pytest.importorskip("transformers")


def test_compiled_graph_step_generates_the_eager_tokens():
    import torch

    from accelbench.backends.lm_loop import StaticLoop, compiled_steps, hf_generate
    from accelbench.backends.lm_timing import time_generation, time_steps
    from accelbench.models.lm_load import load_lm

    dev = torch.device("cuda")
    model = load_lm("hf:tiny-shakespeare", dev, torch.float32).module
    prompts = torch.randint(0, 1000, (4, 32), device=dev)
    eager = time_steps(StaticLoop(model, 4, 32, 24, dev), prompts, 24, dev)
    users = time_generation(lambda p, on_token: hf_generate(model, p, 24, on_token), prompts, dev)
    loop = StaticLoop(model, 4, 32, 24, dev, steps=compiled_steps("reduce-overhead"))
    time_steps(loop, prompts, 24, dev), time_steps(loop, prompts, 24, dev)  # compile, then record the graph
    graphed = time_steps(loop, prompts, 24, dev)
    assert torch.equal(graphed.tokens, eager.tokens) and torch.equal(users.tokens, eager.tokens)
    assert len(graphed.itl_s) == 23 and all(t > 0 for t in graphed.itl_s)
    assert sum(graphed.itl_s) < sum(eager.itl_s)  # a replayed graph a step beats eager launches
    assert graphed.ttft_s < eager.ttft_s  # the prefill too: compiled, one graph for its prompt shape


def test_weight_only_kernels_run_on_the_gpu():
    import torch

    from accelbench.quant import gemv
    from accelbench.quant.weight_only import WeightOnlyLinear, int8_kernel_works

    dev = torch.device("cuda")
    assert int8_kernel_works(dev, torch.bfloat16) and gemv.available() is None
    lin = torch.nn.Linear(256, 520, device=dev, dtype=torch.bfloat16)
    for rows in (1, 2, 3, 16, 40, gemv.MAX_ROWS, gemv.MAX_ROWS + 9):  # the Triton kernel, then dequantized
        x = torch.randn(rows, 256, device=dev, dtype=torch.bfloat16)
        ref = lin(x).float()
        for scheme in ("int8", "fp8"):
            for use_gemv in (False, True):
                got = WeightOnlyLinear(lin, scheme, int8_kernel=False, gemv=use_gemv)(x).float()
                assert (got - ref).abs().max() < 0.05 * ref.abs().max(), (rows, scheme, use_gemv)


def test_the_gemv_int8_conversions_agree_and_the_autotuners_choice_is_reported():
    """int8 weights through the GEMV with the conversion forced (instruction, bits) and chosen by the autotuner
    give the dequantized product; :func:`gemv.int8_conversions` names the choice for the shape just tuned."""
    import torch

    from accelbench.quant import gemv
    from accelbench.quant.weight_only import quantize_weight

    dev = torch.device("cuda")
    torch.manual_seed(0)
    q, s = quantize_weight(torch.randn(1000, 768, device=dev), "int8")
    s = s.to(torch.bfloat16)
    x = torch.randn(1, 768, device=dev, dtype=torch.bfloat16)
    ref = (x.float() @ q.float().T) * s.float()
    for conversion in ("auto", *gemv.INT8_CONVERSIONS):
        out = torch.empty(1, 1000, device=dev, dtype=torch.bfloat16)
        gemv.launch(x, q, s, out, int8_conversion=conversion)
        assert ((out.float() - ref).norm() / ref.norm()).item() < 1e-2, conversion
    assert gemv.int8_conversions()[(1000, 768)] in gemv.INT8_CONVERSIONS


def test_the_gemv_kernel_gives_the_plain_weight_only_models_logits():
    """The bundled model quantized (int8, fp8), every linear through the Triton GEMV, against the same model with
    the dequantize-then-matmul path: the decode step's logits (batch 2, one token) agree to bf16 rounding."""
    import torch

    from accelbench.models.lm_load import load_lm
    from accelbench.quant.weight_only import WeightOnlyLinear, quantize_linears

    dev = torch.device("cuda")
    tokens = torch.randint(0, 1000, (2, 1), device=dev)
    for scheme in ("int8", "fp8"):
        model = load_lm("hf:tiny-shakespeare", dev, torch.bfloat16).module
        cols = quantize_linears(model, scheme)
        linears = [m for m in model.modules() if isinstance(m, WeightOnlyLinear)]
        assert len(linears) == cols["quant_layers"] > 0 and all(m.gemv for m in linears)
        assert "Triton 8-bit GEMV" in cols["quant_kernels"]
        assert ("converted by bits at" in cols["quant_kernels"]) == (scheme == "int8"), cols["quant_kernels"]
        with torch.no_grad():
            fast = model(tokens).logits.float()
            for m in linears:
                m.gemv = False
            plain = model(tokens).logits.float()
        assert ((fast - plain).norm() / plain.norm()).item() < 1e-2, scheme


def test_every_backend_and_precision_runs(tmp_path):
    from accelbench.store import Store

    db = tmp_path / "g.db"
    run_cli(
        "generate",
        "-m",
        "hf:tiny-shakespeare",
        "-b",
        "2",
        "--prompt-lens",
        "64",
        "--new-tokens",
        "16",
        "-p",
        "bf16,int8-weight-only,fp8-weight-only",
        "--modes",
        "hf-generate,static-cache,static-compile,static-compile-fused",
        "--repeats",
        "2",
        "--idle-s",
        "0",
        "--db",
        str(db),
        check=True,
        timeout=900,
    )
    rows = Store(db).records()
    assert len(rows) == 3 * 4
    bad = [
        (r["status"], r["mbu"], r["tpot_p50_ms"], r["perplexity"], r["precision"], r["mode"])
        for r in rows
        if not (r["status"] == "ok" and 0 < r["mbu"] < 1.2 and r["tpot_p50_ms"] > 0 and r["perplexity"] > 1)
    ]
    assert not bad, bad
    assert all("Triton 8-bit GEMV" in r["quant_kernels"] for r in rows if "weight-only" in r["precision"])
    bf16 = {r["perplexity"] for r in rows if r["precision"] == "bf16"}
    assert len(bf16) <= 2  # one perplexity a model's numerics: plain and fused projections
    # every engine with a decode step of its own says where a profiled step's device time goes: GEMMs/GEMVs among it
    stepped = [r for r in rows if r["mode"] != "hf-generate"]
    assert len(stepped) == 3 * 3
    assert all(0 < r["decode_kernel_ms"] and "gemm" in r["decode_kernel_families"] for r in stepped), stepped
    whole = [r for r in rows if r["mode"] == "hf-generate"]
    assert len(whole) == 3 and all(r.get("decode_kernel_ms") is None for r in whole)
    assert all("whole generations" in r["decode_profile_note"] for r in whole)


def test_fp8_reads_8_bit_weights_and_keeps_the_bundled_models_perplexity(tmp_path):
    """fp8 W8A8 (torchao, ``torch._scaled_mm``) on the bundled trained model: every linear converted, the decode
    step's weight bytes about half of bf16's, perplexity within 3 % of bf16's on the held-out text."""
    import torch

    from accelbench.store import Store

    if torch.cuda.get_device_capability() < (8, 9):
        pytest.skip("fp8 needs compute capability 8.9")
    db = tmp_path / "f.db"
    run_cli(
        "generate",
        "-m",
        "hf:tiny-shakespeare",
        "-b",
        "1,4",
        "--prompt-lens",
        "64",
        "--new-tokens",
        "16",
        "-p",
        "bf16,fp8",
        "--modes",
        "static-cache,static-compile-fused",
        "--repeats",
        "2",
        "--idle-s",
        "0",
        "--db",
        str(db),
        check=True,
        timeout=900,
    )
    rows = Store(db).records()
    assert len(rows) == 2 * 2 * 2 and {r["status"] for r in rows} == {"ok"}
    fp8 = [r for r in rows if r["precision"] == "fp8"]
    # q k v o gate up down a layer (fused: qkv o gate_up down) and the LM head
    assert len(fp8) == 4 and all(
        r["fp8_linear_layers"] == (4 * 4 if r["mode"] == "static-compile-fused" else 4 * 7) + 1 for r in fp8
    )
    assert all(r["fp8_linear_layers_skipped"] == 0 for r in fp8)
    bf16 = {(r["mode"], r["batch_size"]): r for r in rows if r["precision"] == "bf16"}
    for r in fp8:
        ref = bf16[(r["mode"], r["batch_size"])]
        assert 0.4 < r["weight_bytes"] / ref["weight_bytes"] < 0.75  # the embedding table stays bf16
        assert abs(r["perplexity"] / ref["perplexity"] - 1) < 0.03

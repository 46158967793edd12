#!/usr/bin/env bash
# The generate scenario's GPU proof, one call a GPU kind (each under ~9.5 minutes): on an H200 and an H100.
#   headline  hf:llama-3.1-8b bf16, batch 1, prompt 128, 256 new tokens: static-compile, static-compile-fused,
#             then int8-weight-only and fp8-weight-only through static-compile-fused (the 4.6 ms TPOT and 1.4x targets)
#   wo        the headline's weight-only half alone (HEAD_BF16_S / HEAD_WO_S: the headline stages' limits)
#   hand      benchmarks/llm_handloop.py (the gpt-fast loop at the headline's shape, HF generate at 64 new tokens) and
#             accelbench's hf-generate row at the same 64 tokens: the +-2 % agreements
#   sweep     hf:llama-3.2-1b, batch 1..256, prompt 128 and 2048, 32 new tokens, static-compile-fused bf16
#   study     hf:llama-3.1-8b, batch 1, 16, 64 (H100: up to 256, past its KV-cache boundary at prompt 2048),
#             prompt 128 and 2048, 32 new tokens: the H100-vs-H200 comparison's other half
#   probe     benchmarks/llm_hf_overhead.py: hf-generate's TPOT against hand generate calls, with and without
#             accelbench's per-token processor and telemetry (hf:llama-3.2-1b)
#   oom       hf:llama-3.1-8b at prompt 2048, batch 64 and 256: the KV cache's out-of-memory boundary
#   gpu       pytest -m gpu on the generate tests
#   gemv      benchmarks/gemv_8bit_probe.py: which kernel reads 8-bit weights faster than bf16 at one token
#   handgen   the hand generate loop and accelbench's hf-generate row only (hand without the gpt-fast loop)
#   pytest-lm pytest -m "gpu or ncu": profile of an LM's decode step under ncu, bf16/fp8 roofs
#   fp8       the headline in bf16 and fp8 (W8A8: torch._scaled_mm through torchao), static-compile-fused, one call
#   profile-lm  accelbench profile under ncu: hf:llama-3.2-1b prefill and decode (prompt 512), then the headline's
#             8B decode step (kernels a step, bandwidth per kernel family: where the 4.6 ms target's time goes);
#             PROF1_STEPS (default prefill,decode) and PROF8_P (default bf16) choose
#   gpu-fp8   pytest: the fp8 generate test on the bundled model (first: a broken fp8 path costs 90 s, not a call)
#   gpu-gemv  pytest: the Triton 8-bit GEMV's GPU tests (kernel against the dequantized product, the bundled model's
#             logits); HEAD_MODES chooses the headline's bf16 backends (default static-compile,static-compile-fused)
# SWEEP_S and STUDY_S: those stages' limits (default 115 and 130 s); STUDY_REPEATS: their generations a case.
# HAND_REPS and HANDGEN_S: the hand generate loop's and the hf-generate row's generations (default 3) and limits
# (35 s). STAGES selects (default: by KIND: h200 "headline hand sweep study", h100 "headline sweep study gpu");
# BUDGET_S caps the whole call (default 560): a stage gets what is left and is stopped with SIGTERM past it
# (finished cases are stored; the run is marked interrupted). Results in $OUT (the store llm.db, the hand loops'
# JSON, log.txt; export the runs from the store afterwards). SMOKE=1: a CPU dry run.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-./llm-out}; mkdir -p "$OUT"; DB=$OUT/llm.db
KIND=${KIND:-h200}
if [ "$KIND" = h100 ]; then STAGES=${STAGES:-"headline sweep study gpu"}; else STAGES=${STAGES:-"headline hand sweep study"}; fi
BUDGET_S=${BUDGET_S:-560}; T0=$(date +%s)
AB="python3 -m accelbench"
STAGE_MIN_S=20; source "$(dirname "$0")/lib/stage.sh"
BIG=hf:llama-3.1-8b; SMALL=hf:llama-3.2-1b; HEAD="-b 1 --prompt-lens 128 --new-tokens 256 --repeats ${REPEATS:-5}"
SWEEP_B=${SWEEP_B:-1,4,16,64,256}; STUDY_B=${STUDY_B:-1,16,64}; SWEEP_P=${SWEEP_P:-128,2048}; STUDY_P=${STUDY_P:-128,2048}; HAND="--arch llama-3.1-8b --prompt 128"; COMMON="--idle-s 3 --db $DB"
[ "$KIND" = h100 ] && STUDY_B=${STUDY_B:-1,16,64,128,256}
if [ "${SMOKE:-0}" = 1 ]; then
  BIG=hf:tiny-shakespeare; SMALL=hf:tiny-shakespeare; HEAD="-b 1 --prompt-lens 16 --new-tokens 8 --repeats 2"
  SWEEP_B=1,2; STUDY_B=1,2; COMMON="--idle-s 0 --device cpu --db $DB"
fi
{
  echo "=== $(date +%T) env ($KIND)"
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,clocks.max.mem,memory.total --format=csv,noheader 2>/dev/null
  python3 -c "import torch, transformers, accelbench; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelbench', accelbench.__version__)"
  has gpu-gemv && stage pytest-gpu-gemv ${GPU_GEMV_S:-90} python3 -m pytest -q -m gpu -p no:cacheprovider -W ignore \
    --tb=short tests/test_generate_gpu.py -k "weight_only_kernels or gemv"
  has headline && stage headline-bf16 ${HEAD_BF16_S:-110} $AB generate -m $BIG $HEAD -p bf16 \
    --modes ${HEAD_MODES:-static-compile,static-compile-fused} $COMMON
  if has headline || has wo; then
    stage headline-weight-only ${HEAD_WO_S:-150} $AB generate -m $BIG $HEAD -p int8-weight-only,fp8-weight-only \
      --modes static-compile-fused $COMMON
  fi
  if has gemv && [ "${SMOKE:-0}" != 1 ]; then
    stage gemv-8bit ${GEMV_S:-150} python3 benchmarks/gemv_8bit_probe.py --out "$OUT/gemv-8bit.json"
  fi
  if has hand && [ "${SMOKE:-0}" != 1 ]; then
    stage hand-gptfast 60 python3 benchmarks/llm_handloop.py $HAND --new 256 --loops gptfast --reps 3 --out "$OUT/hand-gptfast.json"
  fi
  if { has hand || has handgen; } && [ "${SMOKE:-0}" != 1 ]; then
    stage hand-generate ${HANDGEN_S:-35} python3 benchmarks/llm_handloop.py $HAND --new 64 --loops generate --reps ${HAND_REPS:-3} --out "$OUT/hand-generate.json"
    stage hf-generate ${HANDGEN_S:-35} $AB generate -m $BIG -b 1 --prompt-lens 128 --new-tokens 64 --repeats ${HAND_REPS:-3} -p bf16 \
      --modes hf-generate $COMMON
  fi
  has probe && stage hf-overhead 60 python3 benchmarks/llm_hf_overhead.py --arch llama-3.2-1b --out "$OUT/hf-overhead.json"
  has sweep && stage sweep ${SWEEP_S:-115} $AB generate -m $SMALL -b $SWEEP_B --prompt-lens $SWEEP_P --new-tokens 32 \
    ${STUDY_REPEATS:+--repeats $STUDY_REPEATS} -p bf16 --modes static-compile-fused $COMMON
  has study && stage study ${STUDY_S:-130} $AB generate -m $BIG -b $STUDY_B --prompt-lens $STUDY_P --new-tokens 32 \
    ${STUDY_REPEATS:+--repeats $STUDY_REPEATS} -p bf16 --modes static-compile-fused $COMMON
  has oom && stage oom ${OOM_S:-75} $AB generate -m $BIG -b ${OOM_B:-64,128,256} --prompt-lens 2048 --new-tokens 32 -p bf16 \
    --modes static-compile-fused $COMMON
  has pytest-lm && stage pytest-lm 170 python3 -m pytest -q -m "gpu or ncu" -p no:cacheprovider -W ignore --tb=short \
    tests/test_profile_lm.py tests/test_profile_gpu.py::test_bf16_and_fp8_steps_each_under_their_own_roof
  has gpu-fp8 && stage pytest-gpu-fp8 ${GPU_FP8_S:-90} python3 -m pytest -q -m gpu -p no:cacheprovider -W ignore \
    --tb=short tests/test_generate_gpu.py::test_fp8_reads_8_bit_weights_and_keeps_the_bundled_models_perplexity
  has fp8 && stage fp8 ${FP8_S:-150} $AB generate -m $BIG $HEAD -p bf16,fp8 --modes static-compile-fused $COMMON
  PROF="-b 1 --modes static-compile-fused --ncu on --warmup-steps 2 --timed-steps 10 --ncu-csv $OUT/ncu-csv --wide --db $DB"
  has profile-lm && stage profile-1b ${PROF1_S:-220} $AB profile -m $SMALL -p bf16 --step ${PROF1_STEPS:-prefill,decode} \
    --prompt-len 512 $PROF
  has profile-lm && stage profile-8b ${PROF8_S:-300} $AB profile -m $BIG -p ${PROF8_P:-bf16} --step decode --prompt-len 128 $PROF
  has gpu && stage pytest-gpu 120 python3 -m pytest -q -m gpu -p no:cacheprovider -W ignore --tb=short \
    tests/test_generate_gpu.py
  echo "=== $(date +%T) done ($(( $(date +%s) - T0 )) s)"
} 2>&1 | tee "$OUT/log.txt"

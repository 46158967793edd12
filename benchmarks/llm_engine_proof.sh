#!/usr/bin/env bash
# The fused engine against a from-scratch gpt-fast decoder, one call on one GPU (under ~8 minutes):
#   scratch   benchmarks/llm_gptfast.py: the from-scratch decoder (SDPA with enable_gqa) on the Llama-3.1-8B shape,
#             batch 1, prompt 128, 256 new tokens, bf16, its outputs checked against the plain model
#   engines   accelbench generate at the same shape: static-compile and static-compile-fused in bf16, then the fused
#             engine in int8-weight-only and fp8-weight-only (the 8-bit decode's speed-up over bf16)
# Results in $OUT: scratch.json, engine.db (the store) and engine.json, device.txt. Run from the repository root.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-./engine-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/device.txt"
timeout ${SCRATCH_S:-150} python3 benchmarks/llm_gptfast.py --arch llama-3.1-8b --variants ${SCRATCH_VARIANTS:-gqa} \
  --out "$OUT/scratch.json" 2>&1 | grep -v -i warn
SHAPE="-m hf:llama-3.1-8b -b 1 --prompt-lens 128 --new-tokens 256 --repeats 5 --idle-s 0 --db $OUT/engine.db"
timeout ${BF16_S:-170} python3 -m accelbench generate $SHAPE -p bf16 --modes ${BF16_MODES:-static-compile-fused,static-compile} \
  --json "$OUT/engine-bf16.json" 2>&1 | grep -v -i warn | tail -8
timeout ${WO_S:-170} python3 -m accelbench generate $SHAPE -p int8-weight-only,fp8-weight-only --modes static-compile-fused \
  --json "$OUT/engine-wo.json" 2>&1 | grep -v -i warn | tail -8

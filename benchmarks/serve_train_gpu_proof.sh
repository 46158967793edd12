#!/usr/bin/env bash
# One GPU call: the generate engines' full GPU test, accelbench serve against transformers serve (with and without
# continuous batching) on the Llama-3.2-1B shape, and accelbench train of the same shape beside a hand training loop.
# Stages in priority order, each bounded (seconds: TESTS_S, SERVE_S a launch, TRAIN_S, HAND_S); results in $OUT
# (serve.db, train.db, hand.json, log lines). Run from the repository root with the serve extra's wheels installed.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-./gpu-out}; mkdir -p "$OUT"
AB="python3 -m accelbench"
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader | tee "$OUT/device.txt"
timeout ${TESTS_S:-90} python3 -m pytest -q -x -p no:cacheprovider -m gpu tests/test_generate_gpu.py -k every_backend \
  2>&1 | tail -3
SERVE="--engine transformers -m hf:llama-3.2-1b --concurrency ${LEVELS:-1,8,32} --duration-s ${LEVEL_S:-8} \
  --warmup-requests 2 --input-len 128 --output-len 64 --idle-s 0 --db $OUT/serve.db"
for cb in "" "--continuous-batching"; do
  timeout ${SERVE_S:-110} $AB serve $SERVE $cb 2>&1 | grep -v -i warn | tail -9
done
timeout ${TRAIN_S:-110} $AB train -m hf:llama-3.2-1b -b ${TRAIN_B:-4} --seq-len 2048 -p amp-bf16 --modes eager,compile \
  --idle-s 0 --db "$OUT/train.db" 2>&1 | grep -v -i warn | tail -8
timeout ${HAND_S:-60} python3 benchmarks/train_lm_hand.py --model hf:llama-3.2-1b --batch ${TRAIN_B:-4} --seq-len 2048 \
  --steps 20 --compile 2>&1 | tail -1 | tee "$OUT/hand.json"

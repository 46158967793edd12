#!/usr/bin/env bash
# Serving engines on one GPU: llama.cpp's llama-server beside transformers serve, both launched by accelbench serve
# --engine, in one or two calls (each under ~9.5 minutes). llama-server is built first from the vendored source in
# .vendor/ (benchmarks/build_llama_server.sh, ~4.5 min on 16 cores; skipped when build/llama.cpp already has it, as on
# a machine still warm from the first call). Stages in priority order (STAGES selects):
#   l1b      llama.cpp, Llama-3.2-1B shape (random bf16 weights), prompt 128 / output 128, concurrency 1..128, beside
#            the in-process ceiling (static-compile at each level's batch)
#   t1b      transformers serve (continuous batching), the same shape and levels, no ceiling (the same as l1b's)
#   l1b-1k   llama.cpp, 1B, prompt 1,024 / output 128, concurrency 1, 16, 64
#   l1b-rate llama.cpp, 1B, Poisson request rates
#   l8b      llama.cpp, Llama-3.1-8B shape, bf16, prompt 128 / output 128, concurrency 1, 16, 64, 128
#   l8b-q8   the same in Q8_0 (8.5 bits a weight), concurrency 1, 16, 64
#   l8b-slo  llama.cpp, 8B bf16: the highest concurrency meeting MLPerf's Llama-3.1-8B Server SLO (TTFT p99 2 s,
#            TPOT p99 100 ms)
# Then an HTML report and a JSON export of the store. Results in $OUT: serve.db, serve.json, serve.html, log.txt, the
# servers' logs. RUN (default /tmp/serve-engines) keeps the store, the checkpoints and logs between two calls.
# CEIL sets the l1b stage's ceiling option (default: the in-process static-compile ceiling; e.g. --ceiling none).
# DRY=1: the same stages on a CPU with the bundled tiny model (a CPU build of llama-server on PATH).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-./serve-engines-out}; RUN=${RUN:-/tmp/serve-engines}; mkdir -p "$OUT" "$RUN"
DB=$RUN/serve.db
AB="python3 -m accelbench"
BUDGET_S=${BUDGET_S:-560}; T0=$(date +%s); STAGE_MIN_S=25
STAGES=${STAGES:-l1b t1b l1b-1k l1b-rate l8b l8b-q8 l8b-slo}; source "$(dirname "$0")/lib/stage.sh"
if [ "${DRY:-0}" = 1 ]; then
  M1=hf:tiny-shakespeare; M8=hf:tiny-shakespeare; C=1,4; C8=1,4; R=20,40; LEN="--input-len 32 --output-len 16"
  LONG="--input-len 256 --output-len 16"; LEVEL="--duration-s 2 --requests 64 --warmup-requests 1 --idle-s 0 --device cpu"
  CEIL="--ceiling static-cache"; BIN=""
else
  M1=hf:llama-3.2-1b; M8=hf:llama-3.1-8b; C=${C:-1,4,16,64,128}; C8=${C8:-1,16,64,128}; R=${R:-4,16,32}
  LEN="--input-len 128 --output-len 128"; LONG="--input-len 1024 --output-len 128"
  LEVEL="--duration-s ${LEVEL_S:-6} --requests 512 --warmup-requests 4 --idle-s 0"; CEIL=${CEIL:-}
  bash "$(dirname "$0")/build_llama_server.sh" 2>&1 | grep -v "^\[" | tail -3
  BIN="--server-bin build/llama.cpp/build/bin/llama-server"
fi
LLAMA="$AB serve --engine llama.cpp $BIN $LEVEL --db $DB"
TRANS="$AB serve --engine transformers --continuous-batching $LEVEL --db $DB"
{
  echo "=== $(date +%T) device"
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader 2>/dev/null
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  has l1b && stage l1b ${L1B_S:-250} $LLAMA -m $M1 $LEN --concurrency $C $CEIL --name llamacpp-1b
  has t1b && stage t1b ${T1B_S:-150} $TRANS -m $M1 $LEN --concurrency ${CT:-1,16,64} --ceiling none --name transformers-1b
  has l1b-1k && stage l1b-1k ${L1K_S:-90} $LLAMA -m $M1 $LONG --concurrency ${C1K:-1,16,64} --ceiling none --name llamacpp-1b-prompt1024
  has l1b-rate && stage l1b-rate ${RATE_S:-80} $LLAMA -m $M1 $LEN --request-rate $R --ceiling none --name llamacpp-1b-rate
  has l8b && stage l8b ${L8B_S:-150} $LLAMA -m $M8 $LEN --concurrency $C8 --ceiling none --name llamacpp-8b
  has l8b-q8 && stage l8b-q8 ${L8Q_S:-120} $LLAMA -m $M8 $LEN --served-precision q8_0 --concurrency ${C8Q:-1,16,64} --ceiling none --name llamacpp-8b-q8_0
  has l8b-slo && stage l8b-slo $(( $(left) - 40 )) $LLAMA -m $M8 $LEN --concurrency 1,128 --slo mlperf-server --slo-search \
    --search-steps ${SEARCH_STEPS:-3} --ceiling none --name llamacpp-8b-slo
  STAGE_MIN_S=10 stage report 30 $AB report --db $DB --html "$OUT/serve.html"
  STAGE_MIN_S=10 stage export 30 $AB export --db $DB --format json --output "$OUT/serve.json"
  cp "$DB" "$OUT"/ 2>/dev/null; tail -n 40 "$RUN"/*-server.log > "$OUT/server-logs-tail.txt" 2>/dev/null
} 2>&1 | grep -v -i "warn" | tee "$OUT/log.txt"

#!/usr/bin/env bash
# Tensor-parallel generation on H200s: how many GPUs a Llama-3.1-70B shape needs, at what TTFT, TPOT and cost per
# million tokens, and how the 8B shape scales from 1 to 4 GPUs. One phase a call, each under ~8 minutes:
#
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2   # 2x H200: 70B at TP 1 refused before building (141 GB of bf16
#                                                #   weights), then 70B bf16 at TP 2: batch 1 and 16 x prompt 128 and
#                                                #   2048, static-compile; static-cache (eager) at batch 1, prompt 128;
#                                                #   int8-weight-only on shards (an unsupported row, by design)
#   bash benchmarks/tp_generate_gpu.sh 8b-curve  # 2x H200: 8B bf16 at TP 1 and TP 2, the same four shapes
#   bash benchmarks/tp_generate_gpu.sh tp4       # 4x H200: 70B bf16 at TP 4, then 8B bf16 at TP 4
#
# Random weights of the published configs (hf:llama-3.1-70b, hf:llama-3.1-8b), drawn on each GPU's shard. 128 new
# tokens, 3 timed generations a case. Results in $OUT: one store (<phase>.db), one JSON export a run
# (<phase>-<what>.json: accelbench import reads them), the console of each command (<phase>-<what>.log),
# device.txt, and summary.txt (benchmarks/tp_summary.py: TPOT, tokens/s total and per GPU, MBU, cost, and the TP
# efficiency against the smallest degree of each shape). Run from the repository root.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
PHASE=${1:?usage: tp_generate_gpu.sh 70b-tp2|8b-curve|tp4}
OUT=${OUT:-./tp-out}; mkdir -p "$OUT"
DB="$OUT/$PHASE.db"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$OUT/device.txt"
nvidia-smi topo -m >> "$OUT/device.txt" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/device.txt"
COMMON="-b 1,16 --prompt-lens 128,2048 --new-tokens 128 --repeats 3 --idle-s 0 --no-perplexity --db $DB"

# gen WHAT SECONDS ARGS...: one accelbench generate, its console kept, its run exported as JSON
gen() {
  local what=$1 secs=$2; shift 2
  echo "== $PHASE $what: accelbench generate $*" | tee "$OUT/$PHASE-$what.log"
  local t0=$SECONDS
  timeout --signal=INT --kill-after=20 "$secs" python3 -m accelbench generate "$@" 2>&1 \
    | grep -v -i -E "warn|enum subclass" | tee -a "$OUT/$PHASE-$what.log" | tail -14
  echo "exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s" | tee -a "$OUT/$PHASE-$what.log"
  local run
  run=$(python3 -c "from accelbench.store import Store; print(Store('$DB').run()['run_id'])" 2>/dev/null) \
    && python3 -m accelbench export --run "$run" --db "$DB" --format json -o "$OUT/$PHASE-$what.json"
}

case "$PHASE" in
  70b-tp2)
    # 141 GB of bf16 weights on one 141 GB H200: refused from the config in seconds (exit 2), nothing built
    echo "== 70B at TP 1 (expect exit 2)" | tee "$OUT/$PHASE-tp1-refused.log"
    timeout 120 python3 -m accelbench generate -m hf:llama-3.1-70b -p bf16 -b 1 --prompt-lens 128 --db "$OUT/refused.db" \
      >> "$OUT/$PHASE-tp1-refused.log" 2>&1
    echo "exit $?" | tee -a "$OUT/$PHASE-tp1-refused.log"; tail -2 "$OUT/$PHASE-tp1-refused.log"
    gen 70b-compile "${COMPILE_S:-330}" -m hf:llama-3.1-70b -p bf16 --modes static-compile $COMMON \
      --gpus 2 --parallel tp
    gen 70b-eager "${EAGER_S:-100}" -m hf:llama-3.1-70b -p bf16,int8-weight-only --modes static-cache -b 1 \
      --prompt-lens 128 --new-tokens 64 --repeats 3 --idle-s 0 --no-perplexity --db "$DB" --gpus 2 --parallel tp
    ;;
  8b-curve)
    gen 8b-tp1 "${TP1_S:-200}" -m hf:llama-3.1-8b -p bf16 --modes static-compile $COMMON
    gen 8b-tp2 "${TP2_S:-230}" -m hf:llama-3.1-8b -p bf16 --modes static-compile $COMMON --gpus 2 --parallel tp
    ;;
  tp4)
    gen 70b-tp4 "${TP4_70B_S:-300}" -m hf:llama-3.1-70b -p bf16 --modes static-compile $COMMON --gpus 4 --parallel tp
    gen 8b-tp4 "${TP4_8B_S:-170}" -m hf:llama-3.1-8b -p bf16 --modes static-compile $COMMON --gpus 4 --parallel tp
    ;;
  *) echo "unknown phase $PHASE: 70b-tp2, 8b-curve or tp4" >&2; exit 2 ;;
esac
python3 benchmarks/tp_summary.py "$OUT"/*.json | tee "$OUT/summary.txt"

#!/usr/bin/env bash
# Tensor-parallel generation on H200s: how many GPUs a Llama-3.1-70B shape needs, at what TTFT, TPOT and cost per
# million tokens, and how the 8B shape scales from 1 to 4 GPUs. One phase a call, each under ~8 minutes (a command
# that would start past BUDGET_S, 460 s by default, is skipped; each has its own timeout):
#
#   2x H200:
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2          # 70B at TP 1 refused before building (141 GB of bf16
#                                                       #   weights); 70B bf16 TP 2 static-cache (eager): batch 1 and
#                                                       #   16 x prompts 128 and 2048, and int8-weight-only (each
#                                                       #   GPU quantizes its shards: real cases, stored as each
#                                                       #   ends within the command's 260 s); then static-compile
#                                                       #   batch 1, prompt 128 in what is left of the budget
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-b1       # the short form of 70b-tp2 (one batch and prompt): 70B at
#                                                       #   TP 1 refused; TP 2 in MODE70 at batch 1, prompt 128, bf16
#                                                       #   then fp8-weight-only (BUDGET_S=540: about 9 minutes; fp8
#                                                       #   tunes half int8's kernel configs at load)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-where    # 70B bf16 TP 2 in MODE70 at batch 1, prompt 128 (its decode
#                                                       #   step's kernels by family from the profiler), then the 8B
#                                                       #   at TP 2 and TP 1, batch 1, prompt 128 (BUDGET_S=580)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-b16      # one shape a call: 70B bf16 TP 2 in MODE70 at batch 16,
#                                                       #   prompt 128, then the 8B at TP 2, batch 1 (BUDGET_S=560)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-p2048    # 70B bf16 TP 2 in MODE70 at batch 1, prompt 2048, then the
#                                                       #   8B at TP 1, batch 1 (BUDGET_S=560)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-fp8      # 70B fp8 weight-only TP 2 in MODE70 at batch 1, prompt 128
#                                                       #   (BUDGET_S=560)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-fp8-b16  # 70B fp8 weight-only TP 2 in MODE70 at batch 16, prompt 128
#                                                       #   (BUDGET_S=560)
#   bash benchmarks/tp_generate_gpu.sh exit-check       # the bundled tiny model, TP 2, static-compile: how long the
#                                                       #   command runs on after its last case (the ranks' exit)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-compile  # 70B bf16 TP 2 in MODE70: batch 1 and 16 x prompts 128
#                                                       #   and 2048 (cases finished before the budget ends are stored)
#   bash benchmarks/tp_generate_gpu.sh 8b-curve         # 8B bf16 at TP 2 then TP 1, the four shapes, MODE8
#                                                       #   (static-compile-fused): about 330 s a degree, so with
#                                                       #   BUDGET_S=580 a second call with RESUME=1 (the store
#                                                       #   copied back to $OUT) finishes what the first left
#   bash benchmarks/tp_generate_gpu.sh serve-ceiling    # accelbench serve --engine transformers of the 8B shape on
#                                                       #   one GPU, concurrency 1 and 4, its in-process ceiling split
#                                                       #   over both GPUs (--ceiling-gpus 2; needs the serve wheels)
#   1x H200:
#   bash benchmarks/tp_generate_gpu.sh 70b-tp1-8bit     # 70B bf16 at TP 1 refused (naming what fits); the 70B on
#                                                       #   one GPU in int8 then fp8 weight-only (each layer
#                                                       #   quantized as drawn), MODE70, batch 1, prompt 128
#   bash benchmarks/tp_generate_gpu.sh 70b-tp1-8bit-shapes  # the same at batch 16, prompt 128 (fp8 then int8
#                                                       #   weight-only), then fp8 weight-only at batch 1,
#                                                       #   prompt 2048 (BUDGET_S=540)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp1-fp8-b4-p2048  # fp8 weight-only at batch 4, prompt 128, then batch
#                                                       #   1, prompt 2048 (BUDGET_S=540)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-rank-alone  # one rank's part of the 70B split in two, as a whole
#                                                       #   model on one GPU (benchmarks/tp_shard.py): the TP 2
#                                                       #   step without its collectives, bf16, MODE70, batch 1,
#                                                       #   prompt 128, its step's kernels by family (BUDGET_S=480)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp4-rank-alone  # one rank's part of the 70B split in four, alone: the
#                                                       #   TP 4 step without its collectives, bf16, MODE70 (and
#                                                       #   hf-generate beside it), batch 1, prompt 128
#                                                       #   (BUDGET_S=480)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-rank-more  # one rank's part of the 70B split in two, alone: fp8
#                                                       #   weight-only at batch 1, then bf16 at batch 16, prompt
#                                                       #   128, MODE70: the split's steps without their
#                                                       #   collectives at the study's other rows (BUDGET_S=560)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp2-rank-fp8-b16  # one rank's part of the 70B split in two, alone, in fp8
#                                                       #   weight-only at batch 16, prompt 128 (BUDGET_S=360)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp1-where    # fp8 weight-only at batch 1, prompt 128 (its decode step's
#                                                       #   kernels by family), then the 8B in bf16, MODE8, batch 1,
#                                                       #   prompt 128 (BUDGET_S=480)
#   bash benchmarks/tp_generate_gpu.sh exit-probe       # how long leaving an NCCL group of one rank takes after CUDA
#                                                       #   graphs captured its all-reduce: a graph alive or dropped,
#                                                       #   a compiled step destroyed as is or through RankContext.leave
#                                                       #   (benchmarks/nccl_graph_exit_probe.py)
#   bash benchmarks/tp_generate_gpu.sh 8b-tp1           # the 8B curve's one-GPU half: bf16, MODE8, the four shapes
#                                                       #   (BUDGET_S=330 fits three; RESUME=1 adds the fourth)
#   bash benchmarks/tp_generate_gpu.sh 70b-tp1-fp8-tiles  # fp8 weight-only at batch 16 then 1, prompt 128: the 8-bit
#                                                       #   kernel's tiles of rows at decode and a 128-token prefill
#                                                       #   (BUDGET_S=560)
#   4x H200:
#   bash benchmarks/tp_generate_gpu.sh tp4              # 70B bf16 TP 4 static-cache, the four shapes; then 8B bf16
#                                                       #   TP 4 in MODE8, the four shapes
#
# A static-compile command compiles its prefill once a (batch, prompt) shape and its decode step once a (batch, cache
# length) shape; the 70B's compiles are the slow part, so its eager rows (static-cache: the same
# loop, uncompiled, host-bound at small batches) come first. Random weights of the published configs
# (hf:llama-3.1-70b, hf:llama-3.1-8b), drawn on each GPU's shard. 64 new tokens, 3 timed generations a case, no
# perplexity (random weights). Results in $OUT: one
# store a phase (<phase>.db), one JSON export a command (<phase>-<what>.json: accelbench import reads them), each
# command's console (<phase>-<what>.log), device.txt, and summary.txt (benchmarks/tp_summary.py over every export in
# $OUT: TTFT, TPOT, tokens/s in all and per GPU, MBU, memory per GPU, cost, TP efficiency against the smallest degree
# of each shape). Run from the repository root.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
PHASE=${1:?usage: tp_generate_gpu.sh 70b-tp2|70b-tp2-b1|70b-tp2-where|70b-tp2-b16|70b-tp2-p2048|70b-tp2-fp8|70b-tp2-fp8-b16|exit-check|70b-tp2-compile|8b-curve|serve-ceiling|70b-tp1-8bit|70b-tp1-8bit-shapes|70b-tp1-fp8-b4-p2048|70b-tp1-fp8-tiles|exit-probe|8b-tp1|70b-tp1-where|70b-tp2-rank-alone|70b-tp2-rank-more|70b-tp2-rank-fp8-b16|70b-tp4-rank-alone|tp4}
OUT=${OUT:-./tp-out}; mkdir -p "$OUT"
DB="$OUT/$PHASE.db"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv,noheader | tee "$OUT/device.txt"
nvidia-smi topo -m >> "$OUT/device.txt" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" | tee -a "$OUT/device.txt"
BUDGET_S=${BUDGET_S:-460}
# gen WHAT SECONDS ARGS...: one accelbench generate (at most SECONDS, and never past BUDGET_S), its console kept,
# its run exported as JSON
gen() {
  local what=$1 secs=$2; shift 2
  local left=$((BUDGET_S - SECONDS))
  if [ "$left" -lt 60 ]; then echo "== $PHASE $what: skipped, ${left} s of the budget left"; return; fi
  [ "$secs" -gt "$left" ] && secs=$left
  echo "== $PHASE $what (at most ${secs} s): accelbench generate $*" | tee "$OUT/$PHASE-$what.log"
  local t0=$SECONDS
  timeout --signal=INT --kill-after=20 "$secs" python3 -m accelbench generate "$@" 2>&1 \
    | grep -v -i -E "warn|enum subclass" | tee -a "$OUT/$PHASE-$what.log" | tail -14
  echo "exit ${PIPESTATUS[0]} after $((SECONDS - t0)) s" | tee -a "$OUT/$PHASE-$what.log"
  local run
  run=$(last_run 2> >(tee -a "$OUT/$PHASE-$what.log" >&2)) \
    && python3 -m accelbench export --run "$run" --db "$DB" --format json -o "$OUT/$PHASE-$what.json"
}

# the run the last command wrote to (its row started last: a resumed run is not the newest one), and on stderr how long
# that command ran on after its last case ended (the ranks' exit: their CUDA graphs handed back, the group left)
last_run() {
  python3 - "$DB" <<'PY'
import sys, time
from accelbench.store import Store
store = Store(sys.argv[1])
runs = store.runs()
if not runs:
    sys.exit(1)
ends = {}
for run in runs:
    for r in store.records(run["run_id"]):
        if r.get("started_at") and r.get("case_wall_s"):
            ends[run["run_id"]] = max(ends.get(run["run_id"], 0.0), r["started_at"] + r["case_wall_s"])
run_id = max(ends, key=ends.get) if ends else store.run()["run_id"]
if ends:
    print(f"the command ended {time.time() - ends[run_id]:.0f} s after its last case", file=sys.stderr)
print(run_id)
PY
}

L70=hf:llama-3.1-70b L8=hf:llama-3.1-8b
RUN="--new-tokens 64 --repeats 3 --idle-s 0 --no-perplexity --db $DB ${RESUME:+--resume}"  # RESUME=1: continue $DB's run
SHAPES="-b 1,16 --prompt-lens 128,2048"
MODE8=${MODE8:-static-compile-fused}  # the 8B curve's engine: one GPU's fastest (fused q/k/v and gate/up, on shards too)
MODE70=${MODE70:-static-compile-fused}  # the 70B's compiled engine (static-compile: the unfused split measured first)
case "$PHASE" in
  70b-tp2)
    # 141 GB of bf16 weights on one 141 GB H200: refused from the config in seconds (exit 2), nothing built
    echo "== 70B at TP 1 (expect exit 2)" | tee "$OUT/$PHASE-tp1-refused.log"
    timeout 120 python3 -m accelbench generate -m $L70 -p bf16 -b 1 --prompt-lens 128 --db "$OUT/refused.db" \
      >> "$OUT/$PHASE-tp1-refused.log" 2>&1
    echo "exit $? after $SECONDS s" | tee -a "$OUT/$PHASE-tp1-refused.log"; tail -2 "$OUT/$PHASE-tp1-refused.log"
    gen 70b-eager 260 -m $L70 -p bf16,int8-weight-only --modes static-cache $SHAPES $RUN --gpus 2 --parallel tp
    gen 70b-compile-b1 400 -m $L70 -p bf16 --modes static-compile -b 1 --prompt-lens 128 $RUN --gpus 2 --parallel tp
    ;;
  70b-tp2-b1)
    echo "== 70B at TP 1 (expect exit 2)" | tee "$OUT/$PHASE-tp1-refused.log"
    timeout 120 python3 -m accelbench generate -m $L70 -p bf16 -b 1 --prompt-lens 128 --db "$OUT/refused.db" \
      >> "$OUT/$PHASE-tp1-refused.log" 2>&1
    echo "exit $? after $SECONDS s" | tee -a "$OUT/$PHASE-tp1-refused.log"; tail -2 "$OUT/$PHASE-tp1-refused.log"
    # bf16 first: its row is stored before int8's compiles start, so a budget that runs out keeps it
    gen 70b-fused-b1 480 -m $L70 -p bf16,fp8-weight-only --modes $MODE70 -b 1 --prompt-lens 128 $RUN \
      --gpus 2 --parallel tp
    ;;
  70b-tp2-where)
    gen 70b-b1 340 -m $L70 -p bf16 --modes $MODE70 -b 1 --prompt-lens 128 $RUN --gpus 2 --parallel tp
    gen 8b-tp2-b1 140 -m $L8 -p bf16 --modes $MODE8 -b 1 --prompt-lens 128 $RUN --gpus 2 --parallel tp
    gen 8b-tp1-b1 120 -m $L8 -p bf16 --modes $MODE8 -b 1 --prompt-lens 128 $RUN
    ;;
  70b-tp2-b16)
    gen 70b-b16 420 -m $L70 -p bf16 --modes $MODE70 -b 16 --prompt-lens 128 $RUN --gpus 2 --parallel tp
    gen 8b-tp2-b1 140 -m $L8 -p bf16 --modes $MODE8 -b 1 --prompt-lens 128 $RUN --gpus 2 --parallel tp
    ;;
  70b-tp2-p2048)
    gen 70b-p2048 420 -m $L70 -p bf16 --modes $MODE70 -b 1 --prompt-lens 2048 $RUN --gpus 2 --parallel tp
    gen 8b-tp1-b1 120 -m $L8 -p bf16 --modes $MODE8 -b 1 --prompt-lens 128 $RUN
    ;;
  70b-tp2-fp8)
    gen 70b-fp8-b1 540 -m $L70 -p fp8-weight-only --modes $MODE70 -b 1 --prompt-lens 128 $RUN --gpus 2 --parallel tp
    ;;
  70b-tp2-fp8-b16)
    gen 70b-fp8-b16 540 -m $L70 -p fp8-weight-only --modes $MODE70 -b 16 --prompt-lens 128 $RUN --gpus 2 --parallel tp
    ;;
  exit-check)
    # the bundled tiny model split over both GPUs, compiled with CUDA graphs (their all-reduces captured): the
    # command must end within seconds of its last case, exit 0
    gen tiny-compiled 240 -m hf:tiny-shakespeare --modes static-compile -b 1 --prompt-lens 16 $RUN --gpus 2 \
      --parallel tp
    ;;
  70b-tp2-compile)
    gen 70b-compile 450 -m $L70 -p bf16 --modes $MODE70 $SHAPES $RUN --gpus 2 --parallel tp
    ;;
  8b-curve)
    gen 8b-tp2 340 -m $L8 -p bf16 --modes $MODE8 $SHAPES $RUN --gpus 2 --parallel tp
    gen 8b-tp1 340 -m $L8 -p bf16 --modes $MODE8 $SHAPES $RUN
    ;;
  serve-ceiling)
    echo "== serve-ceiling (at most 400 s): transformers serve of the 8B, the ceiling over 2 GPUs" | tee "$OUT/$PHASE.log"
    timeout --signal=INT --kill-after=20 400 python3 -m accelbench serve --engine transformers -m $L8 \
      --input-len 128 --output-len 64 --concurrency 1,4 --duration-s 6 --requests 64 --warmup-requests 2 --idle-s 0 \
      --ceiling static-compile --ceiling-gpus 2 --db "$DB" 2>&1 | grep -v -i -E "warn|enum subclass" \
      | tee -a "$OUT/$PHASE.log" | tail -20
    run=$(python3 -c "from accelbench.store import Store; print(Store('$DB').run()['run_id'])" 2>/dev/null) \
      && python3 -m accelbench export --run "$run" --db "$DB" --format json -o "$OUT/$PHASE-8b.json"
    exit 0
    ;;
  70b-tp1-8bit)
    echo "== 70B bf16 at TP 1 (expect exit 2)" | tee "$OUT/$PHASE-tp1-refused.log"
    timeout 120 python3 -m accelbench generate -m $L70 -p bf16 -b 1 --prompt-lens 128 --db "$OUT/refused.db" \
      >> "$OUT/$PHASE-tp1-refused.log" 2>&1
    echo "exit $? after $SECONDS s" | tee -a "$OUT/$PHASE-tp1-refused.log"; tail -2 "$OUT/$PHASE-tp1-refused.log"
    gen 70b-8bit-b1 480 -m $L70 -p int8-weight-only,fp8-weight-only --modes $MODE70 -b 1 --prompt-lens 128 $RUN
    ;;
  70b-tp1-8bit-shapes)
    gen 70b-8bit-b16 380 -m $L70 -p fp8-weight-only,int8-weight-only --modes $MODE70 -b 16 --prompt-lens 128 $RUN
    gen 70b-fp8-p2048 220 -m $L70 -p fp8-weight-only --modes $MODE70 -b 1 --prompt-lens 2048 $RUN
    ;;
  70b-tp1-fp8-b4-p2048)
    gen 70b-fp8-b4 260 -m $L70 -p fp8-weight-only --modes $MODE70 -b 4 --prompt-lens 128 $RUN
    gen 70b-fp8-p2048 260 -m $L70 -p fp8-weight-only --modes $MODE70 -b 1 --prompt-lens 2048 $RUN
    ;;
  70b-tp2-rank-alone)
    gen 70b-tp2-rank 470 -m benchmarks.tp_shard:llama70b_tp2_rank -p bf16 --modes $MODE70 -b 1 --prompt-lens 128 $RUN
    ;;
  70b-tp2-rank-more)
    gen 70b-tp2-rank-fp8 300 -m benchmarks.tp_shard:llama70b_tp2_rank -p fp8-weight-only --modes $MODE70 -b 1 \
      --prompt-lens 128 $RUN
    gen 70b-tp2-rank-b16 260 -m benchmarks.tp_shard:llama70b_tp2_rank -p bf16 --modes $MODE70 -b 16 --prompt-lens 128 \
      $RUN
    ;;
  70b-tp2-rank-fp8-b16)
    gen 70b-tp2-rank-fp8-b16 340 -m benchmarks.tp_shard:llama70b_tp2_rank -p fp8-weight-only --modes $MODE70 -b 16 \
      --prompt-lens 128 $RUN
    ;;
  70b-tp4-rank-alone)
    gen 70b-tp4-rank 380 -m benchmarks.tp_shard:llama70b_tp4_rank -p bf16 --modes $MODE70,hf-generate -b 1 \
      --prompt-lens 128 $RUN
    ;;
  70b-tp1-where)
    gen 70b-fp8-b1 360 -m $L70 -p fp8-weight-only --modes $MODE70 -b 1 --prompt-lens 128 $RUN
    gen 8b-b1 120 -m $L8 -p bf16 --modes $MODE8 -b 1 --prompt-lens 128 $RUN
    ;;
  exit-probe)
    for c in graph-freed graph-alive compiled-leave compiled-raw; do
      timeout --kill-after=10 150 python3 benchmarks/nccl_graph_exit_probe.py $c 2>&1 | grep -v -i -E "warn" \
        | tail -3 | tee -a "$OUT/$PHASE.log"
      echo "$c: exit ${PIPESTATUS[0]}, $SECONDS s into the phase" | tee -a "$OUT/$PHASE.log"
    done
    exit 0
    ;;
  8b-tp1)
    gen 8b-tp1 300 -m $L8 -p bf16 --modes $MODE8 $SHAPES $RUN
    ;;
  70b-tp1-fp8-tiles)
    gen 70b-fp8-b16-b1 560 -m $L70 -p fp8-weight-only --modes $MODE70 -b 16,1 --prompt-lens 128 $RUN
    ;;
  tp4)
    gen 70b-tp4-eager 230 -m $L70 -p bf16 --modes static-cache $SHAPES $RUN --gpus 4 --parallel tp
    gen 8b-tp4 240 -m $L8 -p bf16 --modes $MODE8 $SHAPES $RUN --gpus 4 --parallel tp
    ;;
  *) echo "unknown phase $PHASE: 70b-tp2, 70b-tp2-b1, 70b-tp2-where, 70b-tp2-b16, 70b-tp2-p2048, 70b-tp2-fp8, 70b-tp2-fp8-b16, exit-check, 70b-tp2-compile, 8b-curve, serve-ceiling, 70b-tp1-8bit(-shapes), 70b-tp1-fp8-b4-p2048, 70b-tp1-fp8-tiles, exit-probe, 8b-tp1, 70b-tp1-where, 70b-tp2-rank-alone, 70b-tp2-rank-more, 70b-tp2-rank-fp8-b16, 70b-tp4-rank-alone or tp4" >&2
     exit 2 ;;
esac
python3 benchmarks/tp_summary.py "$OUT"/*.json | tee "$OUT/summary.txt"

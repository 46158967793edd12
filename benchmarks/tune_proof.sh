#!/usr/bin/env bash
# The tune GPU proof: `accelbench tune` on ResNet-50 (run from the repository root with PYTHONPATH=src).
#   1. --objective throughput (target >= 29,000 img/s on an H200): amp-bf16 compile (the default, the baseline),
#      bf16 / fp16 weights, compile + Inductor freezing, reduce-overhead (CUDA graphs) + freezing, channels-last on,
#      cuDNN benchmark on, batch bracketed up to 1024; budget $BUDGET s (the 600 s of the target does not fit one 10-minute
#      call: default 420).
#   2. --objective latency at batch 1 (target p50 <= 0.6 ms): cudagraphs, reduce-overhead with freezing, compile +
#      freezing, in bf16 / amp-bf16 / fp16.
#   3. repeatability: the same compile case (bf16 compile-freeze, batch 512) in two separate processes, then
#      `accelbench compare` of the two runs (target: within 2 %).
#   4. train: the ResNet-50 training step (`--workload train`: each trial is `accelbench train`'s step, samples/s of
#      forward + backward + SGD step), amp-bf16 / amp-fp16 / bf16 x eager (brackets the batch: no compile per batch
#      size), compile, compile-cudagraphs (the whole step, fused SGD included, in one CUDA graph), fused SGD
#      (TRAIN_FUSED=on,off also tries foreach: twice the compiles), batch up to 1024; budget $TRAIN_BUDGET s
#      (default 400).
#      Target: MLPerf Training's per-GPU H200 rate.
#   STAGES="throughput latency repeat train" (default: all; one stage per 10-minute call: the final round may overrun the
#   budget by one round of the finalists); SMOKE=1: a CPU dry run of the same commands.
#   Overrides: BUDGET, LAT_BUDGET, TRAIN_BUDGET, PRECISIONS, MODES (throughput space), LAT_PRECISIONS, LAT_MODES,
#   TRAIN_PRECISIONS, TRAIN_MODES, TRAIN_FUSED.
# Results in $OUT: tune.db (every trial), throughput.json / latency.json / train.json, best-*.toml (best-train.toml
# runs with `accelbench train -c`), front-*.png, log.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-./tune-out}; mkdir -p "$OUT"; DB=$OUT/tune.db
BUDGET=${BUDGET:-420}; LAT_BUDGET=${LAT_BUDGET:-300}; TRAIN_BUDGET=${TRAIN_BUDGET:-400}
STAGES=${STAGES:-"throughput latency repeat train"}
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo "=== $(date +%T) $*"; }
AB="python3 -m accelbench"
if [ "${SMOKE:-0}" = 1 ]; then
  M="-m cifar-resnet20 --device cpu -n 32 --idle-s 0 --telemetry-period-ms 0"
  TP="--precisions fp32,bf16 --modes eager --max-batch 32 --screen-time-s 0.1"; LP="--precisions fp32,bf16 --modes eager"
  REP="-p bf16 --modes eager -b 8"; BUDGET=${SMOKE_BUDGET:-40}; LAT_BUDGET=$BUDGET; TRAIN_BUDGET=$BUDGET
  TRM="-m cifar-resnet20 --device cpu -n 16 --idle-s 0 --telemetry-period-ms 0 --warmup-batches 1"
  TRP="--precisions fp32,bf16 --modes eager --max-batch 16 --screen-time-s 0.1 --fused-optimizers ${TRAIN_FUSED:-on,off}"
else
  M="-m resnet50 -n 1024 --channels-last --cudnn-benchmark"
  # every configuration costs a compile per batch size tried (tens of seconds for ResNet-50): the space is the
  # hand-found one's; widen it with PRECISIONS / MODES when the budget allows
  TP="--precisions ${PRECISIONS:-amp-bf16,bf16} --modes ${MODES:-compile,compile-freeze,reduce-overhead-freeze} --max-batch 1024"
  LP="--precisions ${LAT_PRECISIONS:-bf16,amp-bf16,fp16} --modes ${LAT_MODES:-cudagraphs,reduce-overhead-freeze,compile-freeze} -b 1"
  REP="-p bf16 --modes compile-freeze -b 512 --repeats 5 --min-time-s 2"
  # the training step: eager brackets the batch first (no compile per batch size), compiled modes then run at it
  TRM="-m resnet50 -n 1024 --channels-last"
  TRP="--precisions ${TRAIN_PRECISIONS:-amp-bf16,amp-fp16,bf16} --modes ${TRAIN_MODES:-eager,compile,compile-cudagraphs} --max-batch 1024"
  TRP="$TRP --fused-optimizers ${TRAIN_FUSED:-on}"
fi
{
  step env; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader 2>/dev/null
  python3 -c "import torch, accelbench; print('torch', torch.__version__, accelbench.__file__)"
  has throughput && step "tune --objective throughput (budget $BUDGET s)" && \
    $AB tune $M $TP --objective throughput --budget-s "$BUDGET" --db "$DB" --wide \
      --json "$OUT/throughput.json" --out-toml "$OUT/best-throughput.toml" --plot "$OUT/front-throughput.png"
  has latency && step "tune --objective latency at batch 1 (budget $LAT_BUDGET s)" && \
    $AB tune $M $LP --objective latency --budget-s "$LAT_BUDGET" --db "$DB" --wide \
      --json "$OUT/latency.json" --out-toml "$OUT/best-latency.toml" --plot "$OUT/front-latency.png"
  has train && step "tune --workload train (training step, budget $TRAIN_BUDGET s)" && \
    $AB tune $TRM $TRP --workload train --objective throughput --budget-s "$TRAIN_BUDGET" --db "$DB" --wide \
      --json "$OUT/train.json" --out-toml "$OUT/best-train.toml" --plot "$OUT/front-train.png"
  if has repeat; then
    step "repeatability: one compile case in two processes"
    $AB run $M $REP --db "$DB" --json "$OUT/repeat-a.json"
    $AB run $M $REP --db "$DB" --json "$OUT/repeat-b.json"
    IDS=$(python3 -c "from accelbench.store import Store; r=[x['run_id'] for x in Store('$DB').runs() if x['kind']=='inference']; print(*r[-2:])" 2>/dev/null)
    [ -n "$IDS" ] && $AB compare $IDS --db "$DB" --wide --json "$OUT/repeat-compare.json"
  fi
  step done
} 2>&1 | tee -a "$OUT/log.txt"

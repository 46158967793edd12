#!/usr/bin/env bash
# The GPU studies, one GPU machine per call (run it once on an H100 and once on an H200):
#   sweep   seed study 1: ResNet-50 inference, batch 1..1024, fp32 vs amp-bf16, eager vs compile, 5 windows
#           per case (the compare verdicts need >= 4 per side), telemetry and the shipped price of the GPU.
#   cpugpu  CPU vs GPU on the same host: ResNet-50 inference (batch 32; fp32 and amp-bf16 eager, amp-bf16 compiled) and a
#           training step (batch 32 on both; the GPU also at its best batch 256, amp-bf16 compiled) on the
#           host's CPU, beside the same on its GPU.
# STAGES="sweep cpugpu" (default: sweep). RESUME=1: the sweep continues the newest unfinished one in $OUT/study.db
# (copy a store there first; a sweep cut short by `timeout` is marked interrupted and resumes). SMOKE=1: a CPU dry run of the same commands in seconds.
# Results in $OUT: study.db (the store), run-*.json (one per run), log.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-./study-out}; mkdir -p "$OUT"; DB=$OUT/study.db
STAGES=${STAGES:-sweep}
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo "=== $(date +%T) $*"; }
AB="python3 -m accelbench"
if [ "${SMOKE:-0}" = 1 ]; then
  M="-m cifar-resnet20 -n 64 --idle-s 0"; B=1,8,32; W="--repeats 2 --min-time-s 0.05"; GPU="--device cpu"
  CPU="-m cifar-resnet20 --device cpu -b 8 -n 32 --idle-s 0 --repeats 2 --min-time-s 0.05"; GB=8
  TS="--warmup-batches 1 --min-timed-batches 2 --min-time-s 0"
else
  M="-m resnet50 -n 1024"; B=${BATCHES:-1,2,4,8,16,32,64,128,256,512,1024}; W="--repeats 5 --min-time-s 0.5"
  GPU=""; CPU="-m resnet50 --device cpu -b 32 -n 128 --repeats 5 --min-time-s 1"; GB=256
  TS="--warmup-batches 2 --min-timed-batches 6 --min-time-s 0"
fi
{
  step env; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv,noheader 2>/dev/null
  lscpu 2>/dev/null | grep -E "Model name|^CPU\(s\)|Flags" | sed 's/Flags:.*\(amx_bf16\).*/Flags: ... amx_bf16 .../'
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  if has sweep; then
    step "sweep: ResNet-50, batch $B, fp32 amp-bf16, eager compile"
    $AB run $M $GPU -b $B -p fp32,amp-bf16 --modes eager,compile $W --db "$DB" --json $OUT/run-sweep.json $( [ "${RESUME:-0}" = 1 ] && echo --resume) --wide
  fi
  if has cpugpu; then
    step "CPU inference"; $AB run $CPU -p fp32,amp-bf16 --modes eager --db "$DB" --json $OUT/run-cpu-infer.json --wide
    $AB run $CPU -p amp-bf16 --modes compile --db "$DB" --json $OUT/run-cpu-infer-compile.json --wide
    step "CPU training step"; $AB train $CPU -p fp32,amp-bf16 --modes eager $TS --db "$DB" --json $OUT/run-cpu-train.json --wide
    step "GPU training step, batch 32 and $GB"
    $AB train ${CPU/--device cpu/$GPU} -p fp32,amp-bf16 --modes eager $TS --db "$DB" --json $OUT/run-gpu-train32.json --wide
    $AB train ${CPU/--device cpu -b 32/$GPU -b $GB} -p amp-bf16 --modes compile $TS --db "$DB" --json $OUT/run-gpu-train$GB.json --wide
  fi
  step done
} 2>&1 | tee -a "$OUT/log.txt"

#!/usr/bin/env bash
# GPU proof of the training workloads. Writes everything under $OUT (default ./train-out):
#   train.db (all runs), train-checkpoints/, conv.png, log lines on stdout.
# STAGES: space-separated subset of "sweep compile extra converge loaderconv pipeline pytest" (default: all).
# The GPU figures came from several calls (compile cases one batch size per command); see docs/results.md (training).
# SMOKE=1 shrinks every stage to seconds (a CPU dry run of the same commands).
set -u
OUT=${OUT:-./train-out}; mkdir -p "$OUT"
DB="$OUT/train.db"
STAGES=${STAGES:-"sweep compile extra converge loaderconv pipeline pytest"}
AB="python -m accelbench"
T0=$(date +%s)
left() { echo $(( ${BUDGET_S:-570} - ($(date +%s) - T0) )); }
has() { [[ " $STAGES " == *" $1 "* ]]; }
if [ "${SMOKE:-0}" = 1 ]; then
  R50="-m cifar-resnet20 -b 8 -n 16 --warmup-batches 1 --min-timed-batches 2 --min-time-s 0 --device cpu"
  EXTRA_P="fp32,amp-bf16"; CONV="--epochs 2 -n 256 --eval-images 200 --device cpu"; WORKERS="0,2"; PIPE_SIZE=32
  LW=2; COMPILE_B=8; CW=2
else
  R50="-m resnet50 -b 64,128,256,512 -n 1024"
  EXTRA_P="bf16,amp-fp16"; CONV="--epochs 80 --target-top1 70"; WORKERS="0,4,8,16"; PIPE_SIZE=224
  LW=8; COMPILE_B=256; CW=8
fi
echo "== start $(date -u) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
python -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
df -h /dev/shm | tail -1
if has sweep; then echo "== sweep (left $(left) s)"
  $AB train $R50 -p fp32,tf32,amp-bf16 --modes eager --loader-workers $LW --db "$DB"; fi
if has compile; then echo "== compile (left $(left) s)"
  timeout $(( $(left) > 400 ? 240 : 60 )) $AB train $R50 -b $COMPILE_B -p amp-bf16 --modes compile --db "$DB"; echo "compile rc=$?"; fi
if has extra; then echo "== extra (left $(left) s)"
  $AB train $R50 -b ${COMPILE_B} -p $EXTRA_P --modes eager --db "$DB"
  $AB train $R50 -b ${COMPILE_B} -p amp-bf16 --modes eager --no-channels-last --db "$DB"; fi
if has converge; then echo "== converge (left $(left) s)"
  timeout $(( $(left) - 200 > 30 ? $(left) - 200 : 30 )) $AB train $CONV -b 64,256 --placement resident --db "$DB" --plot "$OUT/conv.png"
  echo "converge rc=$?"; fi
if has loaderconv; then echo "== loader-placement convergence (left $(left) s)"
  $AB train ${CONV%% *} 3 $( [ "${SMOKE:-0}" = 1 ] && echo "-n 256 --eval-images 200 --device cpu" ) -b 256 --placement loader --workers $CW --db "$DB"; fi
if has pipeline; then echo "== input pipeline (left $(left) s)"
  $AB input-pipeline -w $WORKERS -b 256 --image-size $PIPE_SIZE --db "$DB"
  $AB input-pipeline -w $WORKERS -b 256 --no-storage --db "$DB"; fi
if has pytest; then echo "== pytest -m gpu (left $(left) s)"
  COLUMNS=250 python -m pytest -q -m gpu tests/test_train_gpu.py -p no:cacheprovider --tb=line -W ignore::DeprecationWarning 2>&1 | tail -30; fi
echo "== done after $(( $(date +%s) - T0 )) s"

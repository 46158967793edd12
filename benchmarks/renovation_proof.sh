#!/usr/bin/env bash
# Re-measurement on one GPU after a restructuring of the code: the new layout measures what the old one measured.
#   hand      benchmarks/handloop.py (accelbench's run_case vs a hand loop, interleaved), ResNet-50 bs 256
#   run       accelbench run: ResNet-50 bs 256, fp32 / amp-bf16, eager / compile / cudagraphs, telemetry
#   train     accelbench train: ResNet-50 bs 256 amp-bf16 eager + compile (docs/results.md, training)
#   profile   accelbench profile: ResNet-50 bs 32 amp-bf16 inference under ncu (docs/results.md, roofline profiling)
#   roofs     accelbench profile: ViT-B/16 bs 32 bf16 and fp8 (--ncu off), each placed under its own precision's roof
#             (fp8 converts Linear layers: a convolutional model has no fp8 path on Hopper)
#   pytest    pytest -m "gpu or ncu"
# STAGES selects (default: all). Results land in $OUT (at most 8 files). SMOKE=1: a CPU dry run in seconds.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-./reno-out}; mkdir -p "$OUT"; DB=$OUT/reno.db
STAGES=${STAGES:-"hand run train profile roofs pytest"}
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo "=== $(date +%T) $*"; }
AB="python3 -m accelbench"
if [ "${SMOKE:-0}" = 1 ]; then
  R="-m cifar-resnet20 -b 8 -n 16 --warmup-batches 1 --min-timed-batches 2 --min-time-s 0 --device cpu"
  HAND="--batch 4 --reps 1 --iters 2 --device cpu"; MODES=eager; PROF="--model cifar-resnet20 --batch-size 4 --ncu off"; ROOFS="--model cifar-resnet20 --batch-size 4 --device cpu"
else
  R="-m resnet50 -b 256 -n 1024"; HAND="--batch 256"; MODES=eager,compile,cudagraphs
  PROF="--model resnet50 --batch-size 32 --ncu on --ncu-csv $OUT/ncu-csv"; ROOFS="--model vit_b_16 --batch-size 32"
fi
{
  step env; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader 2>/dev/null
  python3 -c "import torch, torchvision, accelbench; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'accelbench', accelbench.__version__)"
  has hand && step handloop && python3 benchmarks/handloop.py --settings fp32-eager,bf16-cl-eager $HAND --out "$OUT/handloop.json"
  has run && step "accelbench run" && $AB run $R -p fp32,amp-bf16 --modes $MODES --db "$DB"
  has train && step "accelbench train" && $AB train $R -p amp-bf16 --modes ${MODES%,cudagraphs} --db "$DB"
  has profile && step "accelbench profile" && $AB profile $PROF --precision amp-bf16 --step inference --db "$DB" \
    --charts "$OUT/charts" --json "$OUT/profile.json"
  has roofs && step "accelbench profile (roofs)" && $AB profile $ROOFS --ncu off -p bf16,fp8 --step inference \
    --data synthetic --db "$DB" --json "$OUT/profile-roofs.json"
  has pytest && step "pytest -m 'gpu or ncu'" && COLUMNS=200 python3 -m pytest -q -m "gpu or ncu" -p no:cacheprovider \
    -W ignore --tb=short tests 2>&1 | tail -40
  [ -d "$OUT/charts" ] && tar czf "$OUT/charts.tar.gz" -C "$OUT" charts && rm -rf "$OUT/charts"
  [ -d "$OUT/ncu-csv" ] && tar czf "$OUT/ncu-csv.tar.gz" -C "$OUT" ncu-csv && rm -rf "$OUT/ncu-csv"
  step done  # the store stays in $OUT: export its runs with `accelbench export --run N`
} 2>&1 | tee "$OUT/log.txt"

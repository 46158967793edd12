#!/usr/bin/env bash
# The reduced-precision GPU proof (one H200, under 9 minutes): reduced precision with accuracy.
#   speed    ResNet-50 and ViT-B/16 at batch 256, compiled: fp32 / amp-bf16 / bf16 / fp8 / int8 (random weights: no
#            ImageNet weights on the device, so throughput, latency, energy per image and cost; fp8 on ResNet-50 and
#            int8 on the GPU are `unsupported` rows, simulated-accuracy-capable but with no labels here).
#   fp8      ViT-B/16 bf16 vs fp8 per-row vs fp8 per-tensor, batch 256, compiled, --min-time-s 10 (why no gain?).
#   accuracy cifar-resnet56 and cifar-resnet20 (bundled CIFAR-10 weights) on all 10,000 cifar10-test images in
#            fp32, amp-bf16, bf16, fp16, fp8, fp8-tensor (simulated: conv models), int8 (simulated on the GPU).
#   cpu      ResNet-50 fp32 vs int8 at batch 32 on the host CPU: compile (Inductor freezing for int8) and onnxruntime.
#   fusion   (not in the default STAGES: another call) ViT-B/16 bf16 vs fp8 with Inductor freezing and max-autotune.
# Run from the repository root: OUT=/some/dir bash benchmarks/quant_gpu_proof.sh
#   torchao must be importable (carry the wheel: docs/notes/issue-12-gpu.md); timm gives timm:vit_base_patch16_224,
#   else torchvision's vit_b_16 is used (its attention's qkv projection is not an nn.Linear: fewer fp8 layers).
#   STAGES="speed fp8 accuracy cpu" (default: all, in this order); BUDGET_S (default 510): a stage is given what is
#   left and stopped with SIGTERM past it (accelbench stores every finished case and marks the run interrupted).
#   SMOKE=1: the same commands, tiny, on the CPU (checks every flag; no figure means anything).
# Results in $OUT: quant.db (the store, every stage's run), <stage>.json, log.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-./quant-out}; mkdir -p "$OUT"; DB=$OUT/quant.db
STAGES=${STAGES:-"speed fp8 accuracy cpu"}
BUDGET_S=${BUDGET_S:-510}; T0=$(date +%s)
AB="python3 -m accelbench"
VIT=${VIT:-$(python3 -c "import timm" 2>/dev/null && echo timm:vit_base_patch16_224 || echo vit_b_16)}
STAGE_MIN_S=30; source "$(dirname "$0")/lib/stage.sh"
GPU="-b 256 --data cifar10-test -n 2560 --db $DB"; ACC="-b 1000 -n 10000"; CPU_N=256; T10=10
COMPILE=compile; FUSION=compile-freeze,max-autotune-no-cudagraphs
if [ "${SMOKE:-0}" = 1 ]; then
  GPU="-b 4 --data cifar10-test -n 8 --device cpu --idle-s 0 --db $DB"; ACC="-b 64 -n 128 --device cpu"
  COMPILE=eager; FUSION=eager
  CPU_N=16; T10=0; VIT=vit_b_16
fi
{
  echo "=== $(date +%T) env"
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader 2>/dev/null
  python3 -c "import torch; c = torch.cuda.is_available(); print('torch', torch.__version__, torch.cuda.get_device_name() if c else 'no GPU', torch.cuda.get_device_capability() if c else '')"
  python3 -c "import torchao; print('torchao', torchao.__version__)" || echo "torchao missing: fp8 rows will say what to install"
  python3 -c "import onnxruntime as o; print('onnxruntime', o.__version__, o.get_available_providers())" || echo "onnxruntime missing"
  echo "ViT: $VIT"
  has speed && stage speed-resnet50 150 $AB run -m resnet50 -p fp32,amp-bf16,bf16,fp8,int8 --modes $COMPILE $GPU --json "$OUT/speed-resnet50.json"
  has speed && stage speed-vit 110 $AB run -m "$VIT" -p fp32,amp-bf16,int8 --modes $COMPILE $GPU --json "$OUT/speed-vit.json"
  has fp8 && stage fp8-vit 150 $AB run -m "$VIT" -p bf16,fp8,fp8-tensor --modes $COMPILE $GPU --min-time-s $T10 --json "$OUT/fp8-vit.json" --wide
  has accuracy && stage accuracy 120 $AB run -m cifar-resnet56,cifar-resnet20 $ACC --data cifar10-test \
    -p fp32,amp-bf16,bf16,fp16,fp8,fp8-tensor,int8 --modes eager --db "$DB" --json "$OUT/accuracy.json"
  has fusion && stage fusion 400 $AB run -m "$VIT" -p bf16,fp8 --modes $FUSION $GPU \
    --min-time-s $T10 --json "$OUT/fusion-vit.json" --wide
  has cpu && stage cpu 300 $AB run --device cpu -m resnet50 -b 32 -n $CPU_N -p fp32,int8 --modes compile,onnxruntime \
    --calibration-images $CPU_N --min-time-s 2 --repeats 3 --idle-s 0 --data cifar10-test --db "$DB" --json "$OUT/cpu.json"
  echo "=== $(date +%T) done ($(( $(date +%s) - T0 )) s)"
} 2>&1 | tee -a "$OUT/log.txt"

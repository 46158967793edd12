#!/usr/bin/env bash
# Language-model training on a 2-GPU host in one call: the 1B shape's batch sweep to the OOM boundary (GPU 0) beside
# Float8 training at batch 8 and the 1-process scaling baselines at batch 4 (GPU 1: eager batch 8 does not fit one
# H100), then DDP and FSDP2 over both GPUs, then the 8B shape under FSDP2 at torchtitan's sequence 8192 with selective
# activation checkpointing (SEQ8, AC8 override). Stores under $OUT: lm1.db (batch sweep), lm2.db (Float8), multi.db
# (scaling, 8B), log.txt.
# DRY=1 runs the same commands on a CPU with the bundled tiny model (seconds), to check the script.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-./lm-train-out}; mkdir -p "$OUT"
AB="python3 -m accelbench train"
BUDGET_S=${BUDGET_S:-560}; T0=$(date +%s); STAGE_MIN_S=20; source "$(dirname "$0")/lib/stage.sh"
if [ "${DRY:-0}" = 1 ]; then
  M1=hf:tiny-shakespeare; M8=hf:tiny-shakespeare; SEQ=64; SEQ8=32,64; BS=2,4; B=2; DEV="--device cpu"; G0=""; G1=""
  P=fp32; P8=fp32; FAST="--warmup-batches 1 --min-timed-batches 2 --min-time-s 0"
else
  M1=hf:llama-3.2-1b; M8=hf:llama-3.1-8b; SEQ=2048; SEQ8=${SEQ8:-8192}; BS=${BS:-8,16,32}; B=4; DEV=""
  G0="env CUDA_VISIBLE_DEVICES=0"; G1="env CUDA_VISIBLE_DEVICES=1"; P=amp-bf16; P8=fp8-tensor,fp8
  FAST="--warmup-batches 5 --min-timed-batches 20 --min-time-s 0"
fi
COMMON="--seq-len $SEQ --idle-s 0 $FAST $DEV"
{
  echo "=== $(date +%T) device"
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader 2>/dev/null
  python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())"
  python3 -c "import torchao; print('torchao', torchao.__version__)" 2>&1 | tail -1
  # GPU 0: the 1B batch sweep; GPU 1 beside it: Float8, then the 1-process baselines
  ( stage sweep 230 $G0 $AB -m $M1 -b $BS -p $P --modes compile $COMMON --db "$OUT/lm1.db" 2>&1 | sed 's/^/[gpu0] /' ) &
  ( stage float8 120 $G1 $AB -m $M1 -b 8 -p $P8 --modes compile $COMMON --db "$OUT/lm2.db" 2>&1 | sed 's/^/[gpu1] /'
    stage baselines 110 $G1 $AB --gpus 1 --parallel ddp,fsdp -m $M1 -b $B -p $P --modes eager $COMMON \
      --db "$OUT/multi.db" 2>&1 | sed 's/^/[gpu1] /' ) &
  wait
  stage two-gpus 120 $AB --gpus 2 --parallel ddp,fsdp -m $M1 -b $B -p $P --modes eager $COMMON --db "$OUT/multi.db"
  stage 8b-fsdp2 $(( $(left) - 15 )) $AB --gpus 2 --parallel fsdp -m $M8 -b 1 --seq-len $SEQ8 -p $P --modes compile \
    --activation-checkpointing ${AC8:-selective} --idle-s 0 $FAST $DEV --db "$OUT/multi.db"
} 2>&1 | grep -v -i "warn" | tee "$OUT/log.txt"

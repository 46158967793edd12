#!/usr/bin/env bash
# Language-model training on a 4-GPU host in one call, stages in priority order:
#   8b        Llama-3.1-8B shape, FSDP2 over 4 GPUs, batch 1 x sequence 8192 a GPU, compiled, selective activation
#             checkpointing (torchtitan's Llama-3.1-8B recipe, on 4 GPUs instead of 8); full recompute if that OOMs
#   scale-1   Llama-3.2-1B, batch 4 x 2048, eager, DDP and FSDP2 on one GPU (the scaling baseline)
#   scale-2   the same over 2 GPUs (DDP's exposed communication share timed under no_sync)
#   scale-4   the same over 4 GPUs
#   8b-scale  (named in STAGES only) the 8B shape, FSDP2, batch 1 x 2048, compiled, full recompute, on 2 then 4 GPUs in
#             one `accelbench scale` run (the 2-GPU row is the baseline: the 8B shape's AdamW state does not fit one GPU)
# Everything goes to $OUT/lm4.db (the multi-GPU rows find their 1-GPU baseline there), the console to $OUT/log.txt.
# DRY=1 runs the same commands on a CPU with the bundled tiny model (seconds), to check the script.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-./lm4-out}; mkdir -p "$OUT"; DB=$OUT/lm4.db
AB="python3 -m accelbench train"
BUDGET_S=${BUDGET_S:-555}; T0=$(date +%s); STAGE_MIN_S=30; STAGES=${STAGES:-8b scale-1 scale-2 scale-4}; source "$(dirname "$0")/lib/stage.sh"
if [ "${DRY:-0}" = 1 ]; then
  M1=hf:tiny-shakespeare; M8=hf:tiny-shakespeare; SEQ=64; SEQ8=64; B=2; DEV="--device cpu"; P=fp32; G4=2
  FAST="--warmup-batches 1 --min-timed-batches 2 --min-time-s 0"
else
  M1=hf:llama-3.2-1b; M8=hf:llama-3.1-8b; SEQ=2048; SEQ8=${SEQ8:-8192}; B=4; DEV=""; P=amp-bf16; G4=4
  FAST="--warmup-batches 5 --min-timed-batches 20 --min-time-s 0"
fi
SCALE="-m $M1 -b $B -p $P --modes eager --seq-len $SEQ --parallel ddp,fsdp --idle-s 0 $FAST $DEV --db $DB"
BIG="--parallel fsdp -m $M8 -b 1 --seq-len $SEQ8 -p $P --modes compile --idle-s 0 $FAST $DEV --db $DB"
{
  echo "=== $(date +%T) device"
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader 2>/dev/null
  python3 -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())"
  has 8b && stage 8b 230 $AB --gpus $G4 $BIG --activation-checkpointing ${AC8:-selective} 2>&1 | tee "$OUT/8b.txt"
  if has 8b && grep -qi "out of memory" "$OUT/8b.txt"; then
    stage 8b-full 200 $AB --gpus $G4 $BIG --activation-checkpointing full
  fi
  has scale-1 && stage scale-1 110 $AB --gpus 1 $SCALE
  has scale-2 && stage scale-2 110 $AB --gpus 2 $SCALE
  has scale-4 && stage scale-4 $(( $(left) - 10 )) $AB --gpus $G4 $SCALE
  has 8b-scale && stage 8b-scale $(( $(left) - 10 )) python3 -m accelbench scale -w train --gpus 2,$G4 \
    ${BIG/--seq-len $SEQ8/--seq-len $SEQ} --activation-checkpointing full
} 2>&1 | grep -v -i "warn" | tee "$OUT/log.txt"

#!/usr/bin/env bash
# FSDP2 in accelbench against a plain FSDP2 loop on 2 GPUs, in one call (under ~8 minutes): the Llama-3.2-1B shape,
# 4 x 2048 tokens a GPU, eager, bf16 gathers (MixedPrecisionPolicy), fused AdamW.
#   plain        benchmarks/fsdp_plain_loop.py: no autocast, the model's own loss (the reference, run first and last)
#   plain-amp    the same with bf16 autocast on top and accelbench's loss (cross-entropy of the float32 logits)
#   plain-ce     accelbench's loss without autocast
#   ab-amp       accelbench train --parallel fsdp -p amp-bf16 (autocast on top of the gathers: --fsdp-autocast)
#   ab-noamp     the same with --no-fsdp-autocast (the gathers alone)
#   ab-noamp-proc  the same with the telemetry sampler in its own process (--telemetry-isolation process)
# Results: $OUT/fsdp.db (accelbench's rows), $OUT/plain.jsonl (the plain loop's lines), $OUT/log.txt.
# DRY=1: the same on a CPU with the bundled tiny model (gloo), to check the script.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-./fsdp-out}; mkdir -p "$OUT"; DB=$OUT/fsdp.db
BUDGET_S=${BUDGET_S:-480}; T0=$(date +%s); STAGE_MIN_S=30
STAGES=${STAGES:-plain plain-amp plain-ce ab-amp ab-noamp ab-noamp-proc plain2}; source "$(dirname "$0")/lib/stage.sh"
if [ "${DRY:-0}" = 1 ]; then
  M=hf:tiny-shakespeare; B=2; SEQ=64; P=amp-bf16; DEV="--device cpu"; STEPS=3; WARM=1
else
  M=hf:llama-3.2-1b; B=4; SEQ=2048; P=amp-bf16; DEV=""; STEPS=30; WARM=5
fi
PLAIN="torchrun --nproc-per-node 2 benchmarks/fsdp_plain_loop.py --model $M --batch $B --seq-len $SEQ --steps $STEPS --warmup $WARM --out $OUT/plain.jsonl"
AB="python3 -m accelbench train --gpus 2 --parallel fsdp -m $M -b $B --seq-len $SEQ -p $P --modes eager --idle-s 0 \
  --warmup-batches $WARM --min-timed-batches $STEPS --min-time-s 0 $DEV --db $DB"
{
  echo "=== $(date +%T) device"
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader 2>/dev/null
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  has plain && stage plain 90 $PLAIN
  has plain-amp && stage plain-amp 90 $PLAIN --autocast --loss ce
  has plain-ce && stage plain-ce 90 $PLAIN --loss ce
  has ab-amp && stage ab-amp 100 $AB --name fsdp-autocast
  has ab-noamp && stage ab-noamp 100 $AB --no-fsdp-autocast --name fsdp-gathers-only
  has ab-noamp-proc && stage ab-noamp-proc 100 $AB --no-fsdp-autocast --telemetry-isolation process --name fsdp-gathers-only-proc
  has plain2 && stage plain2 90 $PLAIN
  python3 -m accelbench results --db "$DB" 2>&1 | tail -20
} 2>&1 | grep -v -i "warn" | tee "$OUT/log.txt"

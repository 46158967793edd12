#!/usr/bin/env bash
# The multi-GPU proof: scaling (DDP training, data-parallel inference), the hand-written DDP loop and the plain
# all-reduce loop it is compared with, the interconnect table, concurrent jobs, the multigpu tests.
# Results go to $OUT (at most 8 files). Dry run on a CPU: DRY=1 bash benchmarks/multi_gpu_proof.sh
# SCALE_GPUS / LOOP_NS override the GPU counts of the scale studies / hand loop (default: 1, 2 and 4 if present).
# STAGES: a subset of "train handloop interconnect allreduce infer pytest concurrent" (default: all).
set -uo pipefail
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-proof-out}; mkdir -p "$OUT"; DB=$OUT/multi.db
PY=${PY:-python3}
if [ "${DRY:-0}" = 1 ]; then  # tiny stand-ins, gloo processes
  NS="1 2"; GPUS=1,2; M=resnet18; B=4; N=16; SZ="--image-size 32"; MT=0; DEV="--device cpu"; ISZ=32
  HL="--model resnet18 --batch 4 --image-size 32 --warmup 1 --steps 3"; AR="--sizes 4096"; MAXB=64K; P2P=1M
  CONC="--models cifar-resnet20,cifar-resnet20 --gpus-per-job 1"; CT=0; TO=300
else  # every visible GPU: 1, 2 (and 4) GPU points
  NG=$(nvidia-smi -L | wc -l); if [ "$NG" -ge 4 ]; then NS="1 2 4"; GPUS=1,2,4; else NS="1 2"; GPUS=1,2; fi
  NS=${LOOP_NS:-$NS}; GPUS=${SCALE_GPUS:-$GPUS}  # e.g. SCALE_GPUS=1,4 LOOP_NS=4 when 2 GPUs were measured on another host
  M=resnet50; B=256; N=1024; SZ=""; MT=2; DEV=""; ISZ=224
  HL="--model resnet50 --batch 256 --warmup 10 --steps 40"; AR=""; MAXB=1G; P2P=256M
  CONC="--models resnet50,vit_b_16 --gpus-per-job $((NG / 2)) --sequential-gpus $NG"; CT=3; TO=150
fi
COMMON="--model $M -b $B -p amp-bf16 --modes eager --channels-last -n $N $SZ --min-time-s $MT $DEV --db $DB"
STAGES=${STAGES:-"train handloop interconnect allreduce infer pytest concurrent"}
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo "=== $(date +%T) $*"; }
{
  step topology; nvidia-smi topo -m > "$OUT/topo.txt" 2>&1; cat "$OUT/topo.txt"; nvidia-smi -L
  $PY -c "import torch; print('torch', torch.__version__, 'gpus', torch.cuda.device_count())"
  has train && step "accelbench scale: DDP training" && timeout $TO $PY -m accelbench scale --gpus $GPUS --workload train $COMMON --json "$OUT/scale-train.json"
  has handloop && step "hand-written DDP loop" && for n in $NS; do timeout 60 $PY -m torch.distributed.run --standalone --nproc-per-node $n benchmarks/ddp_hand_loop.py $HL | grep '^{' >> "$OUT/baselines.jsonl"; done
  has interconnect && step "accelbench interconnect" && timeout 90 $PY -m accelbench interconnect --max-bytes $MAXB --p2p-bytes $P2P $DEV --db $DB --json "$OUT/interconnect.json"
  has allreduce && step "plain all-reduce loop" && timeout 60 $PY -m torch.distributed.run --standalone --nproc-per-node ${NS##* } benchmarks/allreduce_plain.py $AR | grep '^{' >> "$OUT/baselines.jsonl"
  has infer && step "accelbench scale: data-parallel inference" && timeout $TO $PY -m accelbench scale --gpus $GPUS --workload inference $COMMON --json "$OUT/scale-infer.json"
  has pytest && step "pytest -m multigpu" && timeout 100 $PY -m pytest -q -m multigpu -p no:cacheprovider tests/test_distributed_gpu.py
  if has concurrent; then step "accelbench concurrent"
    timeout 150 $PY -m accelbench concurrent $CONC --workload train -b $B -p amp-bf16 --modes eager --channels-last -n $N $SZ --min-time-s $CT $DEV --db $DB
    $PY -m accelbench export --db $DB --format json --output "$OUT/concurrent.json"; fi
  step done
} 2>&1 | tee "$OUT/log.txt"

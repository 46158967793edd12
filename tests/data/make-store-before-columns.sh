#!/bin/bash
# Wrote tests/data/store-before-columns.db (kept gzipped: store-before-columns.db.gz) with accelbench at commit 34fe6e4 (before the column table existed): one run of each kind,
# tiny CPU cases (the last one under torchrun with gloo, whose aggregate rows lost compile_mode and freezing).
set -x
DB=${1:?usage: make-store-before-columns.sh OUT.db (run with the accelbench to capture on PYTHONPATH)}
rm -f $DB
A="python3 -m accelbench"
C="--device cpu --idle-s 0 --db $DB"
$A run -m cifar-resnet20 -b 2 -n 4 -p fp32,bf16,int8-dynamic --repeats 2 --kwh-price 0.2 $C
$A train -m cifar-resnet20 -b 4 -n 8 --warmup-batches 1 --min-timed-batches 2 $C
$A train --epochs 1 -b 32 -n 64 --eval-images 50 --placement resident --target-top1 5 $C
$A profile -m cifar-resnet20 -b 2 $C
$A loadgen -m cifar-resnet20 --images 64 --min-duration-s 1 --max-batch 16 $C
$A input-pipeline --images 64 --workers 0 -b 32 --min-batches 2 --evict fadvise $C
$A interconnect --gpus 2 --min-bytes 1K --max-bytes 64K --factor 64 --warmup 1 --iters 3 --p2p-bytes 0 $C
$A tune -m cifar-resnet20 -p fp32,bf16 --modes eager -b 2 --final-rounds 1 --final-repeats 2 --screen-time-s 0 --images 8 --telemetry-period-ms 0 --min-timed-batches 1 $C
$A run --gpus 2 -m cifar-resnet20 -b 4 -n 8 --modes eager,compile-freeze --data synthetic --min-timed-batches 3 --warmup-batches 1 $C

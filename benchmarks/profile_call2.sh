#!/bin/bash
# Device call 2: the GPU proof. The store from call 1 (device/p.db: cached H200 ceilings) is reused.
# A snapshot of everything is tarred after each step, so a timeout keeps what finished.
O=${OUT:-/tmp/out}; W=$O/work; mkdir -p $W; cp device/p.db $W/p.db
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | tail -1); export PATH=$(dirname $NCU):$PATH
snap() { tar czf $O/work.tar.gz -C $O work; echo "== snapshot at ${SECONDS}s"; }
P="python -m accelbench profile --db $W/p.db --charts $W/charts --ncu-csv $W/csv"
time $P -m resnet50 -b 32 -p fp32 --ncu on --json $W/r50-inf-fp32-bs32.json; snap
time $P -m mobilenet_v3_large -b 256 -p amp-bf16 --ncu on --json $W/mnv3-inf-bf16-bs256.json; snap
time $P -m resnet50 -b 256 -p amp-bf16,fp32 --ncu off --json $W/r50-inf-bs256.json; snap
time $P -m resnet50 -b 32 -p amp-bf16 --step train --ncu off --json $W/r50-train-bf16-bs32.json; snap
time $P -m resnet50 -b 256 -p amp-bf16 --ncu on --json $W/r50-inf-bf16-bs256-ncu.json; snap

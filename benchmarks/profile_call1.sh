#!/bin/bash
# Device call 1: check the tools, capture real ncu CSVs of a small net, run the GPU tests, time one
# resnet50 profile. Everything lands in $OUT/work.tar.gz and $OUT/log.txt.
O=${OUT:-/tmp/out}; W=$O/work; mkdir -p $W
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | tail -1); export PATH=$(dirname $NCU):$PATH
echo "ncu: $NCU -> $(readlink -f $NCU)"; ncu --version
S=$(dirname $(readlink -f $NCU))/sections; ls $S | tr '\n' ' '; echo
grep -n -i "hfma\|hadd\|hmul\|Expression" $S/SpeedOfLight_HierarchicalHalfRooflineChart.section | head -40
time ncu --query-metrics > $W/query-metrics.txt 2>&1; head -8 $W/query-metrics.txt
grep -E "^(sm__ops_path_tensor|dram__bytes_(read|write) |smsp__sass_thread_inst_executed_op_[fhd](add|mul|fma)_pred_on )" $W/query-metrics.txt | cut -c1-110
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv
python -c "import torch;print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
P="python -m accelbench profile --ncu on --db $W/p.db --charts $W/charts --ncu-csv $W/csv"
time $P --model cifar-resnet20 --batch-size 8 --precision amp-bf16,fp32 --step inference --json $W/small-inf.json
time $P --model cifar-resnet20 --batch-size 8 --precision amp-bf16 --step train --json $W/small-train.json
time python -m pytest -m "gpu or ncu" -q -x tests
time $P --model resnet50 --batch-size 32 --precision amp-bf16 --step inference --json $W/r50.json
ls -la $W $W/csv; tar czf $O/work.tar.gz -C $O work && rm -rf $W

#!/usr/bin/env bash
# The LoadGen GPU proof: ResNet-50 amp-bf16 through MLPerf LoadGen in all four scenarios, beside `accelbench run`
# of the same configurations (the Offline yardstick and today's batch-1 latency), in one store.
#   STAGES="reference small offline server" (default: all); SMOKE=1: a CPU dry run of the same commands.
#   Overrides: REF_MODES, SMALL (SingleStream/MultiStream modes), BIG (Offline/Server mode), SERVER_BATCHES,
#   SEARCH_STEPS (e.g. BIG=cudagraphs skips the compilations when device time is short).
# Results in $OUT: lg.db (the store), loadgen-logs.tar.gz (LoadGen's summary/detail logs), log.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-./loadgen-out}; mkdir -p "$OUT"; DB=$OUT/lg.db; LOGS=$OUT/logs
STAGES=${STAGES:-"reference small offline server"}
has() { [[ " $STAGES " == *" $1 "* ]]; }
step() { echo "=== $(date +%T) $*"; }
AB="python3 -m accelbench"
if [ "${SMOKE:-0}" = 1 ]; then
  M="-m cifar-resnet20 -p fp32 --device cpu -n 64 --idle-s 0"; SMALL=eager; BIG=eager; MB=32; SMB=16,32
  LG="--min-duration-s 1 --server-search-steps 2"; REF="-b 1,32 --modes eager"
else
  M="-m resnet50 -p amp-bf16 -n 1024"; SMALL=${SMALL:-cudagraphs,eager}; BIG=${BIG:-compile}; MB=256
  SMB=${SERVER_BATCHES:-128,256}; LG="--min-duration-s 10 --server-search-steps ${SEARCH_STEPS:-5}"
  REF="-b 1,256 --modes ${REF_MODES:-compile,cudagraphs}"
fi
{
  step env; nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader 2>/dev/null
  python3 -c "import torch, mlperf_loadgen; print('torch', torch.__version__, 'loadgen', mlperf_loadgen.__file__)"
  has reference && step "accelbench run (the yardstick)" && $AB run $M $REF --db "$DB"
  has small && step "loadgen SingleStream, MultiStream" && $AB loadgen $M --modes $SMALL -s SingleStream,MultiStream $LG --db "$DB" --log-dir "$LOGS"
  has offline && step "loadgen Offline" && $AB loadgen $M --modes $BIG -s Offline --max-batch $MB $LG --db "$DB" --log-dir "$LOGS"
  has server && step "loadgen Server (search for the highest VALID QPS at p99 <= 15 ms)" && \
    $AB loadgen $M --modes $BIG -s Server --max-batch $SMB $LG --db "$DB" --log-dir "$LOGS" --wide
  [ -d "$LOGS" ] && find "$LOGS" -name mlperf_log_trace.json -delete && tar czf "$OUT/loadgen-logs.tar.gz" -C "$OUT" logs && rm -rf "$LOGS"
  step done
} 2>&1 | tee -a "$OUT/log.txt"

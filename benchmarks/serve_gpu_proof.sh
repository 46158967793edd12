#!/usr/bin/env bash
# accelbench serve against transformers serve on one GPU, in one call (under ~10 minutes), stages in priority order:
#   cb       Llama-3.2-1B shape (random weights), continuous batching, concurrency 1..64, the in-process ceiling
#   slo      Llama-3.1-8B shape, continuous batching, the highest concurrency meeting MLPerf's Server SLO
#   nocb     Llama-3.2-1B without continuous batching, concurrency 1..16
#   rate     Llama-3.2-1B, continuous batching, Poisson request rates
# then the HTML report and a JSON export of the store. Results in $OUT: serve.db, serve.json, serve.html, log.txt and
# the servers' logs (the random checkpoints stay in $RUN).
# Run from the repository root with the serve extra's wheels on the path. DRY=1: the same stages on a CPU with the
# bundled tiny model (seconds a level). To finish a call that ran out of time: put its serve.db at $RUN/serve.db, name
# the stages left in STAGES and their levels in C (cb), C8 and SEARCH_STEPS (slo), CN (nocb), R (rate). M1=hf:llama-3.1-8b
# TAG=8b runs the cb, nocb and rate stages on the 8B shape (CB_S, NOCB_S: their time limits in s).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-./serve-out}; RUN=${RUN:-/tmp/serve-run}; mkdir -p "$OUT" "$RUN"
DB=$RUN/serve.db  # the store; its server logs and the random checkpoints go beside it
AB="python3 -m accelbench"
BUDGET_S=${BUDGET_S:-570}; T0=$(date +%s); STAGE_MIN_S=20; STAGES=${STAGES:-cb slo nocb rate}; source "$(dirname "$0")/lib/stage.sh"
if [ "${DRY:-0}" = 1 ]; then
  M1=hf:tiny-shakespeare; M8=hf:tiny-shakespeare; C=1,4; C8=1,4; R=2,4; LEN="--input-len 32 --output-len 16"
  LEVEL="--duration-s 2 --warmup-requests 1 --idle-s 0 --device cpu"; CEIL="--ceiling static-cache"
else
  M1=${M1:-hf:llama-3.2-1b}; M8=hf:llama-3.1-8b; C=${C:-1,4,16,64}; C8=${C8:-1,64}; R=${R:-4,16,64}; LEN="--input-len 128 --output-len 64"
  LEVEL="--duration-s 8 --requests 128 --warmup-requests 2 --idle-s 0"; CEIL=""
fi
SERVE="$AB serve --engine transformers $LEN $LEVEL --db $DB"
{
  echo "=== $(date +%T) device"
  nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader 2>/dev/null
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  has cb && stage cb ${CB_S:-230} $SERVE -m $M1 --continuous-batching --concurrency $C $CEIL --name cb-${TAG:-1b}
  has slo && stage slo ${SLO_S:-200} $SERVE -m $M8 --continuous-batching --concurrency $C8 --slo mlperf-server \
    --slo-search --search-steps ${SEARCH_STEPS:-3} --ceiling none --name slo-8b
  has nocb && stage nocb ${NOCB_S:-90} $SERVE -m $M1 --concurrency ${CN:-${C%,*}} --ceiling none --name nocb-${TAG:-1b}
  has rate && stage rate $(( $(left) - 60 )) $SERVE -m $M1 --continuous-batching --request-rate $R --ceiling none --name rate-${TAG:-1b}
  stage report 30 $AB report --db $DB --html "$OUT/serve.html"
  stage export 30 $AB export --db $DB --format json --output "$OUT/serve.json"
  cp "$DB" "$RUN"/*-server.log "$OUT"/
} 2>&1 | grep -v -i "warn" | tee "$OUT/log.txt"

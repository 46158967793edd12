#!/usr/bin/env bash
# The compiled prefill on one GPU (one call of 6 to 7 minutes: every stage capped, the call at BUDGET_S, 420 s):
# TTFT of the Llama-3.1-8B shape (random weights), bf16, batch 1, prompts 128 / 512 / 2048, against its roofline floor
# (ttft_floor_ms, ttft_over_floor), and the decode beside it. Stages in priority order (STAGES selects):
#   fused    accelbench generate, static-compile-fused (prefill and decode compiled, CUDA graphs), 3 prompt lengths
#   eager    the same through static-cache (prefill and decode eager): the reference TTFT before the compiled prefill
#   scratch  benchmarks/llm_gptfast.py: the from-scratch gpt-fast decoder, its prefill compiled with static shapes
#            and CUDA graphs (as the engines compile theirs: a graph a prompt length), with dynamic shapes and CUDA
#            graphs (one graph), then eager (PREFILLS: add dynamic or static, without CUDA graphs, to ask whether
#            graphs pay), 3 prompt lengths, one compiled decode step, its outputs checked against the plain model
#   int8     static-compile-fused in int8-weight-only, prompt 128 (the 8-bit decode's speed-up over bf16)
#   plain    (not in the default STAGES) static-compile, the unfused compiled engine, 3 prompt lengths
#   ncu      (not in the default STAGES) accelbench profile --step decode --ncu on: one decode step of the fused
#            engine under Nsight Compute (NCU_STEPS: decode and/or prefill, a stage each; NCU_MODEL, default the 8B
#            shape; NCU_PRECISION, default bf16, e.g. int8-weight-only; each capped at NCU_S, 150 s)
#   tests    (not in the default STAGES) the generate GPU tests (tests/test_generate_gpu.py: the compiled, graph-captured
#            prefill and decode generate the eager tokens, every engine and precision gives an ok row; needs pytest)
# Then a compact JSON export of each run and a markdown summary (benchmarks/prefill_summary.py).
# Run from the repository root: OUT=/some/dir bash benchmarks/prefill_compiled_gpu.sh
#   SMOKE=1: the generate stages on the CPU with the bundled tiny model (checks every flag; no figure means anything).
# Results in $OUT: prefill.db (the store), prefill-<stage>.json.gz (compact exports, `accelbench import` reads them),
# scratch.json, summary.md, log.txt.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH}
OUT=${OUT:-./prefill-out}; mkdir -p "$OUT"; DB=$OUT/prefill.db
STAGES=${STAGES:-"fused eager scratch int8"}
BUDGET_S=${BUDGET_S:-420}; T0=$(date +%s); STAGE_MIN_S=25
source "$(dirname "$0")/lib/stage.sh"
AB="python3 -m accelbench"
M=hf:llama-3.1-8b; PROMPTS=${PROMPTS:-128,512,2048}; NEW=${NEW:-32}; REPEATS=${REPEATS:-5}
DEV=""; PREFILLS=${PREFILLS:-static-graphs,dynamic-graphs,eager}
if [ "${SMOKE:-0}" = 1 ]; then
  M=hf:tiny-shakespeare; PROMPTS=16,32; NEW=4; REPEATS=2; DEV="--device cpu -p fp32"
fi
GEN="$AB generate -m $M -b 1 --prompt-lens $PROMPTS --new-tokens $NEW --repeats $REPEATS --idle-s 0 --db $DB --wide"
BF16=${DEV:-"-p bf16"}
export_last() {  # the store's latest run as $OUT/prefill-$1.json.gz
  local id; id=$(python3 -c "from accelbench.store import Store; print(Store('$DB').run()['run_id'])" 2>/dev/null) || return
  python3 benchmarks/compact_export.py "$DB" "$id" "$OUT/prefill-$1.json.gz" && echo "exported run $id: prefill-$1.json.gz"
}
{
  echo "=== $(date +%T) env"
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader 2>/dev/null
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
  git log -1 --format="commit %h %s" 2>/dev/null
  if has fused; then stage fused ${FUSED_S:-190} $GEN $BF16 --modes static-compile-fused --name prefill-fused; export_last fused; fi
  if has eager; then stage eager ${EAGER_S:-45} $GEN $BF16 --modes static-cache --name prefill-eager; export_last eager; fi
  if has scratch && [ "${SMOKE:-0}" != 1 ]; then
    stage scratch ${SCRATCH_S:-100} python3 benchmarks/llm_gptfast.py --arch llama-3.1-8b --variants gqa \
      --prefill "$PREFILLS" --prompt "$PROMPTS" --new "$NEW" --reps 3 --out "$OUT/scratch.json"
  fi
  if has int8; then
    stage int8 ${INT8_S:-100} $AB generate -m $M -b 1 --prompt-lens ${PROMPTS%%,*} --new-tokens $NEW --repeats $REPEATS \
      --idle-s 0 --db $DB --wide ${DEV:-"-p int8-weight-only"} --modes static-compile-fused --name prefill-int8
    export_last int8
  fi
  if has plain; then stage plain ${PLAIN_S:-170} $GEN $BF16 --modes static-compile --name prefill-plain; export_last plain; fi
  if has ncu; then
    NP=${NCU_PRECISION:-bf16}; SUF=$([ "$NP" = bf16 ] || echo "-$NP")
    for step in ${NCU_STEPS:-decode}; do
      stage ncu-$step ${NCU_S:-150} $AB profile -m ${NCU_MODEL:-$M} --step $step -b 1 --prompt-len ${PROMPTS%%,*} \
        ${DEV:-"-p $NP"} --modes static-compile-fused --ncu ${NCU:-on} --ncu-timeout-s $(( ${NCU_S:-150} - 30 )) \
        --db $DB --json "$OUT/ncu-$step$SUF.json"
      export_last ncu-$step$SUF
    done
  fi
  if has tests; then stage tests ${TESTS_S:-150} python3 -m pytest -q -x -m gpu -p no:cacheprovider tests/test_generate_gpu.py; fi
  python3 benchmarks/prefill_summary.py "$OUT" | tee "$OUT/summary.md"
  echo "=== $(date +%T) done ($(( $(date +%s) - T0 )) s)"
} 2>&1 | grep -v -i "warn" | tee -a "$OUT/log.txt"

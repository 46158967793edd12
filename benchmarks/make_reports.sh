#!/usr/bin/env bash
# Regenerate the HTML reports of benchmarks/reports/ from the exports in benchmarks/results/ (the reports are not
# tracked: they are large, and everything in them comes from the exports).
#
#   bash benchmarks/make_reports.sh                       # every report below
#   STUDIES="tune" COMPARISONS=0 bash benchmarks/make_reports.sh   # one study's report only
#
# Each report imports its exports into a fresh temporary store (`accelbench import`) and renders it
# (`accelbench report --html ... --markdown ...`): so a run here also checks that every export still imports and
# renders. Run ids in a temporary store follow the import order, which is what --run and --compare name.
#   reports/study-<folder>.html    every run of one study folder
#   reports/h100-vs-h200.html      ResNet-50 sweep on both GPUs with their comparison, and the H100 host's CPU runs
#   reports/llm-batch-sweeps.html  the language-model batch sweeps (1B at prompt 128 on both GPUs, compared; 1B at
#                                  prompt 2048 on the H100; 8B at prompt 2048 on the H200, to its OOM boundary)
#   reports/llm-h100-vs-h200.html  the 8B headline and 8-bit GEMV runs on both GPUs, the 5-generation H100 studies
#                                  against the H200's, 8B batch sweep compared
#   reports/tune-resnet50-throughput-h200.html  the throughput auto-tune (every trial, the Pareto front)
set -euo pipefail
cd "$(dirname "$0")"
RES=results
OUT=reports
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
AB=${AB:-accelbench}
ALL_STUDIES="resnet50-inference telemetry-energy training roofline-profile multi-gpu loadgen h100-vs-h200
reduced-precision tune language-models training-lm serve-engines serve-gpu serve-vllm-cpu"
STUDIES=${STUDIES-$ALL_STUDIES}

# report NAME "REPORT ARGS" FILE...: import FILE... into a fresh store, then write OUT/NAME.{html,md}.
report() {
  local name=$1 args=$2
  shift 2
  local db="$TMP/$name.db"
  rm -f "$db"
  local t0=$SECONDS
  $AB import --db "$db" "$@" >/dev/null
  # shellcheck disable=SC2086  # ARGS is a list of options
  $AB report --db "$db" $args --html "$OUT/$name.html" --markdown "$OUT/$name.md" >/dev/null
  echo "$OUT/$name.html: $# runs, $((SECONDS - t0)) s"
}

exports() { find "$RES/$1" -name '*.parquet' -o -name '*.json' -o -name '*.json.gz' | sort | while read -r f; do
  # only accelbench run exports: the hand loops, probes and summaries beside them are other JSON (head closes the
  # pipe early: gzip's SIGPIPE must not fail the test under pipefail, or a larger .json.gz is left out)
  if [[ $f == *.parquet ]]; then echo "$f" && continue; fi
  head=$(gzip -cdf "$f" 2>/dev/null | head -c 200 || true)
  if [[ $head == *'"run_id"'* ]]; then echo "$f"; fi
done; }

for s in $STUDIES; do
  mapfile -t files < <(exports "$s")
  report "study-$s" "" "${files[@]}"
done

[[ ${COMPARISONS:-1} == 0 ]] && exit 0
H=$RES/h100-vs-h200
report h100-vs-h200 "--run 1 --run 2 --run 3 --run 4 --run 5 --run 6 --run 7 --compare 1 --compare 2" \
  "$H/h100-sweep.parquet" "$H/h200-sweep.parquet" "$H/h100-host-cpu-inference.json" \
  "$H/h100-host-cpu-inference-compile.json" "$H/h100-host-cpu-train.json" "$H/h100-gpu-train-bs32.json" \
  "$H/h100-gpu-train-bs256.json"
L=$RES/language-models
report llm-batch-sweeps "--compare 1 --compare 2" \
  "$L/h100-1b-batch-sweep.parquet" "$L/h200-1b-batch-sweep.parquet" "$L/h100-1b-prompt2048-sweep.json.gz" \
  "$L/h200-8b-prompt2048-oom.json.gz"
report llm-h100-vs-h200 "--compare 7 --compare 8" \
  "$L/h100-8b-gemv-bf16.json.gz" "$L/h100-8b-gemv-8bit.json.gz" "$L/h200-8b-gemv-bf16.json.gz" "$L/h200-8b-gemv-8bit.json.gz" \
  "$L/h100-1b-repeat5.json.gz" "$L/h200-1b-batch-sweep.parquet" "$L/h100-8b-repeat5.json.gz" "$L/h200-8b-batch-sweep.json.gz"
report tune-resnet50-throughput-h200 "" "$RES/tune/h200-throughput.parquet"

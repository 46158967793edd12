#!/usr/bin/env bash
# Re-export the committed profile studies (roofline-profile/, the language-model profiles of language-models/) with
# the ceilings their rows were measured against and their kernel tables, from what git history keeps of them, so that
# `accelbench report` of the imported exports (benchmarks/make_reports.sh) draws every roofline.
#
#   bash benchmarks/reexport_profiles.sh        # from the repository's root or anywhere
#
# Sources, at commit ecca4c9 (the last that holds the stores, benchmarks/results/README.md):
#   llm-h200-4/call1/llm.db.gz run 3   Llama-3.1-8B shape, decode, bf16 (550 kernels)
#   llm-h200-4/call2/llm.db.gz run 2   Llama-3.1-8B shape, decode, fp8 (582 kernels)
#   llm-h200-4/call3/llm.db.gz run 3   Llama-3.2-1B shape, prefill, bf16 (661 kernels)
#   renovation-h200/profile-resnet50-bs32.json    ResNet-50 bs 32 re-profile, a JSON export with its ceilings and
#                                                 285 kernels (its store was not kept): imported into a fresh store
#   renovation-h200-2/profile-roofs.json          ViT-B/16 bf16 and fp8 (no kernels), likewise
#   profile-h200.json                             the first roofline study (9 cases, each the newest of its case key
#                                                 over 8 runs, with the ceilings), written by profile_summary.py from a
#                                                 store that was never committed: benchmarks/profile_json_to_export.py
#                                                 makes it one run export, with the kernels of roofline-profile/
#                                                 h200-kernels.csv.gz
# The training-lm/ profiles were exported with their ceilings already; their stores were not committed.
# Then every other committed export of a run of those stores (the language-model generate runs, whose report places
# prefill and decode on the roofline) gets the ceilings it was measured against: benchmarks/add_ceilings.py.
set -euo pipefail
cd "$(dirname "$0")/.."
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
OLD=ecca4c96ec6cac8970e18b8a413281a7325712a3
R=benchmarks/results
AB=${AB:-accelbench}
PY=${PY:-python}

# export STORE_PATH RUN OUT: the run of a store at $OLD as a compact export
export_run() {
  git show "$OLD:$R/$1" | gunzip >"$TMP/s.db"
  $PY benchmarks/compact_export.py "$TMP/s.db" "$2" "$3"
  rm -f "$TMP/s.db"
}
# reexport JSON_PATH OUT: a JSON export at $OLD through a fresh store
reexport() {
  git show "$OLD:$R/$1" >"$TMP/e.json"
  $AB import "$TMP/e.json" --db "$TMP/e.db" >/dev/null
  $PY benchmarks/compact_export.py "$TMP/e.db" 1 "$2" --source "git:$OLD:$R/$1"
  rm -f "$TMP/e.json" "$TMP/e.db"
}

export_run llm-h200-4/call1/llm.db.gz 3 "$R/language-models/h200-8b-decode-profile-bf16.json.gz"
export_run llm-h200-4/call2/llm.db.gz 2 "$R/language-models/h200-8b-decode-profile-fp8.json.gz"
export_run llm-h200-4/call3/llm.db.gz 3 "$R/language-models/h200-1b-prefill-profile.json.gz"
reexport renovation-h200/profile-resnet50-bs32.json "$R/roofline-profile/h200-resnet50-bs32-check.json.gz"
reexport renovation-h200-2/profile-roofs.json "$R/roofline-profile/h200-vit-bf16-fp8-roofs.json.gz"
git show "$OLD:$R/profile-h200.json" >"$TMP/first.json"
$PY benchmarks/profile_json_to_export.py "$TMP/first.json" "$R/roofline-profile/h200-kernels.csv.gz" "$TMP/first-run.json"
$AB import "$TMP/first-run.json" --db "$TMP/f.db" >/dev/null
$PY benchmarks/compact_export.py "$TMP/f.db" 1 "$R/roofline-profile/h200-first-study.json.gz" \
  --source "benchmarks/profile_json_to_export.py of git:$OLD:$R/profile-h200.json"

# the language-model stores at $OLD, then every run export of benchmarks/results/ that one of their runs made
stores=()
for p in $(git ls-tree -r --name-only "$OLD" "$R" | grep -E '/llm[^/]*\.db\.gz$|/wo-call4\.db\.gz$'); do
  stores+=("$TMP/$(echo "${p#"$R"/}" | tr / _ | sed 's/\.gz$//')")
  git show "$OLD:$p" | gunzip >"${stores[-1]}"
done
mapfile -t files < <(find "$R" -mindepth 2 \( -name '*.json' -o -name '*.json.gz' -o -name '*.parquet' \) | sort)
$PY benchmarks/add_ceilings.py "${stores[@]}" -- "${files[@]}" | grep -v 'left as it is'

# Shared by the GPU proof scripts (source it after setting STAGES, BUDGET_S and T0):
#   has NAME            is stage NAME selected in $STAGES
#   left                seconds of the call's budget left
#   stage NAME MAX_S cmd...   run cmd for at most MAX_S seconds and never past the budget (SIGTERM, then SIGKILL
#                       15 s later: finished cases are stored, the run is marked interrupted); logs start, end, exit
has() { [[ " $STAGES " == *" $1 "* ]]; }
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
stage() {
  local name=$1 max=$2 t rc; shift 2
  t=$(left); (( t > max )) && t=$max
  if (( t < ${STAGE_MIN_S:-20} )); then echo "=== $(date +%T) skip $name: $(left) s of the budget left"; return; fi
  echo "=== $(date +%T) $name (at most $t s): $*"
  timeout --signal=TERM --kill-after=15 "$t" "$@"; rc=$?; echo "=== $(date +%T) $name exit $rc"
}

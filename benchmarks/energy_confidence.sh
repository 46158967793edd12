#!/usr/bin/env bash
# The default GPU sweep's energy per image is ok-confidence for >= 90 % of its cases, and the
# sweep stays <= 10 minutes. Run on a GPU machine from the repository root (accelbench importable):
#   OUT=/some/dir bash benchmarks/energy_confidence.sh
# Prints the share of ok-confidence energy rows, the methods that gave them, the sweep time, and a verdict line;
# exits 1 when either target is missed. Results in $OUT: x.db (the store), run.log. TIMEOUT_S=N stops the sweep
# after N s (SIGTERM: the finished cases stay stored and are counted).
set -uo pipefail
OUT=${OUT:-./energy-out}; mkdir -p "$OUT"; DB=$OUT/x.db; rm -f "$DB"
t0=$(date +%s)
timeout "${TIMEOUT_S:-0}" python3 -m accelbench run --db "$DB" > "$OUT/run.log" 2>&1; rc=$?
t1=$(date +%s)
tail -3 "$OUT/run.log"
python3 - "$DB" $((t1 - t0)) "$rc" <<'PY'
import collections
import sqlite3
import sys

db, seconds, rc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
con = sqlite3.connect(db)
cols = {r[1] for r in con.execute("PRAGMA table_info(cases)")}
method = "energy_method" if "energy_method" in cols else "energy_source"
rows = con.execute(f"SELECT energy_confidence, {method}, energy_uncertainty_pct FROM cases WHERE status = 'ok'").fetchall()
ok = sum(r[0] == "ok" for r in rows)
share = ok / len(rows) if rows else 0.0
print(f"sweep: exit {rc}, {seconds} s ({seconds / 60:.1f} min), {len(rows)} ok cases")
print(f"ok-confidence energy: {ok} of {len(rows)} = {100 * share:.1f} %")
for (conf, how), n in sorted(collections.Counter((r[0], r[1]) for r in rows).items(), key=str):
    unc = sorted(r[2] for r in rows if (r[0], r[1]) == (conf, how) and r[2] is not None)
    mid = f", uncertainty median {unc[len(unc) // 2]:.2f} % max {unc[-1]:.2f} %" if unc else ""
    print(f"  {conf} via {how}: {n}{mid}")
good = share >= 0.9 and seconds <= 600 and rc == 0
print(("PASS" if good else "FAIL") + f": >= 90 % ok-confidence ({100 * share:.1f} %), <= 10 min ({seconds} s)")
sys.exit(0 if good else 1)
PY

#!/usr/bin/env bash
# `meshwork runs list|import|export|delete` end to end on real files: every subcommand, its exit
# code (0 ok, 2 invalid input, 1 other errors) and its messages, the --db override and the XDG
# default, idempotent re-import, malformed lines counted and reported, full CSV export.
#
#   tests/store/cli_test.sh PATH/TO/meshwork
set -uo pipefail
MW="${1:?usage: cli_test.sh MESHWORK_BINARY}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/meshwork-cli-test.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
DB="$TMP/runs.db"
failures=0
checks=0

# run EXPECTED_CODE ARGS...: runs meshwork, keeps stdout/stderr in $OUT/$ERR, checks the code.
run() {
  local want="$1"; shift
  "$MW" "$@" > "$TMP/out" 2> "$TMP/err"
  CODE=$?
  OUT="$(cat "$TMP/out")"
  ERR="$(cat "$TMP/err")"
  checks=$((checks + 1))
  if [ "$CODE" != "$want" ]; then
    echo "FAIL: meshwork $* -> exit $CODE, expected $want"
    echo "  stdout: $OUT"
    echo "  stderr: $ERR"
    failures=$((failures + 1))
  fi
}
# has WHICH TEXT: stdout/stderr of the last run contains TEXT (fixed string).
has() {
  local what="$1" text="$2" hay
  [ "$what" = out ] && hay="$OUT" || hay="$ERR"
  checks=$((checks + 1))
  if ! grep -qF -- "$text" <<< "$hay"; then
    echo "FAIL: std$what of the last command lacks: $text"
    echo "  it was: $hay"
    failures=$((failures + 1))
  fi
}
lacks() {
  local what="$1" text="$2" hay
  [ "$what" = out ] && hay="$OUT" || hay="$ERR"
  checks=$((checks + 1))
  if grep -qF -- "$text" <<< "$hay"; then
    echo "FAIL: std$what of the last command should not contain: $text"
    failures=$((failures + 1))
  fi
}
check() {  # check DESCRIPTION COMMAND...
  local what="$1"; shift
  checks=$((checks + 1))
  if ! "$@"; then echo "FAIL: $what"; failures=$((failures + 1)); fi
}

# A run directory as meshtrain leaves it: two ranks, 3 steps each, start and end records; rank 1
# has one line that is not JSON and one of an unknown type (counted, reported, not fatal).
step() {  # step RANK STEP LOSS
  printf '{"v":1,"type":"step","step":%d,"rank":%d,"time":%d.5,"loss":%s,"lr":0.0003,"grad_norm":1.5,"tokens":512,"tokens_per_s":1000,"tflops":0.001,"mfu":0.01,"mem_bytes":1000,"mem_peak_bytes":2000,"comm_s":{"dp_replicate":0.0,"dp_shard":0.01,"cp":0.0,"tp":0.0},"compute_s":0.4,"step_s":0.5}\n' \
    "$2" "$1" "$((1795336866 + $2))" "$3"
}
mkdir -p "$TMP/run-a"
for r in 0 1; do
  f="$TMP/run-a/metrics-rank$r.jsonl"
  printf '{"v":1,"type":"start","rank":%d,"time":1795336866.2,"host":"vm","pid":42,"node":0,"world":2,"mesh":{"dp_replicate":1,"dp_shard":2,"cp":1,"tp":1},"config":{"v":1,"name":"from-config","model":"tiny","mesh":{"dp_replicate":1,"dp_shard":2,"cp":1,"tp":1},"training":{"steps":3},"cluster":{"nodes":[]}}}\n' "$r" > "$f"
  step "$r" 0 5.5 >> "$f"
  step "$r" 1 4.25 >> "$f"
  [ "$r" = 1 ] && { echo 'this is not json' >> "$f"; echo '{"v":1,"type":"heartbeat","rank":1}' >> "$f"; }
  step "$r" 2 3.125 >> "$f"
  printf '{"v":1,"type":"end","rank":%d,"time":1795336870,"status":"ok","reason":""}\n' "$r" >> "$f"
done
# 2 ranks x 3 steps x the keys of one step record.
KEYS_PER_STEP=$(( $(step 0 0 1 | grep -o '"[a-z_]*":' | grep -vc -e '"v"' -e '"type"' -e '"step"' -e '"rank"' -e '"time"' -e '"comm_s"') ))
POINTS=$((2 * 3 * KEYS_PER_STEP))

# --- usage and unknown subcommands ---------------------------------------------------------------
run 2 runs
has err "usage: meshwork runs list"
run 0 runs --help
has out "meshwork runs export RUN --csv OUT"
run 2 runs frobnicate
has err "meshwork: runs: frobnicate: allowed: list, import, export, delete"

# --- list on an empty (new) database ----------------------------------------------------------------
run 0 runs list --db "$DB"
has out "no runs in $DB"
check "list creates the database" test -f "$DB"
run 0 runs list --db "$DB" --json
check "list --json of an empty store is []" test "$(tr -d ' \n' < "$TMP/out")" = "[]"
run 2 runs list --db "$DB" --frob
has err "meshwork: --frob: not an option of meshwork runs list (see --help)"
run 2 runs list --db "$DB" --json=1
has err "meshwork: --json: 1: takes no value"
run 0 runs list -h
has out "usage: meshwork runs list"
run 2 runs list --db "$DB" extra
has err "meshwork: argument: extra: runs list takes no arguments"
run 2 runs list --db
has err "meshwork: --db: needs a value: PATH"

# --- import -------------------------------------------------------------------------------------------
run 2 runs import --db "$DB"
has err "meshwork: PATH: give metrics .jsonl files or run directories"
run 2 runs import "$TMP/nope" --db "$DB"
has err "meshwork: PATH: $TMP/nope: no such file or directory"
mkdir -p "$TMP/empty"
run 2 runs import "$TMP/empty" --db "$DB"
has err "a run directory must contain metrics .jsonl files"
run 2 runs import "$TMP/run-a" "$TMP/empty" --db "$DB" --name x
run 2 runs import "$TMP/run-a" --db "$DB" --name ""
has err "meshwork: --name: must not be empty"

run 0 runs import "$TMP/run-a" --db "$DB"
has out "imported run 1 'from-config' from 2 files"
has out "$POINTS new points, 0 already stored, 1 malformed, 1 unknown; status ok"
has err "metrics-rank1.jsonl: 1 malformed and 1 unknown lines counted, not stored"
# Re-import: nothing new, nothing duplicated; the same run is updated.
run 0 runs import "$TMP/run-a" --db "$DB"
has out "updated run 1 'from-config'"
has out "0 new points"
# Appending to a file and importing again stores only the new step (resumes from the offset).
step 0 3 2.0 >> "$TMP/run-a/metrics-rank0.jsonl"
run 0 runs import "$TMP/run-a" --db "$DB" --name renamed
has out "updated run 1 'renamed'"
has out "$KEYS_PER_STEP new points"
# One loose file with --name; --db=PATH form.
run 0 runs import "$TMP/run-a/metrics-rank1.jsonl" --db="$DB" --name "loose; 'quoted' \"name\""
has out "imported run 2 'loose; 'quoted' \"name\"'"

# --- list ---------------------------------------------------------------------------------------------
run 0 runs list --db "$DB"
has out "ID"
has out "renamed"
has out "loose; 'quoted' \"name\""
has out "1x2x1x1"
has out "3.1250"
run 0 runs list --db "$DB" --json
has out '"name": "renamed"'
has out "\"points\": $((POINTS + KEYS_PER_STEP))"
has out '"status": "ok"'

# --- export -------------------------------------------------------------------------------------------
run 0 runs export renamed --csv "$TMP/out.csv" --db "$DB"
has out "wrote run 1 to $TMP/out.csv"
check "CSV header" test "$(head -1 "$TMP/out.csv")" = "run,rank,step,time,tokens,key,value"
check "CSV has every point ($((POINTS + KEYS_PER_STEP)))" test "$(($(wc -l < "$TMP/out.csv") - 1))" = "$((POINTS + KEYS_PER_STEP))"
check "CSV has the loss of rank 1 step 2" grep -q '^1,1,2,.*,loss,3.125$' "$TMP/out.csv"
run 0 runs export 1 --csv - --db "$DB"
check "export to stdout equals the file" cmp -s "$TMP/out" "$TMP/out.csv"
run 2 runs export 1 --db "$DB"
has err "meshwork: --csv: give the CSV file to write (or - for stdout)"
run 2 runs export 99 --csv "$TMP/x.csv" --db "$DB"
has err "meshwork: RUN: 99: no run with this id or name"
run 2 runs export 1 2 --csv "$TMP/x.csv" --db "$DB"
has err "runs export takes exactly one run id or name"
run 1 runs export 1 --csv "$TMP/no/such/dir/x.csv" --db "$DB"
has err "meshwork: "

# --- delete -------------------------------------------------------------------------------------------
run 2 runs delete --db "$DB"
has err "runs delete takes exactly one run id or name"
run 2 runs delete "no such run" --db "$DB"
has err "meshwork: RUN: no such run: no run with this id or name"
run 0 runs delete renamed --db "$DB"
has out "deleted run 1 'renamed' ($((POINTS + KEYS_PER_STEP)) points)"
run 0 runs list --db "$DB"
lacks out "renamed"
has out "loose"
run 2 runs delete 1 --db "$DB"
run 0 runs export 2 --csv - --db "$DB"
check "the other run keeps its points" test "$(($(wc -l < "$TMP/out") - 1))" = "$((3 * KEYS_PER_STEP))"

# --- the database location ----------------------------------------------------------------------------
run 1 runs list --db /proc/meshwork-no/runs.db
has err "meshwork: "
XDG_DATA_HOME="$TMP/xdg" run 0 runs list
has out "no runs in $TMP/xdg/meshwork/runs.db"
check "default database under XDG_DATA_HOME" test -f "$TMP/xdg/meshwork/runs.db"

echo "$checks checks, $failures failed"
[ "$failures" = 0 ]

#!/usr/bin/env bash
# `meshwork runs import` of other tools' runs, end to end: an event file written by
# torch.utils.tensorboard's SummaryWriter and a trainer_state.json written by transformers, into a
# real store file; values read back with `runs export --csv`; re-import stores nothing twice; a
# cut file resumes where it was cut; a corrupt record keeps everything before it.
# Usage: foreign_import_test.sh path/to/meshwork
set -euo pipefail
meshwork="$1"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../scripts/env.sh"
py="$MESHWORK_VENV/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
db="$work/runs.db"
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir -p "$work/tb" "$work/hf"
"$py" "$here/write_foreign_runs.py" events "$work/tb"
"$py" "$here/write_foreign_runs.py" trainer-state "$work/hf"
event="$(ls "$work/tb"/events.out.tfevents.*)"

# 1. A cut event file (a run still writing): every whole record is stored, the rest waits.
mkdir -p "$work/live"
size=$(stat -c %s "$event")
head -c $((size - 9)) "$event" > "$work/live/$(basename "$event")"
"$meshwork" runs import "$work/live" --db "$db" --name live > "$work/out" 2> "$work/err"
grep -q "the last record is cut short" "$work/err" || fail "no cut warning: $(cat "$work/err")"
first=$(sed -n 's/.*: [0-9]* lines, \([0-9]*\) new points.*/\1/p' "$work/out")
# The writer finishes: the next import reads on from the stored offset.
cp "$event" "$work/live/"
"$meshwork" runs import "$work/live" --db "$db" > "$work/out2" 2>&1
second=$(sed -n 's/.*: [0-9]* lines, \([0-9]*\) new points.*/\1/p' "$work/out2")
[ "$second" -gt 0 ] || fail "the rest of the cut file was not stored: $(cat "$work/out2")"

# 2. The whole file as its own run: every scalar under Meshwork's names, nothing twice.
"$meshwork" runs import "$work/tb" --db "$db" --name tb > "$work/out" 2>&1
"$meshwork" runs import "$work/tb" --db "$db" > "$work/again" 2>&1
grep -q " 0 new points" "$work/again" || fail "re-import stored points again: $(cat "$work/again")"
"$meshwork" runs export tb --csv "$work/tb.csv" --db "$db"
"$meshwork" runs export live --csv "$work/live.csv" --db "$db"
"$py" - "$work/tb/expect.json" "$work/tb.csv" "$work/live.csv" <<'PY'
import csv, json, sys
expect = json.load(open(sys.argv[1]))["scalars"]
names = {"train/loss": ("loss", 1.0), "lr": ("lr", 1.0), "tps": ("tokens_per_s", 1.0), "mfu(%)": ("mfu", 0.01)}
for path in sys.argv[2:]:
    rows = list(csv.DictReader(open(path)))
    got = {}
    for r in rows:
        assert r["rank"] == "0", r
        key = (r["key"], int(r["step"]))
        assert key not in got, f"{path}: {key} stored twice"
        got[key] = float(r["value"])
    want = {}
    for tag, points in expect.items():
        key, scale = names[tag]
        for step, v in points:
            want[(key, step)] = v * scale
    assert set(got) == set(want), (path, sorted(set(got) ^ set(want))[:10])
    for k, v in want.items():
        assert abs(got[k] - v) <= 1e-12 * max(1.0, abs(v)), (path, k, got[k], v)
    # What TensorBoard does not have stays absent: no communication, no step time.
    assert not any(k[0].startswith("comm_s") or k[0] == "step_s" for k in got), path
print("event file values ok:", len(want), "points")
PY
"$meshwork" runs list --db "$db" --json > "$work/list.json"
"$py" - "$work/list.json" <<'PY'
import json, sys
runs = json.load(open(sys.argv[1]))
runs = runs["runs"] if isinstance(runs, dict) else runs
st = {r["name"]: r["status"] for r in runs}
assert st.get("tb") == "ok", st
PY

# 3. A corrupt record: reported with its offset, every intact record before it kept.
mkdir -p "$work/bad"
cp "$event" "$work/bad/"
bad="$work/bad/$(basename "$event")"
printf '\x55' | dd of="$bad" bs=1 seek=$((size / 2)) conv=notrunc status=none
"$meshwork" runs import "$work/bad" --db "$db" --name bad > "$work/out" 2> "$work/err"
grep -q "offset [0-9]*: the record's data fails its CRC-32C\|offset [0-9]*: the record's length fails its CRC-32C" "$work/err" \
  || fail "no CRC warning: $(cat "$work/err")"
kept=$(sed -n 's/.*: [0-9]* lines, \([0-9]*\) new points.*/\1/p' "$work/out")
[ "$kept" -gt 0 ] || fail "nothing kept before the corrupt record"

# 4. trainer_state.json: Trainer's names mapped (loss, lr, grad_norm, eval_loss), others kept.
"$meshwork" runs import "$work/hf" --db "$db" --name hf > "$work/out" 2>&1
"$meshwork" runs export hf --csv "$work/hf.csv" --db "$db"
"$py" - "$work/hf/expect.json" "$work/hf.csv" <<'PY'
import csv, json, sys
history = json.load(open(sys.argv[1]))["history"]
rename = {"loss": "loss", "learning_rate": "lr", "grad_norm": "grad_norm", "eval_loss": "eval_loss"}
got = {(r["key"], int(r["step"])): float(r["value"]) for r in csv.DictReader(open(sys.argv[2]))}
for entry in history:
    for k, v in entry.items():
        if k == "step":
            continue
        key = (rename.get(k, k), entry["step"])
        assert key in got, key
print("trainer_state values ok:", len(got), "points")
PY
echo "foreign imports ok"

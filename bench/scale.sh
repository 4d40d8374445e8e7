#!/usr/bin/env bash
# Meshwork at 1,024 nodes x 8 GPUs (issue 26), every target in one table: the planner for 405B on
# 1024 x 8 (timed here), then the store, the views and the follower (bench/scale_store.sh,
# bench/scale_views.sh, bench/scale_follow.sh: each prints its own table and writes its JSON).
# Prints goal vs measured vs before, writes bench/results/scale.json.
#   bench/scale.sh                # run everything (the follower part needs root: namespaces)
#   bench/scale.sh --merge-only   # time the planner, take the other parts' last results
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
merge_only=0
[ "${1:-}" = "--merge-only" ] && merge_only=1
if [ ! -f "$MESHWORK_BUILD_DIR/build.ninja" ]; then "$MESHWORK_ROOT/scripts/build" --target meshwork; else
  cmake --build "$MESHWORK_BUILD_DIR" --target meshwork > /dev/null; fi
results="$MESHWORK_ROOT/bench/results"
mkdir -p "$results"
if [ "$merge_only" = 0 ]; then
  "$MESHWORK_ROOT/bench/scale_store.sh"
  "$MESHWORK_ROOT/bench/scale_views.sh"
  "$MESHWORK_ROOT/bench/scale_follow.sh"
  "$MESHWORK_ROOT/bench/scale_follow.sh" 1024 30 10 shared
fi
# The planner: 5 runs of the issue's command, the median wall time.
plan=()
for i in 1 2 3 4 5; do
  s=$(date +%s.%N)
  "$MESHWORK_BUILD_DIR/bin/meshwork" plan --model llama-3.1-405b --nodes 1024 --gpus-per-node 8 \
    --gpu-memory 80GiB --seq-len 8192 --micro-batch 1 --json > /tmp/meshwork-scale-plan.json
  e=$(date +%s.%N)
  plan+=("$(echo "$e - $s" | bc)")
done
shapes=$(python3 -c "import json;print(len(json.load(open('/tmp/meshwork-scale-plan.json'))['shapes']))")
python3 - "$results" "$shapes" "${plan[@]}" <<'PY'
import json, os, statistics, sys
results, shapes, plan = sys.argv[1], int(sys.argv[2]), sorted(float(x) for x in sys.argv[3:])
def load(name):
    p = os.path.join(results, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
st, vw, fl = load("scale-store"), load("scale-views"), load("scale-follow")
sh = load("scale-follow-shared")
rows = [("plan 405B on 1024 x 8 (s, median of 5)", "<= 0.5", statistics.median(plan), "1.77", f"{shapes} shapes")]
if st:
    rows += [
        ("store ingest at 8,192 ranks (lines/s)", ">= 25000", st["ingest"]["lines_per_s"], st["ingest"]["before_lines_per_s"], ""),
        ("get_run during ingest, p95 (ms)", "<= 50", st["ingest"]["get_run_ms_p95"], st["ingest"]["before_get_run_ms"], ""),
        ("monitor frame during ingest, p95 (ms)", "<= 50", st["ingest"]["frame_ms_p95"], "-", ""),
        ("monitor frame, mean of 8,192 ranks (ms)", "<= 50", st["monitor_frame"]["median_ms"], st["monitor_frame"]["before_ms"], ""),
        ("Compare 8 runs x 8,192 ranks x 10k steps, cold (ms)", "<= 1000", st["compare"]["median_ms"], st["compare"]["before_ms"], "synthetic aggregates"),
        ("shared-file import / per-rank files (ratio)", ">= ~1", st["import"]["ratio"], st["import"]["before_ratio"], ""),
    ]
if vw:
    add = {c["nodes"]: c for c in vw["cluster_add"]}
    red = {r["case"]: r for r in vw["mesh_redraw"]}
    r1024 = next((r for c, r in red.items() if c.startswith("1024 x 8") and "whole" in c), None)
    rows += [("Cluster view: add 1,024 nodes (ms)", "<= 1000", add[1024]["add_ms"], add[1024]["before_issue26_ms"], f'{add[1024]["card_widgets"]} card widgets')]
    if r1024:
        rows += [("mesh view redraw 1024 x 8, p95 (ms)", "<= 100", r1024["p95_ms"], "no mesh drawn", vw["window"])]
if fl:
    m = fl["model"]["stream"]
    rows += [
        ("follower CPU at 1,024 x 8, 1 step/s (cores, model)", "<= 1", m["follower"]["cores_at_1024"], fl["model"]["files"]["follower"]["cores_at_1024"], "model fitted on namespace nodes"),
        ("follow lag p95 at the largest count that kept up (s)", "<= 5", m["lag_p95_at_largest_s"], fl["model"]["files"]["lag_p95_at_largest_s"], f'{m["largest_count_kept_up"]} nodes x 8'),
    ]
if fl and "process" in fl["model"]["stream"]:
    rows += [("workbench process CPU at 1,024 x 8, per-node streams (cores, model)", "<= 1",
              fl["model"]["stream"]["process"]["cores_at_1024"], "-", "follower + store writer")]
if sh:
    r = sh["measured"][0]
    ranks = r["nodes"] * sh["ranks_per_node"]
    rows += [
        (f"follow {ranks:,} ranks through one tail (Slurm path): lag p95 (s)", "<= 5", r["lag_p95_s"], "-",
         f"measured, {r['chunks']} chunks in {sh['window_s']:.0f} s"),
        (f"follow {ranks:,} ranks through one tail: workbench CPU (cores)", "<= 1", r["cpu_process_cores"], "-",
         "measured, follower + store writer"),
    ]
print(f'{"measure":58} {"goal":>9} {"measured":>12} {"before":>14}  note')
out = []
for name, goal, got, before, note in rows:
    g = f"{got:.3g}" if isinstance(got, (int, float)) else str(got)
    b = f"{before:.3g}" if isinstance(before, float) else str(before)
    print(f"{name:58} {goal:>9} {g:>12} {b:>14}  {note}")
    out.append({"measure": name, "goal": goal, "measured": got, "before": before, "note": note})
json.dump({"bench": "scale", "rows": out, "plan_runs_s": plan}, open(os.path.join(results, "scale.json"), "w"), indent=2)
print("wrote bench/results/scale.json")
PY

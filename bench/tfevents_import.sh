#!/usr/bin/env bash
# Importing another tool's TensorBoard run: `meshwork runs import` of an event file holding N
# scalars (default 1,000,000, written by torch.utils.tensorboard's SummaryWriter) into a fresh
# store, against TensorBoard's own Python loader (EventAccumulator) reading the same file, in
# the same run, R times each (default 3; alternating, so both see the same machine load). Target
# (issue 20): the import >= 3x faster. Reports min and median of each and the ratio of the
# medians, with the load average before and after (a shared machine moves single samples).
# Writes bench/results/tfevents.json.
#   bench/tfevents_import.sh [N] [R]
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
n="${1:-1000000}"
repeats="${2:-3}"
if [ ! -f "$MESHWORK_BUILD_DIR/build.ninja" ]; then "$MESHWORK_ROOT/scripts/build" --target meshwork; else
  cmake --build "$MESHWORK_BUILD_DIR" --target meshwork > /dev/null; fi
work="$(mktemp -d "${TMPDIR:-/tmp}/meshwork-tfevents.XXXXXX")"
trap 'rm -rf "$work"' EXIT
py="$MESHWORK_VENV/bin/python"
echo "writing $n scalars with SummaryWriter ..."
"$py" "$MESHWORK_ROOT/bench/tfevents_bench.py" write "$work/tb" "$n"
bytes=$(du -sb "$work/tb" | cut -f1)
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
tb_times=() mw_times=()
for i in $(seq 1 "$repeats"); do
  read -r tb_s tb_n < <("$py" "$MESHWORK_ROOT/bench/tfevents_bench.py" load "$work/tb")
  rm -f "$work/runs.db" "$work/runs.db-wal" "$work/runs.db-shm"  # a fresh store each time
  s=$(date +%s.%N)
  "$MESHWORK_BUILD_DIR/bin/meshwork" runs import "$work/tb" --db "$work/runs.db" --name tb > "$work/out"
  e=$(date +%s.%N)
  tb_times+=("$tb_s") mw_times+=("$(echo "$e - $s" | bc)")
  echo "run $i: EventAccumulator ${tb_s} s, meshwork runs import ${mw_times[-1]} s"
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$n" "$bytes" "$tb_n" "${tb_times[*]}" "${mw_times[*]}" "$(cat "$work/out")" "$load_before" "$load_after" \
  "$MESHWORK_ROOT/bench/results/tfevents.json" <<'PY'
import json, statistics, sys
n, size, tb_n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
tb = [float(x) for x in sys.argv[4].split()]
mw = [float(x) for x in sys.argv[5].split()]
out, load_before, load_after, path = sys.argv[6], sys.argv[7], sys.argv[8], sys.argv[9]
tb_med, mw_med = statistics.median(tb), statistics.median(mw)
ratios = [t / m for t, m in zip(tb, mw)]
print(f"{'':34} {'min s':>8} {'median s':>9} {'scalars/s (median)':>19}")
print(f"{'TensorBoard EventAccumulator':34} {min(tb):8.2f} {tb_med:9.2f} {tb_n / tb_med:19,.0f}")
print(f"{'meshwork runs import (into SQLite)':34} {min(mw):8.2f} {mw_med:9.2f} {n / mw_med:19,.0f}")
print(f"ratio of medians {tb_med / mw_med:.2f}x, per run {min(ratios):.2f}-{max(ratios):.2f}x (goal >= 3x); "
      f"file {size / 1e6:.1f} MB; load {load_before} -> {load_after}")
json.dump({"scalars": n, "file_bytes": size, "repeats": len(tb),
           "eventaccumulator_s": tb, "eventaccumulator_min_s": min(tb), "eventaccumulator_median_s": tb_med,
           "eventaccumulator_scalars": tb_n,
           "import_s": mw, "import_min_s": min(mw), "import_median_s": mw_med,
           "ratio_of_medians": tb_med / mw_med, "ratio_min": min(ratios), "ratio_max": max(ratios),
           "goal_ratio": 3.0, "loadavg_before": load_before, "loadavg_after": load_after,
           "import_output": out.strip()}, open(path, "w"), indent=2)
PY
echo "wrote bench/results/tfevents.json"

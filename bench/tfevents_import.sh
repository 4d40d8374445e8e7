#!/usr/bin/env bash
# Importing another tool's TensorBoard run: `meshwork runs import` of an event file holding N
# scalars (default 1,000,000, written by torch.utils.tensorboard's SummaryWriter) into a fresh
# store, against TensorBoard's own Python loader (EventAccumulator) reading the same file, in
# the same run. Target (issue 20): the import >= 3x faster. Writes bench/results/tfevents.json.
#   bench/tfevents_import.sh [N]
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
n="${1:-1000000}"
if [ ! -f "$MESHWORK_BUILD_DIR/build.ninja" ]; then "$MESHWORK_ROOT/scripts/build" --target meshwork; else
  cmake --build "$MESHWORK_BUILD_DIR" --target meshwork > /dev/null; fi
work="$(mktemp -d "${TMPDIR:-/tmp}/meshwork-tfevents.XXXXXX")"
trap 'rm -rf "$work"' EXIT
py="$MESHWORK_VENV/bin/python"
echo "writing $n scalars with SummaryWriter ..."
"$py" "$MESHWORK_ROOT/bench/tfevents_bench.py" write "$work/tb" "$n"
bytes=$(du -sb "$work/tb" | cut -f1)
read -r tb_s tb_n < <("$py" "$MESHWORK_ROOT/bench/tfevents_bench.py" load "$work/tb")
s=$(date +%s.%N)
"$MESHWORK_BUILD_DIR/bin/meshwork" runs import "$work/tb" --db "$work/runs.db" --name tb > "$work/out"
e=$(date +%s.%N)
mw_s=$(echo "$e - $s" | bc)
python3 - "$n" "$bytes" "$tb_s" "$tb_n" "$mw_s" "$(cat "$work/out")" "$MESHWORK_ROOT/bench/results/tfevents.json" <<'PY'
import json, sys
n, size, tb_s, tb_n, mw_s, out, path = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6], sys.argv[7]
ratio = tb_s / mw_s
print(f"{'':34} {'seconds':>9} {'scalars/s':>12}")
print(f"{'TensorBoard EventAccumulator':34} {tb_s:9.2f} {tb_n / tb_s:12,.0f}")
print(f"{'meshwork runs import (into SQLite)':34} {mw_s:9.2f} {n / mw_s:12,.0f}")
print(f"ratio {ratio:.1f}x (goal >= 3x); file {size / 1e6:.1f} MB; {out.strip()}")
json.dump({"scalars": n, "file_bytes": size, "eventaccumulator_s": tb_s, "eventaccumulator_scalars": tb_n,
           "import_s": mw_s, "ratio": ratio, "goal_ratio": 3.0, "import_output": out.strip()}, open(path, "w"), indent=2)
PY
echo "wrote bench/results/tfevents.json"

#!/usr/bin/env bash
# Run store benchmark: ingest rate (points/s) of meshtrain's metrics JSON lines for 1M+ points
# against the sqlite3 shell importing the same points as CSV, in the same run, as a ratio; and
# the time of a decimated chart query (800 pixel columns) over 8 runs totalling 1M points.
# Targets (issue 5): >= 500k points/s, >= 0.8x the sqlite3 import, query <= 20 ms.
#
# Usage: bench/store.sh [RANKS STEPS] [QUERY_STEPS_PER_RUN] [ROUNDS]
#   defaults: 8 ranks x 8400 steps x 15 keys = 1,008,000 points; 8 runs x 125,000 steps; 3 rounds
# Prints a table; writes bench/results/store.json. Builds store_bench into $MESHWORK_BUILD_DIR.
set -euo pipefail
source "$(dirname "$0")/common.sh"
command -v sqlite3 > /dev/null || { echo "store.sh: the sqlite3 shell is needed (apt-get install sqlite3)" >&2; exit 1; }
bench_build store_bench
bench_workdir meshwork-store-bench
ranks="${1:-8}"; steps="${2:-8400}"; qsteps="${3:-125000}"; rounds="${4:-3}"
"$MESHWORK_BUILD_DIR/bin/store_bench" "$work" "$ranks" "$steps" "$qsteps" "$rounds"
mkdir -p "$MESHWORK_ROOT/bench/results"
cp "$work/store.json" "$MESHWORK_ROOT/bench/results/store.json"
echo "wrote bench/results/store.json"
# Other tools' runs: a TensorBoard event file of 1M scalars imported, against TensorBoard's own
# loader on the same file (issue 20: >= 3x). Skip with TFEVENTS_SCALARS=0.
if [ "${TFEVENTS_SCALARS:-1000000}" != 0 ]; then
  "$MESHWORK_ROOT/bench/tfevents_import.sh" "${TFEVENTS_SCALARS:-1000000}"
fi

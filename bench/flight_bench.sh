#!/usr/bin/env bash
# The flight recorder's cost: `small` on CPU (2 ranks, FSDP over dp_shard: every collective
# recorded) with the recorder on and off, alternating runs, several rounds; prints a table.
# Usage: bench/flight_bench.sh [--rounds 6 --steps 30 --seq-len 128 --global-batch 4 ...]
# Results: bench/results/flight.json. Build meshtrain and flight_recorder_bench first (scripts/build
# --target meshtrain, then --target flight_recorder_bench: the per-mark cost in a loop).
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
BIN="${MESHTRAIN:-$MESHWORK_BUILD_DIR/bin/meshtrain}"
exec python3 "$(dirname "$0")/flight_bench.py" --meshtrain "$BIN" "$@"

#!/usr/bin/env bash
# The flight recorder's cost within one run: `small` on CPU at dp_shard 2 (2 ranks) and at
# dp_shard 2 x tp 2 (4 ranks), odd steps recorded, each against its two unrecorded neighbours
# (median and bootstrap 95 % interval); prints a line per shape.
# Usage: bench/flight_bench.sh [--steps 161 --seq-len 128 --global-batch 4 --shapes ... --whole-rounds N]
# Results: bench/results/flight.json. Build meshtrain and flight_recorder_bench first (scripts/build
# --target meshtrain, then --target flight_recorder_bench: the per-mark cost in a loop).
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
BIN="${MESHTRAIN:-$MESHWORK_BUILD_DIR/bin/meshtrain}"
exec python3 "$(dirname "$0")/flight_bench.py" --meshtrain "$BIN" "$@"

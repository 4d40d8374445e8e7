#!/usr/bin/env bash
# The run store at 1,024 nodes x 8 GPUs (issue 26): ingest of 8,192 ranks fed one chunk per rank
# per step with live queries alongside, the monitor frame and a cold Compare over 8 runs x 8,192
# ranks x 10,000 steps, and `runs import` of one shared file vs per-rank files. Prints goal,
# measured and the issue's numbers from before side by side; writes bench/results/scale-store.json.
#
# Usage: bench/scale_store.sh [INGEST_STEPS] [COMPARE_STEPS] [IMPORT_RANKS IMPORT_STEPS]
#   defaults: 12 steps (98,304 lines); 10,000; 128 ranks x 250 steps (32,000 lines)
# Needs ~1 GB of free disk under $TMPDIR (/tmp by default).
set -euo pipefail
source "$(dirname "$0")/common.sh"
bench_build scale_store_bench
bench_workdir meshwork-scale-store
"$MESHWORK_BUILD_DIR/bin/scale_store_bench" "$work" "${1:-12}" "${2:-10000}" "${3:-128}" "${4:-250}"
mkdir -p "$MESHWORK_ROOT/bench/results"
cp "$work/scale-store.json" "$MESHWORK_ROOT/bench/results/scale-store.json"
echo "wrote bench/results/scale-store.json"

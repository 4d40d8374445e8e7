#!/usr/bin/env bash
# Every valid mesh shape on this machine's ranks (default 4): tokens/s, per-axis comm share,
# measured peak memory per rank next to core's estimate, core's predicted tokens/s from the
# matmul rate and Gloo bandwidth measured in the same run, and the planner's ranking.
# Usage: bench/shapes.sh [--model small (or bench/models/small-moe.json, a mixture of experts) --seq-len 256 --global-batch 8 --steps 10 --world 4 --rounds 2]
#                        [--db PATH]   (run store of the measured runs; default build/bench-shapes.db)
#                        [--out JSON]  (default bench/results/shapes.json)
#                        [--nodes 2]   (root: the ranks on 2 network-namespace nodes, slower links between)
# Two namespace nodes, 8 ranks:
#   bench/shapes.sh --world 8 --nodes 2 --db build/bench-shapes-2nodes.db --out bench/results/shapes-2nodes.json
# Results: bench/results/shapes.json. Build first:
#   scripts/build --target meshtrain shapes_estimate meshwork
# Run it twice: the second run also judges the prediction fitted to the first run's stored runs.
# It calibrates first (meshtrain calibrate on the same ranks) and predicts every shape from that.
# Beside the JSON: the calibration (-calibration.json) and every rank's calibration records
# (-calibration-records.jsonl.gz), which bench/shapes_refit.py fits anew to judge a change to the
# time model against the same measurements.
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
BIN="${MESHTRAIN:-$MESHWORK_BUILD_DIR/bin/meshtrain}"
EST="${SHAPES_ESTIMATE:-$MESHWORK_BUILD_DIR/bin/shapes_estimate}"
exec "$MESHWORK_VENV/bin/python" "$(dirname "$0")/shapes_bench.py" --meshtrain "$BIN" \
  --estimator "$EST" --python "$MESHWORK_VENV/bin/python" \
  --meshwork "${MESHWORK:-$MESHWORK_BUILD_DIR/bin/meshwork}" --db "$MESHWORK_BUILD_DIR/bench-shapes.db" "$@"

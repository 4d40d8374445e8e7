#!/usr/bin/env bash
# Pipeline stages measured against core: for pp 2 and 4 with each schedule, meshtrain trains a
# few steps and the bench prints the measured bubble (the share of a step the stage ranks wait
# for their neighbours: comm_s.pp / step_s, averaged over the stages) next to core's closed form
# and simulated timeline, and each stage's measured peak memory next to core's estimate.
# Usage: bench/pipeline.sh [--layers 8 --seq-len 256 --global-batch 8 --micro-batch 1 --steps 6]
# Results: bench/results/pipeline.json. Build first:
#   scripts/build --target meshtrain pipeline_estimate
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
exec "$MESHWORK_VENV/bin/python" "$(dirname "$0")/pipeline_bench.py" \
  --meshtrain "${MESHTRAIN:-$MESHWORK_BUILD_DIR/bin/meshtrain}" \
  --estimator "${PIPELINE_ESTIMATE:-$MESHWORK_BUILD_DIR/bin/pipeline_estimate}" \
  --resources "$(dirname "$0")/../resources" "$@"

#!/usr/bin/env bash
# One mixture-of-experts training step on 4 CPU ranks: expert parallelism (ep 4 over dp_shard 4)
# against plain FSDP (ep 1 x dp_shard 4), with the step split into the experts' all-to-all
# (comm_s.ep), the experts' grouped GEMMs (forward, from MESHTRAIN_PROFILE's trace), the other
# collectives and the rest of the compute. Prints a table, writes bench/results/moe_step.json.
# Usage: bench/moe_step.sh [--experts 8 --hidden 256 --moe-intermediate 512 --layers 4
#                           --seq-len 256 --steps 6]
# Build first: scripts/build --target meshtrain
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
exec "$MESHWORK_VENV/bin/python" "$(dirname "$0")/moe_step_bench.py" \
  --meshtrain "${MESHTRAIN:-$MESHWORK_BUILD_DIR/bin/meshtrain}" "$@"

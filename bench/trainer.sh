#!/usr/bin/env bash
# meshtrain vs the PyTorch-Python reference (DDP and FSDP2 fully_shard on Gloo, torch from the
# same venv), 1/2/4 ranks, with the CPU matmul peak measured in the same run.
# Usage: bench/trainer.sh [--model small --seq-len 256 --global-batch 8 --rounds 2 --meshtrain PATH ...]
# Results: bench/results/trainer.json. Build meshtrain first (scripts/build --target meshtrain).
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
BIN="${MESHTRAIN:-$MESHWORK_BUILD_DIR/bin/meshtrain}"
exec "$MESHWORK_VENV/bin/python" "$(dirname "$0")/trainer_bench.py" --meshtrain "$BIN" "$@"

#!/usr/bin/env bash
# meshtrain loading a Hugging Face checkpoint (a few hundred MB, written by transformers) with
# FSDP x TP ranks: each rank's peak resident memory during the load against its shard plus its
# largest single tensor piece, and the load speed against `cat > /dev/null` of the same files
# (both with the files in the page cache; --cold: both from the disk, the page cache dropped before each).
# Usage: bench/hf_load.sh [--hidden 1024 --layers 8 --dtype bfloat16 --shape "--dp-shard 2 --tp 2" --rounds 3]
#        [--cold] [--before OLDER_MESHTRAIN]   (its loads interleaved with this build's: before/after, same machine state)
# Results: bench/results/hf_load.json (--cold: hf_load-cold.json). Build meshtrain first (scripts/build --target meshtrain).
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
BIN="${MESHTRAIN:-$MESHWORK_BUILD_DIR/bin/meshtrain}"
exec "$MESHWORK_VENV/bin/python" "$(dirname "$0")/hf_load_bench.py" --meshtrain "$BIN" "$@"

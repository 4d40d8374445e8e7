#!/usr/bin/env bash
# Records the metrics files the workbench tests import (tests/ui/runs_test.cpp) with the real
# meshtrain on this machine: tiny model, 2 CPU ranks, 8 steps, every rank's lines in one file
# (--metrics). --peak-tflops is fixed so the configs differ only where the runs do:
#   fsdp-1x2.jsonl          dp_shard 2
#   ddp-2x1.jsonl           dp_replicate 2
#   fsdp-1x2-lr1e-3.jsonl   dp_shard 2, lr 1e-3
#   fsdp-1x2-eval.jsonl     dp_shard 2, validation loss on the bundled corpus every 4 steps
#                           (eval records; the path is relative to the repository root)
# Usage: tests/ui/data/record.sh [MESHTRAIN]   (default: $MESHWORK_BUILD_DIR/bin/meshtrain)
set -euo pipefail
source "$(dirname "$0")/../../../scripts/env.sh"
bin="${1:-$MESHWORK_BUILD_DIR/bin/meshtrain}"
here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
record() {
  local name="$1"; shift
  rm -f "$here/$name.jsonl"
  "$bin" --nproc-per-node 2 --model tiny --steps 8 --seq-len 64 --global-batch 4 --micro-batch 1 \
    --warmup-steps 2 --peak-tflops 0.05 --master-port "$((20000 + RANDOM % 20000))" \
    --run-dir "$tmp/$name" --metrics "$here/$name.jsonl" "$@" > "$tmp/$name.out"
  echo "recorded $name.jsonl: $(wc -l < "$here/$name.jsonl") lines"
}
record fsdp-1x2 --dp-shard 2
record ddp-2x1 --dp-replicate 2
record fsdp-1x2-lr1e-3 --dp-shard 2 --lr 1e-3
(cd "$MESHWORK_ROOT" && record fsdp-1x2-eval --dp-shard 2 --eval-data resources/data/kjv.bin --eval-every 4 --eval-batches 2)

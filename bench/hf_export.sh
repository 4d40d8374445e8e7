#!/usr/bin/env bash
# meshtrain export's time and memory: a 26 M-parameter Llama (hidden 512, 8 layers, vocab 256)
# trained 1 step at dp_shard 2 x tp 2 (4 ranks, checkpointed), then exported; peak RSS of the
# export process next to the baseline RSS of a meshtrain process that loads nothing (--help),
# the model's fp32 bytes and its largest single tensor (the streaming export's unit of work).
# MESHTRAIN_BEFORE=/path/to/older/meshtrain exports the same checkpoint with that binary too,
# side by side (e.g. the build before the streaming export).
# Usage: bench/hf_export.sh   Results: bench/results/hf_export.json.
# Build first: scripts/build --target meshtrain
set -euo pipefail
source "$(dirname "$0")/../scripts/env.sh"
BIN="${MESHTRAIN:-$MESHWORK_BUILD_DIR/bin/meshtrain}"
BEFORE="${MESHTRAIN_BEFORE:-}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$MESHWORK_VENV/bin/python" - "$MESHWORK_ROOT/resources/models/tiny.json" "$tmp/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=512, intermediate_size=1408, num_hidden_layers=8, num_attention_heads=8,
         num_key_value_heads=4, head_dim=64)
json.dump(c, open(sys.argv[2], "w"))
PY
"$BIN" --model "$tmp/config.json" --steps 1 --seq-len 64 --global-batch 4 --micro-batch 1 --peak-tflops 1 \
  --checkpoint-every 1 --nproc-per-node 4 --dp-shard 2 --tp 2 --run-dir "$tmp/run" > "$tmp/train.log" 2>&1
rss() { grep "Maximum resident" "$1" | awk '{print $NF}'; }
wall() { grep "Elapsed" "$1" | awk '{print $NF}'; }
/usr/bin/time -v "$BIN" --help > /dev/null 2> "$tmp/base.txt"
/usr/bin/time -v "$BIN" export --checkpoint "$tmp/run/checkpoints" --out "$tmp/hf" > /dev/null 2> "$tmp/export.txt"
model=$(stat -c %s "$tmp/hf/model.safetensors")
largest=$("$MESHWORK_VENV/bin/python" -c '
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
print(max(e[1] - e[0] for k, v in h.items() if k != "__metadata__" for e in [v["data_offsets"]]))' "$tmp/hf/model.safetensors")
rank_file=$(stat -c %s "$tmp/run/checkpoints/step-00000001/rank0.pt")
base=$(rss "$tmp/base.txt"); peak=$(rss "$tmp/export.txt"); t=$(wall "$tmp/export.txt")
printf '%-34s %12s\n' "model.safetensors (fp32)" "$((model / 1000000)) MB" \
  "largest tensor (fp32)" "$((largest / 1000)) KB" \
  "one rank file (params + AdamW)" "$((rank_file / 1000000)) MB" \
  "meshtrain --help peak RSS" "$((base / 1000)) MB" \
  "export peak RSS" "$((peak / 1000)) MB" \
  "export RSS above baseline" "$(((peak - base) / 1000)) MB" \
  "export wall time" "$t"
before_json=""
if [ -n "$BEFORE" ]; then
  /usr/bin/time -v "$BEFORE" --help > /dev/null 2> "$tmp/base-before.txt"
  /usr/bin/time -v "$BEFORE" export --checkpoint "$tmp/run/checkpoints" --out "$tmp/hf-before" > /dev/null 2> "$tmp/export-before.txt"
  bb=$(rss "$tmp/base-before.txt"); bp=$(rss "$tmp/export-before.txt"); bt=$(wall "$tmp/export-before.txt")
  cmp -s "$tmp/hf/model.safetensors" "$tmp/hf-before/model.safetensors" && same=true || same=false
  printf '%-34s %12s\n' "before: export RSS above baseline" "$(((bp - bb) / 1000)) MB" \
    "before: export wall time" "$bt" "same model.safetensors bytes" "$same"
  before_json=", \"before\": {\"binary\": \"$BEFORE\", \"baseline_rss_kb\": $bb, \"export_rss_kb\": $bp, \"export_wall\": \"$bt\", \"same_bytes\": $same}"
fi
mkdir -p "$MESHWORK_ROOT/bench/results"
cat > "$MESHWORK_ROOT/bench/results/hf_export.json" <<JSON
{"model_bytes": $model, "largest_tensor_bytes": $largest, "rank_file_bytes": $rank_file, "baseline_rss_kb": $base,
 "export_rss_kb": $peak, "export_wall": "$t", "shape": "dp_shard 2 x tp 2",
 "parameters": "hidden 512, 8 layers, vocab 256"$before_json}
JSON

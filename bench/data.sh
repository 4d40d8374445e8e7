#!/usr/bin/env bash
# Data preparation benchmark: `meshwork data prepare` (whole command: hashing, reading, JSON,
# the tokenizer worker, shard writing) against the tokenizers wheel's own batch encoder over the
# same documents already in memory (encode_batch, and encode_batch_fast, the same ids without
# offsets), same input, same cores, in the same run; best of ROUNDS each. Target (issue 16):
# meshwork >= 0.8x encode_batch's MB/s.
#
# Usage: bench/data.sh [MB] [ROUNDS]    defaults: 100 MB of deterministic JSON lines, 2 rounds
# Prints a table; writes bench/results/data.json. Builds meshwork into $MESHWORK_BUILD_DIR.
set -euo pipefail
source "$(dirname "$0")/common.sh"
mb="${1:-100}"; rounds="${2:-2}"
PY="$MESHWORK_VENV/bin/python"
bench_build meshwork
bench_workdir meshwork-data-bench
"$PY" "$MESHWORK_ROOT/bench/data_bench.py" corpus "$work" "$mb" > "$work/corpus.json"
batch=$((4 << 20))  # the worker's batch of text (resources/python/meshwork_tokenize.py BLOCK_BYTES)
for r in $(seq "$rounds"); do
  "$PY" "$MESHWORK_ROOT/bench/data_bench.py" baseline "$work/tokenizer/tokenizer.json" "$work/corpus.jsonl" "$batch" \
    > "$work/baseline-$r.json"
  start=$(date +%s.%N)
  "$MESHWORK_BUILD_DIR/bin/meshwork" data prepare --tokenizer "$work/tokenizer" --input "$work/corpus.jsonl" \
    --out "$work/out" --force --progress none > /dev/null
  end=$(date +%s.%N)
  echo "$start $end" > "$work/meshwork-$r.txt"
done
"$PY" - "$work" "$rounds" "$(nproc)" > "$work/data.json" <<'PY'
import json, sys
work, rounds, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
corpus = json.load(open(f"{work}/corpus.json"))
base = [json.load(open(f"{work}/baseline-{r}.json")) for r in range(1, rounds + 1)]
ours = [float(b) - float(a) for a, b in (open(f"{work}/meshwork-{r}.txt").read().split() for r in range(1, rounds + 1))]
manifest = json.load(open(f"{work}/out/manifest.json"))
mb = corpus["bytes"] / 1e6
row = lambda s: {"seconds": s, "mb_per_s": mb / s}
out = {"input_mb": mb, "cores": cores, "rounds": rounds, "documents": manifest["documents"],
       "tokens": manifest["tokens"], "vocab_size": manifest["tokenizer"]["vocab_size"],
       "meshwork_prepare": row(min(ours)),
       "tokenizers_encode_batch": row(min(b["encode_batch"]["seconds"] for b in base))}
if all("encode_batch_fast" in b for b in base):
    out["tokenizers_encode_batch_fast"] = row(min(b["encode_batch_fast"]["seconds"] for b in base))
out["ratio_vs_encode_batch"] = out["meshwork_prepare"]["mb_per_s"] / out["tokenizers_encode_batch"]["mb_per_s"]
print(json.dumps(out, indent=2))
PY
"$PY" - "$work/data.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(f"input: {d['input_mb']:.1f} MB of JSON lines, {d['documents']:,} documents, {d['tokens']:,} tokens, "
      f"vocab {d['vocab_size']:,}, {d['cores']} cores, best of {d['rounds']}")
print(f"{'encoder':<38}{'seconds':>10}{'MB/s':>10}{'ratio':>8}")
ref = d["tokenizers_encode_batch"]["mb_per_s"]
for key, name in [("meshwork_prepare", "meshwork data prepare (whole command)"),
                  ("tokenizers_encode_batch", "tokenizers encode_batch (in memory)"),
                  ("tokenizers_encode_batch_fast", "tokenizers encode_batch_fast")]:
    if key in d:
        print(f"{name:<38}{d[key]['seconds']:>10.2f}{d[key]['mb_per_s']:>10.2f}{d[key]['mb_per_s'] / ref:>7.2f}x")
print(f"target: meshwork >= 0.8x encode_batch: {'met' if d['ratio_vs_encode_batch'] >= 0.8 else 'NOT met'}")
PY
mkdir -p "$MESHWORK_ROOT/bench/results"
cp "$work/data.json" "$MESHWORK_ROOT/bench/results/data.json"
echo "wrote bench/results/data.json"

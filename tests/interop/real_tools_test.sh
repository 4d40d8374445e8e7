#!/usr/bin/env bash
# `meshwork plan --export` read by the tools themselves: Accelerate's own config loader and its
# ParallelismConfig (which refuses bad shapes), torchtitan's ConfigManager for the TOML, Axolotl's
# pydantic schema for its fragment (plus their key names); then every export read back with
# `plan --from`.
# Usage: real_tools_test.sh path/to/meshwork
set -euo pipefail
meshwork="$1"
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../../scripts/env.sh"
py="$MESHWORK_VENV/bin/python"
"$py" -c "import accelerate, torchtitan, axolotl" || { echo "accelerate, torchtitan or axolotl is not installed in $MESHWORK_VENV: run scripts/bootstrap" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cluster=(--model llama-3.2-1b --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB --seq-len 4096 --micro-batch 1 --global-batch 64)
shapes=("--dp-shard 16" "--dp-replicate 2 --dp-shard 4 --tp 2" "--dp-shard 2 --cp 2 --tp 4" "--dp-replicate 16" "--dp-shard 2 --tp 8")
i=0
for s in "${shapes[@]}"; do
  i=$((i + 1))
  for f in accelerate axolotl torchtitan; do
    ext=yaml; [ "$f" = torchtitan ] && ext=toml
    out="$work/$f-$i.$ext"
    # shellcheck disable=SC2086
    "$meshwork" plan "${cluster[@]}" $s --export "$f" --out "$out" > "$work/log" 2>&1 || {
      echo "export $f for '$s' failed:"; cat "$work/log"; exit 1; }
    # Read back: the planner gives the same shape from the file. Accelerate's file holds the
    # machines but no model or batch; the others the reverse: the rest comes as flags.
    extra=(--nodes 2 --gpus-per-node 8)
    [ "$f" = accelerate ] && extra=(--model llama-3.2-1b --seq-len 4096 --micro-batch 1)
    "$meshwork" plan --from "$out" "${extra[@]}" --gpu-memory 80GiB --json > "$work/back.json" 2> "$work/back.err" || {
      echo "plan --from $out failed:"; cat "$work/back.err"; exit 1; }
    "$py" - "$out" "$work/back.json" "$s" <<'PY'
import json, sys
path, back, flags = sys.argv[1], sys.argv[2], sys.argv[3].split()
want = {"dp_replicate": 1, "dp_shard": 1, "cp": 1, "tp": 1}
for k, v in zip(flags[::2], flags[1::2]):
    want[k[2:].replace("-", "_")] = int(v)
shapes = json.load(open(back))["shapes"]
got = {k: shapes[0][k] for k in want}
assert got == want, f"{path}: plan --from gave {got}, exported {want}"
PY
  done
  # Accelerate: its loader refuses unknown keys; ParallelismConfig validates the sizes.
  "$py" - "$work/accelerate-$i.yaml" <<'PY'
import sys
from accelerate.commands.config.config_args import load_config_from_file
from accelerate.parallelism_config import ParallelismConfig
cfg = load_config_from_file(sys.argv[1])
pc = {k.replace("parallelism_config_", ""): v for k, v in cfg.parallelism_config.items()}
p = ParallelismConfig(**pc)
assert p.total_size == cfg.num_processes, (p.total_size, cfg.num_processes)
assert cfg.distributed_type.value in ("FSDP", "MULTI_GPU"), cfg.distributed_type
if cfg.distributed_type.value == "FSDP":
    assert cfg.fsdp_config["fsdp_version"] == 2
    assert p.dp_shard_size > 1 or p.cp_size > 1, "FSDP needs a dimension to shard"
print("accelerate ok:", sys.argv[1], pc)
PY
  # torchtitan: valid TOML whose sections and keys are torchtitan JobConfig's.
  "$py" - "$work/torchtitan-$i.toml" <<'PY'
import sys, tomllib
doc = tomllib.load(open(sys.argv[1], "rb"))
known = {
    "job": {"description", "dump_folder"},
    "model": {"name", "flavor", "hf_assets_path"},
    "optimizer": {"name", "lr", "eps"},
    "lr_scheduler": {"warmup_steps"},
    "training": {"local_batch_size", "global_batch_size", "seq_len", "steps", "max_norm", "mixed_precision_param"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "context_parallel_degree",
                    "tensor_parallel_degree", "pipeline_parallel_degree"},
    "activation_checkpoint": {"mode"},
}
for section, keys in doc.items():
    assert section in known, section
    assert set(keys) <= known[section], (section, set(keys) - known[section])
assert isinstance(doc["training"]["max_norm"], float)
assert isinstance(doc["optimizer"]["lr"], float)
p = doc["parallelism"]
size = p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"] * p["context_parallel_degree"] * p["tensor_parallel_degree"]
assert size == 16, size
print("torchtitan ok:", sys.argv[1], p)
PY
  # Axolotl: a YAML mapping with Axolotl's key names and types.
  "$py" - "$work/axolotl-$i.yaml" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
known = {"base_model", "sequence_len", "micro_batch_size", "gradient_accumulation_steps", "learning_rate",
         "warmup_steps", "max_steps", "bf16", "gradient_checkpointing", "dp_shard_size", "dp_replicate_size",
         "context_parallel_size", "tensor_parallel_size", "fsdp_version", "fsdp_config"}
assert set(doc) <= known, set(doc) - known
assert isinstance(doc["learning_rate"], float), doc["learning_rate"]
assert doc["micro_batch_size"] * doc["gradient_accumulation_steps"] * doc["dp_shard_size"] * doc["dp_replicate_size"] == 64
print("axolotl ok:", sys.argv[1])
PY
done
# torchtitan's own loader: ConfigManager of torchtitan 0.2.2 (the last release that reads a TOML
# job config; scripts/bootstrap installs it without dependencies) builds its JobConfig from each
# file and refuses any key its dataclasses lack; the values must be the ones planned.
"$py" - "$work"/torchtitan-*.toml <<'PY'
import sys, tomllib
from torchtitan.config import ConfigManager
for path in sys.argv[1:]:
    job = ConfigManager().parse_args(["--job.config_file", path])
    doc = tomllib.load(open(path, "rb"))
    p = job.parallelism
    for key, want in doc["parallelism"].items():
        assert getattr(p, key) == want, (path, key, getattr(p, key), want)
    size = p.data_parallel_replicate_degree * p.data_parallel_shard_degree * p.context_parallel_degree * p.tensor_parallel_degree
    assert size == 16, (path, size)
    t = job.training
    assert (t.seq_len, t.local_batch_size, t.global_batch_size) == (4096, 1, 64), (path, t)
    assert job.model.name == "llama3", job.model.name
    print("torchtitan ConfigManager ok:", path, size, "ranks")
PY
# Axolotl's own schema: its pydantic AxolotlInputConfig (axolotl 0.19.0, installed without
# dependencies) validates each fragment once the one thing a fragment leaves to the user, the
# datasets, is added. cp > 1 is left to the key check above: the schema then demands the
# ring-flash-attn CUDA package, which a CPU machine cannot install.
"$py" - "$work"/axolotl-*.yaml <<'PY'
import sys, yaml
from axolotl.utils.schemas.config import AxolotlInputConfig
from axolotl.utils.schemas.fsdp import FSDPConfig
checked = 0
for path in sys.argv[1:]:
    doc = yaml.safe_load(open(path))
    assert set(doc) <= set(AxolotlInputConfig.model_fields), set(doc) - set(AxolotlInputConfig.model_fields)
    assert set(doc.get("fsdp_config", {})) <= set(FSDPConfig.model_fields), doc.get("fsdp_config")
    if doc.get("context_parallel_size", 1) > 1:
        continue
    cfg = AxolotlInputConfig(**doc, datasets=[{"path": "tatsu-lab/alpaca", "type": "alpaca"}])
    for key in ("dp_shard_size", "dp_replicate_size", "tensor_parallel_size", "micro_batch_size",
                "gradient_accumulation_steps", "sequence_len", "learning_rate", "max_steps"):
        assert getattr(cfg, key) == doc[key], (path, key, getattr(cfg, key), doc[key])
    checked += 1
    print("axolotl schema ok:", path)
assert checked >= 3, checked
PY
# What the tools refuse is refused here too, with the reason: pure replication with tp.
if "$meshwork" plan "${cluster[@]}" --dp-replicate 8 --tp 2 --export accelerate > "$work/log" 2>&1; then
  echo "accelerate export of dp_replicate 8 x tp 2 should be refused"; exit 1
fi
grep -q "dp_shard: 1: Accelerate refuses tp/cp with pure replication" "$work/log" || { cat "$work/log"; exit 1; }
"$py" - <<'PY'
from accelerate.parallelism_config import ParallelismConfig
try:
    ParallelismConfig(dp_replicate_size=8, tp_size=2)
except ValueError:
    print("accelerate refuses it as well")
else:
    raise SystemExit("accelerate accepted dp_replicate 8 x tp 2: Meshwork's refusal is out of date")
PY
echo "all exports load"

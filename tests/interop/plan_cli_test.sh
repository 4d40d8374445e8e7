#!/usr/bin/env bash
# `meshwork plan --export/--from` as a user types it: the launch lines name the file written
# (--out, quoted for the shell when it must be), --lr/--warmup-steps/--steps reach the exported
# file and win over --from, a malformed --from file is refused with exit 2 naming the file, the
# line and the key, and keys Meshwork does not use are listed without failing.
# Usage: plan_cli_test.sh path/to/meshwork
set -euo pipefail
meshwork="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cluster=(--model llama-3.2-1b --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB --seq-len 4096 --micro-batch 1
         --global-batch 64 --dp-replicate 2 --dp-shard 4 --tp 2)
failed=0
check() {  # check DESCRIPTION FILE PATTERN: the fixed string PATTERN is in FILE
  if grep -qF -- "$3" "$2"; then echo "ok: $1"; else echo "FAIL: $1: '$3' not in $2:"; cat "$2"; failed=1; fi
}
expect_exit() {  # expect_exit CODE DESCRIPTION -- COMMAND...: stdout+stderr in $work/out
  local want="$1" what="$2"; shift 3
  local rc=0
  "$@" > "$work/out" 2>&1 || rc=$?
  if [ "$rc" = "$want" ]; then echo "ok: $what (exit $rc)"; else echo "FAIL: $what: exit $rc, want $want:"; cat "$work/out"; failed=1; fi
}

# 1. The launch lines name the file --out wrote, whatever its name.
mkdir -p "$work/my configs"
acc="$work/my configs/acc 2x4x1x2.yaml"
expect_exit 0 "accelerate export to a path with spaces" -- "$meshwork" plan "${cluster[@]}" --export accelerate --out "$acc"
[ -s "$acc" ] || { echo "FAIL: $acc not written"; failed=1; }
check "accelerate launch names the --out file, quoted" "$work/out" \
  "accelerate launch --config_file '$acc' --machine_rank 1 "
expect_exit 0 "axolotl export" -- "$meshwork" plan "${cluster[@]}" --export axolotl --out "$work/ax.yaml"
check "torchrun line runs axolotl on the --out file" "$work/out" "--node-rank 1 --master-addr NODE0_ADDRESS --master-port 29500 -m axolotl.cli.train $work/ax.yaml"
expect_exit 0 "torchtitan export" -- "$meshwork" plan "${cluster[@]}" --export torchtitan --out "$work/tt.toml"
check "torchrun line gives torchtitan the --out file" "$work/out" "-m torchtitan.train --job.config_file $work/tt.toml"
expect_exit 0 "accelerate export to stdout" -- "$meshwork" plan "${cluster[@]}" --export accelerate
check "without --out the line names the default file" "$work/out" "accelerate launch --config_file accelerate_config.yaml --machine_rank 0 "

# 2. --lr, --warmup-steps, --steps: meshtrain's flags, into the exported file; a flag wins over --from.
expect_exit 0 "axolotl export with training flags" -- \
  "$meshwork" plan "${cluster[@]}" --export axolotl --out "$work/ax-lr.yaml" --lr 0.0005 --warmup-steps 7 --steps 321
check "axolotl learning_rate from --lr" "$work/ax-lr.yaml" "learning_rate: 5.0e-04"
check "axolotl warmup_steps from --warmup-steps" "$work/ax-lr.yaml" "warmup_steps: 7"
check "axolotl max_steps from --steps" "$work/ax-lr.yaml" "max_steps: 321"
expect_exit 0 "torchtitan export from the axolotl file, --lr overriding it" -- \
  "$meshwork" plan --from "$work/ax-lr.yaml" --nodes 2 --gpus-per-node 8 --gpu-memory 80GiB --lr 0.0001 \
  --export torchtitan --out "$work/tt-lr.toml"
check "torchtitan lr: the flag's, not the file's" "$work/tt-lr.toml" "lr = 1.0e-04"
check "torchtitan steps from the --from file" "$work/tt-lr.toml" "steps = 321"
check "torchtitan warmup_steps from the --from file" "$work/tt-lr.toml" "warmup_steps = 7"
expect_exit 2 "--lr -1 refused" -- "$meshwork" plan "${cluster[@]}" --export axolotl --lr -1
check "--lr error names flag, value and what is allowed" "$work/out" "meshwork: --lr: -1: a number > 0"
expect_exit 2 "--steps 0 refused" -- "$meshwork" plan "${cluster[@]}" --export torchtitan --steps 0
check "--steps error" "$work/out" "meshwork: --steps: 0: a whole number >= 1"
expect_exit 2 "--steps without --export refused" -- "$meshwork" plan "${cluster[@]}" --steps 50
check "--steps needs --export" "$work/out" "meshwork: --steps: 50: only with --export FORMAT"

# 3. A malformed --from file: exit 2, the file, the line and the key.
printf 'distributed_type: FSDP\nmixed_precision: bf16\nnum_processes: eight\n' > "$work/bad.yaml"
expect_exit 2 "malformed Accelerate YAML" -- "$meshwork" plan --from "$work/bad.yaml" --gpu-memory 80GiB
check "YAML error names file:line: key: value: allowed" "$work/out" \
  "meshwork: $work/bad.yaml:3: num_processes: eight: a whole number >= 1"
printf '[model]\nname = "llama3"\n[parallelism]\ntensor_parallel_degree = "two"\n' > "$work/bad.toml"
expect_exit 2 "malformed torchtitan TOML" -- "$meshwork" plan --from "$work/bad.toml" --nodes 1 --gpus-per-node 8 --gpu-memory 80GiB
check "TOML error names file:line: key" "$work/out" "meshwork: $work/bad.toml:4: parallelism.tensor_parallel_degree: "
printf '[training]\nsteps = = 3\n' > "$work/syntax.toml"
expect_exit 2 "TOML syntax error" -- "$meshwork" plan --from "$work/syntax.toml" --gpu-memory 80GiB
check "syntax error names file:line" "$work/out" "meshwork: $work/syntax.toml:2"

# 4. Keys Meshwork does not use are listed, not fatal.
cat > "$work/extra.yaml" <<'YAML'
base_model: meta-llama/Llama-3.2-1B
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
output_dir: ./outputs/run
dp_shard_size: 8
sequence_len: 2048
micro_batch_size: 1
gradient_accumulation_steps: 2
wandb_project: mine
YAML
expect_exit 0 "axolotl file with keys Meshwork does not use" -- \
  "$meshwork" plan --from "$work/extra.yaml" --nodes 1 --gpus-per-node 8 --gpu-memory 80GiB --json
check "unknown keys listed" "$work/out" "not used by Meshwork: datasets output_dir wandb_project"
check "the plan keeps the file's dp_shard" "$work/out" '"dp_shard": 8'
exit "$failed"

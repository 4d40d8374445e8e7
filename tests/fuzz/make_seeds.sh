#!/usr/bin/env bash
# Rebuilds tests/fuzz/seeds/ (checked in) from the repository's own test data: the recorded
# GPU-cluster outputs, the model presets, metrics files, run configs and safetensors files
# written by the real `safetensors` library. Run it after adding test data; the fuzzers start
# from these seeds, and the replay tests run every seed and every regression input.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/scripts/env.sh"
out="$root/tests/fuzz/seeds"
rm -rf "$out"
mkdir -p "$out"/{metrics_line,model_config,run_config,host,probe,safetensors,tfevents,trainer_state,follow_stream,calibration,slurm,ecosystem_config,exit_record}

# metrics lines: one seed per distinct record type and shape of line
for f in "$root"/tests/ui/data/*.jsonl "$root"/tests/store/data/*.jsonl; do
  i=0
  head -n 3 "$f" | while IFS= read -r line; do
    i=$((i + 1)); printf '%s' "$line" > "$out/metrics_line/$(basename "$f" .jsonl)-$i"
  done
  tail -n 1 "$f" | tr -d '\n' > "$out/metrics_line/$(basename "$f" .jsonl)-end"
done

cp "$root"/resources/models/*.json "$out/model_config/"

# run configs: the default one, one with every knob set, one inline model, one with nodes
cat > "$out/run_config/default.json" <<'J'
{"v":1,"name":"run","model":"tiny","mesh":{"dp_replicate":1,"dp_shard":2,"cp":1,"tp":1},"data":null}
J
cat > "$out/run_config/knobs.json" <<'J'
{"v":1,"name":"knobs","model":"small","mesh":{"dp_replicate":2,"dp_shard":2,"cp":1,"tp":2},
 "training":{"seq_len":128,"micro_batch":2,"global_batch":16,"steps":10,"lr":0.0003,"warmup_steps":2,
  "precision":"bf16","activation_checkpointing":"full","sequence_parallel":true,"fsdp_grad_sync":"step",
  "max_grad_norm":1.0},"data":"/tmp/tokens","cluster":{"nodes":[{"host":"gpu01","slots":8},{"host":"gpu02","slots":8}]}}
J
printf '{"v":1,"name":"inline","model":%s,"mesh":{"dp_replicate":1,"dp_shard":1,"cp":1,"tp":1}}' \
  "$(tr -d '\n' < "$root/resources/models/tiny.json")" > "$out/run_config/inline.json"

# hosts: the first byte picks the parser (0 host spec, 1 hostfile, 2 --hosts list)
printf '\x00alice@gpu01:2222' > "$out/host/spec"
printf '\x00[fe80::1]:22' > "$out/host/spec-v6"
printf '\x01# hosts\ngpu01 slots=8\ngpu02 slots=8\n\nbob@gpu03:2200 slots=4\n' > "$out/host/hostfile"
printf '\x02gpu01,gpu02:2222,carol@gpu03' > "$out/host/list"

# probe outputs: the first byte picks the parser (see probe_fuzz.cpp's switch)
prefix() { printf "\\x$(printf '%02x' "$1")"; }
for f in "$root"/tests/data/gpu-cluster/*; do
  b="$(basename "$f")"
  case "$b" in
    query_gpu_*) k=0 ;; topo_*) k=1 ;; smi_*) k=2 ;; nvlink_*) k=3 ;; ibstat_*) k=4 ;;
    ibv_devinfo_*) k=5 ;; *) continue ;;
  esac
  { prefix $k; cat "$f"; } > "$out/probe/$b"
done
{ prefix 6; printf 'mlx5_0/ports/1/state:4: ACTIVE\nmlx5_0/ports/1/rate:400 Gb/sec (4X NDR)\nmlx5_0/ports/1/link_layer:InfiniBand\n'; } > "$out/probe/sysfs"
{ prefix 7; printf 'MemTotal:       131072000 kB\nMemFree:         1000000 kB\nMemAvailable:   120000000 kB\n'; } > "$out/probe/meminfo"
{ prefix 8; printf 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'; } > "$out/probe/os-release"

"$MESHWORK_VENV/bin/python" - "$out/safetensors" <<'PY'
import sys, torch
from safetensors.torch import save_file
out = sys.argv[1]
g = torch.Generator().manual_seed(0)
save_file({"w": torch.randn(3, 4, generator=g), "b": torch.randn(4, generator=g)}, f"{out}/f32.safetensors")
save_file({"w": torch.randn(2, 5, generator=g).to(torch.bfloat16),
           "h": torch.randn(5, 2, generator=g).to(torch.float16)}, f"{out}/bf16-f16.safetensors",
          metadata={"format": "pt"})
save_file({"e": torch.zeros(0, 4)}, f"{out}/empty.safetensors")
PY

# TensorBoard event files from tensorboard's own writer. The first byte picks the reading (see
# tfevents_fuzz.cpp): 0 = the file's bytes, 1 = record payloads joined by 0xFF, framed there.
"$MESHWORK_VENV/bin/python" - "$out/tfevents" <<'PY'
import glob, os, struct, sys, tempfile
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.compat.proto import event_pb2, summary_pb2
out = sys.argv[1]
d = tempfile.mkdtemp()
w = EventFileWriter(d)
for step in range(3):
    v = [summary_pb2.Summary.Value(tag="train/loss", simple_value=4.0 - step),
         summary_pb2.Summary.Value(tag="lr", simple_value=1e-4)]
    w.add_event(event_pb2.Event(wall_time=1700000000.0 + step, step=step, summary=summary_pb2.Summary(value=v)))
w.close()
data = open(glob.glob(os.path.join(d, "events.out.tfevents.*"))[0], "rb").read()
open(f"{out}/writer", "wb").write(b"\x00" + data)
payloads, pos = [], 0
while pos + 12 <= len(data):
    (n,) = struct.unpack_from("<Q", data, pos)
    payloads.append(data[pos + 12: pos + 12 + n])
    pos += 12 + n + 4
open(f"{out}/payloads", "wb").write(b"\x01" + b"\xff".join(payloads))
PY

# trainer_state.json as Hugging Face's Trainer writes it (log_history of train and eval records)
cat > "$out/trainer_state/trainer_state.json" <<'J'
{"best_metric": null, "epoch": 0.5, "global_step": 20, "is_world_process_zero": true,
 "log_history": [{"epoch": 0.25, "grad_norm": 1.5, "learning_rate": 4e-05, "loss": 2.31, "step": 10},
                 {"epoch": 0.5, "grad_norm": 1.2, "learning_rate": 3e-05, "loss": 2.05, "step": 20},
                 {"epoch": 0.5, "eval_loss": 2.1, "eval_runtime": 1.5, "step": 20}],
 "max_steps": 40, "num_train_epochs": 1, "total_flos": 1.0e12, "trial_name": null}
J

# the follow stream as `meshtrain tail` writes it, and the request it reads
printf 'V 1 4242\nF 0 0 33\n{"v":1,"type":"step","step":0}\n\nH 1700000000000\nR 0 0 10\nrestart 1\nX 0 0 1700000001.5 0 exit\nE\n' \
  > "$out/follow_stream/stream"
printf 'N 0 0 2\nN 1 2 2\nO 0 120\nO 3 7\n.\n' > "$out/follow_stream/request"

# a calibration as `meshtrain calibrate` stores it
cp "$root/bench/results/shapes-calibration.json" "$out/calibration/shapes.json"
# and the records it is fitted from (a JSON array: node, matmul, step, collective and split_step
# records of a 4-rank `meshtrain calibrate` of the small model)
cp "$root/tests/data/calibration/records-4-ranks.json" "$out/calibration/records.json"

# Slurm's output: the first byte picks the parser (see slurm_fuzz.cpp's switch)
for f in "$root"/tests/data/slurm/*; do
  b="$(basename "$f")"
  case "$b" in
    sinfo-*.txt) k=0 ;; scontrol-show-job*) k=1 ;; squeue-*.json) k=2 ;; scontrol-show-node*) k=3 ;;
    sacct-*) k=6 ;; *) continue ;;
  esac
  { prefix $k; cat "$f"; } > "$out/slurm/$b"
done
{ prefix 4; printf '4242;cluster\n'; } > "$out/slurm/sbatch-parsable"
{ prefix 5; printf 'gpu:h100:8(S:0-1),shard:4'; } > "$out/slurm/gres"

# Accelerate / Axolotl / torchtitan configs: the first byte picks the format (3: from the text)
{ prefix 0; cat "$root/tests/interop/data/accelerate_tp_hsdp.yaml"; } > "$out/ecosystem_config/accelerate"
{ prefix 1; cat "$root/tests/interop/data/axolotl_nd_parallel.yaml"; } > "$out/ecosystem_config/axolotl"
{ prefix 2; cat "$root/tests/interop/data/torchtitan_llama3_8b.toml"; } > "$out/ecosystem_config/torchtitan"
{ prefix 3; cat "$root/tests/interop/data/accelerate_tp_hsdp.yaml"; } > "$out/ecosystem_config/detected"
# exit records as the supervisor writes them (core/exit_record.h; first byte 0), and metrics
# tails for rank_progress (first byte 1)
{ prefix 0; printf '%s' '{"v":1,"node":0,"host":"n0","outcome":"ok","exit_code":0,"time":1765012345.5,"reason":""}'; } > "$out/exit_record/ok"
{ prefix 0; printf '%s' '{"v":1,"node":1,"host":"n2","outcome":"rank_failed","exit_code":3,"time":1765012345.5,"reason":"rank 3 on node 1: killed by signal KILL (9)","failure":{"rank":3,"node":1,"signal":9,"time":1765012345.2,"phase":"training","last_step":7}}'; } > "$out/exit_record/rank-killed"
{ prefix 0; printf '%s' '{"v":1,"node":0,"host":"n0","outcome":"peer_failed","exit_code":3,"time":1765012346,"reason":"node 1 failed","failure":{"rank":2,"node":1,"exit_code":1,"time":1765012345.9,"phase":"startup","last_step":-1}}'; } > "$out/exit_record/peer-failed"
{ prefix 0; printf '%s' '{"v":1,"node":2,"host":"n3","outcome":"store_lost","exit_code":4,"time":1765012350,"reason":"the rendezvous store went away","failure":null}'; } > "$out/exit_record/store-lost"
{ prefix 1; tail -n 4 "$root/tests/ui/data/ddp-2x1.jsonl"; } > "$out/exit_record/metrics-tail"
echo "seeds: $(find "$out" -type f | wc -l) files in $out"

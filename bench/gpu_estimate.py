#!/usr/bin/env python3
"""core's memory estimate beside what bench/gpu.sh measured on the GPU, per speed configuration.

bench/gpu.sh runs on a GPU machine that has no Meshwork workbench build; this runs here, on the
results it wrote: for every speed run it asks `meshwork plan --json` for the same model, shape
(one GPU), sequence, micro-batch, precision and activation checkpointing, and writes into the
JSON, beside each measured peak:
  estimate_allocated   the estimate's total less its framework reserve: what the caching
                       allocator should have handed out at the step's peak
  estimate_error       (estimate_allocated - measured allocated peak) / measured
  estimate_reserve     the reserve core adds (default 1 GiB on CUDA: context, workspaces, slack)
  measured_slack       reserved peak - allocated peak: the allocator's own share of the reserve
Usage: gpu_estimate.py --meshwork BIN --results bench/results/gpu-h200.json
"""
import argparse
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def estimate(meshwork, run, gpu_memory):
    cmd = [meshwork, "plan", "--model", "llama-3.2-1b", "--nodes", "1", "--gpus-per-node", "1",
           "--gpu-memory", f"{gpu_memory // 2**20}MiB", "--seq-len", str(run["seq_len"]),
           "--micro-batch", str(run["micro_batch"]), "--global-batch", str(run["global_batch"]),
           "--precision", "bf16", "--activation-checkpointing", run["ac"], "--device", "cuda",
           "--dp-replicate", "1", "--dp-shard", "1", "--cp", "1", "--tp", "1", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    plan = json.loads(p.stdout)
    mem = plan["shapes"][0]["memory_bytes"]
    return mem["total"] - mem["reserve"], mem["reserve"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshwork", default=os.path.join(ROOT, "build", "bin", "meshwork"))
    ap.add_argument("--results", required=True)
    a = ap.parse_args()
    with open(a.results) as f:
        d = json.load(f)
    gpu_memory = d["environment"]["memory_bytes"]
    print(f"{'run':<28} {'allocated GiB':>14} {'estimate GiB':>13} {'error':>7} {'slack GiB':>10}")
    for key, run in d["stages"]["speed"]["runs"].items():
        if "error" in run:
            continue
        est, reserve = estimate(a.meshwork, run, gpu_memory)
        measured = run["mem_peak_allocated"]
        run["estimate_allocated"] = est
        run["estimate_error"] = (est - measured) / measured
        run["estimate_reserve"] = reserve
        if run.get("mem_peak_reserved"):
            run["measured_slack"] = run["mem_peak_reserved"] - measured
        print(f"{key:<28} {measured / 2**30:>14.2f} {est / 2**30:>13.2f} {run['estimate_error']:>+7.1%} "
              f"{run.get('measured_slack', 0) / 2**30:>10.2f}")
    with open(a.results, "w") as f:
        json.dump(d, f, indent=1)


if __name__ == "__main__":
    main()

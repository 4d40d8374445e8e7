#!/usr/bin/env python3
"""Check core's per-rank memory estimate against an independent implementation: eager PyTorch.

The estimate (`meshwork plan --json`) must hold against measured peaks, not only against its own
formulas. meshtrain's peaks are compared in bench/shapes.sh; this script measures a second,
independent trainer: the Python reference Llama (bench/reference/llama_ref.py) on CPU, fp32, one
process, AdamW, zero_grad(set_to_none=True), with either attention kernel the estimate knows:
  fused        scaled_dot_product_attention(enable_gqa=True), as meshtrain calls it (LibTorch runs
               its flash kernel on CPU; the estimate's default for every device);
  materialized softmax(q k^T / sqrt(d)) v with k, v expanded to the query heads (an eager
               implementation; `meshwork plan` is told so via the same kernel choice).

Peak = bytes live before the measured step (parameters, AdamW moments, the batch) + the highest
running sum of the allocations and frees the profiler records during one full step (forward,
backward, optimizer step). The first step is a warm-up so AdamW's state exists, as it does in
every step the estimate describes.

Side by side, the same cases run by meshtrain (one rank, its tracking allocator's exact peak):
the program the estimate is for. Prints a table and writes
bench/results/estimator_check-ATTENTION.json. Target: estimate within 10% of meshtrain's peak;
the eager reference keeps a few more temporaries (unfused RMSNorm and RoPE), so it is shown as a
second, independent opinion.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch._C._profiler import _EventType

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench", "reference"))
import llama_ref  # noqa: E402


def fused_block_forward(self, x, cos, sin):
    # llama_ref.Block.forward without expanding k and v: SDPA's GQA mode, as trainer/model.cpp.
    q, k, v = self.attention_inputs(x, cos, sin)
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    return self.output_and_mlp(x, a)


def materialized_attention(q, k, v, is_causal=True):
    # The plain path: scores and probabilities are real [B, H, T, T] tensors kept for backward.
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return probs @ v


class _MaterializedF:
    """llama_ref's view of torch.nn.functional with SDPA replaced by the materialized path."""

    def __getattr__(self, name):
        if name == "scaled_dot_product_attention":
            return materialized_attention
        return getattr(F, name)


def tensor_bytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def measure_peak(preset, seq_len, micro_batch):
    torch.manual_seed(0)
    c = llama_ref.PRESETS[preset]
    model = llama_ref.Llama(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    tokens = torch.randint(0, c["vocab"], (micro_batch, seq_len))
    targets = torch.randint(0, c["vocab"], (micro_batch, seq_len))

    def step():
        opt.zero_grad(set_to_none=True)
        model(tokens, targets).backward()
        opt.step()

    step()  # AdamW state now exists
    opt.zero_grad(set_to_none=True)
    state = [t for s in opt.state.values() for t in s.values() if torch.is_tensor(t)]
    resident = tensor_bytes(model.parameters()) + tensor_bytes(state) + tensor_bytes([tokens, targets])
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # Every CPU allocation and free inside the step, with the allocator's running total of the
    # bytes allocated since profiling began (so it starts from 0: `resident` is the rest).
    high = 0
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        if e.tag == _EventType.Allocation:
            high = max(high, e.extra_fields.total_allocated)
        stack.extend(e.children)
    return resident + high


def meshtrain_peak(binary, preset, seq_len, micro_batch):
    with tempfile.TemporaryDirectory() as d:
        cmd = [binary, "--model", preset, "--seq-len", str(seq_len), "--micro-batch", str(micro_batch),
               "--global-batch", str(micro_batch), "--steps", "3", "--run-dir", d]
        subprocess.run(cmd, check=True, capture_output=True)
        with open(os.path.join(d, "metrics-rank0.jsonl")) as f:
            steps = [json.loads(line) for line in f]
        return max(r["mem_peak_bytes"] for r in steps if r["type"] == "step")


def estimate(binary, preset, seq_len, micro_batch, attention):
    cmd = [binary, "plan", "--model", preset, "--nodes", "1", "--gpus-per-node", "1", "--gpu-memory", "64GiB",
           "--seq-len", str(seq_len), "--micro-batch", str(micro_batch), "--global-batch", str(micro_batch),
           "--precision", "fp32", "--device", "cpu", "--reserve", "0B", "--json"]
    if attention == "materialized":
        cmd += ["--attention", "materialized"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    shape = json.loads(out)["shapes"][0]
    return shape["memory_bytes"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--meshwork", default=os.path.join(ROOT, "build", "bin", "meshwork"))
    p.add_argument("--out", default=None, help="default bench/results/estimator_check-ATTENTION.json")
    p.add_argument("--meshtrain", default=os.path.join(ROOT, "build", "bin", "meshtrain"))
    p.add_argument("--attention", choices=["fused", "materialized"], default="fused")
    a = p.parse_args()
    if a.attention == "fused":
        llama_ref.Block.forward = fused_block_forward
    else:
        llama_ref.F = _MaterializedF()
    torch.set_num_threads(1)

    cases = [("tiny", 256, 2), ("tiny", 512, 4), ("small", 256, 1), ("small", 512, 2), ("small", 1024, 1)]
    rows = []
    print(f"{'model':6} {'seq':>5} {'mb':>3} {'estimate MiB':>13} {'meshtrain MiB':>14} {'est/mt':>7}"
          f" {'eager MiB':>10} {'est/eager':>9}")
    for preset, s, b in cases:
        eager = measure_peak(preset, s, b)
        est = estimate(a.meshwork, preset, s, b, a.attention)
        row = {"model": preset, "seq_len": s, "micro_batch": b, "estimate_bytes": est,
               "eager_peak_bytes": eager, "estimate_over_eager": est["total"] / eager}
        mt = ""
        if a.attention == "fused":  # meshtrain runs the fused kernel
            m = meshtrain_peak(a.meshtrain, preset, s, b)
            row.update(meshtrain_peak_bytes=m, estimate_over_meshtrain=est["total"] / m)
            mt = f"{m / 2**20:14.2f} {est['total'] / m:7.3f}"
        rows.append(row)
        print(f"{preset:6} {s:5d} {b:3d} {est['total'] / 2**20:13.2f} {mt:>22} {eager / 2**20:10.2f}"
              f" {est['total'] / eager:9.3f}")
    key = "estimate_over_meshtrain" if a.attention == "fused" else "estimate_over_eager"
    worst = max(abs(r[key] - 1) for r in rows)
    print(f"worst deviation ({key}) {worst * 100:.1f}% (target 10%)")
    out = a.out or os.path.join(ROOT, "bench", "results", f"estimator_check-{a.attention}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"torch": torch.__version__, "attention": a.attention, "load_avg": os.getloadavg(), "cases": rows,
                   "worst_deviation": worst, "worst_of": key, "target": 0.10}, f, indent=1)
    return 0 if worst <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())

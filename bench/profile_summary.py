#!/usr/bin/env python3
"""Where a training step's GPU time goes, from a Kineto chrome trace (meshtrain's
MESHTRAIN_PROFILE on CUDA, or torch.profiler's export_chrome_trace for the Python reference).

Sums the device time of the GPU kernels (and copies / memsets) by kind, from the kernels' own
names, and compares their union with the traced wall time: what is left is the GPU idle,
waiting for the host (launch overhead, synchronisations).

    profile_summary.py TRACE.json [TRACE2.json ...]   prints one table per trace
As a module: summarize(path) -> {"wall_ms", "busy_ms", "idle_ms", "kinds": {kind: ms}, "kernels": n}
"""
import json
import sys

# First match wins; the names are cuBLAS / cuBLASLt (nvjet, sm90_xmma, cutlass), flash attention,
# ATen's own kernels and the fused optimizer's multi-tensor apply.
KINDS = [
    ("matmul", ("gemm", "nvjet", "xmma", "cutlass", "cublas", "splitkreduce")),
    ("attention", ("flash", "fmha", "attention", "attn")),
    ("optimizer", ("adam", "multi_tensor_apply", "foreach")),
    ("loss", ("softmax", "nll_loss", "cross_entropy", "logsumexp")),
    ("norm / reductions", ("reduce_kernel", "norm", "rsqrt")),
    ("copies and casts", ("copy", "cat", "memcpy", "memset", "fill", "index", "embedding")),
    ("element-wise", ("elementwise", "silu", "mul", "add", "neg")),
]


def kind_of(name):
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    return "other"


def summarize(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    if not gpu:
        raise SystemExit(f"{path}: no GPU kernels in the trace (a CPU trace, or CUPTI was not available)")
    kinds = {}
    for e in gpu:
        k = "copies and casts" if e["cat"] != "kernel" else kind_of(e["name"])
        kinds[k] = kinds.get(k, 0.0) + e["dur"] / 1e3
    # Busy time: the union of the kernels' intervals (streams may overlap); wall: first to last.
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in gpu)
    busy, cur_start, cur_end = 0.0, spans[0][0], spans[0][1]
    for s, t in spans[1:]:
        if s > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = s, t
        else:
            cur_end = max(cur_end, t)
    busy += cur_end - cur_start
    wall = spans[-1][1] - spans[0][0]
    return {"wall_ms": wall / 1e3, "busy_ms": busy / 1e3, "idle_ms": (wall - busy) / 1e3,
            "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1])), "kernels": len(gpu)}


def print_summary(name, s):
    print(f"{name}: {s['kernels']} GPU events, {s['wall_ms']:.1f} ms first to last, "
          f"GPU busy {s['busy_ms']:.1f} ms, idle {s['idle_ms']:.1f} ms")
    for k, ms in s["kinds"].items():
        print(f"  {k:<20} {ms:>9.1f} ms  {ms / s['busy_ms']:>6.1%}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    for p in sys.argv[1:]:
        print_summary(p, summarize(p))

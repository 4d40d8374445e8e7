#!/usr/bin/env python3
"""meshtrain vs the PyTorch-Python reference (bench/reference/llama_ref.py), side by side.

For 1, 2 and 4 ranks (single; DDP = dp_replicate N; FSDP = dp_shard N) runs both
implementations on the same model, data, sequence length and global batch, alternating them
(`--rounds` times, best kept; which goes first alternates too) so a busy machine hurts both
alike. Each round's own ratio (its two runs are adjacent in time) is recorded and printed as
min / median / max: the machine's speed drifts over minutes, so best-of-rounds per side can pair
a fast minute of one with a slow minute of the other. A run's speed is its median
step time over the steps after `--skip` (both sides alike; a load spike moves a mean by tens of
percent, a median barely). Tokens/s counts each token of the global batch once; MFU = tokens/s * model FLOPs per token / the CPU matmul peak measured in
this same run (fp32 1024^3 matmuls with all cores, torch from the same venv). Writes
bench/results/trainer.json and prints a table.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

import bench_common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def matmul_peak_gflops(seconds=1.0, n=1024):
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(2):
        a @ b
    it, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a @ b
        it += 1
    return 2 * n ** 3 * it / (time.perf_counter() - t0) / 1e9


def run_meshtrain(binary, shape, nproc, a, port):
    with tempfile.TemporaryDirectory() as d:
        cmd = [binary, "--model", a.model, "--data", a.data, "--steps", str(a.steps), "--seq-len", str(a.seq_len),
               "--global-batch", str(a.global_batch), "--micro-batch", str(a.micro_batch), "--run-dir", d,
               "--master-port", str(port), "--metrics", os.path.join(d, "all.jsonl")] + shape
        if nproc > 1:
            cmd += ["--nproc-per-node", str(nproc)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        steps = [json.loads(l) for l in open(os.path.join(d, "metrics-rank0.jsonl"))]
        steps = [s for s in steps if s["type"] == "step"]
        timed = [s["step_s"] for s in steps[a.skip:]]
        step_s = median(timed)
        return {"step_s": step_s, "step_s_mean": sum(timed) / len(timed),
                "tokens_per_s": a.global_batch * a.seq_len / step_s,
                "losses": [s["loss"] for s in steps],
                "comm_s": {k: sum(s["comm_s"][k] for s in steps[a.skip:]) / len(timed) for k in steps[0]["comm_s"]},
                "mem_peak_bytes": max(s["mem_peak_bytes"] for s in steps)}


def run_python(mode, nproc, a, port):
    ref = os.path.join(ROOT, "bench", "reference", "llama_ref.py")
    args = [ref, "--mode", mode, "--model", a.model, "--data", a.data, "--steps", str(a.steps), "--skip", str(a.skip),
            "--seq-len", str(a.seq_len), "--global-batch", str(a.global_batch), "--micro-batch", str(a.micro_batch)]
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
               "--master-port", str(port)] + args
    else:
        cmd = [sys.executable] + args
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    r = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
    # The same statistic as meshtrain's: the median step (a load spike on this shared machine
    # moves a mean by tens of percent, a median barely).
    r["step_s_mean"], r["step_s"] = r["step_s"], r["step_s_median"]
    r["tokens_per_s"] = a.global_batch * a.seq_len / r["step_s"]
    return r


def retry(run, port, attempts=4):
    """Retries on other ports: a rendezvous port can be taken by an ephemeral Gloo socket of the
    run before, and the Python reference's Gloo ranks sometimes abort at start-up on this VM
    (SIGABRT in 2 of ~40 launches of round 5's benches, commit 1248109); the last failure is raised."""
    for i in range(attempts):
        try:
            return run(port + 500 * i)
        except subprocess.CalledProcessError as e:
            if i == attempts - 1:
                raise
            err = e.stderr if isinstance(e.stderr, str) else (e.stderr or b"").decode(errors="replace")
            lines = [l for l in err.splitlines() if "Error" in l or "error" in l or "what()" in l]
            print(f"  run failed (exit {e.returncode}), retrying on another port: "
                  + (" | ".join(lines[-4:]) or err[-400:]), file=sys.stderr, flush=True)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshtrain", default=os.path.join(ROOT, "build", "bin", "meshtrain"))
    ap.add_argument("--data", default=os.path.join(ROOT, "resources", "data", "kjv.bin"))
    bench_common.add_run_args(ap, micro_batch=2, steps=12)
    ap.add_argument("--skip", type=int, default=2)
    ap.add_argument("--ranks", default="1,2,4")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "trainer.json"))
    a = ap.parse_args()

    load_start = os.getloadavg()
    peak_before = matmul_peak_gflops()
    configs = []
    for n in [int(x) for x in a.ranks.split(",")]:
        if n == 1:
            configs.append(("single", 1, [], "single"))
        else:
            configs.append((f"DDP {n}", n, ["--dp-replicate", str(n)], "ddp"))
            # The reference reduce-scatters once per step (set_requires_gradient_sync(last)).
            configs.append((f"FSDP {n}", n, ["--dp-shard", str(n), "--fsdp-grad-sync", "step"], "fsdp"))
    port = 31000 + os.getpid() % 1000 * 10
    rows = []
    for name, n, shape, mode in configs:
        best_m, best_p = None, None
        round_ratios = []
        for k in range(a.rounds):
            # The two runs of a round are adjacent in time (the machine's speed drifts over
            # minutes); which goes first alternates, so neither side always gets the warm start.
            port += 2
            run_m = lambda: retry(lambda pt: run_meshtrain(a.meshtrain, shape, n, a, pt), port)
            run_p = lambda: retry(lambda pt: run_python(mode, n, a, pt), port + 1)
            if k % 2 == 0:
                m = run_m()
                p = run_p()
            else:
                p = run_p()
                m = run_m()
            round_ratios.append(m["tokens_per_s"] / p["tokens_per_s"])
            if best_m is None or m["tokens_per_s"] > best_m["tokens_per_s"]:
                best_m = m
            if best_p is None or p["tokens_per_s"] > best_p["tokens_per_s"]:
                best_p = p
        rows.append({"config": name, "ranks": n, "meshtrain": best_m, "python": best_p,
                     "round_ratios": round_ratios, "flops_per_token": best_p["flops_per_token"]})
        print(f"  done {name}", file=sys.stderr, flush=True)
    peak_after = matmul_peak_gflops()
    peak = max(peak_before, peak_after)
    for r in rows:
        for impl in ("meshtrain", "python"):
            r[impl]["mfu"] = r[impl]["tokens_per_s"] * r["flops_per_token"] / (peak * 1e9)
        r["ratio"] = r["meshtrain"]["tokens_per_s"] / r["python"]["tokens_per_s"]
    result = {"bench": "trainer", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "torch": torch.__version__, "cores": len(os.sched_getaffinity(0)),
              "load_average_start": load_start, "load_average": os.getloadavg(), "matmul_peak_gflops": {"before": peak_before, "after": peak_after},
              "settings": {k: getattr(a, k) for k in ("model", "steps", "skip", "seq_len", "global_batch",
                                                       "micro_batch", "rounds")},
              "rows": rows}
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"CPU fp32 matmul peak (1024^3, {result['cores']} cores): {peak_before:.1f} GFLOP/s before, "
          f"{peak_after:.1f} after; MFU uses {peak:.1f}")
    print(f"model {a.model}, seq_len {a.seq_len}, global batch {a.global_batch}, micro batch {a.micro_batch}")
    print("ratio: best round of each side; per round: the two runs of each round (adjacent in time)")
    print(f"{'config':<8} {'meshtrain tok/s':>16} {'python tok/s':>13} {'ratio':>6} {'mesh MFU':>9} {'py MFU':>7}"
          f"  {'per round: min':>14} {'median':>6} {'max':>5}")
    for r in rows:
        m, p, rr = r["meshtrain"], r["python"], r["round_ratios"]
        print(f"{r['config']:<8} {m['tokens_per_s']:>16.0f} {p['tokens_per_s']:>13.0f} {r['ratio']:>6.2f} "
              f"{m['mfu']:>9.1%} {p['mfu']:>7.1%}  {min(rr):>14.2f} {median(rr):>6.2f} {max(rr):>5.2f}")
    print(f"results: {a.out}")


if __name__ == "__main__":
    main()

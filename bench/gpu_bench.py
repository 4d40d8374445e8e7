#!/usr/bin/env python3
"""meshtrain on one CUDA GPU: correctness against the CPU and transformers, speed and memory
against PyTorch (bench/gpu.sh runs this on the GPU machine, after building meshtrain there).

Stages, in this order (each is written to the JSON as soon as it ends, so that a run cut short
keeps what it measured; --budget skips the stages that would not fit):
  peak      the GPU's measured matmul peak: 8192^3 products, bf16 and fp32 (TF32 off and on)
  fp32      `small`, 10 steps, --device cuda against --device cpu: the losses, step by step
  bf16      the same run in bf16 against the fp32 CUDA run
  hf        a random Llama checkpoint written by transformers: meshtrain's step-0 loss on CUDA
            against transformers' CUDA loss on the same tokens (tests/trainer/hf_reference.py)
  speed     Llama-3.2-1B-shaped (random weights), bf16, seq 2048 and 8192, activation
            checkpointing off and on: meshtrain, the eager FSDP2 reference
            (bench/reference/llama_ref.py) and the same reference with torch.compile; tokens/s,
            MFU against the bf16 peak above, and the peak memory allocated / reserved per step
  profile   steps 2 and 3 of the first speed configuration, meshtrain (MESHTRAIN_PROFILE) and the
            eager reference (torch.profiler): GPU time by kind of kernel (bench/profile_summary.py)

Usage: gpu_bench.py --meshtrain BIN --out FILE [--budget SECONDS] [--stages peak,fp32,...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "reference"))
sys.path.insert(0, HERE)

import torch  # noqa: E402

CORPUS = os.path.join(ROOT, "resources", "data", "kjv.bin")
LLAMA_1B = os.path.join(ROOT, "resources", "models", "llama-3.2-1b.json")

# Tolerances, stated before measuring (docs/trainer.md, "On a GPU"):
# fp32: the 1e-4 relative per step (same maths, other kernels and summation orders).
FP32_RTOL = 1e-4
# bf16 against fp32: bf16 keeps 8 significant bits, so one rounding is off by up to 2^-9 = 0.2 %
# relative; a step's loss goes through ~2 L + 2 roundings of activations on its way (every block's
# two matmul outputs and the logits), errors that partly cancel in the mean over thousands of
# tokens; 10 steps of AdamW from the same start then drift apart slowly. 1 % is five single
# roundings: a bf16 bug (a wrong cast, an fp32 master lost) moves the loss far more than that.
BF16_RTOL = 1e-2
# transformers' loss: fp32 on both sides, as the CPU test (tests/trainer/hf_load_test.cpp).
HF_RTOL = 1e-5


def log(*a):
    print("gpu_bench:", *a, flush=True)


class Results:
    def __init__(self, path):
        self.path = path
        self.data = {"stages": {}, "skipped": []}

    def put(self, key, value):
        self.data["stages"][key] = value
        self.save()

    def save(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        with open(self.path + ".tmp", "w") as f:
            json.dump(self.data, f, indent=1)
        os.replace(self.path + ".tmp", self.path)


def environment():
    env = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "device_name": torch.cuda.get_device_name(0),
           "multiprocessors": torch.cuda.get_device_properties(0).multi_processor_count,
           "memory_bytes": torch.cuda.get_device_properties(0).total_memory}
    try:
        env["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        env["nvidia_smi"] = f"not run: {e}"
    return env


def matmul_tflops(dtype, tf32=False, n=8192, warmup=3, iters=10):
    """Mean TFLOP/s of `iters` n^3 products after `warmup` (2 n^3 FLOPs each), timed with events."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    for _ in range(warmup):
        a @ b
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        a @ b
    stop.record()
    torch.cuda.synchronize()
    torch.backends.cuda.matmul.allow_tf32 = False
    seconds = start.elapsed_time(stop) / 1e3
    del a, b
    torch.cuda.empty_cache()  # the runs that follow are other processes
    return 2 * n ** 3 * iters / seconds / 1e12


def stage_peak():
    return {"bf16_tflops": matmul_tflops(torch.bfloat16), "fp32_tflops": matmul_tflops(torch.float32),
            "tf32_tflops": matmul_tflops(torch.float32, tf32=True)}


def run_meshtrain(bin_path, run_dir, args, timeout, env=None):
    """Runs meshtrain; returns (step records of rank 0, rank 0's log text). Raises on failure."""
    os.makedirs(run_dir, exist_ok=True)
    cmd = [bin_path, "--run-dir", run_dir] + args
    t0 = time.time()
    # Not the reference's torchrun variables (set in this process once it ran): meshtrain would
    # take them for its own launch and meet the reference's store on its port.
    launch = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    base = {k: v for k, v in os.environ.items() if k not in launch}
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(base, **(env or {})))
    log_path = os.path.join(run_dir, "rank0.log")
    rank_log = open(log_path).read() if os.path.exists(log_path) else ""
    if p.returncode != 0:
        raise RuntimeError(f"meshtrain exited {p.returncode}: {' '.join(cmd)}\n{p.stderr[-3000:]}\n{rank_log[-3000:]}")
    steps = []
    with open(os.path.join(run_dir, "metrics-rank0.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "step":
                steps.append(rec)
    log(f"meshtrain {' '.join(args)}: {len(steps)} steps in {time.time() - t0:.1f} s")
    return steps, rank_log


def rel_diffs(a, b):
    return [abs(x - y) / abs(y) for x, y in zip(a, b)]


def small_args(device, precision):
    return ["--model", "small", "--steps", "10", "--seq-len", "256", "--global-batch", "8", "--micro-batch", "1",
            "--device", device, "--precision", precision, "--peak-tflops", "1"]


def stage_fp32(bin_path, work):
    cpu, _ = run_meshtrain(bin_path, os.path.join(work, "fp32-cpu"), small_args("cpu", "fp32"), 300)
    gpu, _ = run_meshtrain(bin_path, os.path.join(work, "fp32-cuda"), small_args("cuda", "fp32"), 300)
    lc, lg = [s["loss"] for s in cpu], [s["loss"] for s in gpu]
    worst = max(rel_diffs(lg, lc))
    return {"cpu_losses": lc, "cuda_losses": lg, "max_rel_diff": worst, "tolerance": FP32_RTOL,
            "ok": len(lc) == len(lg) == 10 and worst <= FP32_RTOL}


def stage_bf16(bin_path, work, fp32):
    bf, _ = run_meshtrain(bin_path, os.path.join(work, "bf16-cuda"), small_args("cuda", "bf16"), 300)
    lb = [s["loss"] for s in bf]
    ref = fp32["cuda_losses"]
    worst = max(rel_diffs(lb, ref))
    return {"bf16_losses": lb, "fp32_cuda_losses": ref, "max_rel_diff": worst, "tolerance": BF16_RTOL,
            "ok": len(lb) == 10 and worst <= BF16_RTOL}


def stage_hf(bin_path, work):
    d = os.path.join(work, "hf")
    ref = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "trainer", "hf_reference.py"), d, "llama3",
                          "--tied", "--seq-len", "32", "--batch", "4", "--device", "cuda"],
                         capture_output=True, text=True, timeout=300)
    if ref.returncode != 0:
        raise RuntimeError("hf_reference.py: " + ref.stderr[-3000:])
    want = float(ref.stdout.strip().splitlines()[-1])
    steps, _ = run_meshtrain(bin_path, os.path.join(d, "run"),
                             ["--model", os.path.join(d, "model"), "--data", os.path.join(d, "tokens.bin"),
                              "--steps", "1", "--seq-len", "32", "--global-batch", "4", "--micro-batch", "1",
                              "--device", "cuda", "--peak-tflops", "1"], 300)
    got = steps[0]["loss"]
    diff = abs(got - want) / want
    return {"transformers_loss": want, "meshtrain_loss": got, "rel_diff": diff, "tolerance": HF_RTOL,
            "ok": diff <= HF_RTOL}


# The speed configurations: 16,384 tokens a step either way (two micro-batches of 8,192 tokens).
SPEED_CONFIGS = [
    {"seq_len": 2048, "global_batch": 8, "micro_batch": 4, "ac": "none"},
    {"seq_len": 2048, "global_batch": 8, "micro_batch": 4, "ac": "full"},
    {"seq_len": 8192, "global_batch": 2, "micro_batch": 1, "ac": "none"},
    {"seq_len": 8192, "global_batch": 2, "micro_batch": 1, "ac": "full"},
]


def config_name(c):
    return f"seq{c['seq_len']}-ac{c['ac']}"


def meshtrain_speed_args(c, steps, peak):
    return ["--model", LLAMA_1B, "--steps", str(steps), "--seq-len", str(c["seq_len"]),
            "--global-batch", str(c["global_batch"]), "--micro-batch", str(c["micro_batch"]),
            "--activation-checkpointing", c["ac"], "--precision", "bf16", "--device", "cuda",
            "--peak-tflops", repr(peak)]


def speed_meshtrain(bin_path, work, c, steps, skip, peak):
    run_dir = os.path.join(work, "speed-" + config_name(c))
    recs, rank_log = run_meshtrain(bin_path, run_dir, meshtrain_speed_args(c, steps, peak), 400)
    timed = recs[skip:]
    step_s = sum(r["step_s"] for r in timed) / len(timed)
    tokens = timed[0]["tokens"]
    reserved = [int(m) for m in re.findall(r"reserved peak (\d+) B", rank_log)][skip:]
    return {"step_s": step_s, "tokens_per_s": tokens / step_s,
            "mfu": sum(r["mfu"] for r in timed) / len(timed),
            "mem_peak_allocated": max(r["mem_peak_bytes"] for r in timed),
            "mem_peak_reserved": max(reserved) if reserved else None,
            "losses": [r["loss"] for r in recs]}


def reference_env():
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": os.environ.get("MASTER_PORT", "29533")})


def reference_args(c, steps, skip):
    return ["--mode", "fsdp", "--config", LLAMA_1B, "--data", CORPUS, "--steps", str(steps), "--skip", str(skip),
            "--seq-len", str(c["seq_len"]), "--global-batch", str(c["global_batch"]),
            "--micro-batch", str(c["micro_batch"]), "--device", "cuda", "--precision", "bf16", "--ac", c["ac"]]


def stage_profile(bin_path, work, c, peak):
    """Steps 2 and 3 of configuration c under the profiler, meshtrain and the eager reference."""
    import llama_ref
    import profile_summary
    out = {"config": config_name(c)}
    prefix = os.path.join(work, "profile-meshtrain")
    run_meshtrain(bin_path, os.path.join(work, "profile-run"), meshtrain_speed_args(c, 4, peak), 400,
                  env={"MESHTRAIN_PROFILE": prefix})
    out["meshtrain"] = {f"step{s}": profile_summary.summarize(f"{prefix}.step{s}.rank0") for s in (2, 3)}
    reference_env()
    trace = os.path.join(work, "profile-eager.json")
    llama_ref.run(llama_ref.parse_args(reference_args(c, 4, 2) + ["--profile", trace]))
    out["eager"] = {"steps2-3": profile_summary.summarize(trace)}
    return out


def speed_reference(c, steps, skip, peak, compiled):
    import llama_ref
    reference_env()
    argv = reference_args(c, steps, skip)
    if compiled:
        argv.append("--compile")
    t0 = time.time()
    out = llama_ref.run(llama_ref.parse_args(argv))
    log(f"reference {'compiled' if compiled else 'eager'} {config_name(c)}: {time.time() - t0:.1f} s")
    tflops = out["flops_per_token"] * out["tokens_per_s"] / 1e12
    return {"step_s": out["step_s"], "tokens_per_s": out["tokens_per_s"], "mfu": tflops / peak,
            "mem_peak_allocated": out.get("max_memory_allocated"), "mem_peak_reserved": out.get("max_memory_reserved"),
            "losses": out["losses"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshtrain", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=1e9, help="seconds; stages that would not fit are skipped")
    ap.add_argument("--stages", default="peak,fp32,bf16,hf,speed,profile")
    ap.add_argument("--steps", type=int, default=7, help="steps of each speed run")
    ap.add_argument("--skip", type=int, default=3, help="first steps left out of the speed figures")
    ap.add_argument("--impls", default="meshtrain,eager,compiled")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_bench: no CUDA device visible to torch")
    start = time.time()
    left = lambda: a.budget - (time.time() - start)  # noqa: E731
    res = Results(a.out)
    res.data["environment"] = environment()
    res.data["command"] = " ".join(sys.argv)
    res.save()
    log("environment:", json.dumps(res.data["environment"]))
    work = tempfile.mkdtemp(prefix="gpu-bench-")
    stages = a.stages.split(",")
    # Rough costs on an H100/H200 (seconds), to skip what cannot finish inside the budget.
    cost = {"peak": 10, "fp32": 40, "bf16": 20, "hf": 40, "profile": 45}

    def attempt(name, fn):
        if name not in stages:
            return None
        if left() < cost.get(name, 0):
            res.data["skipped"].append(f"{name}: {left():.0f} s left of the budget")
            return None
        try:
            t0 = time.time()
            out = fn()
            out["seconds"] = round(time.time() - t0, 1)
            res.put(name, out)
            log(name, json.dumps(out)[:400])
            return out
        except Exception as e:  # a failing stage is a result too: recorded, and the others go on
            res.put(name, {"error": str(e)[-4000:]})
            log(name, "FAILED:", str(e)[-2000:])
            return None

    peak = attempt("peak", stage_peak)
    fp32 = attempt("fp32", lambda: stage_fp32(a.meshtrain, work))
    if fp32 and "cuda_losses" in fp32:
        attempt("bf16", lambda: stage_bf16(a.meshtrain, work, fp32))
    attempt("hf", lambda: stage_hf(a.meshtrain, work))
    if "speed" in stages:
        bf16_peak = peak["bf16_tflops"] if peak else matmul_tflops(torch.bfloat16)
        impls = a.impls.split(",")
        speed = {"model": "llama-3.2-1b (random weights)", "precision": "bf16", "steps": a.steps,
                 "skip": a.skip, "peak_tflops": bf16_peak, "runs": {}}
        # Configuration by configuration, the implementations one after the other: a budget
        # that runs out leaves whole side-by-side rows (the committed H200 runs went
        # implementation by implementation, and the last eager run did not fit).
        for c in SPEED_CONFIGS:
            for impl in impls:
                key = f"{impl}/{config_name(c)}"
                need = 60 if impl == "compiled" else 25
                if left() < need:
                    res.data["skipped"].append(f"speed {key}: {left():.0f} s left of the budget")
                    continue
                try:
                    if impl == "meshtrain":
                        r = speed_meshtrain(a.meshtrain, work, c, a.steps, a.skip, bf16_peak)
                    else:
                        r = speed_reference(c, a.steps, a.skip, bf16_peak, impl == "compiled")
                    r.update(c)
                except Exception as e:
                    r = {"error": str(e)[-3000:]}
                    torch.cuda.empty_cache()
                speed["runs"][key] = r
                res.put("speed", speed)
                log("speed", key, json.dumps({k: v for k, v in r.items() if k != "losses"})[:400])
    if "profile" in stages:
        attempt("profile", lambda: stage_profile(a.meshtrain, work, SPEED_CONFIGS[0],
                                                 peak["bf16_tflops"] if peak else matmul_tflops(torch.bfloat16)))
    res.data["seconds"] = round(time.time() - start, 1)
    res.save()
    print_table(res.data)


def print_table(d):
    s = d["stages"]
    print(f"\n{d['environment']['device_name']}  torch {d['environment']['torch']}")
    if "peak" in s and "bf16_tflops" in s["peak"]:
        print(f"matmul peak: bf16 {s['peak']['bf16_tflops']:.0f}, fp32 {s['peak']['fp32_tflops']:.1f}, "
              f"tf32 {s['peak']['tf32_tflops']:.0f} TFLOP/s")
    for k in ("fp32", "bf16", "hf"):
        if k in s:
            v = s[k]
            if "error" in v:
                print(f"{k}: FAILED")
            else:
                diff = v.get("max_rel_diff", v.get("rel_diff"))
                print(f"{k}: rel diff {diff:.2e} (tolerance {v['tolerance']:.0e}) {'ok' if v['ok'] else 'MISSED'}")
    if "speed" in s:
        print(f"{'run':<28} {'tokens/s':>10} {'MFU':>6} {'alloc GiB':>10} {'reserved GiB':>13}")
        for key, r in s["speed"]["runs"].items():
            if "error" in r:
                print(f"{key:<28} FAILED")
                continue
            res = r["mem_peak_reserved"]
            print(f"{key:<28} {r['tokens_per_s']:>10.0f} {r['mfu']:>6.1%} {r['mem_peak_allocated'] / 2**30:>10.2f} "
                  f"{(res or 0) / 2**30:>13.2f}")
    if "profile" in s and "error" not in s["profile"]:
        import profile_summary
        for who, steps in s["profile"].items():
            if not isinstance(steps, dict):  # "config", "seconds"
                continue
            for step, summ in steps.items():
                profile_summary.print_summary(f"profile {who} {s['profile']['config']} {step}", summ)
    for line in d.get("skipped", []):
        print("skipped:", line)


if __name__ == "__main__":
    main()

"""One mixture-of-experts step on 4 CPU ranks: ep 4 against ep 1 x dp_shard 4 (bench/moe_step.sh).

The model is a Qwen3-MoE config.json written here (random weights, every layer sparse, top-2 of
`--experts`), trained `--steps` steps on each shape. Per shape, over the steps after the first
two (medians of rank 0's step records): the step time, the experts' dispatch/combine all-to-alls
(comm_s.ep), the other collectives (FSDP's gathers and reduce-scatters, efsdp's included), and
the experts' grouped GEMMs in forward, summed from the "meshwork::experts" scopes of the
CPU profiler trace of step 3 (MESHTRAIN_PROFILE; their backward costs about twice as much and
is inside "rest of compute"). Under ep 4 each rank holds 1/4 of the experts and computes every
row routed to them; under dp_shard 4 each rank gathers all experts and computes its own rows.

On a machine with fewer cores than ranks the ranks share cores, so times are what this machine
gives, not a dedicated device's.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile

SHAPES = [("ep 4 x dp_shard 4", ["--dp-shard", "4", "--ep", "4"]),
          ("ep 1 x dp_shard 4", ["--dp-shard", "4"])]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step_records(path):
    out = []
    with open(path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("type") == "step":
                out.append(j)
    return out


def expert_gemm_seconds(trace):
    with open(trace) as f:
        t = json.load(f)
    events = t["traceEvents"] if isinstance(t, dict) else t
    return sum(e.get("dur", 0) for e in events if e.get("name") == "meshwork::experts") / 1e6


def config(args):
    return {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": args.hidden,
            "intermediate_size": 2 * args.moe_intermediate, "moe_intermediate_size": args.moe_intermediate,
            "num_hidden_layers": args.layers, "num_attention_heads": 8, "num_key_value_heads": 4,
            "head_dim": args.hidden // 8, "num_experts": args.experts, "num_experts_per_tok": 2,
            "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [], "vocab_size": 1024,
            "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
            "tie_word_embeddings": False, "router_aux_loss_coef": 0.001, "output_router_logits": False}


def run(args, model, flags):
    run_dir = tempfile.mkdtemp(prefix="moe-step-bench-")
    cmd = [args.meshtrain, "--model", model, "--steps", str(args.steps), "--seq-len", str(args.seq_len),
           "--global-batch", "4", "--micro-batch", "1", "--nproc-per-node", "4", "--peak-tflops", "1",
           "--run-dir", run_dir, "--master-port", str(free_port())] + flags
    env = dict(os.environ, MESHTRAIN_PROFILE=os.path.join(run_dir, "trace"))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"moe step bench: {' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    steps = [s for s in step_records(os.path.join(run_dir, "metrics-rank0.jsonl")) if s["step"] >= 2]
    # The profiled steps (2 and 3) run slower: the step times come from the others when there are.
    timed = [s for s in steps if s["step"] > 3] or steps
    med = lambda f: statistics.median(f(s) for s in timed)
    step_s = med(lambda s: s["step_s"])
    ep_s = med(lambda s: s["comm_s"].get("ep", 0.0))
    other_s = med(lambda s: sum(v for k, v in s["comm_s"].items() if k != "ep"))
    gemm_s = expert_gemm_seconds(os.path.join(run_dir, "trace.step3.rank0"))
    shutil.rmtree(run_dir, ignore_errors=True)
    return {"step_s": step_s, "all_to_all_s": ep_s, "other_comm_s": other_s, "expert_gemm_fwd_s": gemm_s,
            "rest_compute_s": max(0.0, step_s - ep_s - other_s - gemm_s),
            "mem_peak_bytes": steps[-1]["mem_peak_bytes"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--meshtrain", required=True)
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--moe-intermediate", type=int, default=512)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "moe_step.json"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="moe-step-model-")
    model = os.path.join(work, "config.json")
    with open(model, "w") as f:
        json.dump(config(args), f)
    rows = []
    for name, flags in SHAPES:
        r = run(args, model, flags)
        r["shape"] = name
        rows.append(r)
    print(f"one MoE step, 4 CPU ranks on {os.cpu_count()} cores: {args.experts} experts top-2, hidden {args.hidden}, "
          f"expert intermediate {args.moe_intermediate}, {args.layers} layers, seq {args.seq_len}, 1 sequence per rank")
    head = f"{'shape':<20}{'step s':>9}{'all-to-all s':>14}{'expert GEMM fwd s':>19}{'other comm s':>14}{'rest s':>9}{'peak MiB':>10}"
    print(head)
    for r in rows:
        print(f"{r['shape']:<20}{r['step_s']:>9.4f}{r['all_to_all_s']:>14.4f}{r['expert_gemm_fwd_s']:>19.4f}"
              f"{r['other_comm_s']:>14.4f}{r['rest_compute_s']:>9.4f}{r['mem_peak_bytes'] / 2**20:>10.1f}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        # Paths are kept as given relative to the checkout, so a result names no machine's folders.
        shown = {k: (os.path.relpath(v) if isinstance(v, str) and os.path.isabs(v) else v) for k, v in vars(args).items()}
        json.dump({"config": shown, "cores": os.cpu_count(), "rows": rows}, f, indent=2)
    print(f"written: {args.out}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

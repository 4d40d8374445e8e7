"""Pipeline stages (pp) measured against core's predictions (bench/pipeline.sh).

For each (pp, schedule) meshtrain trains `--steps` steps of the `small` preset cut to `--layers`
decoder layers (vocabulary 256: the head costs about nothing, so the cut is balanced and the
closed form applies) on pp ranks of this machine. Measured per stage rank and step: the time it
waited in pp's receives and sends over the step time (the stage's idle share; steps after the
first two, median). The measured bubble is their mean over the stages, core's is
sum(idle) / (pp * step) of its simulated timeline (and the closed form (pp - 1) / (V M + pp - 1)).
Memory: every stage's measured peak (the CPU allocator's, meshtrain's step records) next to
core's estimate for that stage, with the relative error (target: within 10 %).

On a machine with fewer cores than ranks the stages share cores: a waiting stage lends its core
to the others, so the measured bubble is then below the dedicated-device figure (the table says
how many ranks each core runs).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile

CONFIGS = [(2, "gpipe", 1), (2, "1f1b", 1), (2, "interleaved-1f1b", 2),
           (4, "gpipe", 1), (4, "1f1b", 1), (4, "interleaved-1f1b", 2)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def records(path, kind):
    out = []
    with open(path) as f:
        for line in f:
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("type") == kind:
                out.append(j)
    return out


def run(args, model_path, pp, schedule, virtual):
    run_dir = tempfile.mkdtemp(prefix="pipeline-bench-")
    cmd = [args.meshtrain, "--model", model_path, "--steps", str(args.steps), "--seq-len", str(args.seq_len),
           "--global-batch", str(args.global_batch), "--micro-batch", str(args.micro_batch),
           "--nproc-per-node", str(pp), "--pp", str(pp), "--pp-schedule", schedule,
           "--pp-virtual-stages", str(virtual), "--run-dir", run_dir, "--master-port", str(free_port())]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"pipeline bench: {' '.join(cmd)} failed ({done.returncode}): {done.stderr[-2000:]}")
    idle, peaks = [], []
    for r in range(pp):
        steps = records(os.path.join(run_dir, f"metrics-rank{r}.jsonl"), "step")[2:]
        idle.append(statistics.median(s["comm_s"]["pp"] / s["step_s"] for s in steps))
        peaks.append(max(s["mem_peak_bytes"] for s in steps))
    step_s = statistics.median(s["step_s"] for s in records(os.path.join(run_dir, "metrics-rank0.jsonl"), "step")[2:])
    config = records(os.path.join(run_dir, "metrics-rank0.jsonl"), "start")[0]["config"]
    config_path = os.path.join(run_dir, "config-ran.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    est = subprocess.run([args.estimator, config_path], capture_output=True, text=True)
    if est.returncode != 0:
        sys.exit(f"pipeline bench: pipeline_estimate failed: {est.stderr}")
    return idle, peaks, step_s, json.loads(est.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshtrain", required=True)
    ap.add_argument("--estimator", required=True)
    ap.add_argument("--resources", required=True)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "pipeline.json"))
    args = ap.parse_args()

    with open(os.path.join(args.resources, "models", "small.json")) as f:
        model = json.load(f)
    model["num_hidden_layers"] = args.layers
    model["tie_word_embeddings"] = False  # core refuses pp with tied embeddings
    model["_source"] = f"small with {args.layers} decoder layers, untied head (bench/pipeline_bench.py)"
    model_dir = tempfile.mkdtemp(prefix="pipeline-bench-model-")
    model_path = os.path.join(model_dir, "config.json")
    with open(model_path, "w") as f:
        json.dump(model, f)

    cores = os.cpu_count() or 1
    rows = []
    print(f"{'pp':>3} {'schedule':<17} {'V':>2} {'M':>3} {'ranks/core':>10} {'step s':>7} "
          f"{'bubble meas':>11} {'sim':>6} {'closed':>6} {'meas/sim':>8}   memory per stage: measured MB / estimate MB (error)")
    for pp, schedule, virtual in CONFIGS:
        idle, peaks, step_s, est = run(args, model_path, pp, schedule, virtual)
        measured = sum(idle) / pp
        stages = []
        for st, peak in zip(est["stages"], peaks):
            err = (peak - st["memory_bytes"]) / st["memory_bytes"]
            stages.append({"stage": st["stage"], "layers": st["layers"], "measured_bytes": peak,
                           "estimate_bytes": st["memory_bytes"], "error": err, "idle_share": idle[st["stage"]]})
        row = {"pp": pp, "schedule": schedule, "virtual_stages": virtual, "micro_batches": est["micro_batches"],
               "ranks_per_core": pp / cores, "step_s": step_s, "bubble_measured": measured,
               "bubble_simulated": est["bubble_simulated"], "bubble_closed_form": est["bubble_closed_form"],
               "stages": stages}
        rows.append(row)
        mem = "  ".join(f"{s['measured_bytes'] / 1e6:.1f}/{s['estimate_bytes'] / 1e6:.1f} ({s['error']:+.0%})" for s in stages)
        print(f"{pp:>3} {schedule:<17} {virtual:>2} {est['micro_batches']:>3} {pp / cores:>10.1f} {step_s:>7.3f} "
              f"{measured:>11.3f} {est['bubble_simulated']:>6.3f} {est['bubble_closed_form']:>6.3f} "
              f"{measured / est['bubble_simulated']:>8.2f}   {mem}", flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"model": model["_source"], "seq_len": args.seq_len, "global_batch": args.global_batch,
                   "micro_batch": args.micro_batch, "cores": cores, "rows": rows}, f, indent=1)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()

"""Every valid mesh shape of one machine's ranks, measured against core's estimates.

First `meshtrain calibrate` runs on the same ranks (matmuls of the model's shapes, Gloo
collectives at several sizes, and short training steps of the model cut to 4 layers on every
split of the ranks: core/calibration.h); core's planner then predicts every shape from that
calibration alone (bench/shapes_estimate --calibration). For each shape
meshtrain trains a few steps; the tables show predicted vs measured step time, compute and
per-axis communication with the relative error (target: within 15 %), tokens/s, the measured
peak memory per rank next to core's estimate, Spearman's rho between predicted and measured
tokens/s and whether the planner's first is the measured best.

Learning from runs: every measured run is imported into a run store (--db, default
build/bench-shapes.db). When that store already holds runs of this machine (an earlier run of
the bench), the prediction "from the fit alone" is made first, before anything is measured:
core's fit of the stored runs (core/run_fit.h) on the hardware defaults, no calibration
(bench/shapes_estimate --fit-db). Run the bench twice: the second run judges the fit of the
first's runs against fresh measurements.

Usage: bench/shapes.sh [--model small --seq-len 256 --global-batch 8 --micro-batch 1
                        --steps 10 --world 4 --rounds 2 --db PATH --out JSON]
                       [--nodes 2 --inter-node-rate 1gbit]
With --nodes N (root) the ranks run on N network namespaces (tests/cluster/cluster.sh), the
links between them rate-limited (tc tbf): e.g. --world 8 --nodes 2 --db build/bench-shapes-2nodes.db
--out bench/results/shapes-2nodes.json.

Beside the JSON it writes the calibration it measured (-calibration.json) and every rank's
calibration records (-calibration-records.jsonl.gz): bench/shapes_refit.py fits those anew with
the current core, so a change to the time model is judged against the same measurements.
"""
import argparse
import atexit
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import bench_common

AXES = ["dp_replicate", "dp_shard", "cp", "tp"]
# Axes a plan writes only when they are not 1 (core/planner.cpp's plan_to_json): expert
# parallelism (mixtures of experts) and pipeline stages.
OPTIONAL_AXES = ["ep", "pp"]
# Communication compared per axis: the mesh axes and the experts' all-to-all (comm_s.ep; 0 where
# a shape has no ep).
COMM_AXES = AXES + ["ep"]


def shape_key(shape):
    """r×s×c×t, with ep and pp appended when not 1 (an ep shape borrows its ranks from the others,
    so two shapes can share r×s×c×t)."""
    key = "x".join(str(shape[a]) for a in AXES)
    for a in OPTIONAL_AXES:
        if shape.get(a, 1) > 1:
            key += ":%s%d" % (a, shape[a])
    return key


def shape_flags(shape):
    flags = []
    for a in AXES + OPTIONAL_AXES:
        if a in shape:
            flags += ["--" + a.replace("_", "-"), str(shape[a])]
    return flags
# core/cpu_steal.h's kStealLimit, and trainer/calibrate.cpp's kStealRepeats.
STEAL_LIMIT = 0.02
STEAL_REPEATS = 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_jsonl(path):
    out = []
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


class Nodes:
    """Where meshtrain runs: this machine (one node), or --nodes N network namespaces made by
    tests/cluster/cluster.sh (each its own address; they share the filesystem, so every rank's
    metrics land in one run directory). Between namespaces the traffic crosses a veth pair
    whose rate is limited (tc tbf, --inter-node-rate): inter-node links slower than the loopback
    inside a node, as on a cluster."""

    def __init__(self, args):
        self.count = args.nodes
        self.per_node = args.world // args.nodes
        self.state = None
        self.namespaces, self.addresses = [], []
        if self.count == 1:
            return
        if args.world % args.nodes:
            raise SystemExit("--world %d: a multiple of --nodes %d" % (args.world, args.nodes))
        self.script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "cluster", "cluster.sh")
        self.state = tempfile.mkdtemp(prefix="shapes-cluster-")
        subprocess.run([self.script, "up", self.state, str(self.count)], check=True, capture_output=True, text=True)
        with open(os.path.join(self.state, "nodes")) as f:
            self.addresses = [line.strip() for line in f if line.strip()]
        for i in range(self.count):
            with open(os.path.join(self.state, "node%d" % i, "ns")) as f:
                self.namespaces.append(f.read().strip())
            # A token bucket (tbf; this kernel has no netem): the rate, bursts of 256 KiB.
            shape = ["ip", "netns", "exec", self.namespaces[i], "tc", "qdisc", "replace", "dev", "eth0", "root",
                     "tbf", "rate", args.inter_node_rate, "burst", "256kb", "latency", "50ms"]
            p = subprocess.run(shape, capture_output=True, text=True)
            if p.returncode != 0:
                self.close()
                raise SystemExit("tc tbf on node %d failed: %s" % (i, p.stderr.strip()))

    def close(self):
        if self.state:
            subprocess.run([self.script, "down", self.state], capture_output=True, text=True)
            self.state = None

    def refusal(self, cmd):
        """meshtrain's words when it refuses `cmd` on these ranks (`--check`: core's layout and
        what meshtrain runs, before any process starts); None when it accepts it."""
        p = subprocess.run(cmd + ["--check", "--nproc-per-node", str(self.per_node), "--nnodes", str(self.count)],
                           capture_output=True, text=True)
        if p.returncode == 0:
            return None
        return " ".join(line.strip() for line in p.stderr.strip().splitlines()) or "exit %d" % p.returncode

    def run(self, cmd, what):
        """meshtrain `cmd` (without placement flags) on every node; raises on a failure."""
        port = str(free_port())
        if self.count == 1:
            p = subprocess.run(cmd + ["--nproc-per-node", str(self.per_node), "--master-port", port],
                               capture_output=True, text=True)
            if p.returncode != 0:
                raise SystemExit("meshtrain failed for %s: %s" % (what, p.stderr[-2000:]))
            return
        procs = []
        for i, ns in enumerate(self.namespaces):
            # Gloo binds to the address of the hostname, which the namespaces share: each node's
            # own address instead, as `meshwork launch` gives it (remote/launch.cpp).
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, "env", "MESHWORK_GLOO_HOSTNAME=" + self.addresses[i]] + cmd +
                ["--nproc-per-node", str(self.per_node), "--nnodes", str(self.count), "--node-rank", str(i),
                 "--master-addr", self.addresses[0], "--master-port", port],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outs = [p.communicate() for p in procs]
        for i, p in enumerate(procs):
            if p.returncode != 0:
                raise SystemExit("meshtrain failed for %s on node %d: %s" % (what, i, outs[i][1][-2000:]))


def cpu_times():
    """(steal, total) jiffies of this machine (/proc/stat's cpu line): time the hypervisor gave
    this VM's CPUs to someone else. The namespace nodes share this kernel, so it covers them."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return fields[7], sum(fields[:8])


def steal_share(before, after):
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else 0.0


def middle_half(steps):
    """The steps a run's step time is measured on: the middle half by step time, each step whole
    (its compute and comm per axis still add up to it). The same statistic `meshtrain calibrate`
    takes of its split steps (trainer/calibrate.cpp): on a shared machine a step whose rank was
    descheduled runs several times slower, and a plain mean of a few steps carries it."""
    ordered = sorted(steps, key=lambda x: x["step_s"])
    lo = len(ordered) // 4
    return ordered[lo:len(ordered) - lo]


def shape_command(args, shape, run_dir):
    return [args.meshtrain, "--model", args.model, "--steps", str(args.steps), "--seq-len",
            str(args.seq_len), "--global-batch", str(args.global_batch), "--micro-batch",
            str(args.micro_batch), "--run-dir", run_dir] + shape_flags(shape)


def run_shape(args, shape):
    world = args.world
    run_dir = tempfile.mkdtemp(prefix="shapes-")
    cmd = shape_command(args, shape, run_dir)
    t0, cpu0 = time.time(), cpu_times()
    args.cluster.run(cmd, shape)
    wall, steal = time.time() - t0, steal_share(cpu0, cpu_times())
    steps, peaks, mem = [], [], []
    for r in range(world):
        recs = read_jsonl(os.path.join(run_dir, "metrics-rank%d.jsonl" % r))
        st = [x for x in recs if x.get("type") == "step"]
        peaks += [x["peak_tflops"] for x in recs if x.get("type") == "start"]
        # Peak tensor bytes of every step (the estimate covers every step; the first is left out
        # of the time only, as warm-up).
        mem.append(max(x["mem_peak_bytes"] for x in st))
        if r == 0:
            steps = st
    timed = middle_half(steps[1:] if len(steps) > 1 else steps)
    n = len(timed)
    step_s = sum(x["step_s"] for x in timed)
    tokens = sum(x["tokens"] for x in timed)
    dp = shape["dp_replicate"] * shape["dp_shard"]
    comm = {a: sum(x["comm_s"].get(a, 0.0) for x in timed) / step_s for a in COMM_AXES}
    mfu = sum(x["mfu"] for x in timed) / n
    achieved = sum(x["tflops"] for x in timed) / n  # model TFLOP/s of rank 0
    return {"tokens_per_s": tokens * dp / step_s, "comm_share": comm, "peak_bytes": max(mem),
            "step_s": step_s / n, "achieved_tflops": achieved, "compute_s": sum(x["compute_s"] for x in timed) / n,
            "comm_s": {a: sum(x["comm_s"].get(a, 0.0) for x in timed) / n for a in COMM_AXES},
            "all_steps_s": [x["step_s"] for x in steps], "steal": steal,
            "peak_bytes_per_rank": mem, "matmul_tflops": sum(peaks) / len(peaks), "mfu": mfu,
            "wall_s": wall, "run_dir": run_dir}


def mean_of(runs):
    """Several rounds of one shape: their mean, the step a run of the shape takes on this machine.
    The prediction is made from typical steps (the calibration's middle-half means), and a user
    runs a shape once: the fastest of the rounds would judge it against a lucky one (min of two
    samples sits about half a standard deviation low). Peak memory: the largest (equal in every
    round). The fastest round is kept beside it (fastest_step_s) for comparison."""
    n = len(runs)
    m = dict(runs[0])
    m["step_s"] = sum(r["step_s"] for r in runs) / n
    m["compute_s"] = sum(r["compute_s"] for r in runs) / n
    m["comm_s"] = {a: sum(r["comm_s"][a] for r in runs) / n for a in COMM_AXES}
    m["comm_share"] = {a: m["comm_s"][a] / m["step_s"] for a in COMM_AXES}
    # Tokens per step are the same in every round: tokens/s follows the mean step.
    m["tokens_per_s"] = runs[0]["tokens_per_s"] * runs[0]["step_s"] / m["step_s"]
    for k in ("achieved_tflops", "mfu", "matmul_tflops", "steal"):
        m[k] = sum(r[k] for r in runs) / n
    m["peak_bytes"] = max(r["peak_bytes"] for r in runs)
    m["fastest_step_s"] = min(r["step_s"] for r in runs)
    m["rounds_tokens_per_s"] = [r["tokens_per_s"] for r in runs]
    m["rounds_step_s"] = [r["step_s"] for r in runs]
    m["rounds_steal"] = [r["steal"] for r in runs]
    return m


def spearman(xs, ys):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for k, i in enumerate(order):
            r[i] = float(k)
        return r
    rx, ry = ranks(xs), ranks(ys)
    n = len(xs)
    d2 = sum((a - b) ** 2 for a, b in zip(rx, ry))
    return 1 - 6 * d2 / (n * (n * n - 1)) if n > 1 else 1.0


def estimate(args, flops=1e10, bw=1e9, lat=1e-4, efficiency=1.0, calibration=None, fit_db=None, routing_run=None):
    cmd = [args.estimator, "--model", args.model, "--world", str(args.world), "--nodes", str(args.nodes), "--seq-len",
           str(args.seq_len), "--micro-batch", str(args.micro_batch), "--global-batch",
           str(args.global_batch)]
    if calibration:
        cmd += ["--calibration", calibration]
    if routing_run:
        cmd += ["--routing-db", args.db, "--routing-run", str(routing_run)]
    if fit_db:
        cmd += ["--fit-db", fit_db]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            return None, p.stderr.strip()
        return json.loads(p.stdout), json.loads(p.stderr.strip().splitlines()[-1])
    if not calibration:
        cmd += ["--flops", repr(flops), "--efficiency", repr(efficiency), "--bandwidth", repr(bw),
                "--latency", repr(lat)]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def calibrate(args):
    """`meshtrain calibrate` on the bench's ranks: the fitted calibration (calibration.json that
    rank 0 writes when every rank's records are in its run directory) and how long it took."""
    run_dir = tempfile.mkdtemp(prefix="calibrate-")
    cmd = [args.meshtrain, "calibrate", "--model", args.model, "--seq-len", str(args.seq_len),
           "--global-batch", str(args.global_batch), "--micro-batch", str(args.micro_batch), "--run-dir", run_dir]
    t0, cpu0 = time.time(), cpu_times()
    args.cluster.run(cmd, "calibrate")
    seconds, steal = time.time() - t0, steal_share(cpu0, cpu_times())
    keep_calibration_records(run_dir, os.path.splitext(args.out)[0] + "-calibration-records.jsonl.gz")
    with open(os.path.join(run_dir, "calibration.json")) as f:
        return json.load(f), seconds, steal


def keep_calibration_records(run_dir, path):
    """Every rank's calibration records (matmuls, collectives, split steps; 10-35 KB
    compressed for 4-8 ranks), beside the bench's JSON: a later change to the fit is judged offline against the
    very measurements of this bench (`zcat PATH > DIR/metrics-rank0.jsonl`, then
    shapes_estimate --calibration-records DIR)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with gzip.open(path, "wt") as out:
        rank = 0
        while os.path.exists(os.path.join(run_dir, "metrics-rank%d.jsonl" % rank)):
            with open(os.path.join(run_dir, "metrics-rank%d.jsonl" % rank)) as f:
                for line in f:
                    if '"type":"calibration"' in line:
                        out.write(line if line.endswith("\n") else line + "\n")
            rank += 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshtrain", required=True)
    ap.add_argument("--estimator", required=True)
    ap.add_argument("--python", default=sys.executable)
    bench_common.add_run_args(ap, micro_batch=1, steps=10)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=1,
                    help="ranks on this many network-namespace nodes (tests/cluster/cluster.sh; root)")
    ap.add_argument("--inter-node-rate", default="1gbit", help="rate limit (tc tbf) between namespace nodes")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "shapes.json"))
    ap.add_argument("--meshwork", required=True)
    ap.add_argument("--db", required=True, help="run store the measured runs are imported into")
    args = ap.parse_args()
    args.cluster = Nodes(args)
    atexit.register(args.cluster.close)  # the namespaces go on every exit, failures included
    # Before anything is measured: the fit of the runs an earlier bench stored (none: first run).
    fitted_plan, fit = estimate(args, fit_db=args.db) if os.path.exists(args.db) else (None, "no store yet")
    if fitted_plan is None:
        print("no fit from stored runs (%s): run the bench again to judge one" % fit, file=sys.stderr)
    else:
        print("fitted to %d stored runs of cluster %s (median residual %.1f%%)"
              % (fit["runs"], fit["cluster"], 100 * fit["median_residual"]), file=sys.stderr)

    load0 = os.getloadavg()[0]
    cal, cal_s, cal_steal = calibrate(args)
    print("calibrated in %.1f s (load average %.1f, steal %.1f%%): cluster %s"
          % (cal_s, os.getloadavg()[0], 100 * cal_steal, cal["fingerprint_id"]), file=sys.stderr)
    # Shapes: whatever core accepts (the estimate with placeholder hardware just lists them) and
    # meshtrain runs: a shape meshtrain refuses (say ep > 1 before it runs expert parallelism) is
    # skipped with its words, and measured as soon as meshtrain accepts it.
    shapes, skipped = [], {}
    for s in estimate(args)["shapes"]:
        why = args.cluster.refusal(shape_command(args, s, tempfile.gettempdir()))
        if why is None:
            shapes.append(s)
        else:
            skipped[shape_key(s)] = why
            print("  skipped %s: %s" % (shape_key(s), why), file=sys.stderr)
    # Rounds alternate the shapes (a burst of load on the shared machine hits every shape alike).
    runs = {}
    # A mixture of experts: the routing the first shape without ep measured (its stored tokens per
    # expert, core/routing_imbalance.h) gives every ep shape's imbalance; no ep shape's own run.
    routing_run, routing_shape = None, None
    for rnd in range(args.rounds):
        for s in shapes:
            key = shape_key(s)
            # A run during which the hypervisor took more than STEAL_LIMIT of the CPUs is run again,
            # up to STEAL_REPEATS times (as `meshtrain calibrate` does with its split steps); every
            # run goes into the store, the fastest attempt of the round into the table.
            attempts = []
            while True:
                m = run_shape(args, s)
                attempts.append(m)
                imp = subprocess.run([args.meshwork, "runs", "import", m["run_dir"], "--db", args.db, "--name",
                                      "shapes %s round %d" % (key, rnd + 1)], capture_output=True, text=True)
                if imp.returncode != 0:
                    raise SystemExit("meshwork runs import failed: %s" % imp.stderr[-2000:])
                stored = re.search(r"(?:imported|updated) run (\d+)", imp.stdout)
                if routing_run is None and "ep" not in s and stored and any("ep" in x for x in shapes):
                    routing_run, routing_shape = int(stored.group(1)), key
                print("  round %d: %s %.0f tok/s, step %.0f ms in %.1f s, steal %.1f%%"
                      % (rnd + 1, key, m["tokens_per_s"], 1e3 * m["step_s"], m["wall_s"], 100 * m["steal"]),
                      file=sys.stderr)
                if m["steal"] <= STEAL_LIMIT or len(attempts) > STEAL_REPEATS:
                    break
            m = dict(min(attempts, key=lambda a: a["step_s"]), attempts=len(attempts))
            runs.setdefault(key, []).append(m)
    measured = {k: mean_of(v) for k, v in runs.items()}
    # Everything the prediction uses comes from the calibration as measured: its step efficiency
    # and its split steps' factors (core's Calibration::step_factors), nothing from the runs.
    efficiency = cal["step_efficiency"]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    # Beside its JSON (shapes.json -> shapes-calibration.json): a run with another --out (the
    # two-node bench) must not overwrite the default run's calibration.
    cal_path = os.path.splitext(args.out)[0] + "-calibration.json"
    with open(cal_path, "w") as f:
        json.dump(cal, f, indent=1)
    balanced = estimate(args, calibration=cal_path)
    plan = estimate(args, calibration=cal_path, routing_run=routing_run) if routing_run else balanced
    balanced_by_key = {shape_key(e): e for e in balanced["shapes"]}

    def rel(pred, meas):
        return (pred - meas) / meas if meas > 0 else 0.0

    fitted = {}
    if fitted_plan is not None:
        for i, est in enumerate(fitted_plan["shapes"]):
            fitted[shape_key(est)] = dict(est, rank=i + 1)
    rows = []
    for est in plan["shapes"]:
        key = shape_key(est)
        if key in skipped:
            continue
        m = measured[key]
        e = est["memory_bytes"]["total"]
        f = fitted.get(key)
        if f is not None:
            fit_row = {"fitted_step_s": f["step_time_s"], "fitted_step_error": rel(f["step_time_s"], m["step_s"]),
                       "fitted_compute_s": f["compute_s"], "fitted_comm_s": f["comm_s"],
                       "fitted_tokens_per_s": f["tokens_per_s"], "fitted_rank": f["rank"]}
        else:
            fit_row = {}
        b = balanced_by_key[key]
        if routing_run:
            fit_row = dict(fit_row, routing_imbalance=est.get("routing_imbalance"),
                           balanced_step_s=b["step_time_s"], balanced_step_error=rel(b["step_time_s"], m["step_s"]),
                           balanced_estimate_bytes=b["memory_bytes"]["total"],
                           balanced_memory_error=(b["memory_bytes"]["total"] - m["peak_bytes"]) / m["peak_bytes"])
        rows.append(dict(fit_row, **{"shape": key, "planner_rank": est["rank"], "tokens_per_s": m["tokens_per_s"],
                     "predicted_tokens_per_s": est["tokens_per_s"], "comm_share": m["comm_share"],
                     "step_s": m["step_s"], "predicted_step_s": est["step_time_s"],
                     "predicted_step_band": est.get("step_band", 0.0),
                     "rounds_step_s": m["rounds_step_s"], "rounds_steal": m["rounds_steal"],
                     "step_error": rel(est["step_time_s"], m["step_s"]),
                     "fastest_step_s": m["fastest_step_s"],
                     "step_error_fastest": rel(est["step_time_s"], m["fastest_step_s"]),
                     "compute_s": m["compute_s"], "predicted_compute_s": est["compute_s"],
                     "comm_s": m["comm_s"], "predicted_comm_s": {a: est["comm_s"].get(a, 0.0) for a in COMM_AXES},
                     "calibrated": est["calibrated"],
                     "peak_bytes": m["peak_bytes"], "peak_bytes_per_rank": m["peak_bytes_per_rank"],
                     "estimate_bytes": e, "estimate_groups": est["memory_bytes"],
                     "memory_error": (e - m["peak_bytes"]) / m["peak_bytes"]}))
    rows.sort(key=lambda r: -r["tokens_per_s"])
    rho = spearman([r["tokens_per_s"] for r in rows], [r["predicted_tokens_per_s"] for r in rows])
    best_measured = rows[0]["shape"]
    best_planned = min(rows, key=lambda r: r["planner_rank"])["shape"]
    load1 = os.getloadavg()[0]

    mib = 1 / 2**20
    ms = 1e3
    fp32 = [r for r in cal["matmul"] if r["precision"] == "fp32"]
    print("model %s, seq %d, global batch %d, micro batch %d, %d ranks on %d node(s)%s, %d steps (first not timed, the middle half of the rest by time)"
          % (args.model, args.seq_len, args.global_batch, args.micro_batch, args.world, args.nodes,
             " (between nodes: %s)" % args.inter_node_rate if args.nodes > 1 else "",
             args.steps))
    print("calibration %s: matmul fp32 %s GFLOP/s per rank (split 1/2/4...), step efficiency %.2f;"
          " load average %.1f at start, %.1f at end; measured: the mean of %d rounds"
          % (cal["fingerprint_id"], "/".join("%.1f" % (r["flops_per_s"] / 1e9) for r in sorted(fp32, key=lambda r: r["split"])),
             efficiency, load0, load1, args.rounds))
    for c in cal["collectives"]:
        print("  %s %-14s n=%d: %.0f us + bytes / %.0f MB/s" % (c["link"], c["op"], c["group_size"],
                                                             c["latency_s"] * 1e6, c["bytes_per_s"] / 1e6))
    for k, why in skipped.items():
        print("skipped %s (meshtrain refuses it): %s" % (k, why))
    print("| shape r×s×c×t | step ms meas / pred | error | rounds ms (spread) | compute ms meas / pred |"
          " comm ms dp_r / dp_s / cp / tp / ep, meas (pred) | tok/s meas / pred | rank meas / plan |")
    print("|---|---:|---:|---|---:|---|---:|---:|")
    for i, r in enumerate(rows):
        r["measured_rank"] = i + 1
        # How far apart the rounds of the same shape were: the measurement's own noise, which the
        # prediction cannot be judged more finely than.
        r["rounds_spread"] = max(r["rounds_step_s"]) / min(r["rounds_step_s"]) - 1
        comm = " / ".join("%.0f (%.0f)" % (r["comm_s"][a] * ms, r["predicted_comm_s"][a] * ms) for a in COMM_AXES)
        print("| %s | %.0f / %.0f | %+.0f%% | %s (%.0f%%) | %.0f / %.0f | %s | %.0f / %.0f | %d / %d |" % (
            r["shape"], r["step_s"] * ms, r["predicted_step_s"] * ms, 100 * r["step_error"],
            " / ".join("%.0f" % (t * ms) for t in r["rounds_step_s"]), 100 * r["rounds_spread"],
            r["compute_s"] * ms, r["predicted_compute_s"] * ms, comm, r["tokens_per_s"],
            r["predicted_tokens_per_s"], i + 1, r["planner_rank"]))
    print("| shape | peak MiB/rank | estimate MiB | error |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print("| %s | %.1f | %.1f | %+.1f%% |" % (r["shape"], r["peak_bytes"] * mib, r["estimate_bytes"] * mib,
                                                 100 * r["memory_error"]))
    worst = max(abs(r["memory_error"]) for r in rows)
    worst_step = max(abs(r["step_error"]) for r in rows)
    within = sum(1 for r in rows if abs(r["step_error"]) <= 0.15)
    within_fastest = sum(1 for r in rows if abs(r["step_error_fastest"]) <= 0.15)
    worst_fastest = max(abs(r["step_error_fastest"]) for r in rows)
    # The band the planner shows beside each prediction (core's TimeEstimate::step_band: the
    # drift and spread the calibration measured of this machine): does it hold what it claims?
    band = max(r["predicted_step_band"] for r in rows)
    within_band = sum(1 for r in rows if r["predicted_step_band"] > 0 and abs(r["step_error"]) <= r["predicted_step_band"])
    spreads = sorted(r["rounds_spread"] for r in rows)
    print("rounds of one shape apart (slowest / fastest - 1): median %.0f%%, worst %.0f%% (%s); steal during"
          " the calibration %.1f%%" % (100 * spreads[len(spreads) // 2], 100 * spreads[-1],
                                       max(rows, key=lambda r: r["rounds_spread"])["shape"], 100 * cal_steal))
    print("step time: worst |error| %.0f%%, %d of %d shapes within 15%% (target: all); Spearman rho %.2f"
          " (target >= 0.95); best measured %s, planner's first %s (%s); memory: worst |error| %.1f%%"
          % (100 * worst_step, within, len(rows), rho, best_measured, best_planned,
             "same" if best_measured == best_planned else "DIFFERENT", 100 * worst))
    print("against each shape's fastest round instead of the mean (as before commit 6662c12): worst |error| %.0f%%,"
          " %d of %d within 15%%" % (100 * worst_fastest, within_fastest, len(rows)))
    memory_within = sum(1 for r in rows if abs(r["memory_error"]) <= 0.10)
    routing_summary = None
    if routing_run:
        gammas = {}
        for r in rows:
            if r.get("routing_imbalance"):
                gammas[int(r["shape"].split(":ep")[1])] = r["routing_imbalance"]
        b_within = sum(1 for r in rows if abs(r["balanced_step_error"]) <= 0.15)
        b_memory = sum(1 for r in rows if abs(r["balanced_memory_error"]) <= 0.10)
        print("routing: as run %d (%s, no ep) measured it; busiest ep rank over the mean, step / memory: %s"
              % (routing_run, routing_shape, ", ".join("ep %d %.2f / %.2f" % (ep, g["step"], g["memory"])
                                                       for ep, g in sorted(gammas.items()))))
        print("with it: step %d of %d within 15%%, memory %d of %d within 10%%; taken as balanced (gamma 1):"
              " step %d of %d, memory %d of %d" % (within, len(rows), memory_within, len(rows), b_within, len(rows),
                                                   b_memory, len(rows)))
        routing_summary = {"run": routing_run, "shape": routing_shape,
                           "imbalance": {str(ep): g for ep, g in sorted(gammas.items())},
                           "balanced_shapes_within_15pct": b_within, "balanced_memory_within_10pct": b_memory,
                           "balanced_worst_step_error": max(abs(r["balanced_step_error"]) for r in rows),
                           "balanced_worst_memory_error": max(abs(r["balanced_memory_error"]) for r in rows)}
    noise = cal.get("step_noise", {})
    print("the calibration's own noise: drift %.0f%%, spread %.0f%% -> predictions shown ± %.0f%%; %d of %d"
          " measured steps inside their band" % (100 * noise.get("drift", 0), 100 * noise.get("spread", 0),
                                                 100 * band, within_band, len(rows)))
    fit_summary = None
    if fitted:
        print("Fitted from the stored runs alone (no calibration): predicted vs measured this run")
        print("| shape r×s×c×t | step ms meas / fit | error | compute ms meas / fit |"
              " comm ms dp_r / dp_s / cp / tp, meas (fit) | rank meas / fit |")
        print("|---|---:|---:|---:|---|---:|")
        for r in rows:
            comm = " / ".join("%.0f (%.0f)" % (r["comm_s"][a] * ms, r["fitted_comm_s"][a] * ms) for a in AXES)
            print("| %s | %.0f / %.0f | %+.0f%% | %.0f / %.0f | %s | %d / %d |" % (
                r["shape"], r["step_s"] * ms, r["fitted_step_s"] * ms, 100 * r["fitted_step_error"],
                r["compute_s"] * ms, r["fitted_compute_s"] * ms, comm, r["measured_rank"], r["fitted_rank"]))
        f_rho = spearman([r["tokens_per_s"] for r in rows], [r["fitted_tokens_per_s"] for r in rows])
        f_worst = max(abs(r["fitted_step_error"]) for r in rows)
        f_within = sum(1 for r in rows if abs(r["fitted_step_error"]) <= 0.15)
        f_first = min(rows, key=lambda r: r["fitted_rank"])["shape"]
        print("fit alone: worst |error| %.0f%%, %d of %d shapes within 15%% (target: all); Spearman rho %.2f;"
              " best measured %s, fit's first %s (%s)" % (100 * f_worst, f_within, len(rows), f_rho, best_measured,
                                                          f_first, "same" if f_first == best_measured else "DIFFERENT"))
        fit_summary = {"fit": fit, "worst_step_error": f_worst, "shapes_within_15pct": f_within,
                       "spearman_rho": f_rho, "first": f_first}
    with open(args.out, "w") as f:
        json.dump({"model": args.model, "seq_len": args.seq_len, "global_batch": args.global_batch,
                   "micro_batch": args.micro_batch, "world": args.world, "nodes": args.nodes,
                   "inter_node_rate": args.inter_node_rate if args.nodes > 1 else None,
                   "steps": args.steps,
                   "calibration": cal, "calibrate_s": cal_s, "calibrate_steal": cal_steal,
                   "load_average": load0, "load_average_end": load1,
                   "rounds": args.rounds, "step_efficiency": efficiency, "spearman_rho": rho,
                   "worst_step_error": worst_step, "shapes_within_15pct": within,
                   "step_band": band, "shapes_within_band": within_band,
                   "worst_step_error_fastest": worst_fastest, "shapes_within_15pct_fastest": within_fastest,
                   "rounds_spread_median": spreads[len(spreads) // 2], "rounds_spread_worst": spreads[-1],
                   "worst_memory_error": worst, "memory_within_10pct": memory_within,
                   "routing": routing_summary,
                   "best_measured": best_measured, "planner_first": best_planned,
                   "fitted_from_runs": fit_summary, "db": os.path.basename(args.db), "shapes": rows,
                   "skipped": [{"shape": k, "refusal": v} for k, v in skipped.items()]},
                  f, indent=1)


if __name__ == "__main__":
    main()

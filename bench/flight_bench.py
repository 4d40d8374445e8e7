"""The flight recorder's cost, measured within one run so that a noisy machine can resolve 1 %.

Paired (the judged number): meshtrain with --bench-flight-odd-steps records odd steps only and
runs even steps exactly as --no-flight-recorder does (no recorder reachable from the hot path).
Each recorded step is compared with the mean of its two unrecorded neighbours,
t_on / ((t_before + t_after) / 2) - 1, so a slow minute of the machine falls on both sides of a
pair; the overhead is the median of those pairs, with a bootstrap 95 % interval of that median.
Two shapes: `small` on 2 ranks (dp_shard 2: FSDP, every collective recorded) and on 4 ranks
(dp_shard 2 x tp 2: tensor-parallel all-reduces too, several times the collectives per step).

Whole runs (optional, --whole-rounds N): the earlier comparison, runs on and off alternating; kept
to show why it cannot resolve 1 % here (its rounds scatter by more than that)."""
import argparse
import json
import os
import platform
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

# core/flight_layout.h: the record ends with last_seq, one int64 per group slot (8 dense groups,
# the world, ep, efsdp); the generation counter is at offset 16 and every mark bumps it twice.
FLIGHT_GROUP_SLOTS = 11
FLIGHT_LAYOUT_VERSION = 2

SHAPES = {
    "dp_shard=2": {"nproc": 2, "flags": ["--dp-shard", "2"]},
    "dp_shard=2 tp=2": {"nproc": 4, "flags": ["--dp-shard", "2", "--tp", "2"]},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def bootstrap_median_interval(xs, rounds=4000, seed=1):
    """The 2.5th and 97.5th percentiles of the median of `xs` resampled with replacement."""
    rng = random.Random(seed)
    meds = sorted(median([rng.choice(xs) for _ in xs]) for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def record_counts(path):
    """(collectives entered, marks written) of a flight file: the sum of last_seq and half the
    generation."""
    data = open(path, "rb").read()
    (version,) = struct.unpack_from("<I", data, 8)
    assert version == FLIGHT_LAYOUT_VERSION, f"{path}: flight layout {version}, this bench reads {FLIGHT_LAYOUT_VERSION}"
    collectives = sum(struct.unpack_from(f"<{FLIGHT_GROUP_SLOTS}q", data, len(data) - 8 * FLIGHT_GROUP_SLOTS))
    (generation,) = struct.unpack_from("<Q", data, 16)
    return collectives, generation // 2


def meshtrain(a, shape, steps, extra):
    """Runs meshtrain; returns ({step: step_s} of rank 0, the flight file's counts or None)."""
    with tempfile.TemporaryDirectory(prefix="flight-bench.") as d:
        cmd = [a.meshtrain, "--model", a.model, "--steps", str(steps), "--seq-len", str(a.seq_len),
               "--global-batch", str(a.global_batch), "--micro-batch", "1", "--peak-tflops", "1",
               "--nproc-per-node", str(SHAPES[shape]["nproc"]), *SHAPES[shape]["flags"], "--run-dir", d,
               "--master-port", str(free_port()), *extra]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        steps_s = {}
        with open(os.path.join(d, "metrics-rank0.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("type") == "step":
                    steps_s[r["step"]] = r["step_s"]
        flight = os.path.join(d, "flight-rank0.bin")
        has_file = os.path.exists(flight)
        assert has_file == ("--no-flight-recorder" not in extra), "the flight file exists exactly when the recorder is on"
        return steps_s, (record_counts(flight) if has_file else None)


def paired(a, shape):
    """One run recording odd steps only: each recorded step against its two neighbours."""
    steps_s, (collectives, marks) = meshtrain(a, shape, a.steps, ["--bench-flight-odd-steps"])
    pairs = []
    for i in range(a.skip + 1, a.steps - 1):  # odd i: recorded; i - 1 and i + 1: not
        if i % 2 == 1 and {i - 1, i, i + 1} <= steps_s.keys():
            pairs.append(steps_s[i] / (0.5 * (steps_s[i - 1] + steps_s[i + 1])) - 1)
    on = [steps_s[i] for i in steps_s if i >= a.skip and i % 2 == 1]
    off = [steps_s[i] for i in steps_s if i >= a.skip and i % 2 == 0]
    low, high = bootstrap_median_interval(pairs)
    recorded_steps = sum(1 for i in range(a.steps) if i % 2 == 1)
    return {
        "shape": shape, "nproc": SHAPES[shape]["nproc"], "steps": a.steps, "skip": a.skip,
        "pairs": len(pairs), "overhead": median(pairs), "overhead_ci95": [low, high],
        "step_s_on": median(on), "step_s_off": median(off),
        # Collectives and marks of the whole run (the record counts recorded steps only; startup's
        # few collectives are spread over them).
        "collectives_per_recorded_step": collectives / recorded_steps,
        "marks_per_recorded_step": marks / recorded_steps,
        "pair_overheads": pairs, "step_s": [steps_s[i] for i in sorted(steps_s)],
    }


def whole_runs(a, shape):
    runs = {"on": [], "off": []}
    for r in range(a.whole_rounds):
        for side in (["on", "off"] if r % 2 == 0 else ["off", "on"]):
            steps_s, _ = meshtrain(a, shape, a.whole_steps, [] if side == "on" else ["--no-flight-recorder"])
            runs[side].append(median([steps_s[i] for i in steps_s if i >= a.skip]))
    per_round = [x / y - 1 for x, y in zip(runs["on"], runs["off"])]
    return {"shape": shape, "rounds": a.whole_rounds, "steps": a.whole_steps,
            "overhead": median(runs["on"]) / median(runs["off"]) - 1, "overhead_per_round": per_round,
            "step_s_on": runs["on"], "step_s_off": runs["off"]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--meshtrain", required=True)
    p.add_argument("--model", default="small")
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated, of: " + ", ".join(SHAPES))
    p.add_argument("--steps", type=int, default=161, help="steps of each paired run (odd ones recorded)")
    p.add_argument("--skip", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--global-batch", type=int, default=4)
    p.add_argument("--whole-rounds", type=int, default=0, help="also alternate whole runs on/off, this many rounds")
    p.add_argument("--whole-steps", type=int, default=30)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "flight.json"))
    a = p.parse_args()

    load_before = os.getloadavg()
    t0 = time.time()
    results, whole = [], []
    for shape in a.shapes.split(","):
        r = paired(a, shape)
        results.append(r)
        lo, hi = r["overhead_ci95"]
        print(f"{shape:>16} ({r['nproc']} ranks): recorded step {r['step_s_on'] * 1000:7.1f} ms, unrecorded "
              f"{r['step_s_off'] * 1000:7.1f} ms; paired overhead {r['overhead']:+.2%} "
              f"[95 % {lo:+.2%}, {hi:+.2%}] over {r['pairs']} pairs; "
              f"{r['collectives_per_recorded_step']:.0f} collectives, {r['marks_per_recorded_step']:.0f} marks "
              f"per step and rank", flush=True)
        if a.whole_rounds:
            w = whole_runs(a, shape)
            whole.append(w)
            print(f"{'':>16} whole runs alternating: {w['overhead']:+.2%}, per round "
                  + " ".join(f"{x:+.1%}" for x in w["overhead_per_round"]), flush=True)
    # The recorder's own cost per mark, measured in a loop (bench/flight_recorder_bench.cpp).
    micro = None
    bench_bin = os.path.join(os.path.dirname(a.meshtrain), "flight_recorder_bench")
    if os.path.exists(bench_bin):
        micro = json.loads(subprocess.run([bench_bin], check=True, capture_output=True, text=True).stdout)
        micro["per_mark_ns"] = max(micro["collective_ns"] / 2, micro["async_collective_ns"] / 3, micro["phase_ns"])
        for r in results:
            r["micro_bound_fraction_of_step"] = r["marks_per_recorded_step"] * micro["per_mark_ns"] * 1e-9 / r["step_s_off"]
            print(f"{r['shape']:>16}: {r['marks_per_recorded_step']:.0f} marks x {micro['per_mark_ns']:.0f} ns = "
                  f"{r['micro_bound_fraction_of_step']:.5%} of the step")
    else:
        print(f"(no {bench_bin}: build the flight_recorder_bench target for the per-mark cost)")
    result = {
        "bench": "flight", "method": "paired: odd steps recorded, each against the mean of its two unrecorded "
                                     "neighbours; median and bootstrap 95 % interval",
        "model": a.model, "seq_len": a.seq_len, "global_batch": a.global_batch, "target": 0.01,
        "paired": results, "whole_runs": whole, "recorder_micro": micro, "seconds": time.time() - t0,
        "load_before": load_before, "load_after": os.getloadavg(), "cores": os.cpu_count(),
        "machine": platform.node(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())

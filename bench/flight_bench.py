"""The flight recorder's cost: meshtrain with the recorder on and off (--no-flight-recorder), side
by side on the same machine, runs alternating (on, off, on, off, ...) so that a slow minute of the
machine falls on both sides alike. A run's speed is its median step time past the first `skip`
steps; a side's speed is the median of its runs. The recorder marks every collective (FSDP over
dp_shard makes a few hundred per step) and every phase and decoder layer."""
import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def record_counts(path):
    """(collectives entered, marks written) of a flight file (core/flight_layout.h): the sum of
    last_seq (the last kFlightGroupSlots int64 words) and half the generation (offset 16; every
    mark bumps it twice)."""
    import struct
    data = open(path, "rb").read()
    slots = 9
    collectives = sum(struct.unpack_from(f"<{slots}q", data, len(data) - 8 * slots))
    (generation,) = struct.unpack_from("<Q", data, 16)
    return collectives, generation // 2


def run(a, recorder):
    with tempfile.TemporaryDirectory(prefix="flight-bench.") as d:
        cmd = [a.meshtrain, "--model", a.model, "--steps", str(a.steps), "--seq-len", str(a.seq_len),
               "--global-batch", str(a.global_batch), "--micro-batch", "1", "--peak-tflops", "1",
               "--nproc-per-node", str(a.nproc), "--dp-shard", str(a.nproc), "--run-dir", d,
               "--master-port", str(free_port())]
        if not recorder:
            cmd.append("--no-flight-recorder")
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        steps = []
        with open(os.path.join(d, "metrics-rank0.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r.get("type") == "step":
                    steps.append(r["step_s"])
        has_file = os.path.exists(os.path.join(d, "flight-rank0.bin"))
        assert has_file == recorder, "the flight file should exist exactly when the recorder is on"
        timed = steps[a.skip:]
        out = {"step_s": median(timed), "steps": timed}
        if recorder:
            # Collectives rank 0 entered over the run (the record's last_seq per group), per step.
            c, marks = record_counts(os.path.join(d, "flight-rank0.bin"))
            out["collectives_per_step"] = c / a.steps
            out["marks_per_step"] = marks / a.steps
        return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--meshtrain", required=True)
    p.add_argument("--model", default="small")
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skip", type=int, default=3)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--global-batch", type=int, default=4)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "flight.json"))
    a = p.parse_args()

    load_before = os.getloadavg()
    runs = {"on": [], "off": []}
    for r in range(a.rounds):
        # Alternate which side goes first, so neither always runs on a warmer machine.
        order = ["on", "off"] if r % 2 == 0 else ["off", "on"]
        for side in order:
            res = run(a, side == "on")
            runs[side].append(res)
            print(f"round {r + 1}/{a.rounds} recorder {side:>3}: median step {res['step_s'] * 1000:8.1f} ms",
                  flush=True)
    on = median([x["step_s"] for x in runs["on"]])
    off = median([x["step_s"] for x in runs["off"]])
    overhead = on / off - 1
    # The same ratio per round (pairs run back to back): its spread is the noise of the machine.
    pairs = [x["step_s"] / y["step_s"] - 1 for x, y in zip(runs["on"], runs["off"])]
    print()
    print(f"{'':>14} {'median step':>12} {'per round (ms)':>30}")
    for side in ("on", "off"):
        rr = " ".join(f"{x['step_s'] * 1000:8.1f}" for x in runs[side])
        print(f"{'recorder ' + side:>14} {(on if side == 'on' else off) * 1000:9.1f} ms {rr:>30}")
    print(f"{'overhead':>14} {overhead:+10.2%}   per round: " + " ".join(f"{x:+.2%}" for x in pairs))
    cps = median([x["collectives_per_step"] for x in runs["on"]])
    mps = median([x["marks_per_step"] for x in runs["on"]])
    print(f"{'per step':>14} {cps:10.0f} collectives, {mps:.0f} marks (enter, exit, phase, layer, step) per rank")
    # The recorder's own cost per mark, measured in a loop (bench/flight_recorder_bench.cpp).
    micro = None
    bench_bin = os.path.join(os.path.dirname(a.meshtrain), "flight_recorder_bench")
    if os.path.exists(bench_bin):
        micro = json.loads(subprocess.run([bench_bin], check=True, capture_output=True, text=True).stdout)
        per_mark_ns = max(micro["collective_ns"] / 2, micro["async_collective_ns"] / 3, micro["phase_ns"])
        bound = mps * per_mark_ns * 1e-9 / off
        micro["per_mark_ns"] = per_mark_ns
        micro["bound_fraction_of_step"] = bound
        print(f"{'recorder cost':>14} {micro['collective_ns']:.0f} ns per collective, {micro['phase_ns']:.0f} ns per "
              f"phase mark: {mps:.0f} marks x {per_mark_ns:.0f} ns = {bound:.5%} of the step")
    else:
        print(f"(no {bench_bin}: build the flight_recorder_bench target for the per-mark cost)")
    result = {
        "bench": "flight", "model": a.model, "nproc": a.nproc, "shape": f"dp_shard={a.nproc}",
        "seq_len": a.seq_len, "global_batch": a.global_batch, "steps": a.steps, "skip": a.skip,
        "rounds": a.rounds, "step_s_on": on, "step_s_off": off, "overhead": overhead,
        "overhead_per_round": pairs, "collectives_per_step": cps, "marks_per_step": mps,
        "recorder_micro": micro, "runs": runs,
        "load_before": load_before, "load_after": os.getloadavg(), "cores": os.cpu_count(),
        "machine": platform.node(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())

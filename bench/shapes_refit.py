"""Judge a change to the time model offline, against measurements a bench already made.

bench/shapes.sh keeps, beside each JSON, every rank's calibration records
(`<json>-calibration-records.jsonl.gz`). This script fits them anew with the current core
(shapes_estimate --calibration-records), predicts every shape of that bench again and prints,
per bench JSON, the prediction as it was made then (stored in the JSON) beside the refitted one,
against the same measured step times: shapes within 15 %, the worst, the mean |error|,
Spearman's rho and whether the planner's first is the measured best; and the per-rank memory
estimate, as stored and from the current core, against the measured peaks (within 10 %). With --fit-db STORE it
also judges the fit of the runs stored there (no calibration) against each bench.

Usage: bench/shapes_refit.py bench/results/shapes-2nodes-{5b9bbd1,2f2d746-delta}{-first-run,}.json
                             [--estimator build/bin/shapes_estimate] [--fit-db STORE] [--json OUT]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

from shapes_bench import shape_key, spearman

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def routing_source(bench):
    """A mixture of experts' bench estimated its ep shapes with the routing of its first ep-1 run
    (its JSON's "routing"): the same run from the same store, when that store is still in build/."""
    routing = bench.get("routing") or {}
    db = os.path.join(ROOT, "build", bench.get("db") or "")
    if not routing.get("run") or not os.path.isfile(db):
        if routing.get("run"):
            print("(%s: its store %s is gone: ep shapes estimated with balanced routing)" % (bench.get("model"), db),
                  file=sys.stderr)
        return []
    return ["--routing-db", db, "--routing-run", str(routing["run"])]


def predict(args, bench, source):
    """{shape: (predicted step s, planner rank, predicted tokens/s)} from shapes_estimate."""
    cmd = [args.estimator, "--model", bench["model"], "--world", str(bench["world"]), "--nodes",
           str(bench["nodes"]), "--seq-len", str(bench["seq_len"]), "--micro-batch", str(bench["micro_batch"]),
           "--global-batch", str(bench["global_batch"])] + source + routing_source(bench)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("shapes_estimate failed: %s" % p.stderr.strip())
    return {shape_key(s): (s["step_time_s"], s["rank"], s["tokens_per_s"], s["memory_bytes"]["total"])
            for s in json.loads(p.stdout)["shapes"]}


def judge_memory(bench, pred):
    """Per-rank memory: the estimate (pred's 4th field) against the measured peak, within 10 %."""
    errors = {r["shape"]: pred[r["shape"]][3] / r["peak_bytes"] - 1 for r in bench["shapes"] if r.get("peak_bytes")}
    worst = max(errors, key=lambda k: abs(errors[k]))
    return {"within_10pct": sum(1 for e in errors.values() if abs(e) <= 0.10), "shapes": len(errors),
            "worst_shape": worst, "worst_error": errors[worst],
            "mean_abs_error": sum(abs(e) for e in errors.values()) / len(errors), "errors": errors}


def memory_line(name, j):
    return "| %s | %d/%d | %s %+.1f%% | %.1f%% |" % (name, j["within_10pct"], j["shapes"], j["worst_shape"],
                                                   100 * j["worst_error"], 100 * j["mean_abs_error"])


def judge(bench, pred):
    rows = bench["shapes"]
    errors = {r["shape"]: pred[r["shape"]][0] / r["step_s"] - 1 for r in rows}
    worst = max(errors, key=lambda k: abs(errors[k]))
    first = min(rows, key=lambda r: pred[r["shape"]][1])["shape"]
    rho = spearman([r["tokens_per_s"] for r in rows], [pred[r["shape"]][2] for r in rows])
    return {"within_15pct": sum(1 for e in errors.values() if abs(e) <= 0.15), "shapes": len(rows),
            "worst_shape": worst, "worst_error": errors[worst],
            "mean_abs_error": sum(abs(e) for e in errors.values()) / len(rows), "spearman_rho": rho,
            "first_is_best": first == bench["best_measured"], "errors": errors}


def line(name, j):
    return "| %s | %d/%d | %s %+.0f%% | %.1f%% | %.2f | %s |" % (
        name, j["within_15pct"], j["shapes"], j["worst_shape"], 100 * j["worst_error"],
        100 * j["mean_abs_error"], j["spearman_rho"], "yes" if j["first_is_best"] else "NO")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("benches", nargs="+", help="bench/shapes.sh JSON files")
    ap.add_argument("--estimator", default=os.path.join(ROOT, "build", "bin", "shapes_estimate"))
    ap.add_argument("--fit-db", help="judge the fit of this store's runs (no calibration) as well")
    ap.add_argument("--json", help="write the judgements here")
    args = ap.parse_args()
    out = {}
    print("| bench, prediction | within 15 % | worst | mean \\|error\\| | rho | first = best |")
    print("|---|---:|---|---:|---:|---|")
    for path in args.benches:
        with open(path) as f:
            bench = json.load(f)
        name = os.path.basename(path)
        stored = {r["shape"]: (r["predicted_step_s"], r["planner_rank"], r["predicted_tokens_per_s"],
                               r.get("estimate_bytes", 0)) for r in bench["shapes"]}
        out[name] = {"as_made": judge(bench, stored)}
        print(line(name + ", as made", out[name]["as_made"]))
        records = os.path.splitext(path)[0] + "-calibration-records.jsonl.gz"
        if os.path.exists(records):
            with tempfile.TemporaryDirectory() as d:
                with gzip.open(records, "rt") as src, open(os.path.join(d, "metrics-rank0.jsonl"), "w") as dst:
                    dst.write(src.read())
                out[name]["refitted"] = judge(bench, predict(args, bench, ["--calibration-records", d]))
            print(line(name + ", refitted now", out[name]["refitted"]))
        else:
            print("| %s: no %s | | | | | |" % (name, os.path.basename(records)))
        if args.fit_db:
            out[name]["fit"] = judge(bench, predict(args, bench, ["--fit-db", args.fit_db]))
            print(line(name + ", fit of " + os.path.basename(args.fit_db), out[name]["fit"]))
    # Memory needs no calibration: the estimate as the bench stored it, and core's estimate now.
    print("\n| bench, memory estimate | within 10 % | worst | mean \\|error\\| |")
    print("|---|---:|---|---:|")
    for path in args.benches:
        with open(path) as f:
            bench = json.load(f)
        name = os.path.basename(path)
        if not any(r.get("peak_bytes") for r in bench["shapes"]):
            continue
        stored = {r["shape"]: (0, 0, 0, r.get("estimate_bytes", 0)) for r in bench["shapes"]}
        out[name]["memory_as_made"] = judge_memory(bench, stored)
        nominal = ["--flops", "1e10", "--efficiency", "1.0", "--bandwidth", "1e9", "--latency", "1e-4"]
        out[name]["memory_now"] = judge_memory(bench, predict(args, bench, nominal))
        print(memory_line(name + ", as made", out[name]["memory_as_made"]))
        print(memory_line(name + ", now", out[name]["memory_now"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())

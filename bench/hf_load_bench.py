"""meshtrain's Hugging Face checkpoint loading: memory per rank and speed (bench/hf_load.sh).

Writes a Llama checkpoint with transformers (save_pretrained, sharded), then runs meshtrain on it
(--init hf, one step, the mesh given by --shape) `rounds` times. Each rank writes
hf-load-rank<r>.json (trainer/train.cpp): its load seconds, its parameter bytes (fp32 shard),
the largest single tensor piece it holds and its peak resident memory growth during the load.
The load speed is the checkpoint's bytes over the slowest rank's load time; the reference is
`cat FILES > /dev/null`, timed the same number of rounds. Both read warm files: a first cat puts
them in the page cache before anything is timed.

--cold: both read cold files instead, as a node does when it loads a checkpoint from its disk or a
shared filesystem for the first time: the page cache is dropped (`sync; echo 3 >
/proc/sys/vm/drop_caches`, root only) before every timed cat and every load. Results then go to
bench/results/hf_load-cold.json unless --out says otherwise.

--before BIN: another meshtrain (e.g. one built from an older commit) loads the same checkpoint
too, its rounds interleaved with this one's (before, after, before, ...), so both see the same
machine state; the JSON gets a "before" entry with the same fields.
"""
import argparse
import glob
import json
import mmap
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_page_cache():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def write_checkpoint(out, a):
    import torch
    import transformers
    cfg = transformers.LlamaConfig(hidden_size=a.hidden, intermediate_size=a.hidden * 11 // 4,
                                   num_hidden_layers=a.layers, num_attention_heads=a.hidden // 64,
                                   num_key_value_heads=a.hidden // 256, vocab_size=a.vocab,
                                   max_position_embeddings=1024, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = transformers.LlamaForCausalLM(cfg).to(getattr(torch, a.dtype))
    model.save_pretrained(out, max_shard_size="100MB")
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, 4096
    with open(os.path.join(out, "tokens.bin"), "wb") as f:
        f.write(header.tobytes())
        f.write(np.random.default_rng(0).integers(0, a.vocab, 4096).astype(np.uint16).tobytes())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meshtrain", required=True)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--shape", default="--dp-shard 2 --tp 2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default="")
    ap.add_argument("--before", default="", help="another meshtrain binary, timed interleaved")
    ap.add_argument("--cold", action="store_true", help="drop the page cache before every timed read (root)")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    if not a.out:
        a.out = os.path.join(os.path.dirname(__file__), "results", "hf_load-cold.json" if a.cold else "hf_load.json")
    if a.cold:
        try:
            drop_page_cache()
        except OSError as e:
            sys.exit(f"hf_load_bench: --cold: cannot drop the page cache ({e}): run as root")
    work = a.dir or tempfile.mkdtemp(prefix="hf-load-bench-")
    model_dir = os.path.join(work, "model")
    if not os.path.exists(os.path.join(model_dir, "config.json")):
        write_checkpoint(model_dir, a)
    files = sorted(glob.glob(os.path.join(model_dir, "*.safetensors")))
    total = sum(os.path.getsize(f) for f in files)
    shape = a.shape.split()
    nproc = 1
    for i in range(0, len(shape), 2):
        nproc *= int(shape[i + 1])

    subprocess.run(["cat"] + files, stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    cat_s = []
    for _ in range(a.rounds):
        if a.cold:
            drop_page_cache()
        t0 = time.perf_counter()
        subprocess.run(["cat"] + files, stdout=subprocess.DEVNULL, check=True)
        cat_s.append(time.perf_counter() - t0)

    # The floor of any loader that gives each rank fresh fp32 storage: touching that memory for
    # the first time (page faults + one write), for the whole model's fp32 bytes, one process;
    # with 4 KiB pages (LibTorch's allocator) and in 2 MiB-aligned memory advised MADV_HUGEPAGE.
    import torch
    torch.set_num_threads(1)
    fp32_bytes = int(total * 2 if a.dtype != "float32" else total)
    touch_s, touch_huge_s = [], []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        buf = torch.empty(fp32_bytes // 4, dtype=torch.float32)
        buf.fill_(0.0)
        touch_s.append(time.perf_counter() - t0)
        del buf
        t0 = time.perf_counter()
        huge = 2 << 20
        m = mmap.mmap(-1, fp32_bytes + huge)
        start = (-np.frombuffer(m, dtype=np.uint8, count=1).ctypes.data) % huge
        m.madvise(mmap.MADV_HUGEPAGE, start, fp32_bytes // huge * huge)
        np.frombuffer(m, dtype=np.float32, count=fp32_bytes // 4, offset=start).fill(0.0)
        touch_huge_s.append(time.perf_counter() - t0)
        m.close()

    main_name = "after" if a.before else "meshtrain"
    binaries = [(main_name, a.meshtrain)] + ([("before", a.before)] if a.before else [])
    rounds = {name: [] for name, _ in binaries}
    for r in range(a.rounds):
        for name, binary in (binaries if r % 2 == 0 else binaries[::-1]):
            run_dir = os.path.join(work, f"run-{name}{r}")
            cmd = [binary, "--model", model_dir, "--data", os.path.join(model_dir, "tokens.bin"),
                   "--steps", "1", "--seq-len", "16", "--global-batch", str(nproc), "--micro-batch", "1",
                   "--peak-tflops", "1", "--run-dir", run_dir, "--master-port", str(free_port()),
                   "--nproc-per-node", str(nproc)] + shape
            if a.cold:
                drop_page_cache()
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"{binary} failed ({p.returncode}):\n{p.stderr}")
            rounds[name].append([json.load(open(os.path.join(run_dir, f"hf-load-rank{k}.json")))
                                 for k in range(nproc)])

    cat_best = min(cat_s)
    mb = total / 1e6
    print(f"checkpoint: {len(files)} files, {mb:.1f} MB ({a.dtype}), mesh {a.shape}, {nproc} ranks, best of {a.rounds}, "
          f"{'cold (page cache dropped before each read)' if a.cold else 'warm (files in the page cache)'}")
    results = {}
    for name, binary in binaries:
        best = min(rounds[name], key=lambda rs: max(x["seconds"] for x in rs))
        load_s = max(x["seconds"] for x in best)
        print(f"{name}: {binary}")
        print(f"{'rank':>4} {'shard MB':>9} {'largest MB':>10} {'peak RSS MB':>11} {'target MB':>9} {'ratio':>6} {'load s':>7}")
        per_rank = []
        for x in best:
            target = (x["param_bytes"] + x["largest_piece_bytes"]) * 1.10
            ratio = x["peak_rss_growth_bytes"] / (x["param_bytes"] + x["largest_piece_bytes"])
            per_rank.append(dict(x, target_bytes=target, ratio_to_shard_plus_piece=ratio))
            print(f"{x['rank']:>4} {x['param_bytes']/1e6:>9.1f} {x['largest_piece_bytes']/1e6:>10.1f} "
                  f"{x['peak_rss_growth_bytes']/1e6:>11.1f} {target/1e6:>9.1f} {ratio:>6.2f} {x['seconds']:>7.3f}")
        load_mbs, cat_mbs = mb / load_s, mb / cat_best
        print(f"{name}: load {load_mbs:.0f} MB/s (slowest rank {load_s:.3f} s) vs cat > /dev/null {cat_mbs:.0f} MB/s "
              f"({cat_best:.3f} s): {load_mbs / cat_mbs:.2f}x (target >= 0.5x)")
        results[name] = {"binary": binary, "load_seconds": load_s, "load_mb_s": load_mbs,
                         "speed_ratio": load_mbs / cat_mbs, "per_rank": per_rank,
                         "all_rounds_load_seconds": [max(x["seconds"] for x in rs) for rs in rounds[name]]}
    print(f"first touch of the model's fp32 bytes ({fp32_bytes / 1e6:.0f} MB, one process): "
          f"{min(touch_s):.3f} s with 4 KiB pages, {min(touch_huge_s):.3f} s with huge pages (MADV_HUGEPAGE)")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        out = {"checkpoint_bytes": total, "files": len(files), "dtype": a.dtype, "shape": a.shape,
               "ranks": nproc, "rounds": a.rounds, "cpu_count": os.cpu_count(),
               "page_cache": "cold" if a.cold else "warm",
               "load_avg_at_end": os.getloadavg()[0],
               "cat_seconds": cat_best, "cat_mb_s": mb / cat_best,
               "fp32_first_touch_seconds": min(touch_s), "fp32_first_touch_huge_pages_seconds": min(touch_huge_s),
               "all_cat_seconds": cat_s}
        out.update(results[main_name])
        if "before" in results:
            out["before"] = results["before"]
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

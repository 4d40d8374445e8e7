#!/usr/bin/env python3
"""Writes demo runs as meshtrain metrics files (docs/metrics.md) for the web view's screenshots
(scripts/web-screenshots): four finished runs of a 16-GPU shape sweep (one failed with its root
cause) and one still running. Synthetic numbers, real format: `meshwork runs import` reads them.
usage: web_demo_runs.py OUT_DIR"""
import json, math, os, random, sys
os.makedirs(sys.argv[1], exist_ok=True)
os.chdir(sys.argv[1])
def run(name, mesh, lr, scale, steps, fail=False):
    os.makedirs(name, exist_ok=True)
    world = mesh['dp_replicate']*mesh['dp_shard']*mesh['cp']*mesh['tp']
    cfg = {"name": name, "model": "llama-3.2-1b", "mesh": mesh, "training": {"lr": lr, "steps": steps, "seq_len": 2048, "micro_batch": 1, "device": "cuda", "precision": "bf16"}}
    rnd = random.Random(name)
    for r in range(world):
        with open(f"{name}/metrics-rank{r}.jsonl", "w") as f:
            f.write(json.dumps({"type":"start","v":1,"rank":r,"world":world,"node":r//8,"host":f"gpu-node{r//8}","pid":1000+r,"time":1.79e9,"mesh":mesh,"config":cfg,"peak_tflops":989.0,"versions":{}})+"\n")
            t = 1.79e9
            for s in range(steps):
                comm = {a: (0.012*(i+1)*(1+0.1*rnd.random()) if mesh[a] > 1 else 0.0) for i, a in enumerate(["dp_replicate","dp_shard","cp","tp"])}
                comp = 0.42*(1+0.05*rnd.random())
                st = comp + sum(comm.values())
                t += st
                loss = scale*(2.1 + 8.6/(1+0.02*s)**0.8) + 0.08*rnd.gauss(0,1)
                f.write(json.dumps({"type":"step","v":1,"rank":r,"step":s,"time":t,"loss":loss,"lr":lr*min(1,(s+1)/50),"grad_norm":1.0+2.0/(1+0.05*s)+0.1*rnd.random(),"tokens":2048*8,"tokens_per_s":2048*8/st,"tflops":400*(1-sum(comm.values())/st),"mfu":0.42*(comp/st),"mem_bytes":int((38+r*0.3)*2**30),"mem_peak_bytes":int((52+r*0.3+3*math.sin(s/40))*2**30),"comm_s":comm,"compute_s":comp,"step_s":st})+"\n")
            if fail and r == world-1:
                f.write(json.dumps({"type":"end","v":1,"rank":r,"status":"failed","reason":"CUDA out of memory. Tried to allocate 2.00 GiB (GPU 7; 79.11 GiB total capacity)","time":t})+"\n")
            else:
                f.write(json.dumps({"type":"end","v":1,"rank":r,"status":"ok","time":t})+"\n")
run("fsdp16-lr3e-4", {"dp_replicate":1,"dp_shard":16,"cp":1,"tp":1}, 3e-4, 1.0, 1500)
run("hsdp-2x8", {"dp_replicate":2,"dp_shard":8,"cp":1,"tp":1}, 3e-4, 1.02, 1500)
run("fsdp8-tp2", {"dp_replicate":1,"dp_shard":8,"cp":1,"tp":2}, 3e-4, 0.99, 1500)
run("fsdp4-cp2-tp2-lr6e-4", {"dp_replicate":1,"dp_shard":4,"cp":2,"tp":2}, 6e-4, 1.05, 900, fail=True)
# Still running: its last line (each rank's end record) cut off.
run("live-fsdp8-tp2-lr1e-3", {"dp_replicate":1,"dp_shard":4,"cp":1,"tp":2}, 1e-3, 0.97, 640)
for r in range(8):
    fn = f"live-fsdp8-tp2-lr1e-3/metrics-rank{r}.jsonl"
    lines = open(fn).read().splitlines(True)
    open(fn, "w").writelines(lines[:-1])

#!/usr/bin/env python3
"""PyTorch-Python reference of meshtrain's model, data and training step (bench/trainer.sh).

Same Llama decoder (RMSNorm, RoPE, GQA, SwiGLU, tied embeddings per preset), same llm.c data
order (global batch k = sequences k*G .. k*G+G-1, split contiguously over data-parallel ranks),
same loss (token-loss sum / global tokens), AdamW(0.9, 0.95, wd 0.1), global-norm clipping at
1.0, warmup + cosine. Parallelism with torch's own tools on Gloo:
  --mode single   one process
  --mode ddp      DistributedDataParallel (no_sync during accumulation)
  --mode fsdp     FSDP2 fully_shard on every block, then the root
Launch with torchrun (RANK/WORLD_SIZE/...). Rank 0 prints one JSON line with tokens/s.

On a GPU (bench/gpu.sh, which calls run() once per configuration in one process):
  --device cuda       NCCL instead of Gloo (fsdp on one rank is FSDP2 over a world of 1)
  --precision bf16    FSDP2's MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32): fp32
                      master weights and optimizer, bf16 compute, as meshtrain's --precision bf16
  --ac full           torch.utils.checkpoint around every block (meshtrain --activation-checkpointing full)
  --compile           torch.compile on every block before sharding, as torchtitan does
  --config FILE       the model from a Hugging Face config.json (e.g. resources/models/llama-3.2-1b.json)
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "tiny": dict(hidden=64, inter=128, layers=2, heads=8, kv=4, head_dim=8, vocab=256, tied=False),
    "small": dict(hidden=256, inter=768, layers=4, heads=8, kv=4, head_dim=32, vocab=256, tied=True),
}


def preset_from_hf(path):
    """The few config.json keys this reference uses (RoPE scaling is left out: it changes no cost)."""
    with open(path) as f:
        j = json.load(f)
    heads = j["num_attention_heads"]
    return dict(hidden=j["hidden_size"], inter=j["intermediate_size"], layers=j["num_hidden_layers"],
                heads=heads, kv=j.get("num_key_value_heads", heads),
                head_dim=j.get("head_dim", j["hidden_size"] // heads), vocab=j["vocab_size"],
                tied=bool(j.get("tie_word_embeddings", False)))


def flops_per_token(c, seq_len):
    """PaLM / torchtitan: 6 * N_matmul + 12 * L * Hq * D * T (as meshtrain's model.cpp)."""
    H, I, D, Hq, Hkv, L, V = c["hidden"], c["inter"], c["head_dim"], c["heads"], c["kv"], c["layers"], c["vocab"]
    per_layer = H * Hq * D + 2 * H * Hkv * D + Hq * D * H + 3 * H * I
    return 6 * (L * per_layer + V * H) + 12 * L * Hq * D * seq_len


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rotate_half(x):
    a, b = x.chunk(2, -1)
    return torch.cat((-b, a), -1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        H, D = c["hidden"], c["head_dim"]
        self.hq, self.hkv, self.d = c["heads"], c["kv"], D
        self.attn_norm = RMSNorm(H)
        self.wq = nn.Linear(H, self.hq * D, bias=False)
        self.wk = nn.Linear(H, self.hkv * D, bias=False)
        self.wv = nn.Linear(H, self.hkv * D, bias=False)
        self.wo = nn.Linear(self.hq * D, H, bias=False)
        self.mlp_norm = RMSNorm(H)
        self.w_gate = nn.Linear(H, c["inter"], bias=False)
        self.w_up = nn.Linear(H, c["inter"], bias=False)
        self.w_down = nn.Linear(c["inter"], H, bias=False)

    def attention_inputs(self, x, cos, sin):
        """q, k, v of the normed x as [B, heads, T, D] (k and v with the kv heads), q and k rotated."""
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.hq, self.d).transpose(1, 2)
        k = self.wk(h).view(B, T, self.hkv, self.d).transpose(1, 2)
        v = self.wv(h).view(B, T, self.hkv, self.d).transpose(1, 2)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def output_and_mlp(self, x, a):
        """The attention output a [B, heads, T, D] projected onto the residual x, then the MLP."""
        B, T, _ = x.shape
        x = x + self.wo(a.transpose(1, 2).reshape(B, T, -1))
        m = self.mlp_norm(x)
        return x + self.w_down(F.silu(self.w_gate(m)) * self.w_up(m))

    def forward(self, x, cos, sin):
        q, k, v = self.attention_inputs(x, cos, sin)
        rep = self.hq // self.hkv
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        return self.output_and_mlp(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))


class Llama(nn.Module):
    def __init__(self, c, ac=False):
        super().__init__()
        self.c = c
        self.ac = ac
        self.embed = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList(Block(c) for _ in range(c["layers"]))
        self.norm = RMSNorm(c["hidden"])
        self.head = None if c["tied"] else nn.Linear(c["hidden"], c["vocab"], bias=False)
        out_std = 0.02 / math.sqrt(2 * c["layers"])
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0, out_std if name.endswith(("wo.weight", "w_down.weight")) else 0.02)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        dev = tokens.device
        inv = 10000.0 ** (-torch.arange(0, self.c["head_dim"], 2, device=dev).float() / self.c["head_dim"])
        ang = torch.outer(torch.arange(T, device=dev).float(), inv)
        emb = torch.cat((ang, ang), -1)
        x = self.embed(tokens)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        for layer in self.layers:
            if self.ac:
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        h = self.norm(x)
        w = self.embed.weight if self.head is None else self.head.weight
        logits = F.linear(h, w).float()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), reduction="sum")


def load_tokens(path):
    header = np.fromfile(path, dtype=np.int32, count=256)
    dtype = np.uint16 if header[0] == 20240520 else np.uint32
    return np.memmap(path, dtype=dtype, mode="r", offset=1024, shape=(int(header[2]),))


def lr_at(step, a):
    lr_min = a.lr / 10
    if step < a.warmup_steps:
        return a.lr * (step + 1) / a.warmup_steps
    p = min(1.0, (step - a.warmup_steps) / max(1, a.steps - a.warmup_steps - 1))
    return lr_min + (a.lr - lr_min) * (1 + math.cos(math.pi * p)) / 2


def parse_args(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["single", "ddp", "fsdp"], default="single")
    ap.add_argument("--model", default="small")
    ap.add_argument("--config", default="", help="a Hugging Face config.json (instead of --model)")
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2, help="steps left out of the timing")
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--warmup-steps", type=int, default=10)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--ac", choices=["none", "full"], default="none")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--profile", default="", help="chrome trace of steps 2 and 3 (torch.profiler) to this path")
    return ap.parse_args(argv)


def run(a):
    """Trains a.steps steps; returns rank 0's result (None on other ranks). The process group, if
    any, is left open so that one process can run several configurations (bench/gpu.sh)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    cuda = a.device == "cuda"
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // local_world))
    if a.mode != "single" and not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    torch.manual_seed(1234)
    c = preset_from_hf(a.config) if a.config else PRESETS[a.model]
    model = Llama(c, ac=a.ac == "full").to(device)
    if a.compile:
        for layer in model.layers:
            layer.compile()
    if a.mode == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
    elif a.mode == "fsdp":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        # fp32: FSDP2's default policy (no casts), as before the GPU options existed.
        kw = {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)} \
            if a.precision == "bf16" else {}
        for layer in model.layers:
            fully_shard(layer, **kw)
        fully_shard(model, **kw)
    elif a.precision == "bf16":
        raise SystemExit("llama_ref: --precision bf16 needs --mode fsdp (FSDP2's mixed precision)")
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if cuda else {}))
    tokens = load_tokens(a.data)
    n_seq = (len(tokens) - 1) // a.seq_len
    dp = world
    per_rank = a.global_batch // dp
    accum = per_rank // a.micro_batch
    global_tokens = a.global_batch * a.seq_len
    times, losses = [], []
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    prof = None
    for step in range(a.steps):
        if a.profile and step == 2:
            acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if cuda else [])
            prof = torch.profiler.profile(activities=acts)
            prof.__enter__()
        if prof is not None and step == 4:
            prof.__exit__(None, None, None)
            prof.export_chrome_trace(a.profile)
            prof = None
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        local = torch.zeros(1, dtype=torch.float64, device=device)
        for m in range(accum):
            first = step * a.global_batch + rank * per_rank + m * a.micro_batch
            seqs = np.stack([tokens[((first + i) % n_seq) * a.seq_len:][: a.seq_len + 1] for i in range(a.micro_batch)])
            seqs = torch.from_numpy(seqs.astype(np.int64)).to(device)
            last = m == accum - 1
            if a.mode == "ddp" and not last:
                with model.no_sync():
                    loss_sum = model(seqs[:, :-1], seqs[:, 1:])
                    (loss_sum / global_tokens).backward()
            else:
                if a.mode == "fsdp":
                    model.set_requires_gradient_sync(last)
                loss_sum = model(seqs[:, :-1], seqs[:, 1:])
                (loss_sum / global_tokens).backward()
            local += loss_sum.detach().double()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if world > 1:
            dist.all_reduce(local)
        losses.append(local.item() / global_tokens)  # .item() waits for the GPU
        times.append(time.perf_counter() - t0)
    if prof is not None:
        prof.__exit__(None, None, None)
        prof.export_chrome_trace(a.profile)
    timed = times[a.skip:]
    step_s = sum(timed) / len(timed)
    out = None
    if rank == 0:
        out = {"impl": "python", "mode": a.mode, "world": world, "step_s": step_s,
               "step_s_min": min(timed), "step_s_median": float(np.median(timed)),
               "tokens_per_s": global_tokens / step_s, "losses": losses,
               "flops_per_token": flops_per_token(c, a.seq_len)}
        if cuda:
            out["max_memory_allocated"] = torch.cuda.max_memory_allocated(device)
            out["max_memory_reserved"] = torch.cuda.max_memory_reserved(device)
    del model, opt
    if cuda:
        torch.cuda.empty_cache()
    return out


def main():
    out = run(parse_args())
    if out is not None:
        print(json.dumps(out), flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

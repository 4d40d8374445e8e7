"""Reference side of meshtrain's Hugging Face checkpoint tests (tests/trainer/hf_load_test.cpp).

    hf_reference.py OUT_DIR FAMILY [--tied] [--kv-heads K] [--shard-kb N] [--seq-len T] [--batch G] [--dtype D]
                    [--device cpu|cuda] [--micro-batch M]

Builds a tiny random model of FAMILY (llama, llama3: Llama with rope_scaling llama3, qwen2: q/k/v
biases, mistral, qwen3: per-head q/k norms; mixtures of experts: qwen3_moe with a dense layer
among sparse ones, mixtral, olmoe: whole-projection q/k norms) with the real transformers classes, saves it with save_pretrained into
OUT_DIR/model (sharded when --shard-kb is given), writes an llm.c token shard OUT_DIR/tokens.bin
and prints transformers' loss on meshtrain's first global batch: sequences 0..G-1, sequence i
being tokens [i*T, i*T + T] (inputs and the shifted targets), the mean next-token cross-entropy
over all G*T tokens, in fp32 (on --device; TF32 off on CUDA, so that matmuls are fp32 as on the
CPU). No network: everything is built from a seed.

Mixtures of experts are configured with output_router_logits true, so transformers adds
router_aux_loss_coef times the load-balancing loss of each forward call to its loss; the loss
printed is then the mean over forward calls of M sequences each (--micro-batch, default G), as a
trainer accumulating gradients over micro-batches of M computes it.
"""
import argparse
import os

import numpy as np
import torch
import transformers


def build(family, tied, kv_heads):
    # Odd sizes on purpose: 6 heads (over 3 kv heads unless told), vocab 250 (not a power of two,
    # even for tp 2), head_dim 8.
    common = dict(hidden_size=48, intermediate_size=72, num_hidden_layers=2, num_attention_heads=6,
                  num_key_value_heads=kv_heads, vocab_size=250, max_position_embeddings=256,
                  rms_norm_eps=1e-5, tie_word_embeddings=tied)
    if family in ("llama", "llama3"):
        kw = dict(common)
        if family == "llama3":
            kw["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
            kw["rope_theta"] = 500000.0
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw))
    if family == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    if family == "mistral":
        return transformers.MistralForCausalLM(transformers.MistralConfig(sliding_window=None, **common))
    if family == "qwen3":
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=8, **common))
    # Mixtures of experts: 4 experts, 2 per token, width 24; a large aux coefficient so that a
    # wrong aux loss shows in the loss.
    moe = dict(num_experts_per_tok=2, router_aux_loss_coef=0.05, output_router_logits=True)
    if family == "qwen3_moe":
        kw = dict(common, num_hidden_layers=3)
        return transformers.Qwen3MoeForCausalLM(transformers.Qwen3MoeConfig(
            head_dim=8, num_experts=4, moe_intermediate_size=24, norm_topk_prob=True, mlp_only_layers=[1],
            **moe, **kw))
    if family == "mixtral":
        return transformers.MixtralForCausalLM(transformers.MixtralConfig(
            num_local_experts=4, sliding_window=None, **moe, **common))
    if family == "olmoe":
        return transformers.OlmoeForCausalLM(transformers.OlmoeConfig(
            num_experts=4, norm_topk_prob=False, **moe, **dict(common, intermediate_size=24)))
    raise SystemExit("unknown family " + family)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("family")
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--kv-heads", type=int, default=3)
    ap.add_argument("--shard-kb", type=int, default=0)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--micro-batch", type=int, default=0)
    a = ap.parse_args()
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1234)
    model = build(a.family, a.tied, a.kv_heads).eval()
    # Random weights everywhere (norm weights and biases too, so a misplaced one shows in the loss).
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * (0.5 if p.dim() == 1 else 0.1) + (1.0 if p.dim() == 1 else 0.0))
    os.makedirs(a.out, exist_ok=True)
    kw = {"max_shard_size": f"{a.shard_kb}KB"} if a.shard_kb else {}
    model.to(getattr(torch, a.dtype)).save_pretrained(os.path.join(a.out, "model"), **kw)
    model.float()
    if a.dtype != "float32":  # the loss of the weights as saved
        model = type(model).from_pretrained(os.path.join(a.out, "model"), dtype=torch.float32).eval()

    T, G, V = a.seq_len, a.batch, model.config.vocab_size
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, V, (G * T + 1,), generator=gen)
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, tokens.numel()
    with open(os.path.join(a.out, "tokens.bin"), "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.numpy().astype(np.uint16).tobytes())
    seqs = torch.stack([tokens[i * T:i * T + T + 1] for i in range(G)]).to(a.device)
    model.to(a.device)
    M = a.micro_batch or G
    coef = getattr(model.config, "router_aux_loss_coef", 0.0)
    losses = []
    with torch.no_grad():
        for i in range(0, G, M):
            out = model(input_ids=seqs[i:i + M, :T])
            logits = out.logits.float()
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), seqs[i:i + M, 1:].reshape(-1))
            if getattr(out, "aux_loss", None) is not None:
                loss = loss + coef * out.aux_loss
            losses.append(loss)
    print(repr(torch.stack(losses).mean().item()))


if __name__ == "__main__":
    main()

"""Loads two Hugging Face config.json files with transformers' AutoConfig and compares the numbers
that define the architecture (tests/trainer/hf_export_test.cpp's round trip).

    same_config.py SOURCE_DIR EXPORT_DIR

Prints one line per key; exits 1 if any differs or either does not load.
"""
import sys

import transformers

KEYS = ["model_type", "architectures", "hidden_size", "intermediate_size", "num_hidden_layers",
        "num_attention_heads", "num_key_value_heads", "vocab_size",
        "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings", "hidden_act", "dtype",
        # mixtures of experts (absent keys read as None on both sides)
        "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
        "router_aux_loss_coef", "output_router_logits", "decoder_sparse_step", "mlp_only_layers"]


def rope_theta(c):
    # v5 keeps rope_theta inside rope_parameters; older configs at the top level.
    params = getattr(c, "rope_parameters", None) or {}
    return params.get("rope_theta", getattr(c, "rope_theta", None))


def head_dim(c):
    # Qwen2's config has no head_dim unless told; its attention uses hidden / heads then.
    return getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads


def main():
    a = transformers.AutoConfig.from_pretrained(sys.argv[1])
    b = transformers.AutoConfig.from_pretrained(sys.argv[2])
    bad = 0
    derived = {"rope_theta": rope_theta, "head_dim": head_dim}
    for key in KEYS + list(derived):
        get = derived.get(key, lambda c: getattr(c, key, None))
        va, vb = get(a), get(b)
        ok = va == vb
        bad += not ok
        print(f"{key}: {va!r} {'==' if ok else '!='} {vb!r}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

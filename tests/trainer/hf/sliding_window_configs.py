"""Config directories with and without sliding-window attention, written by transformers itself
(Config.save_pretrained, no weights), for meshtrain's refusal test (tests/trainer/hf_load_test.cpp).

    sliding_window_configs.py OUT_DIR

Writes OUT_DIR/<name>/config.json for:
  mistral-window16     MistralConfig(sliding_window=16): every layer sees 16 tokens back
  mistral-null         MistralConfig(sliding_window=None): full attention
  mistral-default      MistralConfig() as transformers defaults it (sliding_window 4096)
  qwen2-window16       Qwen2Config(use_sliding_window=True, sliding_window=16, max_window_layers=1)
  qwen2-off            Qwen2Config(use_sliding_window=False, sliding_window=16): the flag is off
"""
import os
import sys

import transformers

common = dict(hidden_size=48, intermediate_size=72, num_hidden_layers=2, num_attention_heads=6,
              num_key_value_heads=3, vocab_size=250, max_position_embeddings=256)
configs = {
    "mistral-window16": transformers.MistralConfig(sliding_window=16, **common),
    "mistral-null": transformers.MistralConfig(sliding_window=None, **common),
    "mistral-default": transformers.MistralConfig(**common),
    "qwen2-window16": transformers.Qwen2Config(use_sliding_window=True, sliding_window=16, max_window_layers=1,
                                               **common),
    "qwen2-off": transformers.Qwen2Config(use_sliding_window=False, sliding_window=16, **common),
}
for name, cfg in configs.items():
    cfg.save_pretrained(os.path.join(sys.argv[1], name))

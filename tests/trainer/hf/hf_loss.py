"""Reference side of the export test (tests/trainer/hf_export_test.cpp): the loss transformers
computes with an exported model.

usage: hf_loss.py HF_DIR SHARD SEQ_LEN N [MICRO]
Loads HF_DIR with AutoModelForCausalLM.from_pretrained (float32, eager attention), reads the
llm.c token shard SHARD (256 x int32 header, uint16 or uint32 tokens), and prints the mean
next-token cross-entropy over sequences 0..N-1 (sequence i = tokens [i*T, i*T + T], inputs and
shifted targets, as meshtrain's data order) with 17 significant digits.
With MICRO, the sequences go through the model MICRO at a time and a mixture of experts whose
config says output_router_logits adds router_aux_loss_coef x each call's aux loss, as
transformers' loss does; the mean over the calls is printed (meshtrain's micro-batches).
"""
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM

hf_dir, shard, seq_len, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
micro = int(sys.argv[5]) if len(sys.argv) > 5 else n
header = np.fromfile(shard, dtype="<i4", count=256)
assert header[0] in (20240520, 20240801), header[0]
dtype = "<u2" if header[0] == 20240520 else "<u4"
tokens = np.fromfile(shard, dtype=dtype, offset=256 * 4, count=int(header[2])).astype(np.int64)
seqs = torch.tensor(np.stack([tokens[i * seq_len: i * seq_len + seq_len + 1] for i in range(n)]))
model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
model.eval()
coef = getattr(model.config, "router_aux_loss_coef", 0.0)
losses = []
with torch.no_grad():
    for i in range(0, n, micro):
        out = model(input_ids=seqs[i:i + micro, :-1])
        logits = out.logits.double()
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 seqs[i:i + micro, 1:].reshape(-1))
        if len(sys.argv) > 5 and getattr(out, "aux_loss", None) is not None:
            loss = loss + coef * out.aux_loss.double()
        losses.append(loss)
print(f"{torch.stack(losses).mean().item():.17g}")

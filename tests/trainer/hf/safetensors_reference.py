"""Reference side of the safetensors writer test (tests/trainer/safetensors_writer_test.cpp).

usage: safetensors_reference.py WRITTEN OUT
Loads WRITTEN (meshtrain's writer) with safetensors.torch.load_file, checks every tensor against
the values the C++ test wrote (element i of tensor k is (i % 251) * 0.5 - k, in the tensor's
dtype), then saves the same tensors with safetensors.torch.save_file(metadata={"format": "pt"})
to OUT, which the C++ test compares byte for byte with WRITTEN. Prints one line per tensor.
"""
import sys

import torch
from safetensors.torch import load_file, save_file

written, out = sys.argv[1], sys.argv[2]
loaded = load_file(written)
expected = {
    "z.weight": ((3, 4), torch.float32, 0),
    "a.bias": ((7,), torch.bfloat16, 1),
    "m.steps": ((2, 3), torch.int64, 2),
    "b.half": ((5,), torch.float16, 3),
    "scalar": ((), torch.float32, 4),
}
assert sorted(loaded) == sorted(expected), sorted(loaded)
for name, (shape, dtype, k) in expected.items():
    t = loaded[name]
    assert tuple(t.shape) == shape and t.dtype == dtype, (name, t.shape, t.dtype)
    n = t.numel()
    want = ((torch.arange(n, dtype=torch.float64) % 251) * 0.5 - k).to(dtype).reshape(shape)
    assert torch.equal(t, want), (name, t, want)
    print(name, tuple(t.shape), str(t.dtype))
save_file(loaded, out, metadata={"format": "pt"})

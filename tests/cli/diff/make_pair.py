"""Writes the small hand-constructed pair of tests/cli/test_diff.sh into the
current directory: a.h5 (label miss, cache=miss) and b.h5 (label hit,
cache=hit).  Every expected number in golden.* is derived by hand in
README.md next to this file."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import diffsnap as ds  # noqa: E402

u16 = lambda v: np.array(v, dtype=np.uint16)  # noqa: E731
f32 = lambda v: np.array(v, dtype=np.float32).view(np.uint32)  # noqa: E731

embed = u16([[0x3f80, 0x4000], [0xbf00, 0x3e80]])            # 1, 2, -0.5, 0.25
l0_a = u16([[0x3f80] * 4, [0x4000] * 4])                     # 1 1 1 1 / 2 2 2 2
l0_b = l0_a.copy()
l0_b[1, 2] = 0x4001                                          # 2 -> 2.015625 (+1 ULP)
l1_a = u16([[0x3f80, 0x3f80, 0x3f80, 0x3f80], [0xbf80, 0x0000, 0x4080, 0x4100]])
l1_b = u16([[0x3f81, 0x3f80, 0x3f7f, 0x3f80], [0x3f80, 0x8000, 0x4080, 0x4101]])
lg_a = f32([[1.0, 2.0, 1.5], [0.5, 0.25, 0.0]])
lg_b = f32([[1.0, 1.75, 2.0], [0.5, 0.25, 0.0]])

ds.write_snapshot("a.h5", [
    dict(name="embed", bits=embed, dtype="bf16"),
    dict(name="model.layers.0.out", bits=l0_a, dtype="bf16", layer=0, kernels=[0, 1]),
    dict(name="model.layers.1.out", bits=l1_a, dtype="bf16", layer=1, kernels=[1, 2]),
    dict(name="lm_head", bits=lg_a, dtype="f32", role="logits"),
], label="miss", run={"cache": "miss", "model": "tiny"},
    kernels=[(0, (4, 1, 1), (256, 1, 1)), (1, (2, 1, 1), (128, 1, 1))],
    kernel_names=["sgemm_128x128", "rmsnorm"])
ds.write_snapshot("b.h5", [
    dict(name="embed", bits=embed, dtype="bf16"),
    dict(name="model.layers.0.out", bits=l0_b, dtype="bf16", layer=0, kernels=[0, 1]),
    dict(name="model.layers.1.out", bits=l1_b, dtype="bf16", layer=1, kernels=[1, 2]),
    dict(name="lm_head", bits=lg_b, dtype="f32", role="logits"),
    dict(name="extra", bits=np.array([1, 2, 3], np.uint8), dtype="u8"),
], label="hit", run={"cache": "hit", "model": "tiny"},
    kernels=[(0, (8, 1, 1), (128, 1, 1)), (1, (2, 1, 1), (128, 1, 1))],
    kernel_names=["sgemm_64x64", "rmsnorm"])

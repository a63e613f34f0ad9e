"""One generation's captures as the PyTorch helper writes them, through the
host library's Session (python/ulpprof/_lib.py): a prompt's rows, then
1-row decode steps, one request; per step the fed ids (role input, kept in
digest mode), `layers` f32 layer outputs of `hidden` (each naming the one
before as its input) and the produced token (`tokens`, kept).  For the
tests of digest files' size and rewrite (test_digest_size,
test_digest_compact).

    write(session, steps, prompt=16, layers=12, hidden=64, seed=7, tok=11)
"""
import numpy as np


def write(s, steps, prompt=16, layers=12, hidden=64, seed=7, tok=11):
    """Feeds the captures to the open Session `s` (not closed here)."""
    rng = np.random.default_rng(seed)
    for step in range(steps):
        pos = list(range(prompt)) if step == 0 else [prompt + step - 1]
        n = len(pos)
        ids = np.array([[tok] * n], np.int64)
        s.capture("input_ids", ids.ctypes.data, "i64", [1, n], role="input", positions=pos,
                  row_rank=2, step=step)
        prev = "input_ids"
        for layer in range(layers):
            h = rng.standard_normal((1, n, hidden)).astype(np.float32)
            name = "model.layers.%d" % layer
            s.capture(name, h.ctypes.data, "f32", [1, n, hidden], layer=layer, positions=pos,
                      row_rank=2, step=step, inputs=[prev])
            prev = name
        tok = int(rng.integers(0, 8192))
        t = np.array([[tok]], np.int64)
        s.capture("tokens", t.ctypes.data, "i64", [1, 1], positions=[pos[-1]], row_rank=2,
                  step=step)

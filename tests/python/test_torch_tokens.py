"""The produced tokens (`capture(..., tokens=True)`, FORMAT.md "Produced
tokens") bit for bit against numpy: for each forward call and batch row, the
last position's logits (the model run by hand, without hooks) give column 0
= argmax (ties to the lowest id) and column 1 = top-1 minus top-2 in f64,
at that row's position and request.  Float32 and bfloat16 logits, batch 1
and 3, a near tie and an exact tie made in the logits, select rows, and the
decode steps of a KV-less model fed its own tokens."""
import os
import tempfile
import unittest

import torch_env

torch = torch_env.setup("test_torch_tokens")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tiny_model  # noqa: E402
import ulpprof.torch as ut  # noqa: E402


def expected(logits):
    """[(token, margin)] of each batch row's last logits, in numpy f64."""
    last = logits[:, -1, :].float().double().numpy() if logits.dtype == torch.bfloat16 \
        else logits[:, -1, :].double().numpy()
    out = []
    for row in last:
        tok = int(np.argmax(row))  # the first of equal maxima
        top = np.sort(row)[::-1]
        out.append((float(tok), float(top[0] - top[1])))
    return out


class TokensTest(unittest.TestCase):
    def check(self, dtype, batch, select=None, tie=None):
        model, ids = tiny_model.make(batch, tokens=5, layers=1, dtype=dtype)
        if tie is not None:  # rows 3 and 7 of lm_head made the argmax's (or one ULP off)
            with torch.no_grad():
                w = model.lm_head.weight
                t = int(model(ids)[0, -1].argmax())
                w[3] = w[t]
                w[7] = w[t]
                if tie == "near":
                    w[7, 0] = torch.nextafter(w[7, 0], torch.tensor(1e9, dtype=w.dtype))
        low = None if tie is None else min(3, t)  # the lowest id of the tied maxima
        want, fed = [], ids
        with torch.no_grad():
            for _ in range(3):  # a prompt, then two steps that recompute it fed its token
                logits = model(fed)
                want.append(expected(logits))
                nxt = logits[:, -1, :].float().argmax(-1, keepdim=True)
                fed = torch.cat([fed, nxt], 1)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.h5")
            fed = ids
            with torch.no_grad(), ut.capture(model, path, tokens=True, select=select):
                for _ in range(3):
                    logits = model(fed)
                    nxt = logits[:, -1, :].float().argmax(-1, keepdim=True)
                    fed = torch.cat([fed, nxt], 1)
            rows = list(range(batch)) if select is None else select
            with h5py.File(path, "r") as f:
                g = f["captures"]["tokens"]
                self.assertEqual(len(g), 3)
                for step in range(3):
                    d = g[str(step)]
                    got = d[()]
                    self.assertEqual(got.dtype, np.float64)
                    w = np.array([want[step][i] for i in rows], dtype=np.float64)
                    if tie == "exact" and step == 0:
                        self.assertEqual(w[0][1], 0.0, "the tie is not at the top")
                        self.assertEqual(w[0][0], float(low), "ties go to the lowest id")
                    self.assertEqual(got.tobytes(), w.tobytes(),
                                     "%s batch %d step %d: %s, numpy %s" % (dtype, batch, step,
                                                                           got.tolist(), w.tolist()))
                    self.assertEqual(d.attrs["positions"].tolist(), [5 + step - 1] * len(rows))
                    self.assertEqual(d.attrs["requests"].tolist(), rows)  # a new position

    def test_float32(self):
        for batch in (1, 3):
            self.check("float32", batch)

    def test_bfloat16(self):
        self.check("bfloat16", 3)

    def test_ties(self):
        self.check("float32", 3, tie="exact")
        self.check("float32", 3, tie="near")

    def test_select(self):
        self.check("float32", 3, select=[0, 2])


if __name__ == "__main__":
    unittest.main()

"""The keys ulpprof.torch files a token computed again under (its k-th
recomputation under request + k * 1,000,000, the least k free at its
position), filed range by range: checked against a row-by-row reference
written here from the rule alone, on random sequences of captures (passes
repeated, prefixes and shifted windows of earlier passes, several requests
in one capture, names interleaved), and a pass repeated many times
costs a bounded number of range lookups per capture, not one per earlier
pass and row."""
import os
import random
import sys
import unittest

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SRC, "python"))
import torch  # noqa: E402

import ulpprof.torch as ut  # noqa: E402

REPEAT = 1000000


class Reference:
    """Row by row: each row takes the least k with (request + k * REPEAT,
    position) not yet taken under its name."""

    def __init__(self):
        self.taken = set()

    def file(self, name, pos, req):
        out = []
        for p, r in zip(pos.reshape(-1).tolist(), req.reshape(-1).tolist()):
            k = 0
            while (name, r + k * REPEAT, p) in self.taken:
                k += 1
            self.taken.add((name, r + k * REPEAT, p))
            out.append(r + k * REPEAT)
        return out


def random_capture(rng):
    """(positions[b, s], requests[b, s]) of one call: b batch rows, each a
    window of consecutive positions (the same window per row, as a forward
    call has), or one flattened axis of several requests."""
    if rng.random() < 0.3:  # engines' flattened tokens: requests one after another
        pos, req = [], []
        for r in rng.sample(range(4), rng.randint(1, 3)):
            a = rng.randint(0, 12)
            n = rng.randint(1, 6)
            pos += list(range(a, a + n))
            req += [r] * n
        return torch.tensor([pos]), torch.tensor([req])
    b = rng.randint(1, 3)
    a = rng.randint(0, 12)
    s = rng.randint(1, 8)
    rows = rng.sample(range(4), b)
    pos = torch.arange(a, a + s).view(1, s).expand(b, s).contiguous()
    req = torch.tensor(rows).view(b, 1).expand(b, s).contiguous()
    return pos, req


class KeysTest(unittest.TestCase):
    def test_matches_row_by_row(self):
        for seed in range(60):
            rng = random.Random(seed)
            keys, ref = ut._Keys(), Reference()
            memo = {}
            for step in range(rng.randint(5, 40)):
                pos, req = random_capture(rng)
                segs = ut._segments(pos, req) if rng.random() < 0.5 else None
                for name in rng.sample(["a", "b", "c"], rng.randint(1, 3)):
                    got = keys.file(name, pos, req, segs, memo if segs is not None else None)
                    want = ref.file(name, pos, req)
                    self.assertEqual(got.reshape(-1).tolist(), want,
                                     "seed %d step %d name %s: positions %s requests %s"
                                     % (seed, step, name, pos.tolist(), req.tolist()))
                    self.assertEqual(tuple(got.shape), tuple(pos.shape))
                if rng.random() < 0.3:
                    memo = {}  # a new forward call

    def test_repeated_pass_is_not_quadratic(self):
        keys = ut._Keys()
        pos = torch.arange(0, 64).view(1, 64)
        req = torch.zeros(1, 64, dtype=torch.int64)
        segs = ut._segments(pos, req)
        calls = [0]
        orig = ut._Runs.gaps

        def counted(self, a, b):
            calls[0] += 1
            return orig(self, a, b)

        ut._Runs.gaps = counted
        try:
            for k in range(300):
                got = keys.file("x", pos, req, segs)
                self.assertEqual(set(got.reshape(-1).tolist()), {k * REPEAT})
        finally:
            ut._Runs.gaps = orig
        # At most two range lookups per capture (level 0 on the first
        # recomputation, then the level above the last whole one), not one
        # per earlier pass and row (about 300 * 300 * 64 / 2).
        self.assertLessEqual(calls[0], 2 * 300)


if __name__ == "__main__":
    unittest.main()

"""The token rows ulpprof.torch gives a forward call's captures, made two
ways: a decode step's few rows (at most _SMALL_ROWS) in Python lists, more
with tensor ops.  Both ways are checked against a row-by-row reference
written here from the rule alone, and against each other, on random calls:
_segments (the runs of consecutive positions of one request) and
_token_context (positions and requests of an HF-style call: a KV cache of
any length, or position_ids / cache_position as generate() passes them,
request ids None / an int / a list, an attention mask that pads some rows;
the small way also into leased tensors filled in place)."""
import os
import random
import sys
import unittest

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SRC, "python"))
import torch  # noqa: E402

import ulpprof.torch as ut  # noqa: E402


def reference_segments(pos, req):
    """Row by row: a row starts a new run unless it is the same request as
    the row before, one position further."""
    p, q = pos.reshape(-1).tolist(), req.reshape(-1).tolist()
    out = []
    for i in range(len(p)):
        if out and q[i] == q[i - 1] and p[i] == p[i - 1] + 1:
            s0, _, r, a = out[-1]
            out[-1] = (s0, i + 1, r, a)
        else:
            out.append((i, i + 1, q[i], p[i]))
    return out


class Cache:
    """A KV cache as HF's get_seq_length() reports it."""

    def __init__(self, n):
        self.n = n

    def get_seq_length(self):
        return self.n


def with_small(n, fn, *args):
    """fn(*args) with _SMALL_ROWS set to n."""
    old = ut._SMALL_ROWS
    ut._SMALL_ROWS = n
    try:
        return fn(*args)
    finally:
        ut._SMALL_ROWS = old


class RowsTest(unittest.TestCase):
    def test_segments_both_ways(self):
        for seed in range(300):
            rng = random.Random(seed)
            n = rng.choice([1, 2, 3, rng.randint(1, 64), rng.randint(65, 300)])
            pos, req, p, r = [], [], rng.randint(0, 9), rng.randint(0, 3)
            for _ in range(n):
                if rng.random() < 0.15:
                    p, r = rng.randint(0, 20), rng.randint(0, 3)
                pos.append(p)
                req.append(r)
                p += 1
            shape = (1, n) if rng.random() < 0.5 else (n,)
            pt, rt = torch.tensor(pos).view(shape), torch.tensor(req).view(shape)
            want = reference_segments(pt, rt)
            self.assertEqual(with_small(10 ** 9, ut._segments, pt, rt), want, "seed %d" % seed)
            self.assertEqual(with_small(0, ut._segments, pt, rt), want, "seed %d" % seed)
        self.assertEqual(ut._segments(torch.zeros(0, dtype=torch.int64),
                                      torch.zeros(0, dtype=torch.int64)), [])

    def test_token_context_both_ways(self):
        for seed in range(300):
            rng = random.Random(seed)
            b, s = rng.randint(0, 4), rng.choice([1, 1, 2, rng.randint(1, 40)])
            past = rng.choice([0, rng.randint(1, 3000)])
            kwargs = {"input_ids": torch.zeros(b, s, dtype=torch.int64)}
            if past or rng.random() < 0.5:
                kwargs["past_key_values"] = Cache(past)
            if b > 0 and rng.random() < 0.3:
                mask = torch.ones(b, past + s, dtype=torch.int64)
                mask[0, past:past + rng.randint(0, s - 1)] = 0
                kwargs["attention_mask"] = mask
            want_pos = [[past + j for j in range(s)] for _ in range(b)]
            given = rng.random()
            if given < 0.2:  # position_ids as generate() passes them: any values, 1 or b rows
                one = rng.random() < 0.5
                ids = torch.tensor([[rng.randint(0, 5000) for _ in range(s)]
                                    for _ in range(1 if one else b)],
                                   dtype=rng.choice([torch.int64, torch.int32])).view(-1, s)
                kwargs["position_ids"] = ids
                want_pos = ids.tolist() * b if one else ids.tolist()
            elif given < 0.3:  # cache_position only: one row for every batch row
                cp = torch.tensor([rng.randint(0, 5000) for _ in range(s)])
                kwargs["cache_position"] = cp
                want_pos = [cp.tolist()] * b
            requests = rng.choice([None, rng.randint(0, 9), [rng.randint(0, 99) for _ in range(b)]])
            small = with_small(10 ** 9, ut._token_context, (), kwargs, requests)
            large = with_small(0, ut._token_context, (), kwargs, requests)
            made = []  # the leased way: tensors filled in place, made once per shape

            def lease(b, s):
                if not made:
                    made.append((torch.full((b, s), -7, dtype=torch.int64),
                                 torch.full((b, s), -7, dtype=torch.int64)))
                pos, req = made[0]
                return pos, req, memoryview(pos.view(-1).numpy()), memoryview(req.view(-1).numpy())

            leased = with_small(10 ** 9, ut._token_context, (), kwargs, requests, lease)
            self.assertTrue(b * s == 0 or leased[0] is made[0][0], "seed %d: not leased" % seed)
            if b * s and "position_ids" not in kwargs and "cache_position" not in kwargs:
                self.assertIsNotNone(leased[4], "seed %d: the runs as made" % seed)
            rows = (range(b) if requests is None else
                    range(requests, requests + b) if isinstance(requests, int) else requests)
            want_req = [[r] * s for r in rows]
            for got in (small, large, leased):
                pos, req, keep, flat, segments = got
                if segments is not None:  # as _segments() makes them
                    self.assertEqual(segments, ut._segments(pos, req), "seed %d" % seed)
                self.assertEqual(tuple(pos.shape), (b, s), "seed %d" % seed)
                self.assertEqual(tuple(req.shape), (b, s), "seed %d" % seed)
                self.assertEqual(pos.tolist(), want_pos, "seed %d" % seed)
                self.assertEqual(req.tolist(), want_req, "seed %d" % seed)
                self.assertEqual((pos.dtype, req.dtype), (torch.int64, torch.int64))
                self.assertTrue(pos.is_contiguous() and req.is_contiguous())
                self.assertIs(flat, False)
                mask = kwargs.get("attention_mask")
                if mask is None or bool((mask[:, -s:] != 0).all()):
                    self.assertIsNone(keep, "seed %d" % seed)
                else:
                    self.assertEqual(keep.tolist(), (mask[:, -s:] != 0).tolist(), "seed %d" % seed)


if __name__ == "__main__":
    unittest.main()

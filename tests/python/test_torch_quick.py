"""The hooks' quick lane (Capture._quick: one ctypes call on a descriptor
made once per thread, name, shape and dtype), and its compiled form
(capture/torch/hook.c, which takes the hooks' captures it can and leaves
the rest to the Python hook), write what capture() writes: the same runs
made three times, once with the compiled lane, once with the Python quick
lane alone (ULPPROF_TORCH_HOOK=0) and once with both turned off (every
capture through capture(), the general path), give
files equal dataset by dataset and attribute by attribute, but for the
times of day (and /index and /journal, whose records hold them).  Runs:
data, digest and both modes; batch 1 and 3; every tuple element and the
key and value projections captured (outputs="all", kv=True); passes
repeated (the keys of recomputed tokens), prompts of other lengths, int32
token ids, the user's own capture() between calls (the step of the call
before, which the session is told only then), and select rows (where
the quick lane does not apply).  The quick lane must have been taken, and
must not have been taken where it does not apply."""
import os
import tempfile
import unittest

import torch_env

torch = torch_env.setup("test_torch_quick")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tiny_model  # noqa: E402
import ulpprof.torch as ut  # noqa: E402

TIMES = ("time_ns", "created_unix_ns")  # what two runs of one process never share


def compiled_hooks(model):
    """The compiled hooks on the model's modules."""
    hooks = [h for m in model.modules() for h in m._forward_hooks.values()]
    return [h for h in hooks if type(h).__name__ == "Hook"]


def run(path, mode, batch, lane, **options):
    """The same calls, with lane "compiled", "python" (the quick lane in
    Python alone) or "general" (both off); returns how many captures the
    quick lanes took, the compiled one's apart: (python, compiled)."""
    taken = [0]
    real = ut.Capture._quick

    def counted(self, *a):
        if lane == "general":
            return False
        done = real(self, *a)
        taken[0] += bool(done)
        return done

    ut.Capture._quick = counted
    os.environ["ULPPROF_TORCH_HOOK"] = "1" if lane == "compiled" else "0"
    try:
        model, ids = tiny_model.make(batch, tokens=5, layers=2)
        with torch.no_grad(), ut.capture(model, path, label="q", mode=mode, **options) as cap:
            hooks = compiled_hooks(model)
            if lane == "compiled":  # every hook but the logits' (their tokens, in Python)
                assert len(hooks) == 8, "%d compiled hooks" % len(hooks)
            else:
                assert not hooks
            model(ids)
            model(ids)  # the same tokens again: moved keys
            model(ids[:, :3])  # a prefix: all taken
            model(ids.to(torch.int32))
            cap.capture("mine", torch.arange(6.0).view(2, 3))
            model(torch.cat([ids, ids[:, :2]], 1))  # longer: two new positions
            compiled = sum(h.taken for h in hooks)
    finally:
        ut.Capture._quick = real
        os.environ.pop("ULPPROF_TORCH_HOOK")
    return taken[0], compiled


def items(path):
    """{object path: (value bytes or None, {attribute: value})} of a file,
    times left out."""
    out = {}

    def attrs(obj):
        return {k: np.asarray(v).tobytes() if not isinstance(v, (str, bytes)) else v
                for k, v in obj.attrs.items() if k not in TIMES}

    def visit(name, obj):
        # Records of the captures with their times: the index's, and the journal's of kept
        # captures (format/journal_kept.h: time_ns in the record head).
        if name.startswith("index") or name == "journal":
            return
        if isinstance(obj, h5py.Dataset):
            v = obj[()]
            if v.dtype.names:  # a compound (digest occurrences): times left out
                v = np.array([tuple(r[n] for n in v.dtype.names if n not in TIMES)
                              for r in np.atleast_1d(v)], dtype=object)
                v = repr(v.tolist()).encode()
            elif v.dtype == object or isinstance(v, bytes):  # strings
                v = repr(np.asarray(v).tolist()).encode()
            else:
                v = np.asarray(v).tobytes()
            out[name] = (v, attrs(obj))
        else:
            out[name] = (None, attrs(obj))

    with h5py.File(path, "r") as f:
        out["/"] = (None, attrs(f))
        f.visititems(visit)
    return out


class QuickTest(unittest.TestCase):
    def test_same_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            for mode in ("data", "digest", "both"):
                for batch in (1, 3):
                    for options in ({}, {"select": [0]}, {"outputs": "all", "kv": True}):
                        a, b, c = (os.path.join(tmp, "%s-%d-%d-%s.h5" % (
                            mode, batch, len(options), w)) for w in "abc")
                        py, none = run(a, mode, batch, "python", **options)
                        self.assertEqual(none, 0)
                        self.assertEqual(run(b, mode, batch, "general", **options), (0, 0))
                        py_c, compiled = run(c, mode, batch, "compiled", **options)
                        if "select" in options:
                            self.assertEqual((py, py_c, compiled), (0, 0, 0),
                                             "select rows: the quick lane applies not")
                        elif options:  # tuples' other tensors: in Python, on both
                            self.assertGreater(compiled, 0)
                        else:  # embeddings, 2 x (attention, MLP, layer), norm, logits,
                            # input_ids: 10 a call, 5 calls; ids[:, :3] of 3 rows is not
                            # contiguous: its input_ids go the general way
                            self.assertEqual(py, 50 - (batch > 1), "%s batch %d: quick lane %d times"
                                             % (mode, batch, py))
                            # compiled: the 8 hooked modules but the logits' of calls 2
                            # and 4, which repeat call 1's shapes (a shape's first call
                            # makes its descriptors, in the Python lane)
                            self.assertEqual((compiled, py_c), (16, 34 - (batch > 1)),
                                             "%s batch %d" % (mode, batch))
                        ia, ib, ic = items(a), items(b), items(c)
                        for other, lane in ((ib, "general"), (ic, "compiled")):
                            self.assertEqual(sorted(ia), sorted(other), "%s batch %d %s"
                                             % (mode, batch, lane))
                            for k in ia:
                                self.assertEqual(ia[k], other[k], "%s batch %d %s %s: %s differs"
                                                 % (mode, batch, options, lane, k))
                        with h5py.File(a, "r") as f:
                            if mode != "data":
                                self.assertIn("digests", f)
                            else:  # made after the 4th call: that call's step
                                self.assertEqual(int(f["captures/mine/0"].attrs["step"]), 3)


if __name__ == "__main__":
    unittest.main()

"""The step of a capture made outside a forward call (cap.capture() between
calls): the step of the last forward call of any capture on its file, which
the session is told only when such a capture comes (a forward call's own
captures carry theirs); cap.step(n) sets it at once.  Also: a capture
closed during a forward call (by another tool's hook on a module) makes the
rest of the call's hooks warn, not call the library on a closed session,
and the model's run goes on bitwise; request ids that are not ints are
refused by capture(), not by the forward."""
import contextlib
import io
import os
import tempfile
import unittest

import torch_env

torch = torch_env.setup("test_torch_step")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tiny_model  # noqa: E402
import ulpprof.torch as ut  # noqa: E402


def step_of(path, name):
    with h5py.File(path, "r") as f:
        g = f["captures"][name]
        return [int(g[k].attrs["step"]) if "step" in g[k].attrs else None
                for k in sorted(g, key=int)]


class StepTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "s.h5")

    def tearDown(self):
        self.tmp.cleanup()

    def test_between_calls(self):
        model, ids = tiny_model.make(1, tokens=3, layers=1)
        x = torch.ones(2)
        with torch.no_grad(), ut.capture(model, self.path) as cap:
            cap.capture("mine", x)  # before any call: no step
            model(ids)
            model(ids)
            cap.capture("mine", x)  # the last call's: 1
            cap.step(7)
            cap.capture("mine", x)  # set at once: 7
            model(ids)
            cap.capture("mine", x)  # the call after: 2
            cap.capture("mine", x)  # still 2
        self.assertEqual(step_of(self.path, "mine"), [None, 1, 7, 2, 2])
        self.assertEqual(step_of(self.path, "lm_head"), [0, 1, 2])

    def test_shared_file(self):
        # Two captures on one file: a capture of B between A's calls gets A's step.
        a_model, ids = tiny_model.make(1, tokens=3, layers=1)
        b_model, _ = tiny_model.make(1, tokens=3, layers=1, seed=1)
        with torch.no_grad(), ut.capture(a_model, self.path) as a, \
                ut.capture(b_model, self.path, prefix="b.") as b:
            for _ in range(3):
                a_model(ids)
            b.capture("mine", torch.ones(2))
            b_model(ids)
            a.capture("mine2", torch.ones(2))
        self.assertEqual(step_of(self.path, "mine"), [2])
        self.assertEqual(step_of(self.path, "mine2"), [0])  # B's first call

    def test_closed_during_call(self):
        model, ids = tiny_model.make(1, tokens=3, layers=2)
        with torch.no_grad():
            bare = model(ids)
            holder = {"calls": 0}

            def close_on_second(m, i, o):
                holder["calls"] += 1
                if holder["calls"] == 2:
                    holder["cap"].close()

            # Registered before capture(): runs before our hook on the same module,
            # in the second call, whose descriptors the first one made.
            handle = model.model.layers[0].register_forward_hook(close_on_second)
            holder["cap"] = cap = ut.capture(model, self.path)
            model(ids)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                got = model(ids)
            handle.remove()
        self.assertTrue(torch.equal(got, bare))
        self.assertIn("not captured", err.getvalue())
        self.assertTrue(cap._closed)
        with h5py.File(self.path, "r") as f:  # the second call's captures up to layer 0
            self.assertEqual(len(f["captures"]["model.embed_tokens"]), 2)
            self.assertEqual(len(f["captures"]["lm_head"]), 1)

    def test_request_ids(self):
        model, _ = tiny_model.make(2, tokens=3, layers=1)
        with self.assertRaisesRegex(TypeError, "requests: one int per batch row"):
            ut.capture(model, self.path, requests=[3.0, 4.0])
        with ut.capture(model, self.path, requests=np.array([3, 4])) as cap:
            self.assertEqual(cap._requests, [3, 4])


if __name__ == "__main__":
    unittest.main()

"""Capture.paused(): inside the `with` block the model runs as if it were not
captured (no hooks on its modules, its own forward, nothing in the file,
no step counted) and gives bitwise the logits it gives captured; after it,
the capture goes on where it was.  Also: close() inside the block, a
capture stacked on top of the paused one (its wrapper above ours: the
paused one passes calls through), a pause inside a pause, another tool's
hook that replaces an output (ours keeps its place before it), and a
capture made inside the block (its wrapper stays; ours goes on top)."""
import os
import tempfile
import unittest

import torch_env

torch = torch_env.setup("test_torch_paused")
import h5py  # noqa: E402
import tiny_model  # noqa: E402
import ulpprof.torch as ut  # noqa: E402


def hooks(model):
    return sum(len(m._forward_hooks) for m in model.modules())


def steps(path, name="lm_head"):
    """The steps of `name`'s captures, in capture order."""
    with h5py.File(path, "r") as f:
        g = f["captures"][name]
        return [int(g[k].attrs["step"]) for k in sorted(g, key=int)]


class PausedTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.model, self.ids = tiny_model.make(2, tokens=4, layers=2)
        with torch.no_grad():
            self.bare = self.model(self.ids)
        self.assertNotIn("forward", self.model.__dict__)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_paused_is_bare(self):
        model, ids = self.model, self.ids
        with torch.no_grad(), ut.capture(model, self.path("a.h5")) as cap:
            n = hooks(model)
            self.assertGreater(n, 0)
            self.assertTrue(torch.equal(model(ids), self.bare))
            with cap.paused():
                self.assertEqual(hooks(model), 0)
                self.assertNotIn("forward", model.__dict__)  # the class's forward
                self.assertTrue(torch.equal(model(ids), self.bare))
                self.assertTrue(torch.equal(model(ids), self.bare))
            self.assertEqual(hooks(model), n)
            self.assertIs(model.__dict__["forward"], cap._wrapper)
            self.assertTrue(torch.equal(model(ids), self.bare))
        self.assertEqual(hooks(model), 0)
        self.assertNotIn("forward", model.__dict__)
        self.assertEqual(steps(self.path("a.h5")), [0, 1])  # the paused calls: no step

    def test_close_inside(self):
        model, ids = self.model, self.ids
        with torch.no_grad():
            cap = ut.capture(model, self.path("b.h5"))
            model(ids)
            with cap.paused():
                cap.close()
            self.assertEqual(hooks(model), 0)
            self.assertNotIn("forward", model.__dict__)
            self.assertTrue(torch.equal(model(ids), self.bare))
        self.assertEqual(steps(self.path("b.h5")), [0])

    def test_under_another(self):
        model, ids = self.model, self.ids
        with torch.no_grad(), ut.capture(model, self.path("low.h5")) as low, \
                ut.capture(model, self.path("top.h5")) as top:
            with low.paused():
                self.assertIs(model.__dict__["forward"], top._wrapper)  # not ours to unwrap
                self.assertTrue(torch.equal(model(ids), self.bare))
                with low.paused():  # a pause inside a pause: nothing more
                    self.assertTrue(torch.equal(model(ids), self.bare))
            with top.paused():
                self.assertIs(model.__dict__["forward"], low._wrapper)
                self.assertTrue(torch.equal(model(ids), self.bare))
            self.assertTrue(torch.equal(model(ids), self.bare))
        self.assertNotIn("forward", model.__dict__)
        self.assertEqual(steps(self.path("top.h5")), [0, 1, 2])
        self.assertEqual(steps(self.path("low.h5")), [0, 1])

    def test_hooks_keep_their_place(self):
        # A hook registered after capture() that replaces the output runs after
        # ours: we capture the module's own output before the pause and after.
        model, ids = self.model, self.ids
        with torch.no_grad(), ut.capture(model, self.path("o.h5")) as cap:
            model.lm_head.register_forward_hook(lambda m, i, o: o * 0)
            model(ids)
            with cap.paused():
                self.assertFalse(bool(model(ids).any()))  # the other tool's hook still runs
            model(ids)
        with h5py.File(self.path("o.h5"), "r") as f:
            g = f["captures"]["lm_head"]
            for k in g:
                self.assertTrue(torch.equal(torch.from_numpy(g[k][()]), self.bare),
                                "lm_head/%s: not the module's own output" % k)

    def test_wrapped_inside(self):
        # A capture made inside the block keeps its wrapper after it; ours goes
        # on top and both capture every call with its rows.
        model, ids = self.model, self.ids
        with torch.no_grad(), ut.capture(model, self.path("out.h5")) as outer:
            model(ids)
            with outer.paused():
                inner = ut.capture(model, self.path("in.h5"))
                model(ids)
            self.assertIs(model.__dict__["forward"], outer._wrapper)
            self.assertTrue(torch.equal(model(ids), self.bare))
            inner.close()
            self.assertTrue(torch.equal(model(ids), self.bare))
        self.assertNotIn("forward", model.__dict__)
        self.assertEqual(steps(self.path("out.h5")), [0, 1, 2])
        self.assertEqual(steps(self.path("in.h5")), [0, 1])
        with h5py.File(self.path("in.h5"), "r") as f:
            self.assertIn("input_ids", f["captures"])
            for k in f["captures"]["lm_head"]:
                self.assertIn("positions", f["captures"]["lm_head"][k].attrs)


if __name__ == "__main__":
    unittest.main()

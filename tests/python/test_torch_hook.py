"""The compiled hook (capture/torch/hook.c) where it leaves the quick lane:
the library refusing a capture, an error inside the capture, a copied
model, a closed session.  Each must do what the Python hook does: the
refusal said once and the tensor captured without its rows (as
Capture._refused does), the error said once per name and never raised
into the model, the copy hooked by the same objects, and nothing called
on a closed session's handle.  The model's outputs stay bitwise those of
the model without capture throughout.  (That the compiled lane writes
what the Python lanes write is test_torch_quick.)"""
import contextlib
import copy
import ctypes
import io
import os
import tempfile
import unittest

import torch_env

torch = torch_env.setup("test_torch_hook")
import h5py  # noqa: E402
import tiny_model  # noqa: E402
import ulpprof._hookmod as hookmod  # noqa: E402
import ulpprof.torch as ut  # noqa: E402

STATUS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


def compiled(model):
    return [h for m in model.modules() for h in m._forward_hooks.values()
            if type(h).__name__ == "Hook"]


def bounds(cap):
    """The descriptors the lanes made on this thread (Capture._quick's)."""
    return list(getattr(cap._local, "quick", {}).values())


class HookTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.model, self.ids = tiny_model.make(1, tokens=4, layers=2)
        with torch.no_grad():
            self.want = self.model(self.ids).clone()  # before any hook

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_refused(self):
        """A refusal with rows (ULP_EINVAL) captures the tensor without them,
        said once a name; the library's function is the one the descriptor
        names (here a stand-in that refuses)."""
        calls = []

        @STATUS
        def refuse(session, desc):
            calls.append(desc)
            return -1  # ULP_EINVAL

        err = io.StringIO()
        with torch.no_grad(), contextlib.redirect_stderr(err), \
                ut.capture(self.model, self.path("r.h5"), label="r") as cap:
            hooks = compiled(self.model)
            self.assertEqual(len(hooks), 8)
            self.model(self.ids)  # the descriptors made, in the Python lane
            for b in bounds(cap):
                b[7] = ctypes.cast(refuse, ctypes.c_void_p).value
            out = self.model(self.ids)
        self.assertTrue(torch.equal(out, self.want))
        self.assertEqual(len(calls), 8)
        self.assertEqual(sum(h.taken for h in hooks), 8)
        with h5py.File(self.path("r.h5"), "r") as f:
            for name in ("model.embed_tokens", "model.layers.0.mlp", "model.norm"):
                self.assertIn("positions", f["captures"][name]["0"].attrs)
                self.assertNotIn("positions", f["captures"][name]["1"].attrs, name)
                self.assertEqual(int(f["captures"][name]["1"].attrs["step"]), 1)
        lines = [x for x in err.getvalue().splitlines() if "token rows refused" in x]
        self.assertEqual(len(lines), 8, err.getvalue())

    def test_error_said_once(self):
        """An error inside the capture (here the keys' filing) is said once
        per name, whichever lane met it, and the model runs on."""
        real = ut._Keys.file

        def broken(self, *a, **k):
            raise RuntimeError("no keys today")

        err = io.StringIO()
        ut._Keys.file = broken
        try:
            with torch.no_grad(), contextlib.redirect_stderr(err), \
                    ut.capture(self.model, self.path("e.h5"), label="e") as cap:
                hooks = compiled(self.model)
                outs = [self.model(self.ids) for _ in range(3)]
                self.assertTrue(bounds(cap))
        finally:
            ut._Keys.file = real
        for out in outs:
            self.assertTrue(torch.equal(out, self.want))
        self.assertEqual(sum(h.taken for h in hooks), 16)  # calls 2 and 3
        said = [x for x in err.getvalue().splitlines() if "no keys today" in x]
        self.assertEqual(len(said), len(set(said)), err.getvalue())
        self.assertIn("ulpprof.torch: model.layers.1.self_attn not captured: RuntimeError: "
                      "no keys today", said)

    def test_copies(self):
        """copy.deepcopy of a hooked model keeps the same hook objects, as
        it keeps Python function hooks, and the copy computes the same."""
        with torch.no_grad(), ut.capture(self.model, self.path("c.h5"), label="c"):
            twin = copy.deepcopy(self.model)
            self.assertEqual([id(h) for h in compiled(twin)],
                             [id(h) for h in compiled(self.model)])
            self.assertTrue(torch.equal(twin(self.ids), self.want))
            self.assertTrue(torch.equal(self.model(self.ids), self.want))

    def test_closed_session(self):
        """A hook that outlives its session (the Session closed under a
        capture that is still open) calls nothing on the closed handle: the
        Python hook then says that the capture failed."""
        err = io.StringIO()
        with torch.no_grad(), contextlib.redirect_stderr(err):
            cap = ut.capture(self.model, self.path("s.h5"), label="s")
            hooks = compiled(self.model)
            self.model(self.ids)
            cap._session.close()
            out = self.model(self.ids)
            cap.close()
        self.assertTrue(torch.equal(out, self.want))
        self.assertEqual(sum(h.taken for h in hooks), 0)
        self.assertIn("failed (ulp_status", err.getvalue())

    def test_module_found(self):
        """The build has the compiled hook and the package loads it (the
        other tests would pass, vacuously, on the Python lane alone)."""
        hookmod._lib.library()
        self.assertIsNotNone(hookmod.module())
        os.environ["ULPPROF_TORCH_HOOK"] = "0"
        try:
            self.assertIsNone(hookmod.module())
        finally:
            del os.environ["ULPPROF_TORCH_HOOK"]


if __name__ == "__main__":
    unittest.main()

"""The compiled hook (capture/torch/hook.c) where it leaves the quick lane:
the library refusing a capture, an error inside the capture (and a
KeyboardInterrupt, which both lanes let through), a copied model, a closed
session, one closed while a hook waits for the keys' lock and one closed
while a hook's library call runs (the library must not be called on the
freed handle, nor the handle freed under a call).  Each must do what the Python hook does: the
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
import threading
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


class GateLock:
    """_Keys' lock, which holds the arm_at-th blocking acquire after arm()
    until go is set, saying so (waiting); armed, it refuses every acquire
    that does not wait (the compiled hook's: it then calls file())."""

    def __init__(self):
        self.lock = threading.Lock()
        self.waiting, self.go = threading.Event(), threading.Event()
        self.armed, self.count = None, 0

    def arm(self, at):
        self.armed, self.count = at, 0

    def acquire(self, blocking=True, timeout=-1):
        if self.armed is not None:
            if not blocking:
                return False
            self.count += 1
            if self.count == self.armed:
                self.waiting.set()
                assert self.go.wait(60), "never let go"
        return self.lock.acquire(blocking, timeout)

    def release(self):
        self.lock.release()

    def __enter__(self):
        self.acquire()

    def __exit__(self, *exc):
        self.release()


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

    def test_closed_while_waiting(self):
        """The session closed while a hook waits in _Keys.file() (another
        thread holds the lock): the capture is refused as closed, in both
        lanes, and the model runs on."""
        real_init = ut._Keys.__init__
        gates = []

        def gated(keys):
            real_init(keys)
            keys._lock = GateLock()
            gates.append(keys._lock)

        for lane in ("1", "0"):
            gates.clear()
            err = io.StringIO()
            os.environ["ULPPROF_TORCH_HOOK"] = lane
            ut._Keys.__init__ = gated
            try:
                with torch.no_grad(), contextlib.redirect_stderr(err):
                    cap = ut.capture(self.model, self.path("w%s.h5" % lane), label="w",
                                     match=r"layers\.0\.mlp$")
                    hooks = compiled(self.model)
                    self.assertEqual(len(hooks), 1 if lane == "1" else 0)
                    outs, closed, late = [], [], []
                    real = cap._session._lib.ulp_session_capture

                    def counted(h, d):
                        if closed:
                            late.append(d)  # the library called on a closed handle
                            return -14
                        return real(h, d)

                    shim = STATUS(counted)

                    def work():
                        outs.append(self.model(self.ids))  # this thread's descriptors
                        for b in bounds(cap):  # both lanes' calls go through counted()
                            b[0], b[7] = counted, ctypes.cast(shim, ctypes.c_void_p).value
                        gates[0].arm(2)  # input_ids' keys pass; the MLP's wait
                        outs.append(self.model(self.ids))

                    t = threading.Thread(target=work)
                    t.start()
                    self.assertTrue(gates[0].waiting.wait(60))
                    closed.append(1)
                    cap._session.close()
                    gates[0].go.set()
                    t.join(60)
                    self.assertFalse(t.is_alive())
                    cap.close()
            finally:
                ut._Keys.__init__ = real_init
                del os.environ["ULPPROF_TORCH_HOOK"]
            self.assertEqual(late, [], "lane %s called the library after the close" % lane)
            self.assertEqual(len(outs), 2)
            for out in outs:
                self.assertTrue(torch.equal(out, self.want))
            if lane == "1":
                self.assertEqual(sum(h.taken for h in hooks), 1)  # the second call's
            self.assertIn("capture of model.layers.0.mlp failed (ulp_status -14)",
                          err.getvalue(), lane)

    def test_closed_during_call(self):
        """The session closed while a hook's library call runs (without the
        GIL) on another thread: close() waits for the call to return before
        the handle goes, in both lanes; the call itself completes, and the
        model runs on."""
        for lane in ("1", "0"):
            os.environ["ULPPROF_TORCH_HOOK"] = lane
            err = io.StringIO()
            try:
                with torch.no_grad(), contextlib.redirect_stderr(err):
                    cap = ut.capture(self.model, self.path("c%s.h5" % lane), label="c",
                                     match=r"layers\.0\.mlp$")
                    session = cap._session
                    lib = session._lib
                    real, real_close = lib.ulp_session_capture, lib.ulp_session_close
                    events, inside, let_go = [], threading.Event(), threading.Event()

                    def held(h, d):
                        if not inside.is_set():
                            events.append("call")
                            inside.set()
                            assert let_go.wait(60), "never let go"
                            events.append("call returns")
                        return real(h, d)

                    shim = STATUS(held)

                    def closing(h):
                        events.append("handle freed")
                        return real_close(h)

                    outs = []

                    def work():
                        outs.append(self.model(self.ids))  # this thread's descriptors
                        for b in bounds(cap):
                            b[0], b[7] = held, ctypes.cast(shim, ctypes.c_void_p).value
                        outs.append(self.model(self.ids))

                    lib.ulp_session_close = closing
                    t = threading.Thread(target=work)
                    closer = threading.Thread(target=session.close)
                    try:
                        t.start()
                        self.assertTrue(inside.wait(60))
                        closer.start()
                        closer.join(0.3)
                        # still waiting for the call: the handle is not freed under it
                        self.assertTrue(closer.is_alive(), lane)
                        self.assertEqual(events, ["call"], lane)
                    finally:
                        let_go.set()
                        t.join(60)
                        if closer.ident is not None:
                            closer.join(60)
                        lib.ulp_session_close = real_close
                    self.assertFalse(t.is_alive() or closer.is_alive())
                    cap.close()
            finally:
                del os.environ["ULPPROF_TORCH_HOOK"]
            self.assertEqual(events, ["call", "call returns", "handle freed"], lane)
            self.assertEqual(len(outs), 2)
            for out in outs:
                self.assertTrue(torch.equal(out, self.want))

    def test_interrupt_passes(self):
        """A KeyboardInterrupt inside the capture reaches the model's caller,
        in both lanes (the hooks catch Exceptions only)."""
        real = ut._Keys.file
        armed = []

        def interrupted(keys, name, *a, **k):
            if armed and name == "model.layers.0.mlp":
                raise KeyboardInterrupt
            return real(keys, name, *a, **k)

        ut._Keys.file = interrupted
        try:
            for lane in ("1", "0"):
                armed.clear()
                os.environ["ULPPROF_TORCH_HOOK"] = lane
                with torch.no_grad(), ut.capture(self.model, self.path("k%s.h5" % lane),
                                                 label="k"):
                    self.model(self.ids)
                    armed.append(1)
                    with self.assertRaises(KeyboardInterrupt, msg=lane):
                        self.model(self.ids)  # the same positions: file() decides
                    armed.clear()
                    self.assertTrue(torch.equal(self.model(self.ids), self.want))
        finally:
            ut._Keys.file = real
            os.environ.pop("ULPPROF_TORCH_HOOK", None)

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

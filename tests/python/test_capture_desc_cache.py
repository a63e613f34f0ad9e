"""Session.capture keeps one ctypes descriptor per kind of capture (name,
dtype, shape, layer, role, rows, inputs) and sets only the data, step,
positions and requests per call.  Checked: captures of one name that
alternate between kinds (with and without positions, with and without
requests, another shape, layer, role, inputs, step) are each written with
their own bytes and attributes, read back with h5py and compared with what
was passed (nothing of one call leaks into the next), in data and digest
mode, and a rank over the mirror's 8 still takes the general path (refused
by the library, as before).
"""
import os
import sys
import tempfile

import h5py
import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", ".")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
from ulpprof import _lib  # noqa: E402

import digests_h5  # noqa: E402  (h5py alone, both layouts)

fails = []


def check(cond, what):
    if not cond:
        fails.append(what)


def calls():
    """(data, kwargs) of the captures of name "x", in order."""
    out = []
    for i in range(12):
        kind = i % 4
        rows = 2 + (i % 2)
        a = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3) + 100 * i
        pos = np.arange(rows, dtype=np.int64) + 10 * i
        req = np.full(rows, i, dtype=np.int64)
        kw = {"layer": i % 3, "role": "activation" if kind != 3 else "logits", "step": 7 * i}
        if kind in (0, 1):
            kw.update(positions_ptr=pos.ctypes.data, row_rank=1)
            if kind == 1:
                kw.update(requests_ptr=req.ctypes.data)
        if kind == 2:
            kw.update(inputs=["in%d" % (i % 2)])
        out.append((a, pos, req, kind, kw))
    return out


for mode in ("data", "digest"):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "c.h5")
        s = _lib.Session(path, label="cache")
        if mode != "data":
            s.set_capture_mode(mode)
        made = calls()
        for a, pos, req, kind, kw in made:
            st = s.capture("x", a.ctypes.data, "f32", list(a.shape), **kw)
            check(st == 0, "%s: capture status %d" % (mode, st))
        big = np.zeros([1] * 9, dtype=np.float32)
        st = s.capture("y", big.ctypes.data, "f32", list(big.shape))
        check(st != 0, "%s: a rank-9 capture was accepted" % mode)
        check(s.close() == 0, "%s: close failed" % mode)
        with h5py.File(path, "r") as f:
            group = f["captures/x"] if mode == "data" else digests_h5.read(f)["x"]
            check(len(group) == len(made), "%s: %d occurrences, %d captured"
                  % (mode, len(group), len(made)))
            for i, (a, pos, req, kind, kw) in enumerate(made):
                ds = group[str(i)] if mode == "data" else group[i]
                at = ds.attrs
                where = "%s occurrence %d" % (mode, i)
                if mode == "data":
                    check(np.array_equal(ds[()], a), where + ": bytes")
                else:
                    check(ds.shape == (a.shape[0],), where + ": %s digests" % (ds.shape,))
                    check(list(at["shape"]) == list(a.shape), where + ": shape")
                check(int(at["step"]) == kw["step"], where + ": step %s" % at["step"])
                check(int(at["layer"]) == kw["layer"], where + ": layer")
                role = at["role"].decode() if isinstance(at["role"], bytes) else at["role"]
                check(role == kw["role"], where + ": role %s" % role)
                if kind in (0, 1):
                    check(list(at["positions"]) == list(pos), where + ": positions")
                else:
                    check("positions" not in at, where + ": positions of another call")
                if kind == 1:
                    check(list(at["requests"]) == list(req), where + ": requests")
                else:
                    check("requests" not in at, where + ": requests of another call")
                if kind == 2:
                    got = [v.decode() if isinstance(v, bytes) else v for v in at["inputs"]]
                    check(got == kw["inputs"], where + ": inputs %s" % got)
                else:
                    check("inputs" not in at, where + ": inputs of another call")

for f in fails:
    print("FAIL: " + f)
print("test_capture_desc_cache: %s" % ("FAIL" if fails else "ok"))
sys.exit(1 if fails else 0)

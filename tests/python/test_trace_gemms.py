#!/usr/bin/python3
"""Session.trace_gemms(): a Python producer's GEMM rows in /trace/gemms.

Rows passed through the ctypes binding (ulp_session_trace_gemms) are read
back with h5py, field by field, and must be exactly what was passed: every
integer column at its extremes, every text column up to its last byte
(one less than the column: the NUL), a field left out 0 or "".  The range
trace_gemms() returns is where the rows are in /trace/gemms, counted by
hand here; capture(..., gemms=range) stores it as the capture's `gemms`
attribute, and `ulpprof contract emit` then takes the capture as the GEMM
site of those rows (docs/contract.md), and `ulpprof repair`'s copy keeps
them.  An unknown field or a text too long for its column is a ValueError
and writes nothing.
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
from ulpprof import _lib  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


ROWS = [
    dict(seq=1, api="torch.matmul cpu", m=127, n=512, k=256, batch=1, transa="N", transb="T",
         a_type="bf16", b_type="bf16", c_type="f32", d_type="f32", compute="32F",
         algo="mkl", algo_id=-1, tile="128x128", stages="2 k-lanes", splitk=4,
         reduction="none", swizzle=0, custom=7, cluster="1x1x1", epilogue=3,
         workspace=1 << 40, corr_first=5, corr_last=9, status=0),
    # Every integer column at an extreme, every text column full (its size - 1).
    dict(seq=2 ** 64 - 1, api="a" * 31, stream=2 ** 64 - 1, m=2 ** 63 - 1, n=-(2 ** 63), k=1,
         batch=-1, transa="CCC", transb="NNN", a_type="x" * 11, b_type="y" * 11,
         c_type="z" * 11, d_type="w" * 11, compute="c" * 23, algo="g" * 11,
         algo_id=-(2 ** 31), tile="t" * 15, stages="s" * 15, splitk=2 ** 31 - 1,
         reduction="r" * 11, swizzle=-1, custom=2 ** 31 - 1, cluster="u" * 15,
         epilogue=-(2 ** 31), workspace=2 ** 64 - 1, corr_first=2 ** 32 - 1,
         corr_last=0, status=-7),
    dict(m=15),  # everything else left out
]
MORE = [dict(seq=9, api="cblas_sgemm", m=15, n=64, k=256, a_type="f32", b_type="f32",
             d_type="f32", compute="32F", algo="Haswell")]


def want(row, field):
    v = row.get(field)
    if v is None:
        return b"" if field in TEXT else 0
    return v.encode() if isinstance(v, str) else v


TEXT = ("api", "transa", "transb", "a_type", "b_type", "c_type", "d_type", "compute", "algo",
        "tile", "stages", "reduction", "cluster")


def main():
    tmp = tempfile.mkdtemp(prefix="test_trace_gemms.")
    path = os.path.join(tmp, "g.h5")
    s = _lib.Session(path, label="py")
    check(s.trace_gemms(ROWS) == (0, 3), "first range")
    check(s.trace_gemms([]) == (3, 3), "empty range")
    for bad, what in ((dict(m=1, colour=2), "unknown field"), (dict(api="a" * 32), "too long"),
                      (dict(tile="t" * 16), "too long")):
        try:
            s.trace_gemms([dict(m=3), bad])
            check(False, "%s: no ValueError" % what)
        except ValueError as e:
            check(what.split()[-1] in str(e) or "no field" in str(e), "%s: %s" % (what, e))
    check(s.trace_gemms(MORE) == (3, 4), "range after refused rows: nothing written by them")
    x = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
    st = s.capture("layers.0.mlp", x.ctypes.data, "f32", list(x.shape), layer=0,
                   positions=list(range(4)), row_rank=1, gemms=(0, 3))
    check(st == 0, "capture with gemms: status %d" % st)
    st = s.capture("layers.0.out", x.ctypes.data, "f32", list(x.shape), layer=0,
                   positions=list(range(4)), row_rank=1)
    check(st == 0, "capture without gemms: status %d" % st)
    check(s.close() == 0, "close")
    try:
        s.trace_gemms(MORE)
        check(False, "closed session: no CaptureError")
    except _lib.CaptureError:
        pass

    with h5py.File(path, "r") as f:
        g = f["trace/gemms"][()]
        caps = f["captures"]
        rng = caps["layers.0.mlp"]["0"].attrs.get("gemms")
        other = caps["layers.0.out"]["0"].attrs.get("gemms")
    check(len(g) == 4, "rows in /trace/gemms: %d, want 4" % len(g))
    for i, row in enumerate((ROWS + MORE)[:len(g)]):
        for field in g.dtype.names:
            if field not in _lib.GEMM_FIELDS:
                check(False, "/trace/gemms column %s is no ulp_gemm_info field" % field)
                continue
            got = g[i][field]
            got = bytes(got) if isinstance(got, bytes) else int(got)
            check(got == want(row, field), "row %d %s: %r, want %r" % (i, field, got,
                                                                      want(row, field)))
    check(set(_lib.GEMM_FIELDS) == set(g.dtype.names),
          "columns: %s, mirror %s" % (g.dtype.names, _lib.GEMM_FIELDS))
    check(rng is not None and [int(v) for v in rng] == [0, 3], "capture gemms: %r" % (rng,))
    check(other is None, "capture without gemms has %r" % (other,))

    # ulpprof repair's copy keeps them: a trace of GEMM rows and no kernels (a CPU
    # producer's) is a trace all the same.
    copy = os.path.join(tmp, "g-copy.h5")
    p = subprocess.run([ULPPROF, "repair", path, copy], capture_output=True, text=True)
    check(p.returncode == 0, "repair: %d %s" % (p.returncode, p.stderr))
    if p.returncode == 0:
        with h5py.File(copy, "r") as f:
            got = f["trace/gemms"][()] if "trace/gemms" in f else None
        check(got is not None and got.dtype == g.dtype and np.array_equal(got, g),
              "repair's copy: /trace/gemms %s" % (None if got is None else len(got)))

    # contract emit takes the capture as the site of its rows (M of rows 0-2).
    out = os.path.join(tmp, "c.json")
    p = subprocess.run([ULPPROF, "contract", "emit", path, "-o", out], capture_output=True,
                       text=True)
    check(p.returncode == 0, "emit: %d %s" % (p.returncode, p.stderr))
    if p.returncode == 0:
        site = json.load(open(out))["gemm"].get("layers.0.mlp", {})
        ms = sorted(c["m"] for c in site.get("configs", {}).get("value", []))
        check(ms == sorted(r["m"] for r in ROWS), "emitted site configs' M: %s" % ms)

    if FAILS:
        print("%d failures" % len(FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

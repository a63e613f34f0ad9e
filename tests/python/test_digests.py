"""Row digests at capture and the digest-first diff.

Checks, against an independent computation: the /digests of a digest-mode
capture equal a pure-Python XXH64 (seed = the row's position) of each row's
bytes (and libxxhash's, where the system has it); a permuted row changes
its digest where a xor-sum would not; `ulpprof diff` of a digest run
against a full one names the rows numpy finds different, the first of them
in write order, and a selection; the selection re-captured in full gives
the same first divergence; digest files are over 100x smaller.
"""
import ctypes
import json
import os
import subprocess
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

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def rnd(acc, w):
    return (rotl((acc + w * P2) & M, 31) * P1) & M


def xxh64(b, seed):
    """XXH64 from its specification, independent of the C code."""
    n, p = len(b), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed & M, (seed - P1) & M]
        while p + 32 <= n:
            for k in range(4):
                v[k] = rnd(v[k], int.from_bytes(b[p + 8 * k:p + 8 * k + 8], "little"))
            p += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M
        for k in range(4):
            h = (((h ^ rnd(0, v[k])) * P1) + P4) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while p + 8 <= n:
        h = ((rotl(h ^ rnd(0, int.from_bytes(b[p:p + 8], "little")), 27) * P1) + P4) & M
        p += 8
    if p + 4 <= n:
        h = ((rotl(h ^ ((int.from_bytes(b[p:p + 4], "little") * P1) & M), 23) * P2) + P3) & M
        p += 4
    while p < n:
        h = (rotl(h ^ ((b[p] * P5) & M), 11) * P1) & M
        p += 1
    h ^= h >> 33
    h = (h * P2) & M
    h ^= h >> 29
    h = (h * P3) & M
    return h ^ (h >> 32)


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


def write(path, tensors, mode="data", select=None):
    s = _lib.Session(path, label=os.path.basename(path))
    s.set_capture_mode(mode)
    if select:
        s.select(select)
    for name, x, pos, req in tensors:
        x = np.ascontiguousarray(x)
        st = s.capture(name, x.ctypes.data, "f32", x.shape, positions=pos.ravel().tolist(),
                       requests=req.ravel().tolist(), row_rank=pos.ndim)
        check(st == 0, "capture %s: status %d" % (name, st))
    s.close()


def diff(a, b):
    p = subprocess.run([ULPPROF, "diff", "-f", "json", a, b], capture_output=True, text=True)
    check(p.returncode in (0, 1), "diff exit %d: %s" % (p.returncode, p.stderr))
    return p.returncode, json.loads(p.stdout)


def main():
    # The C hash against the Python one and, where present, libxxhash.
    for n in (0, 1, 3, 4, 7, 8, 31, 32, 33, 100, 8192):
        b = bytes((i * 37 + 11) & 255 for i in range(n))
        for seed in (0, 5, 2**40):
            buf = ctypes.create_string_buffer(b, max(n, 1))
            c = _lib.library().ulp_row_digest(buf, n, seed)
            check(c == xxh64(b, seed), "ulp_row_digest(%d bytes, seed %d)" % (n, seed))
    try:
        x = ctypes.CDLL("libxxhash.so.0")
        x.XXH64.restype = ctypes.c_uint64
        x.XXH64.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
        for n in (0, 5, 12, 40, 1000):
            b = bytes((i * 91 + 3) & 255 for i in range(n))
            check(x.XXH64(b, n, 7) == xxh64(b, 7), "libxxhash agrees on %d bytes" % n)
    except OSError:
        print("libxxhash not found: checked against the Python XXH64 only")

    rng = np.random.default_rng(3)
    B, T, H, L = 2, 6, 2048, 4
    pos = np.tile(np.arange(T, dtype=np.int64), (B, 1))
    req = np.repeat(np.arange(B, dtype=np.int64)[:, None], T, axis=1)
    xs = [rng.standard_normal((B, T, H)).astype(np.float32) for _ in range(L)]
    ys = [x.copy() for x in xs]
    # B differs from layer 2 on: request 1 positions 3..5, then layer 3 more.
    ys[2][1, 3:, 7] = np.nextafter(ys[2][1, 3:, 7], np.float32(9))
    ys[3][1, 2:, :] += 1
    ys[3][0, 5, 0] += 1
    names = ["layer.%d" % i for i in range(L)]
    with tempfile.TemporaryDirectory() as d:
        da, fa, fb = (os.path.join(d, n) for n in ("a_dig.h5", "a_full.h5", "b_full.h5"))
        write(da, [(n, x, pos, req) for n, x in zip(names, xs)], mode="digest")
        write(fa, [(n, x, pos, req) for n, x in zip(names, xs)])
        write(fb, [(n, y, pos, req) for n, y in zip(names, ys)])

        with h5py.File(da) as f:
            check("captures" not in f or len(f["captures"]) == 0, "digest file holds no data")
            for n, x in zip(names, xs):
                dg = digests_h5.read(f)[n][0]
                check(dg.shape == (B, T), "digest shape %s" % (dg.shape,))
                check(list(dg.attrs["shape"]) == [B, T, H], "shape attribute")
                check(dg.attrs["dtype"] == b"f32", "dtype attribute")
                for bi in range(B):
                    for t in range(T):
                        want = xxh64(x[bi, t].tobytes(), int(pos[bi, t]))
                        check(int(dg[bi, t]) == want, "digest of %s[%d,%d]" % (n, bi, t))
        # Order-sensitive: a permuted row digests differently; a xor-sum would not.
        row = xs[0][0, 0]
        perm = row[::-1].copy()
        check(xxh64(row.tobytes(), 0) != xxh64(perm.tobytes(), 0), "permuted row differs")
        xor = lambda a: np.bitwise_xor.reduce(a.view(np.uint32))  # noqa: E731
        check(xor(row) == xor(perm), "the xor-sum cannot tell them apart")

        # Sizes at a realistic hidden size: 16 captures of 256 rows of 2048 f32.
        big = rng.standard_normal((1, 256, H)).astype(np.float32)
        bp = np.arange(256, dtype=np.int64)[None, :]
        br = np.zeros_like(bp)
        zd, zf = os.path.join(d, "big_dig.h5"), os.path.join(d, "big_full.h5")
        write(zd, [("l%d" % i, big, bp, br) for i in range(16)], mode="digest")
        write(zf, [("l%d" % i, big, bp, br) for i in range(16)])
        ra, sa = os.path.getsize(zd), os.path.getsize(zf)
        print("file sizes: digest %d B, data %d B, ratio %.0fx" % (ra, sa, sa / ra))
        check(sa >= 100 * ra, "digest file 100x smaller (%d vs %d)" % (ra, sa))

        # The expected rows, from numpy.
        want_rows = {}
        for n, x, y in zip(names, xs, ys):
            dif = [(int(req[bi, t]), int(pos[bi, t])) for bi in range(B) for t in range(T)
                   if x[bi, t].tobytes() != y[bi, t].tobytes()]
            want_rows[n] = sorted(dif)
        first_name = next(n for n in names if want_rows[n])
        for a in (da,):
            rc, rep = diff(a, fb)
            check(rc == 1, "digest diff says different")
            got = {c["name"]: c for c in rep["captures"]}
            for n in names:
                check(got[n]["rows_differing"] == len(want_rows[n]), "rows differing " + n)
                check(got[n]["rows_compared"] == B * T, "rows compared " + n)
            fd = rep["first_divergence"]
            check(fd["capture"] == first_name and [fd["request"], fd["position"]] ==
                  list(want_rows[first_name][0]), "first divergence %s" % fd)
            check(rep["digests_a"] == (a == da), "digests_a")
        rc, rep = diff(da, fb)
        sel = rep["capture_next"]
        by_req = {}
        for r, p in want_rows[first_name]:
            by_req.setdefault(r, []).append(p)
        want_sel = ",".join("%s@%d:%d-%d" % (first_name, r, min(v), max(v))
                            for r, v in sorted(by_req.items()))
        check(sel == want_sel, "selection %r, expected %r" % (sel, want_sel))
        rc, rep = diff(da, da)
        check(rc == 0 and rep["identical"] and rep["first_divergence"] is None, "self identical")

        # The selection re-captured in full, in both runs.
        sa2, sb2 = os.path.join(d, "a_sel.h5"), os.path.join(d, "b_sel.h5")
        write(sa2, [(n, x, pos, req) for n, x in zip(names, xs)], select=sel)
        write(sb2, [(n, y, pos, req) for n, y in zip(names, ys)], select=sel)
        with h5py.File(sa2) as f:
            check(sorted(f["captures"]) == [first_name], "only the selected name")
            ds = f["captures"][first_name]["0"]
            keys = list(zip(ds.attrs["requests"].tolist(), ds.attrs["positions"].tolist()))
            check(sorted(keys) == want_rows[first_name], "only the selected rows")
            for k, (r, p) in enumerate(keys):
                check(ds[k].tobytes() == xs[names.index(first_name)][r, p].tobytes(),
                      "selected row bytes")
        p = subprocess.run([ULPPROF, "diff", "-f", "json", sa2, sb2], capture_output=True,
                           text=True)
        check(p.returncode == 1, "full diff of the selection differs: %s" % p.stderr)
        full = json.loads(p.stdout)["first_divergence"]
        p = subprocess.run([ULPPROF, "diff", "-f", "json", fa, fb], capture_output=True,
                           text=True)
        ref = json.loads(p.stdout)["first_divergence"]
        check((full["name"], full["request"], full["position"]) ==
              (ref["name"], ref["request"], ref["position"]) ==
              (first_name,) + tuple(want_rows[first_name][0]),
              "the selection's first divergence %s, a full run's %s" % (full, ref))
    print("ok")


if __name__ == "__main__":
    main()

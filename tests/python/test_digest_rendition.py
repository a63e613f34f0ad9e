"""`ulpprof repair --digests`: the digest-only rendition of a data file.

The same tensors (fed token ids, three activation captures with positions
and requests, one without positions, a rank-0 scalar, the produced tokens)
are captured twice through the C capture API, in mode "data" and in mode
"digest", with the same /run and /env attributes.  Checked, with h5py:
- the rendition of the data file holds in /digests exactly what the
  digest-mode capture wrote: the same datasets, byte for byte, with the
  same attributes (time_ns aside, which each capture stamps: the
  rendition's is the data file's), and the digests equal a pure-Python
  XXH64 (seed = position) of each row's bytes as numpy holds them;
- its /captures holds the tokens and fed ids, equal to the digest file's;
  /run and /env are carried;
- `ulpprof diff` of the rendition against the original says identical
  (exit 0), and against a digest-mode capture of perturbed tensors names
  the row numpy finds first different;
- a "both" file renders to the same digests; a "both" file with a
  selection, an OUT that exists and an IN that is no snapshot are refused
  with one line naming the file, exit 2, nothing left behind.
"""
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
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
from ulpprof import _lib  # noqa: E402
from test_digests import xxh64  # noqa: E402  (pure Python, from the specification)
import digests_h5  # noqa: E402  (h5py alone, both layouts)

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


def tensors(bump=None):
    """(name, array, dtype, role, positions, requests, row_rank, layer) in write order."""
    rng = np.random.default_rng(3)
    pos = np.array([0, 1, 2, 3, 0, 1, 2, 3], np.int64)
    req = np.array([0, 0, 0, 0, 1, 1, 1, 1], np.int64)
    ids = np.array([[5], [9], [2], [7], [5], [9], [4], [1]], np.int64)
    out = [("input_ids", ids, "i64", "input", pos, req, 1, -1)]
    for layer in range(3):
        t = rng.standard_normal((8, 4096)).astype(np.float32)
        if bump is not None and bump[0] == layer:
            t[bump[1]].view(np.uint32)[3] += 1
        out.append(("layers.%d.out" % layer, t, "f32", "activation", pos, req, 1, layer))
    # Rows by request and position on two axes (row_rank 2).
    out.append(("attn", rng.standard_normal((2, 4, 3)).astype(np.float32), "f32", "activation",
                pos.reshape(2, 4), req.reshape(2, 4), 2, 1))
    out.append(("norm", rng.standard_normal((5, 4)).astype(np.float32), "f32", "activation",
                None, None, 0, -1))  # no positions: rows by index
    out.append(("scale", np.array(1.5, np.float32), "f32", "weight", None, None, 0, -1))
    tok = np.array([[11, 0.5], [12, 0.25], [13, 0.75], [14, 0.125]], np.float64)
    out.append(("tokens", tok, "f64", "activation", np.array([3, 4, 3, 4], np.int64),
                np.array([0, 0, 1, 1], np.int64), 1, -1))
    return out


def write(path, mode, bump=None, select=None):
    s = _lib.Session(path, label="run")
    s.set_run("seed", "7")
    s.set_capture_mode(mode)
    if select:
        s.select(select)
    for name, x, dtype, role, pos, req, rr, layer in tensors(bump):
        x = np.ascontiguousarray(x)
        st = s.capture(name, x.ctypes.data, dtype, list(x.shape), layer=layer, role=role,
                       positions=None if pos is None else pos.ravel().tolist(),
                       requests=None if req is None else req.ravel().tolist(), row_rank=rr)
        assert st == 0, (name, st)
    assert s.close() == 0


def run(*args):
    return subprocess.run([ULPPROF] + list(args), capture_output=True, text=True, timeout=120)


def attrs(obj, skip=("time_ns",)):
    return {k: np.asarray(v).tolist() if not isinstance(v, (bytes, str)) else v
            for k, v in obj.attrs.items() if k not in skip}


def datasets(f, group):
    out = {}
    if group in f:
        def visit(n, o):
            if isinstance(o, h5py.Dataset):
                out[n] = o
        f[group].visititems(visit)
    return out


def same_digests(fa, fb, what):
    """/digests of both files, read with h5py in either layout: the same
    names, occurrences, digests and metadata (`time_ns` aside)."""
    da, db = digests_h5.read(fa), digests_h5.read(fb)
    check(sorted(da) == sorted(db), "%s: /digests lists %s, digest mode %s"
          % (what, sorted(da), sorted(db)))
    for k in sorted(set(da) & set(db)):
        check(len(da[k]) == len(db[k]), "%s: /digests/%s occurrences" % (what, k))
        for i, (a, b) in enumerate(zip(da[k], db[k])):
            check(a.shape == b.shape and a[()].tobytes() == b[()].tobytes(),
                  "%s: /digests/%s/%d digests differ" % (what, k, i))
            check(attrs(a) == attrs(b), "%s: /digests/%s/%d attributes %r, digest mode %r"
                  % (what, k, i, attrs(a), attrs(b)))
    # the layout aside: a file made for digests is rewritten in packed-2 at its close, one
    # whose mode was set after the open stays packed-1 (FORMAT.md "Digests")
    la, lb = (dict((k, v) for k, v in f["digests"].attrs.items() if k != "layout")
              for f in (fa, fb))
    check(la == lb, "%s: /digests attributes" % what)


def same_group(fa, fb, group, what):
    if group == "digests":
        return same_digests(fa, fb, what)
    da, db = datasets(fa, group), datasets(fb, group)
    check(sorted(da) == sorted(db), "%s: /%s lists %s, digest mode %s"
          % (what, group, sorted(da), sorted(db)))
    for k in sorted(set(da) & set(db)):
        a, b = da[k], db[k]
        check(a.dtype == b.dtype and a.shape == b.shape and a[()].tobytes() == b[()].tobytes(),
              "%s: /%s/%s bytes differ" % (what, group, k))
        check(attrs(a) == attrs(b), "%s: /%s/%s attributes %r, digest mode %r"
              % (what, group, k, attrs(a), attrs(b)))
    check(dict(fa[group].attrs) == dict(fb[group].attrs) if group in fa and group in fb else True,
          "%s: /%s group attributes" % (what, group))


def same_kept(fa, fb, what):
    """What /digests keeps of captures (digests_h5.kept): the same in both files."""
    ka, kb = digests_h5.kept(fa), digests_h5.kept(fb)
    check(sorted(ka) == sorted(kb), "%s keeps %s, digest mode %s" % (what, sorted(ka), sorted(kb)))
    for name in sorted(set(ka) & set(kb)):
        for a, b in zip(ka[name], kb[name]):
            keys = sorted(set(a.attrs) | set(b.attrs))
            same = all(k in a.attrs and k in b.attrs and
                       np.array_equal(np.asarray(a.attrs[k]), np.asarray(b.attrs[k]))
                       for k in keys if k != "time_ns")
            check(same and a.occurrence == b.occurrence and a[()].tobytes() == b[()].tobytes() and
                  a.shape == b.shape and str(a.dtype) == str(b.dtype),
                  "%s: kept %s/%d differs from digest mode's" % (what, name, a.occurrence))


def expected_digests(name, x, pos, rr):
    """numpy + Python XXH64: the digest of each row of capture `name`."""
    rows = 1 if x.ndim == 0 else int(np.prod(x.shape[:rr if pos is not None else 1]))
    flat = np.ascontiguousarray(x).reshape(rows, -1)
    seeds = pos.ravel().tolist() if pos is not None else list(range(rows))
    return [xxh64(flat[r].tobytes(), seeds[r]) for r in range(rows)]


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-rendition-")
    data, dig = os.path.join(tmp, "data.h5"), os.path.join(tmp, "digest.h5")
    write(data, "data")
    write(dig, "digest")
    out = os.path.join(tmp, "rendition.h5")
    p = run("repair", "--digests", data, out)
    check(p.returncode == 0, "repair --digests exit %d: %s" % (p.returncode, p.stderr))
    check(p.stdout == "%s: 8 captures as digests from %s\n" % (out, data), "stdout %r" % p.stdout)
    with h5py.File(out, "r") as fr, h5py.File(dig, "r") as fd, h5py.File(data, "r") as fo:
        same_group(fr, fd, "digests", "rendition")
        same_group(fr, fd, "captures", "rendition")
        check(sorted(datasets(fr, "captures")) == [],
              "rendition /captures %r" % sorted(datasets(fr, "captures")))
        same_kept(fr, fd, "rendition")
        # What /digests keeps is the data file's ids and tokens, bit for bit, in its order
        # (their seq counts the file's captures: those two).
        kr = digests_h5.kept(fr)
        check(sorted(kr) == ["input_ids", "tokens"], "rendition keeps %r" % sorted(kr))
        order = []
        for name, occs in kr.items():
            for c in occs:
                o = fo["captures"][name][str(c.occurrence)]
                order.append((int(c.attrs["seq"]), int(o.attrs["seq"])))
                check(c[()].tobytes() == o[()].tobytes() and c.shape == o.shape and
                      np.array_equal(c.attrs["positions"], o.attrs["positions"]) and
                      np.array_equal(c.attrs["requests"], o.attrs["requests"]),
                      "rendition keeps %s/%d other than the data file's" % (name, c.occurrence))
        check([k for k, _ in sorted(order)] == list(range(len(order))) and
              sorted(order) == sorted(order, key=lambda t: t[1]),
              "kept seqs %r (rendition, data file)" % sorted(order))
        check(dict(fr["run"].attrs) == dict(fo["run"].attrs) and
              dict(fr["env"].attrs) == dict(fo["env"].attrs), "/run or /env not carried")
        check(fr.attrs["label"] == fo.attrs["label"], "label %r" % fr.attrs["label"])
        dr = digests_h5.read(fr)
        # written for digests (repair --digests), so rewritten at its close
        check(digests_h5.layout(fr) == "packed-2", "rendition layout %r" % digests_h5.layout(fr))
        for name, occs in dr.items():
            for i, o in enumerate(occs):
                k = "%s/%d" % (name, i)
                check(o.attrs["time_ns"] == fo["captures"][k].attrs["time_ns"],
                      "/digests/%s time_ns is not the data file's" % k)
        for name, x, _, _, pos, _, rr, _ in tensors():
            got = dr[name][0][()].ravel().tolist()
            check(got == expected_digests(name, x, pos, rr), "%s: digests differ from Python "
                  "XXH64 of numpy's rows" % name)
    # No tensor in it: the layers' 384 KiB are gone (HDF5's own overhead aside).
    tensors_bytes = 3 * 8 * 4096 * 4
    check(os.path.getsize(out) < os.path.getsize(data) - tensors_bytes // 2,
          "rendition %d bytes, the data file %d less its layers' tensors %d"
          % (os.path.getsize(out), os.path.getsize(data), tensors_bytes))

    # The rendition and the original are the same tensors.
    p = run("diff", "-f", "json", out, data)
    check(p.returncode == 0, "diff rendition original exit %d: %s" % (p.returncode, p.stderr))
    doc = json.loads(p.stdout) if p.stdout else {}
    check(doc.get("format") == "ulpprof-digest-diff" and doc.get("identical") is True,
          "diff rendition original: %r" % {k: doc.get(k) for k in ("format", "identical")})
    p = run("diff", out, data)
    check(p.returncode == 0, "table diff exit %d" % p.returncode)

    # Against perturbed tensors: layer 1, request 1 position 2 (row 6).
    bumped = os.path.join(tmp, "bumped.h5")
    write(bumped, "digest", bump=(1, 6))
    p = run("diff", "-f", "json", out, bumped)
    doc = json.loads(p.stdout) if p.returncode == 1 else {}
    check(p.returncode == 1 and doc.get("first_divergence") ==
          {"capture": "layers.1.out", "request": 1, "position": 2},
          "diff rendition bumped: exit %d, %r" % (p.returncode, doc.get("first_divergence")))

    # Mode "both" renders to the same digests.
    both, out2 = os.path.join(tmp, "both.h5"), os.path.join(tmp, "both-rendition.h5")
    write(both, "both")
    p = run("repair", "--digests", both, out2)
    check(p.returncode == 0, "both: exit %d: %s" % (p.returncode, p.stderr))
    if p.returncode == 0:
        with h5py.File(out2, "r") as fr, h5py.File(dig, "r") as fd:
            same_group(fr, fd, "digests", "both rendition")
            same_group(fr, fd, "captures", "both rendition")
            same_kept(fr, fd, "both rendition")

    # Refusals: one line naming the file, exit 2, nothing written.
    sel = os.path.join(tmp, "sel.h5")
    write(sel, "both", select="layers.0.out")
    for args, name in ((("repair", "--digests", sel, os.path.join(tmp, "x.h5")), sel),
                       (("repair", "--digests", data, out), out),
                       (("repair", "--digests", os.path.join(tmp, "nowhere.h5"),
                         os.path.join(tmp, "y.h5")), "nowhere.h5")):
        p = run(*args)
        check(p.returncode == 2 and p.stderr.count("\n") == 1 and name in p.stderr
              and p.stdout == "", "%s: exit %d, %r" % (args, p.returncode, p.stderr))
    check(not os.path.exists(os.path.join(tmp, "x.h5")) and
          not os.path.exists(os.path.join(tmp, "y.h5")), "a refused rendition left a file")
    p = run("repair", "--help")
    check(p.returncode == 0 and "--digests" in p.stdout, "help: %r" % p.stdout[:200])
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

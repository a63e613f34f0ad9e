"""The packed /digests layout (FORMAT.md "Digests", `packed-1`) and the old
one, read alike; a packed file's lengths and offsets checked.

- A digest-mode file is written packed: /digests `layout` = "packed-1",
  per name row-aligned `digest`, `position`, `request` and an
  `occurrences` table; read with h5py alone (digests_h5.py), its digests
  are Python XXH64 (from the specification) of numpy's rows, with each
  row's position as seed, and its metadata the captures'.
- The same digests rewritten with h5py in the old layout (a dataset per
  occurrence with its attributes, no `layout`) give `ulpprof diff -f json`
  documents identical to the packed file's, against a perturbed digest
  file and against the data file; the rows found differing are the ones
  numpy perturbed.
- A packed file whose table names rows past its datasets (a large `rows`,
  a huge `first`), whose row datasets differ in length, whose occurrence
  is out of order, which lacks a dataset, or whose layout is unknown: one
  stderr line naming the file, exit 2.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", ".")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ulpprof import _lib  # noqa: E402

import digests_h5  # noqa: E402
from test_digests import xxh64  # noqa: E402  (pure Python, from the specification)

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)


def tensors(bump=None):
    """[(name, x, positions, requests, row_rank, kw)]: 3 occurrences of two layers
    (positions and requests), one capture without positions, one with inputs."""
    rng = np.random.default_rng(7)
    out = []
    for occ in range(3):
        pos = np.arange(4, dtype=np.int64)[None, :].repeat(2, 0) + 4 * occ
        req = np.array([[0] * 4, [1] * 4], dtype=np.int64)
        for li in range(2):
            x = rng.standard_normal((2, 4, 8)).astype(np.float32)
            if bump == (li, occ):
                x[1, 2, 3] = np.nextafter(x[1, 2, 3], np.float32(9))
            out.append(("layers.%d" % li, x, pos, req, 2,
                        {"layer": li, "step": occ, "inputs": ["embed"] if li == 0 else None}))
    out.append(("norm", rng.standard_normal((3, 5)).astype(np.float32), None, None, 1,
                {"layer": -1, "step": 9, "inputs": None}))
    return out


def write(path, mode, bump=None):
    s = _lib.Session(path, label="layout")
    if mode != "data":
        s.set_capture_mode(mode)
    for name, x, pos, req, rr, kw in tensors(bump):
        args = {"layer": kw["layer"], "step": kw["step"], "row_rank": rr}
        if pos is not None:
            args.update(positions=pos.ravel().tolist(), requests=req.ravel().tolist())
        if kw["inputs"]:
            args["inputs"] = kw["inputs"]
        st = s.capture(name, x.ctypes.data, "f32", list(x.shape), **args)
        assert st == 0, (name, st)
    assert s.close() == 0


def to_old(src, dst):
    """`src` with its /digests rewritten in the old layout, with h5py alone."""
    occs = digests_h5.read(src)
    with h5py.File(src, "r") as fs, h5py.File(dst, "w") as fd:
        for k, v in fs.attrs.items():
            fd.attrs[k] = v
        for k in fs:
            if k != "digests":
                fs.copy(k, fd)
        for name, lst in occs.items():
            for i, o in enumerate(lst):
                at = {}
                for k, v in o.attrs.items():
                    at[k] = np.bytes_(v) if isinstance(v, bytes) else v
                digests_h5.write_old(fd, name, i, o[()], **at)
        check(digests_h5.layout(fd) is None, "old layout has no `layout`")


def run(*args):
    return subprocess.run([ULPPROF] + list(args), capture_output=True, text=True, timeout=120)


def doc_of(a, b, rename):
    p = run("diff", "-f", "json", a, b)
    check(p.returncode in (0, 1), "diff %s %s exit %d: %s" % (a, b, p.returncode, p.stderr))
    text = p.stdout
    for old, new in rename:
        text = text.replace(old, new)
    return p.returncode, text


PEEK = """
import sys
sys.path.insert(0, %r)
import digests_h5
d = digests_h5.read(sys.argv[1])
print(" ".join("%%s:%%d:%%d" %% (k, len(v), sum(o[()].size for o in v)) for k, v in sorted(d.items())))
""" % os.path.dirname(os.path.abspath(__file__))


def flushed(tmp):
    """Digests are durable at a flush: read (with h5py, in another process,
    the session still open) after each one, appended to by the next; a name
    past the writer's bound (1 MiB in memory) written out before any flush."""
    path = os.path.join(tmp, "flushed.h5")
    s = _lib.Session(path, label="flush")
    s.set_capture_mode("digest")
    small = np.arange(6, dtype=np.float32).reshape(2, 3)
    big = np.arange(30000, dtype=np.float32).reshape(30000, 1)
    env = dict(os.environ, HDF5_USE_FILE_LOCKING="FALSE")

    def peek():
        p = subprocess.run([sys.executable, "-c", PEEK, path], capture_output=True, text=True,
                           env=env, timeout=120)
        return p.stdout.strip() if p.returncode == 0 else "exit %d: %s" % (p.returncode, p.stderr)

    def cap(name, x):
        assert s.capture(name, x.ctypes.data, "f32", list(x.shape)) == 0

    cap("a", small)
    cap("a", small + 1)
    s.flush()
    check(peek() == "a:2:4", "after the first flush: %s" % peek())
    cap("a", small + 2)
    for i in range(3):
        cap("big", big + i)
    s.flush()
    check(peek() == "a:3:6 big:3:90000", "after the second flush: %s" % peek())
    check(s.close() == 0, "close")
    got = digests_h5.read(path)
    for name, xs in (("a", [small, small + 1, small + 2]), ("big", [big + i for i in range(3)])):
        for i, x in enumerate(xs):
            want = [xxh64(x[r].tobytes(), r) for r in range(x.shape[0])]
            check(got[name][i][()].ravel().tolist() == want, "%s/%d digests" % (name, i))
    p = run("diff", "-f", "json", path, path)
    doc = json.loads(p.stdout) if p.returncode == 0 else {}
    rows = {n["name"]: n["rows_compared"] for n in doc.get("captures", [])}
    check(rows == {"a": 6, "big": 90000}, "diff of the flushed file: exit %d, %r %s"
          % (p.returncode, rows, p.stderr))


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-layout-")
    data, dig, bumped = (os.path.join(tmp, n) for n in ("data.h5", "digest.h5", "bumped.h5"))
    write(data, "data")
    write(dig, "digest")
    write(bumped, "digest", bump=(1, 2))

    # The packed file, read with h5py alone, against numpy and Python XXH64.
    with h5py.File(dig, "r") as f:
        check(digests_h5.layout(f) == "packed-1", "layout %r" % digests_h5.layout(f))
        g = f["digests/layers.0"]
        check(sorted(g) == ["digest", "inputs", "occurrences", "position", "request"],
              "layers.0 holds %s" % sorted(g))
    got = digests_h5.read(dig)
    seen = {}
    for name, x, pos, req, rr, kw in tensors():
        i = seen.get(name, 0)
        seen[name] = i + 1
        o = got[name][i]
        rows = int(np.prod(x.shape[:rr]))
        flat = x.reshape(rows, -1)
        seeds = pos.ravel().tolist() if pos is not None else list(range(rows))
        want = [xxh64(flat[r].tobytes(), seeds[r]) for r in range(rows)]
        where = "%s occurrence %d" % (name, i)
        check(o[()].ravel().tolist() == want, where + ": digests")
        check(list(o.attrs["shape"]) == list(x.shape) and int(o.attrs["ndim"]) == x.ndim,
              where + ": shape")
        check(o.attrs["dtype"] == b"f32" and o.attrs["role"] == b"activation", where + ": dtype")
        check(int(o.attrs["step"]) == kw["step"], where + ": step")
        check(("layer" in o.attrs) == (kw["layer"] != -1), where + ": layer present")
        if kw["layer"] != -1:
            check(int(o.attrs["layer"]) == kw["layer"], where + ": layer")
        if pos is not None:
            check(o.attrs["positions"].ravel().tolist() == pos.ravel().tolist(),
                  where + ": positions")
            check(o.attrs["requests"].ravel().tolist() == req.ravel().tolist(),
                  where + ": requests")
        else:
            check("positions" not in o.attrs and "requests" not in o.attrs,
                  where + ": no positions")
        inputs = [s.decode() for s in o.attrs.get("inputs", [])]
        check(inputs == (kw["inputs"] or []), where + ": inputs %r" % inputs)
    seqs = sorted(int(o.attrs["seq"]) for lst in got.values() for o in lst)
    check(seqs == list(range(len(tensors()))), "seq counts the digests: %r" % seqs)

    # The old layout, written by h5py: the same documents.
    old, old_b = os.path.join(tmp, "old.h5"), os.path.join(tmp, "old_bumped.h5")
    to_old(dig, old)
    to_old(bumped, old_b)
    same = [(old, dig), (old_b, bumped)]
    rc_p, packed_doc = doc_of(dig, bumped, [])
    rc_o, old_doc = doc_of(old, old_b, same)
    check((rc_p, packed_doc) == (rc_o, old_doc), "old layout diff differs from packed: %s\n%s"
          % (old_doc[:400], packed_doc[:400]))
    rc_m, mixed_doc = doc_of(old, bumped, same)
    check((rc_m, mixed_doc) == (rc_p, packed_doc), "old vs packed diff differs")
    check(doc_of(dig, data, [])[1] == doc_of(old, data, same)[1], "against the data file")
    # numpy perturbed layers.1, occurrence 2, request 1, position 8 + 2.
    doc = json.loads(packed_doc) if rc_p == 1 else {}
    check(rc_p == 1 and doc.get("first_divergence") ==
          {"capture": "layers.1", "request": 1, "position": 10},
          "first divergence %r" % doc.get("first_divergence"))
    rc_d, _ = doc_of(dig, data, [])
    check(rc_d == 0, "digest file and data file of the same tensors: exit %d" % rc_d)

    flushed(tmp)

    # Bad packed files: one stderr line naming the file, exit 2.
    def bad(label, edit, what):
        path = os.path.join(tmp, "bad-%s.h5" % label)
        shutil.copy(dig, path)
        with h5py.File(path, "r+") as f:
            edit(f)
        p = run("diff", path, bumped)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and path in p.stderr and what in p.stderr,
              "%s: exit %d, stderr %r" % (label, p.returncode, p.stderr))

    def set_field(field, value, k=1):
        def edit(f):
            ds = f["digests/layers.1/occurrences"]
            t = ds[()]
            t[field][k] = value
            ds[...] = t
        return edit

    def shorten(name):
        def edit(f):
            g = f["digests/layers.0"]
            v = g[name][()]
            del g[name]
            g.create_dataset(name, data=v[:-1])
        return edit

    def drop(f):
        del f["digests/norm/digest"]

    def layout(f):
        f["digests"].attrs["layout"] = np.bytes_("packed-9")

    bad("rows", set_field("rows", 10 ** 6), "past its digest datasets")
    bad("first", set_field("first", 2 ** 63), "past its digest datasets")
    bad("last", set_field("first", 8 * 3 - 7, k=2), "past its digest datasets")
    bad("order", set_field("occurrence", 2), "out of order")
    bad("lengths", shorten("request"), "different lengths")
    bad("missing", drop, "lacks")
    bad("layout", layout, "layout 'packed-9'")

    # The old layout names an occurrence by the writer's decimal only: "01"
    # (or "+1") would be a second occurrence 1 of the name, and a number past
    # INT64_MAX one more INT64_MAX.
    for label, alias in (("zero", "01"), ("plus", "+1"), ("huge", "99999999999999999999")):
        path = os.path.join(tmp, "bad-old-%s.h5" % label)
        shutil.copy(old, path)
        with h5py.File(path, "r+") as f:
            f["digests/layers.0"].move("1", alias)
        p = run("diff", path, old_b)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and path in p.stderr and
              "/digests/layers.0/%s is not an occurrence" % alias in p.stderr,
              "old layout occurrence %r: exit %d, stderr %r" % (alias, p.returncode, p.stderr))

    if fails:
        sys.exit(1)
    shutil.rmtree(tmp)
    print("ok")


if __name__ == "__main__":
    main()

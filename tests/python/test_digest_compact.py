"""A digest file's clean close rewrites it tight (FORMAT.md "Digests", "A
digest file's close"; format/writer_compact.c), checked with h5py and the
CLI on files written through the capture library as a generation writes
them (a 16-row prompt, 1-row decode steps, the fed ids and produced tokens
kept, 6 layers with inputs):

- Opened in digest mode, the closed file has no /journal (it is the copy
  ulpprof repair makes), is smaller than the same run with
  ULPPROF_COMPACT=0 (which keeps the writer's file, journal and all), and
  holds the same things: every /digests dataset element for element (the
  occurrences' clocks aside: two runs), the kept captures, /run and /env;
  `ulpprof diff` of the two says identical.
- It keeps the file's permission bits, and leaves nothing else in the
  directory.
- Not rewritten: a data-mode file (its journal stays), a file whose copy
  name is taken (the file stays as written, the other file untouched), and
  a file moved away before the close (then whatever now has its name is
  untouched too).
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
from ulpprof import _lib  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
PROMPT, LAYERS, HIDDEN, STEPS = 16, 6, 64, 24
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)
    return cond


def run(path, mode="digest", before_close=None):
    """One generation's captures; before_close(path) runs just before the close."""
    s = _lib.Session(path, label="compact", run={"case": "c"}, mode=mode)
    rng = np.random.default_rng(3)
    tok = 5
    for step in range(STEPS):
        pos = list(range(PROMPT)) if step == 0 else [PROMPT + step - 1]
        n = len(pos)
        ids = np.array([[tok] * n], np.int64)
        s.capture("input_ids", ids.ctypes.data, "i64", [1, n], role="input", positions=pos,
                  row_rank=2, step=step)
        prev = "input_ids"
        for layer in range(LAYERS):
            h = rng.standard_normal((1, n, HIDDEN)).astype(np.float32)
            name = "model.layers.%d" % layer
            s.capture(name, h.ctypes.data, "f32", [1, n, HIDDEN], layer=layer, positions=pos,
                      row_rank=2, step=step, inputs=[prev])
            prev = name
        tok = int(rng.integers(0, 1000))
        t = np.array([[tok]], np.int64)
        s.capture("tokens", t.ctypes.data, "i64", [1, 1], positions=[pos[-1]], row_rank=2,
                  step=step)
    if before_close is not None:
        before_close(path)
    check(s.close() == 0, "%s: close" % path)


def tree(path):
    """{dataset path: its values} of every dataset but the journal, and the root's names."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and not name.startswith("index"):
                out[name] = obj[()]
        f.visititems(visit)
        return out, sorted(f), dict(f["run"].attrs)


def equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.names:
        # two runs: all but their clocks alike
        return a.dtype == b.dtype and all(equal(a[n], b[n]) for n in a.dtype.names
                                          if n != "time_ns")
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def ls(path):
    p = subprocess.run([ULPPROF, "ls", "--json", path], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, "ls %s: exit %d %s" % (path, p.returncode, p.stderr))
    return json.loads(p.stdout)[0]["captures"] if p.returncode == 0 else []


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-digest-compact-")
    old_umask = os.umask(0o027)  # the file's bits: 0640, kept by the copy
    try:
        tight, kept = os.path.join(tmp, "tight.h5"), os.path.join(tmp, "kept.h5")
        run(tight)
        os.environ["ULPPROF_COMPACT"] = "0"
        run(kept)
        del os.environ["ULPPROF_COMPACT"]
    finally:
        os.umask(old_umask)
    t_tree, t_root, t_run = tree(tight)
    k_tree, k_root, k_run = tree(kept)
    st, sk = os.path.getsize(tight), os.path.getsize(kept)
    print("digest file: %d B rewritten, %d B as the writer left it" % (st, sk))
    check("journal" not in t_root and "journal" in k_root,
          "journal: rewritten %s, kept %s" % (t_root, k_root))
    check(st < sk, "rewritten %d bytes, not less than %d" % (st, sk))
    check(sorted(t_tree) == sorted(k for k in k_tree if k != "journal"),
          "datasets differ: %s vs %s" % (sorted(t_tree), sorted(k_tree)))
    for k in t_tree:
        if k in k_tree:
            check(equal(t_tree[k], k_tree[k]), "%s differs" % k)
    check(t_run == k_run and set(t_run) == {"case"}, "/run %s vs %s" % (t_run, k_run))
    check(oct(os.stat(tight).st_mode & 0o777) == oct(0o640),
          "permissions %s, want 0640" % oct(os.stat(tight).st_mode & 0o777))
    check(sorted(os.listdir(tmp)) == ["kept.h5", "tight.h5"],
          "left in the directory: %s" % sorted(os.listdir(tmp)))
    # The same captures to the CLI.
    names = lambda caps: sorted((c["name"], c["occurrence"]) for c in caps)  # noqa: E731
    lt, lk = ls(tight), ls(kept)
    check(names(lt) == names(lk) and len(lt) == 2 * STEPS,
          "ls: %d and %d captures, want %d" % (len(lt), len(lk), 2 * STEPS))
    p = subprocess.run([ULPPROF, "diff", "-f", "json", tight, kept], capture_output=True,
                       text=True, timeout=120)
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    check(p.returncode == 0 and doc.get("identical") is True,
          "diff rewritten vs kept: exit %d %s" % (p.returncode, p.stderr))

    # Data mode: left as written.
    data = os.path.join(tmp, "data.h5")
    run(data, mode="data")
    with h5py.File(data, "r") as f:
        check("journal" in f, "data-mode file lost its journal")

    # The copy's name taken: the file stays as written, the other file as it was.
    busy = os.path.join(tmp, "busy.h5")
    squat = os.path.join(tmp, ".busy.h5.compact-%d" % os.getpid())
    with open(squat, "wb") as fh:
        fh.write(b"not ours")
    run(busy)
    with h5py.File(busy, "r") as f:
        check("journal" in f, "copy name taken: the file was rewritten anyway")
    check(open(squat, "rb").read() == b"not ours", "the file with the copy's name was touched")
    check(names(ls(busy)) == names(lk), "copy name taken: captures %s" % names(ls(busy)))
    os.remove(squat)

    # Moved away before the close, another file put at its name: both untouched.
    moved = os.path.join(tmp, "moved.h5")
    other = os.path.join(tmp, "moved-away.h5")

    def swap(path):
        os.rename(path, other)
        with open(path, "wb") as fh:
            fh.write(b"someone else's")
    run(moved, before_close=swap)
    check(open(moved, "rb").read() == b"someone else's", "the file now at the path was touched")
    with h5py.File(other, "r") as f:
        check("journal" in f, "the moved file was rewritten")
    check(names(ls(other)) == names(lk), "moved file: captures %s" % names(ls(other)))
    left = sorted(n for n in os.listdir(tmp) if n.startswith("."))
    check(left == [], "dot-files left: %s" % left)
    if fails:
        print("%d failure(s)" % len(fails))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

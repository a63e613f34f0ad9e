"""A digest file's clean close rewrites it tight (FORMAT.md "Digests", "A
digest file's close"; format/writer_compact.c), checked with h5py and the
CLI on files written through the capture library as a generation writes
them (a 16-row prompt, 1-row decode steps, the fed ids and produced tokens
kept, 6 layers with inputs):

- Opened in digest mode, the closed file has no /journal (it is the copy
  ulpprof repair makes, /digests in layout packed-2), is smaller than the
  same run with ULPPROF_COMPACT=0 (which keeps the writer's file, packed-1,
  journal and all), and holds the same things, read with h5py alone
  (digests_h5, either layout): every name's digests and their metadata
  (the clocks aside: two runs), the kept captures' bytes, every other
  dataset, /run; `ulpprof diff` of the two says identical, and
  ulpprof.open() reads the same kept captures from both.
- It keeps the file's permission bits, and leaves nothing else in the
  directory.
- A damaged packed-2 /digests (a range past the shared rows, a name that
  keeps rows without its `value`, no `names`, row datasets of two lengths)
  is refused: exit 2, one stderr line naming the file and the problem.
- Not rewritten: a data-mode file (its journal stays), a file written
  through a symbolic link (the link stays a link), and a file moved away
  before the close (then whatever now has its name is untouched too).
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decode_run  # noqa: E402
import digests_h5  # noqa: E402  (h5py alone, every layout)

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
    decode_run.write(s, STEPS, PROMPT, LAYERS, HIDDEN, seed=3, tok=5)
    if before_close is not None:
        before_close(path)
    check(s.close() == 0, "%s: close" % path)


def tree(path):
    """({dataset path: its values} of every dataset outside /digests, /index and
    /journal; /digests read with h5py alone (digests_h5: either layout) as {name:
    [(digests, attributes)]} and {name: [(kept bytes, attributes)]}; the root's names;
    /run), the clocks (time_ns) left out: two runs."""
    out = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and name.split("/")[0] not in (
                    "index", "journal", "digests"):
                out[name] = obj[()]
        f.visititems(visit)
        plain = lambda a: {k: v for k, v in a.items() if k != "time_ns"}  # noqa: E731
        dig = {n: [(o[()], plain(o.attrs)) for o in occs]
               for n, occs in digests_h5.read(f).items()}
        kept = {n: [(c[()], plain(c.attrs)) for c in cs] for n, cs in digests_h5.kept(f).items()}
        return out, dig, kept, sorted(f), dict(f["run"].attrs), digests_h5.layout(f)


def same(a, b):
    """Whether two {name: [(array, attributes)]} hold the same arrays and attributes."""
    if sorted(a) != sorted(b):
        return False
    for n in a:
        if len(a[n]) != len(b[n]):
            return False
        for (x, ax), (y, ay) in zip(a[n], b[n]):
            if not equal(x, y) or sorted(ax) != sorted(ay) or \
                    not all(equal(ax[k], ay[k]) for k in ax):
                return False
    return True


def equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def _set_name(dg, i, field, value):
    t = dg["names"][()]
    if field == "has_value":  # the first name that keeps no rows
        i = [k for k in range(len(t)) if not t[k]["has_value"]][0]
    t[i][field] = value
    dg["names"][i] = t[i]


def _shorten(dg, name):
    a = dg[name][()]
    del dg[name]
    dg.create_dataset(name, data=a[:-1])


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
    t_tree, t_dig, t_kept, t_root, t_run, t_lay = tree(tight)
    k_tree, k_dig, k_kept, k_root, k_run, k_lay = tree(kept)
    st, sk = os.path.getsize(tight), os.path.getsize(kept)
    print("digest file: %d B rewritten, %d B as the writer left it" % (st, sk))
    check("journal" not in t_root and "journal" in k_root,
          "journal: rewritten %s, kept %s" % (t_root, k_root))
    check(st < sk, "rewritten %d bytes, not less than %d" % (st, sk))
    check(t_lay == "packed-2" and k_lay == "packed-1", "layouts %s and %s" % (t_lay, k_lay))
    check(sorted(t_tree) == sorted(k_tree),
          "datasets differ: %s vs %s" % (sorted(t_tree), sorted(k_tree)))
    for k in t_tree:
        if k in k_tree:
            check(equal(t_tree[k], k_tree[k]), "%s differs" % k)
    check(len(t_dig) == LAYERS + 2 and same(t_dig, k_dig),
          "the digests differ (%d names, %d)" % (len(t_dig), len(k_dig)))
    check(sorted(t_kept) == ["input_ids", "tokens"] and same(t_kept, k_kept),
          "the kept captures differ: %s, %s" % (sorted(t_kept), sorted(k_kept)))
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
    # ulpprof.open() reads the kept bytes of both layouts alike.
    import ulpprof
    os.environ["ULPPROF_PROGRAM"] = ULPPROF
    snap_t, snap_k = ulpprof.open(tight), ulpprof.open(kept)
    for c in snap_k.captures:
        a, b = snap_t.read(c.name, c.occurrence), snap_k.read(c.name, c.occurrence)
        check(equal(a.array, b.array) and equal(a.positions, b.positions),
              "ulpprof.open().read(%s, %d) differs" % (c.name, c.occurrence))
    check(len(snap_t.captures) == len(snap_k.captures) == 2 * STEPS,
          "ulpprof.open(): %d and %d captures" % (len(snap_t.captures), len(snap_k.captures)))
    p = subprocess.run([ULPPROF, "diff", "-f", "json", tight, kept], capture_output=True,
                       text=True, timeout=120)
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    check(p.returncode == 0 and doc.get("identical") is True,
          "diff rewritten vs kept: exit %d %s" % (p.returncode, p.stderr))

    # A damaged packed-2 /digests: refused, one line naming the file and what.
    import shutil
    for what, edit, needle in (
            ("a range past the rows", lambda dg: _set_name(dg, 0, "rows_first", 1 << 40),
             "ranges lie past"),
            ("rows without their value", lambda dg: _set_name(dg, 0, "has_value", 1),
             "without its dataset in `value`"),
            ("no names table", lambda dg: dg.__delitem__("names"), "lacks its 1-D datasets"),
            ("row datasets of two lengths", lambda dg: _shorten(dg, "request"),
             "different lengths")):
        bad = os.path.join(tmp, "bad.h5")
        shutil.copy(tight, bad)
        with h5py.File(bad, "r+") as f:
            edit(f["digests"])
        p = subprocess.run([ULPPROF, "diff", bad, kept], capture_output=True, text=True,
                           timeout=120)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and bad in lines[0] and needle in lines[0],
              "%s: exit %d, stderr %r" % (what, p.returncode, p.stderr))
        os.remove(bad)

    # Data mode: left as written.
    data = os.path.join(tmp, "data.h5")
    run(data, mode="data")
    with h5py.File(data, "r") as f:
        check("journal" in f, "data-mode file lost its journal")

    # Written through a symbolic link: left as written (the rename would replace the link).
    real, link = os.path.join(tmp, "real.h5"), os.path.join(tmp, "link.h5")
    os.symlink(real, link)
    run(link)
    check(os.path.islink(link) and os.readlink(link) == real, "the link was replaced")
    with h5py.File(real, "r") as f:
        check("journal" in f, "a file written through a link was rewritten")
    check(names(ls(link)) == names(lk), "through a link: captures %s" % names(ls(link)))
    os.remove(link)
    os.remove(real)

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

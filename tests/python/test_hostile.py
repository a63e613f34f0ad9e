#!/usr/bin/python3
"""Hostile input: every malformed snapshot is refused by
BOTH `ulpprof ls` and `ulpprof diff` (the bad file first and second, paired
with a good one) with exit 2, nothing on stdout, and exactly one stderr line
that names the file and the problem; valid but awkward files are read.

The corpus is tests/python/make_snapshots.py's (imported, not copied), plus:
  - truncations of four files (h5py's golden.h5 and all_dtypes.h5, one
    written by ulpprof's own writer, and that one without its closed mark, as
    a killed writer leaves it and the reader reads it through its capture
    journal) at every 1/16 of their size, a few bytes from the end and inside
    the superblock;
  - the same cuts with the superblock's end-of-file rewritten, so that HDF5
    opens the file and only the reader's own checks stand between the cut and
    a wrong answer;
  - more rule breakers: huge declared shapes under 2^48 elements (sparse
    chunks, unallocated contiguous), seq as an array, layer out of range,
    rank 32, a null dataspace, compound storage, dangling, external and
    cyclic links, data in an external raw file, a huge format_version;
  - awkward valid files: all-NaN tensors (checked against numpy through
    `diff --format json`), scalars of every dtype, empty tensors with a huge
    other axis, an empty /captures, names in several scripts, /run values
    of fixed-length strings 1 MiB and 17 MiB wide (the second "not shown").
Run under the ASan+UBSan build (.ci/sanitize), a crash anywhere fails here.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "reliability"))
import relcheck as rc  # noqa: E402
from relcheck import check  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import make_snapshots as ms  # noqa: E402  (relcheck put tests/python on the path)

GOOD_PARTNER = "golden.h5"


# --- More malformed files ---------------------------------------------------------

def cut(src, dst, size):
    with open(src, "rb") as a, open(dst, "wb") as b:
        b.write(a.read(size))


def superblock_v0(path):
    with open(path, "rb") as fh:
        head = fh.read(9)
    return head[:8] == b"\x89HDF\r\n\x1a\n" and head[8] == 0


def add_truncations(corpus, src, tag, bad, good=None):
    """Cuts of corpus/src: plain, and with the superblock's EOF rewritten.

    A cut that takes only (some of) the open map after HDF5's end leaves the
    HDF5 file whole: its captures are all read, through HDF5 (with `good`,
    such cuts are checked as good files; without, left out)."""
    path = os.path.join(corpus, src)
    size = os.path.getsize(path)
    end = size - rc.open_map_bytes(path)
    cuts = sorted({size * i // 16 for i in range(1, 16)} |
                  {end - 1, end - 7, end - 64, end - 511, 9, 47, 100} - {0})
    if end < size:
        check(rc.open_map_bytes(path) > 32, "%s: an open map without a body" % src)
        for c in sorted({end, end + 1, size - 1}):
            name = "mapcut_%s_%d.h5" % (tag, c)
            if good is not None:
                cut(path, os.path.join(corpus, name), c)
                good.append(name)
    for c in cuts:
        if c >= end:
            continue
        name = "cut_%s_%d.h5" % (tag, c)
        cut(path, os.path.join(corpus, name), c)
        bad[name] = "truncated"
    for c in (4, 7):
        name = "cut_%s_%d.h5" % (tag, c)
        cut(path, os.path.join(corpus, name), c)
        bad[name] = "not an HDF5 file"
    if superblock_v0(path):
        for i in range(1, 16):
            c = size * i // 16
            if c < 96:
                continue
            name = "eofcut_%s_%d.h5" % (tag, c)
            shutil.copy(path, os.path.join(corpus, name))
            ms.patch_superblock_eof(os.path.join(corpus, name), c)
            # The reader cannot always tell a cut from other damage: what is
            # lost may be metadata it then finds broken.  It must refuse.
            bad[name] = None


def cap(f, name="x", occ="0", dtype="bf16", seq=0, shape=(4,), storage="<u2", **kw):
    g = f.require_group("captures").require_group(name)
    d = g.create_dataset(occ, shape=shape, dtype=storage, **kw)
    if dtype is not None:
        d.attrs["dtype"] = dtype
    if seq is not None:
        d.attrs["seq"] = np.int64(seq)
    return d


def low_level(f, name, occ, ftype, space, dcpl=None, dtype="bf16", seq=0):
    g = f.require_group("captures").require_group(name)
    h5py.h5d.create(g.id, occ.encode(), ftype, space, dcpl=dcpl)
    d = g[occ]
    d.attrs["dtype"] = dtype
    d.attrs["seq"] = np.int64(seq)
    return d


def add_bad(corpus, bad):
    def B(name, word, build):
        with h5py.File(os.path.join(corpus, name), "w") as f:
            build(f)
        bad[name] = word

    def sparse(f):
        ms.root(f)
        cap(f, "huge", shape=(2**20, 2**20), chunks=(1, 1024))
    B("huge_sparse_chunks.h5", "absurd", sparse)

    def unallocated(f):
        ms.root(f)
        cap(f, "huge", shape=(2**21, 2**21))
    B("huge_unallocated.h5", "absurd", unallocated)

    def seq_array(f):
        ms.root(f)
        cap(f, seq=None).attrs["seq"] = np.array([0, 1], dtype=np.int64)
    B("seq_array.h5", "seq", seq_array)

    def layer_big(f):
        ms.root(f)
        cap(f).attrs["layer"] = np.int64(2**40)
    B("layer_range.h5", "layer", layer_big)

    def rank32(f):
        ms.root(f)
        low_level(f, "x", "0", h5py.h5t.STD_U16LE, h5py.h5s.create_simple((1,) * 32))
    B("rank32.h5", "rank", rank32)

    def null_space(f):
        ms.root(f)
        low_level(f, "x", "0", h5py.h5t.STD_U16LE, h5py.h5s.create(h5py.h5s.NULL))
    B("null_dataspace.h5", "dataspace", null_space)

    def compound(f):
        ms.root(f)
        cap(f, dtype="f32", storage=np.dtype([("a", "<u2"), ("b", "<u2")]))
    B("dtype_compound.h5", "compound", compound)

    def dtype_array(f):
        ms.root(f)
        cap(f, dtype=None).attrs["dtype"] = np.array([b"bf16", b"f32"])
    B("dtype_array.h5", "dtype", dtype_array)

    def version_huge(f):
        ms.root(f, version=None)
        f.attrs["format_version"] = np.int64(2**40)
        cap(f)
    B("version_huge.h5", "version", version_huge)

    def dangling(f):
        ms.root(f)
        f.require_group("captures").require_group("x")["0"] = h5py.SoftLink("/nowhere")
    B("dangling_link.h5", "x/0", dangling)

    def cycle(f):
        ms.root(f)
        cap(f, "a")
        f["captures"]["x"] = h5py.SoftLink("/captures")
    B("link_cycle.h5", "group", cycle)

    def external(f):
        ms.root(f)
        g = f.require_group("captures").require_group("x")
        g["0"] = h5py.ExternalLink(GOOD_PARTNER, "/captures/embed/0")
    B("external_link.h5", "external link", external)

    def external_raw(f):
        ms.root(f)
        with open(os.path.join(corpus, "raw.bin"), "wb") as fh:
            fh.write(b"\x01" * 64)
        cap(f, shape=(8,), external=[("raw.bin", 0, 16)])
    B("external_raw.h5", "external", external_raw)


# --- Awkward valid files ------------------------------------------------------------

NAN_F32, NAN_F32_B, INF_F32 = 0x7fc00000, 0x7fc00001, 0x7f800000


def write_bits(f, name, seq, dtype, bits, role=None):
    g = f.require_group("captures").require_group(name)
    space = h5py.h5s.create_simple(bits.shape) if bits.ndim else h5py.h5s.create(h5py.h5s.SCALAR)
    ftype = ms.file_type(dtype)
    dsid = h5py.h5d.create(g.id, b"0", ftype, space)
    if bits.size:
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(bits), mtype=ftype)
    d = g["0"]
    d.attrs["dtype"] = dtype
    d.attrs["seq"] = np.int64(seq)
    if role:
        d.attrs["role"] = role


def nan_files(corpus):
    """Returns {file: {name: bits}} for the all-NaN pair and a finite partner."""
    files = {}
    a32 = np.full(64, NAN_F32, dtype=np.uint32)
    b32 = a32.copy()
    b32[:10] = NAN_F32_B           # another NaN payload: differs, not a ULP distance
    b32[10:20] = INF_F32           # inf where A has NaN
    a16 = np.full((4, 8), 0x7fc0, dtype=np.uint16)
    b16 = a16.copy()
    b16[0, :] = 0xffc0             # negative NaN
    rng = np.random.default_rng(6)
    fin = (rng.standard_normal(64).astype(np.float32)).view(np.uint32)
    for fname, t32, t16 in (("nan_a.h5", a32, a16), ("nan_b.h5", b32, b16),
                            ("nan_finite.h5", fin, (fin[:32] >> 16).astype(np.uint16).reshape(4, 8))):
        with h5py.File(os.path.join(corpus, fname), "w") as f:
            ms.root(f, label=fname[:-3])
            write_bits(f, "all_nan.f32", 0, "f32", t32)
            write_bits(f, "all_nan.bf16", 1, "bf16", t16)
        files[fname] = {"all_nan.f32": ("f32", t32), "all_nan.bf16": ("bf16", t16)}
    return files


def add_awkward(corpus, good):
    def G(name, build):
        with h5py.File(os.path.join(corpus, name), "w") as f:
            build(f)
        good.append(name)

    def scalars(f):
        ms.root(f)
        w = ms.Writer(f)
        for i, dt in enumerate(ms.DTYPES):
            w.capture("scalar." + dt, 0, i, dt, [])
    G("scalars.h5", scalars)

    def empties(f):
        ms.root(f)
        w = ms.Writer(f)
        w.capture("empty.1d", 0, 0, "f32", [0])
        w.capture("empty.wide", 0, 1, "bf16", [0, 2**40])
        w.capture("empty.rank8", 0, 2, "f16", [2, 0, 1, 1, 1, 1, 1, 3])
        w.capture("after", 0, 3, "i8", [5])
    G("empties.h5", empties)

    def empty_group(f):
        ms.root(f)
        f.create_group("captures")
        f.create_group("run")
        f.create_group("env")
    G("captures_empty.h5", empty_group)

    def scripts(f):
        ms.root(f, label="ラベル ✓")
        w = ms.Writer(f)
        for i, nm in enumerate(["modèle.层.ünï", "слой.0", "طبقة.1", "🙂.emoji", "a b\tc",
                                "x" * 300]):
            w.capture(nm, 0, i, "bf16", [3])
    G("scripts.h5", scripts)

    def many_occ(f):
        ms.root(f)
        w = ms.Writer(f)
        for i in range(300):
            w.capture("loop", i, 299 - i, "u8", [2])
    G("many_occurrences.h5", many_occ)

    # /run values of fixed-length strings 1 MiB and 17 MiB wide (dense
    # attribute storage): the first shown, the second said to be too large
    # to show (past 16 MiB), not read into memory nor called unreadable.
    with h5py.File(os.path.join(corpus, "wide_run_strings.h5"), "w", libver="latest") as f:
        ms.root(f)
        ms.Writer(f).capture("a", 0, 0, "f32", [2])
        g = f.create_group("run")
        for name, size in ((b"fine", 1 << 20), (b"wide", 17 << 20)):
            t = h5py.h5t.C_S1.copy()
            t.set_size(size)
            a = h5py.h5a.create(g.id, name, t, h5py.h5s.create(h5py.h5s.SCALAR))
            a.write(np.array(b"x" * 10, dtype="S%d" % size))
    good.append("wide_run_strings.h5")


# --- Checks -------------------------------------------------------------------------

def one_line_error(r, fname, word, tag):
    lines = r.stderr.splitlines()
    check(r.returncode == 2, "%s: exit %d, want 2 (stderr %r)" % (tag, r.returncode, r.stderr[:300]))
    check(r.stdout == "", "%s: stdout %r" % (tag, r.stdout[:200]))
    check(len(lines) == 1, "%s: %d stderr lines: %r" % (tag, len(lines), r.stderr[:600]))
    if lines:
        ln = lines[0]
        check(ln.startswith("ulpprof: ") and "'%s'" % fname in ln,
              "%s: message does not name the file: %r" % (tag, ln))
        check(word is None or word in ln, "%s: message lacks %r: %r" % (tag, word, ln))
    check("HDF5-DIAG" not in r.stderr, "%s: HDF5 noise" % tag)
    check(r.returncode >= 0, "%s: killed by signal %d" % (tag, -r.returncode))


def check_bad(corpus, fname, word):
    one_line_error(rc.ulpprof(["ls", fname], cwd=corpus), fname, word, "ls %s" % fname)
    one_line_error(rc.ulpprof(["diff", fname, GOOD_PARTNER], cwd=corpus), fname, word,
                   "diff %s %s" % (fname, GOOD_PARTNER))
    one_line_error(rc.ulpprof(["diff", GOOD_PARTNER, fname], cwd=corpus), fname, word,
                   "diff %s %s" % (GOOD_PARTNER, fname))


def check_good(corpus, fname):
    view = rc.h5_captures(os.path.join(corpus, fname))
    r = rc.ulpprof(["ls", "--json", fname], cwd=corpus)
    if not check(r.returncode == 0 and r.stderr == "",
                 "ls %s: exit %d, stderr %r" % (fname, r.returncode, r.stderr)):
        return
    j = json.loads(r.stdout)[0]
    got = [(c["seq"], c["name"], c["occurrence"], c["dtype"], tuple(c["shape"]))
           for c in j["captures"]]
    check(got == view, "ls %s: captures %r != h5py %r" % (fname, got[:3], view[:3]))
    r = rc.ulpprof(["ls", fname], cwd=corpus)
    check(r.returncode == 0 and r.stderr == "", "ls %s (text): exit %d" % (fname, r.returncode))
    if not view:
        # Nothing to compare is an error, never "identical".
        one_line_error(rc.ulpprof(["diff", fname, fname], cwd=corpus), fname,
                       "nothing to compare", "diff %s itself" % fname)
        return
    r = rc.ulpprof(["diff", "--format", "json", fname, fname], cwd=corpus)
    check(r.returncode == 0 and r.stderr == "",
          "diff %s itself: exit %d, stderr %r" % (fname, r.returncode, r.stderr))
    if r.returncode == 0:
        j = json.loads(r.stdout)
        check(j["identical"] is True and len(j["rows"]) == len(view) and
              all(row["status"] == "identical" for row in j["rows"]),
              "diff %s itself: not identical" % fname)
    for fmt in ("table", "markdown", "csv"):
        r = rc.ulpprof(["diff", "--format", fmt, fname, fname], cwd=corpus)
        check(r.returncode == 0 and r.stderr == "", "diff --format %s %s: exit %d %r"
              % (fmt, fname, r.returncode, r.stderr))


def expect_metrics(dtype, a, b):
    """differing, nonfinite_mismatch, max_ulp, max_abs_diff from numpy alone."""
    a, b = a.ravel(), b.ravel()
    f = {"f32": lambda x: x.view(np.float32).astype(np.float64),
         "bf16": lambda x: (x.astype(np.uint32) << 16).view(np.float32).astype(np.float64)}[dtype]
    width = 32 if dtype == "f32" else 16
    fa, fb = f(a), f(b)
    diff = a != b
    fin = np.isfinite(fa) & np.isfinite(fb)
    sign = np.uint64(1) << np.uint64(width - 1)

    def ordered(x):
        x = x.astype(np.uint64)
        neg = (x & sign) != 0
        mag = (x & (sign - np.uint64(1))).astype(np.int64)
        return np.where(neg, -mag, mag)
    ulp = np.abs(ordered(a) - ordered(b))
    return {"differing": int(diff.sum()),
            "nonfinite_mismatch": int((diff & ~fin).sum()),
            "max_ulp": int(ulp[fin].max()) if fin.any() else 0,
            "max_abs_diff": float(np.abs(fa - fb)[fin].max()) if fin.any() else 0.0}


def check_nan(corpus, files):
    for fa, fb in (("nan_a.h5", "nan_b.h5"), ("nan_b.h5", "nan_a.h5"),
                   ("nan_a.h5", "nan_finite.h5"), ("nan_finite.h5", "nan_a.h5")):
        r = rc.ulpprof(["diff", "--format", "json", fa, fb], cwd=corpus)
        tag = "diff %s %s" % (fa, fb)
        if not check(r.returncode == 1 and r.stderr == "",
                     "%s: exit %d, stderr %r" % (tag, r.returncode, r.stderr)):
            continue
        rows = {row["name"]: row for row in json.loads(r.stdout)["rows"]}
        for name, (dt, bits_a) in files[fa].items():
            want = expect_metrics(dt, bits_a, files[fb][name][1])
            row = rows.get(name, {})
            for k, v in want.items():
                check(row.get(k) == v, "%s %s: %s = %r, numpy says %r" % (tag, name, k, row.get(k), v))


def main():
    corpus = rc.tmpdir("hostile")
    r = subprocess.run([sys.executable, os.path.join(os.path.dirname(ms.__file__),
                                                     "make_snapshots.py"), corpus])
    if not check(r.returncode == 0, "make_snapshots.py failed"):
        return rc.finish("")
    with open(os.path.join(corpus, "manifest.json")) as fh:
        manifest = json.load(fh)
    bad = {name: want["word"] for name, want in manifest["bad"].items()}
    good = sorted(manifest["good"])
    unclosed_cuts = {}

    add_truncations(corpus, "golden.h5", "golden", bad)
    add_truncations(corpus, "all_dtypes.h5", "dtypes", bad)
    if os.path.exists(rc.LOOP):
        p = subprocess.run([rc.LOOP, "--out", os.path.join(corpus, "loop.h5"), "--count", "9",
                            "--elements", "700", "--names", "4"], capture_output=True)
        check(p.returncode == 0, "capture_loop: %r" % p.stderr)
        good.append("loop.h5")
        add_truncations(corpus, "loop.h5", "writer", bad, good)
        # The same file as a killed writer leaves it (no closed mark), which
        # the reader reads through its capture journal: cut, it is refused too.
        unclosed = os.path.join(corpus, "loop_unclosed.h5")
        shutil.copy(os.path.join(corpus, "loop.h5"), unclosed)
        with h5py.File(unclosed, "r") as f:
            mark = f["journal"].id.get_offset() + 28
        with open(unclosed, "r+b") as fh:
            fh.seek(mark)
            check(fh.read(4) == b"CLSD", "loop.h5 has no closed mark")
            fh.seek(mark)
            fh.write(bytes(4))
        # A killed writer's file whose end HDF5's superblock places past the file's end is
        # read (HDF5's own flush leaves such files: format/FORMAT.md "Crash safety"): a cut
        # that takes nothing a capture needs may read, with every capture and the warning,
        # never fewer or other captures; any other cut is refused as truncated.
        cuts = {}
        add_truncations(corpus, "loop_unclosed.h5", "unclosed", cuts)
        for name, word in cuts.items():
            (unclosed_cuts if word == "truncated" else bad)[name] = word
    else:
        print("SKIP writer-file truncations: %s not built" % rc.LOOP)
    add_bad(corpus, bad)
    add_awkward(corpus, good)
    nan = nan_files(corpus)
    good += sorted(nan)

    for fname in good:
        check_good(corpus, fname)
    r = rc.ulpprof(["ls", "--json", "wide_run_strings.h5"], cwd=corpus)
    run_kv = json.loads(r.stdout)[0]["run"] if r.returncode == 0 else {}
    check(run_kv == {"fine": "x" * 10, "wide": "(%d bytes, not shown)" % (17 << 20)},
          "wide_run_strings.h5: /run %r" % {k: v[:40] for k, v in run_kv.items()})
    for fname, word in sorted(bad.items()):
        check_bad(corpus, fname, word)
    whole = rc.ulpprof(["ls", "--json", "loop_unclosed.h5"], cwd=corpus)
    for fname in sorted(unclosed_cuts):
        r = rc.ulpprof(["ls", "--json", fname], cwd=corpus)
        if r.returncode != 0:
            check_bad(corpus, fname, "truncated")
            continue
        check(whole.returncode == 0 and "did not close it" in r.stderr and
              json.loads(r.stdout)[0]["captures"] == json.loads(whole.stdout)[0]["captures"],
              "ls %s: read, but not as the whole file: %r" % (fname, r.stderr))
    check_nan(corpus, nan)
    if not rc.failures:
        shutil.rmtree(corpus)
    return rc.finish("%d malformed files refused by ls and diff (both positions), %d awkward "
                     "files read" % (len(bad), len(good)))


if __name__ == "__main__":
    sys.exit(main())

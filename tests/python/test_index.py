#!/usr/bin/python3
"""The capture index (FORMAT.md "Capture index") never changes what is read.

Snapshots written by capture_loop are read by `ulpprof ls --json` and
`ulpprof diff -f json` with the index (the default) and without it
(ULPPROF_INDEX=0, the groups read through HDF5): the outputs must be
byte-identical.  Then the files are changed with h5py after their writer
closed them -- an attribute edited, a capture added, a capture deleted, the
records' bytes damaged -- and the change must show in what ulpprof reads
(the seal no longer matches, so the groups are read), again identically
both ways.  The expected contents come from h5py, not from ulpprof.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "reliability"))
from relcheck import edit_keeping_size  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
LOOP = os.path.join(BUILD, "tests", "reliability", "capture_loop")
SHRINK = os.path.join(BUILD, "tests", "reliability", "shrinkfile.so")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(args, index=True, want=(0,)):
    env = dict(os.environ)
    env.pop("ULPPROF_INDEX", None)
    if not index:
        env["ULPPROF_INDEX"] = "0"
    r = subprocess.run([ULPPROF] + args, env=env, capture_output=True, text=True)
    check(r.returncode in want, "%s: exit %d: %s" % (args, r.returncode, r.stderr.strip()))
    return r.stdout


def both(args, want=(0,)):
    """The output with and without the index; they must be the same."""
    a, b = run(args, True, want), run(args, False, want)
    check(a == b, "%s: output differs with and without the index" % args)
    return a


def h5_captures(path):
    """{(name, occurrence): (seq, layer)} as h5py reads the groups."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, g in f["captures"].items():
            for occ, d in g.items():
                out[(name, int(occ))] = (int(d.attrs["seq"]), int(d.attrs.get("layer", -1)))
    return out


def ls_captures(path):
    doc = json.loads(both(["ls", "--json", path]))
    return {(c["name"], c["occurrence"]): (c["seq"], -1 if c["layer"] is None else c["layer"])
            for c in doc[0]["captures"]}


def write_plain(path):
    """A snapshot as an h5py script writes one: no journal, no index."""
    with h5py.File(path, "w") as f:
        f.attrs["format"] = np.bytes_("ulpprof-snapshot")
        f.attrs["format_version"] = np.int32(1)
        seq = 0

        def put(name, occ, data, dtype, **attrs):
            nonlocal seq
            d = f.create_dataset("captures/%s/%d" % (name, occ), **data)
            d.attrs["dtype"] = np.bytes_(dtype)
            d.attrs["seq"] = np.int64(seq)
            for k, v in attrs.items():
                d.attrs[k] = v
            seq += 1
        for occ in range(20):
            for layer in range(12):
                put("h.%d" % layer, occ, {"data": np.arange(32, dtype=np.uint16) + occ}, "bf16",
                    layer=np.int32(layer))
        put("gz", 0, {"data": np.ones((32, 32), np.float32), "chunks": (8, 8),
                      "compression": "gzip"}, "f32", role=np.bytes_("residual"))
        put("empty", 0, {"data": np.zeros((0, 4), np.float32)}, "f32")
        put("scalar", 0, {"data": np.float64(2.5)}, "f64")
        put("tok", 0, {"data": np.ones((3, 8), np.float32)}, "f32", role=np.bytes_("logits"),
            positions=np.array([4, 5, 6], np.int64), requests=np.array([9, 9, 9], np.int64))


def run_all(args, index=True, env=None):
    """Exit status, stdout and stderr of ulpprof, with or without the index
    (index "hash": with it, its seal hashed whatever the file's mtime)."""
    env = dict(os.environ if env is None else env)
    env.pop("ULPPROF_INDEX", None)
    if not index:
        env["ULPPROF_INDEX"] = "0"
    elif index == "hash":
        env["ULPPROF_INDEX"] = "hash"
    r = subprocess.run([ULPPROF] + args, env=env, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def deferred(tmp):
    """`ulpprof diff` opens its second file while the first one's seal hash
    runs (files of 1,024 captures or more), and confirms both before it
    compares.  A stale index that only that hash finds, on either side, and
    a hash that fails, must give what reading the groups gives."""
    a, b = os.path.join(tmp, "big-a.h5"), os.path.join(tmp, "big-b.h5")
    base = [LOOP, "--count", "1100", "--elements", "16", "--names", "7"]
    subprocess.run(base + ["--out", a], check=True, capture_output=True)
    subprocess.run(base + ["--out", b, "--flip-from", "1090"], check=True, capture_output=True)

    def edited(tag, edit):
        path = os.path.join(tmp, "big-" + tag + ".h5")
        shutil.copy(a, path)
        edit_keeping_size(path, edit)
        return path

    def attr(name, key, value):
        """Writes the attribute in place: the file keeps its size, so only the hash sees it."""
        return lambda f: h5py.h5a.open(f[name].id, key.encode()).write(np.array(value))

    layer = edited("layer", attr("captures/t.3/2", "layer", np.int32(77)))
    seq = edited("seq", attr("captures/t.4/9", "seq", np.int64(100000)))
    deleted = edited("deleted", lambda f: f["captures/t.2"].__delitem__("5"))
    for path in (layer, seq):
        with h5py.File(path, "r") as f:
            seal = bytes(f["index/seal"][:])
        check(int.from_bytes(seal[16:24], "little") == os.path.getsize(path),
              "%s: the size changed: the stale index is found before the hash" % path)
    # Unedited, both files keep their stamp: no hash, their records decoded
    # at once on two threads; the same reports as the groups' and the hash's.
    for fmt in ("json", "csv"):
        args = ["diff", "-f", fmt, a, b]
        want = run_all(args, False)
        check(run_all(args) == want and run_all(args, "hash") == want and want[0] == 1,
              "%s: stamped pair: not the groups' report" % args)
    seen = {layer: ['"layer": 77'], seq: ['"seq": 100000', '"seq_b": 100000'], deleted: []}
    for path in (layer, seq, deleted):
        for side, pair in enumerate(((path, b), (b, path))):
            for fmt in ("json", "csv"):
                args = ["diff", "-f", fmt] + list(pair)
                got, want = run_all(args), run_all(args, False)
                check(got == want and got[0] == 1,
                      "%s: stale index: exit %d, unlike the groups' exit %d or output"
                      % (args, got[0], want[0]))
                mark = seen[path][side] if len(seen[path]) > side else None
                check(fmt != "json" or mark is None or mark in got[1],
                      "%s: the edit (%s) is not reported" % (args, mark))

    # The hash fails: the file shrinks under it (shrinkfile.so truncates it
    # at the first read after the first thread starts: the hash's own).
    # What follows must be what the truncated file gives read the sure way.
    cut = edited("cut", lambda f: None)
    env = dict(os.environ, LD_PRELOAD=SHRINK, ULP_SHRINK_PATH=cut,
               ULP_SHRINK_SIZE=str(os.path.getsize(cut) // 2))
    got = run_all(["diff", "-f", "json", cut, b], env=env)
    check(os.path.getsize(cut) == int(env["ULP_SHRINK_SIZE"]), "shrinkfile.so did not cut the file")
    want = run_all(["diff", "-f", "json", cut, b], False)
    check(got == want and got[0] == 2 and got[1] == "",
          "failed hash: %r, not as the groups give it: %r" % (got, want))


def seal_field(path, at):
    with h5py.File(path, "r") as f:
        return int.from_bytes(bytes(f["index/seal"][:])[at:at + 8], "little")


def stamped(tmp, a, b):
    """The writer and `ulpprof repair` leave a file's mtime at its seal's
    stamp (bytes 40..47), and a reader that finds it so skips the hash: an
    edit shows whenever it moved the mtime, and is missed only when the
    mtime is set back to the stamp on purpose (the documented limit), which
    ULPPROF_INDEX=hash still catches.  A copy that keeps the mtime (cp -p,
    shutil.copy2) stays stamped.  Skipped where the filesystem keeps no
    nanosecond mtimes: no stamp survives there, and every file is hashed."""
    probe = os.path.join(tmp, "ns-probe")
    open(probe, "w").close()
    os.utime(probe, ns=(0, 1796123912558669069))
    if os.stat(probe).st_mtime_ns != 1796123912558669069:
        print("index: the stamp checks skipped: %s keeps no nanosecond mtimes" % tmp)
        return
    copy = os.path.join(tmp, "stamped.copy.h5")
    r = subprocess.run([ULPPROF, "repair", a, copy], capture_output=True, text=True)
    check(r.returncode == 0, "repair: exit %d: %s" % (r.returncode, r.stderr))
    # Written by the Python package (`ulpprof import`), through the same writer.
    npz, imported = os.path.join(tmp, "dump.npz"), os.path.join(tmp, "imported.h5")
    np.savez(npz, **{"model.layers.0.out": np.arange(64, dtype=np.float32),
                     "logits": np.ones((2, 8), np.float32)})
    src = os.environ.get("ULPPROF_SOURCE_DIR", ".")
    env = dict(os.environ, ULPPROF_PYTHON=sys.executable, PYTHONPATH=os.path.join(src, "python"),
               ULPPROF_CAPTURE_LIBRARY=os.path.join(BUILD, "capture", "libulpprof_capture.so"))
    r = subprocess.run([ULPPROF, "import", "-o", imported, npz], env=env, capture_output=True,
                       text=True)
    check(r.returncode == 0, "import: exit %d: %s" % (r.returncode, r.stderr))
    args = ["ls", "--json", imported]
    check(run_all(args) == run_all(args, False) == run_all(args, "hash"),
          "imported: ls differs with the stamp, without the index or hashed")
    for path in (a, b, copy, imported):
        stamp = seal_field(path, 40)
        check(stamp != 0 and os.stat(path).st_mtime_ns == stamp,
              "%s: mtime %d is not the seal's stamp %d" % (path, os.stat(path).st_mtime_ns, stamp))
    kept = os.path.join(tmp, "stamped.h5")
    shutil.copy2(a, kept)
    stamp = seal_field(kept, 40)
    check(os.stat(kept).st_mtime_ns == stamp, "shutil.copy2 did not keep the stamp")
    args = ["diff", "-f", "json", kept, b]
    want = run_all(args, False)
    check(run_all(args) == want and run_all(args, "hash") == want and want[0] == 1,
          "stamped file: the report differs from the groups' %r" % (want[:1],))
    size = os.path.getsize(kept)
    edit_keeping_size(kept, lambda f: h5py.h5a.open(f["captures/t.3/2"].id,
                                                    b"layer").write(np.array(np.int32(77))))
    check(os.path.getsize(kept) == size and os.stat(kept).st_mtime_ns != stamp,
          "the in-place edit changed the size, or not the mtime")
    want = run_all(args, False)
    check('"layer": 77' in want[1], "the edited layer is not in the groups' report")
    check(run_all(args) == want, "an edit after the seal is not found (mtime moved)")
    st = os.stat(kept)
    os.utime(kept, ns=(st.st_atime_ns, stamp))
    got = run_all(args)
    check(got[0] == 1 and '"layer": 77' not in got[1],
          "mtime set back to the stamp: the seal was not trusted (hashed anyway?)")
    check(run_all(args, "hash") == want, "ULPPROF_INDEX=hash did not find the edit")


def main():
    tmp = tempfile.mkdtemp(prefix="ulp-index-")
    deferred(tmp)
    a, b = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    base = [LOOP, "--count", "300", "--elements", "64", "--names", "7", "--kernels", "3"]
    subprocess.run(base + ["--out", a], check=True, capture_output=True)
    subprocess.run(base + ["--out", b, "--flip-from", "290"], check=True, capture_output=True)
    with h5py.File(a, "r") as f:
        check("index" in f and "records" in f["index"] and "seal" in f["index"],
              "the writer left no /index/records and /index/seal")
        seal = bytes(f["index/seal"][:])
        check(seal[:8] == b"ULPINDX1" and int.from_bytes(seal[32:40], "little") == 300,
              "seal: %r" % seal[:40])
        check(int.from_bytes(seal[16:24], "little") == os.path.getsize(a), "seal: file size")

    # Untouched files: the same listing and report both ways, and as h5py sees them.
    check(ls_captures(a) == h5_captures(a), "ls of the untouched file differs from h5py")
    both(["diff", "-f", "json", a, b], want=(1,))
    stamped(tmp, a, b)

    # Changes made after the writer closed the file.
    def changed(tag, edit):
        path = os.path.join(tmp, tag + ".h5")
        shutil.copy(a, path)
        with h5py.File(path, "r+") as f:
            edit(f)
        got, want = ls_captures(path), h5_captures(path)
        check(got == want, "%s: ulpprof reads %d captures unlike h5py's %d (%s)"
              % (tag, len(got), len(want), sorted(set(got.items()) ^ set(want.items()))[:3]))
        return got

    got = changed("layer", lambda f: f["captures/t.3/2"].attrs.__setitem__("layer", np.int32(77)))
    check(got.get(("t.3", 2), (0, 0))[1] == 77, "an edited layer attribute is not read")

    def add(f):
        d = f["captures/t.1"].create_dataset("999", data=np.zeros(64, np.uint16))
        d.attrs["dtype"] = np.bytes_("bf16")
        d.attrs["seq"] = np.int64(100000)
    got = changed("added", add)
    check(("t.1", 999) in got, "a capture added by h5py is not read")

    got = changed("deleted", lambda f: f["captures/t.2"].__delitem__("5"))
    check(("t.2", 5) not in got and len(got) == 299, "a capture deleted by h5py is still read")

    # Damaged records (the raw bytes of /index/records): the groups are read.
    path = os.path.join(tmp, "damaged.h5")
    shutil.copy(a, path)
    with h5py.File(path, "r") as f:
        off = f["index/records"].id.get_offset()
        n = f["index/records"].shape[0]
    with open(path, "r+b") as fh:
        fh.seek(off + n // 2)
        byte = fh.read(1)
        fh.seek(off + n // 2)
        fh.write(bytes([byte[0] ^ 0xFF]))
    check(ls_captures(path) == h5_captures(path), "damaged records: ls differs from h5py")

    # `ulpprof repair` seals an index into its copy: also of a file without one
    # (h5py's) or with a stale one (edited after close).  The copy lists as
    # h5py lists the original, and compares identical to it.
    plain = os.path.join(tmp, "plain.h5")
    write_plain(plain)
    for tag, src in (("plain", plain), ("edited", os.path.join(tmp, "layer.h5"))):
        copy = os.path.join(tmp, tag + ".copy.h5")
        r = subprocess.run([ULPPROF, "repair", src, copy], capture_output=True, text=True)
        check(r.returncode == 0, "repair %s: exit %d: %s" % (tag, r.returncode, r.stderr))
        with h5py.File(copy, "r") as f:
            seal = bytes(f["index/seal"][:])
        check(seal[:8] == b"ULPINDX1" and int.from_bytes(seal[8:16], "little") != 0 and
              int.from_bytes(seal[16:24], "little") == os.path.getsize(copy),
              "repair %s: the copy's index is not sealed: %r" % (tag, seal[:24]))
        check(ls_captures(copy) == h5_captures(src),
              "repair %s: the copy lists unlike h5py's original" % tag)
        both(["diff", "-f", "json", src, copy], want=(0,))

    if not failures:
        shutil.rmtree(tmp)
        print("index: same listing and report with and without it; edits, additions, "
              "deletions and damage after close are read as h5py reads them")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

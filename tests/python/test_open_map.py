#!/usr/bin/python3
"""The open map (FORMAT.md, "Open map"): the bytes after HDF5's end that let
a reader open a sealed snapshot without HDF5.

Files written by the capture library (through the Python package, and by
capture_loop) are checked against h5py and numpy only:
  - the map parsed here from FORMAT.md says what h5py reads: the root's
    attributes, /run and /env (a value set twice: its last; one over 16 KiB:
    stored variable-length), the journal's and the seal's offsets, and the
    records' runs hold /index/records byte for byte (contiguous records in
    a small file, 64 KiB chunks in a large one);
  - h5py and h5dump read the file; the seal's size counts the map;
  - ulpprof opened from the map (ULPPROF_OPEN_MAP=1, which refuses a file it
    cannot open so) prints byte for byte what it prints through HDF5
    (ULPPROF_OPEN_MAP=0): ls, ls --json, diff in every format;
  - a map whose byte changed (the mtime set back to the stamp), a file
    touched, ULPPROF_INDEX=0 or =hash, a file with a kernel trace, one
    without its closed mark: never opened from the map, and read through
    HDF5 with the same output as before;
  - a footer whose length claims the whole file, where no trusted seal is:
    its body is not read (the open's peak RSS stays small);
  - copies written by `ulpprof repair` (of the package's, capture_loop's
    and an h5py file with integer /run values) have a map too: no journal
    (2^64 - 1), the root, /run and /env as h5py reads them (integers as
    their decimal text), the records' run, the seal covering the map; and
    are read from it as through HDF5.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zlib

import h5py
import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
LOOP = os.path.join(BUILD, "tests", "reliability", "capture_loop")
LIB = os.path.join(BUILD, "capture", "libulpprof_capture.so")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", ".")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def run(args, open_map, index=None):
    env = dict(os.environ)
    env.pop("ULPPROF_INDEX", None)
    env["ULPPROF_OPEN_MAP"] = open_map
    if index is not None:
        env["ULPPROF_INDEX"] = index
    r = subprocess.run([ULPPROF] + args, env=env, capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def parse_map(path):
    """The map at the end of `path`, read as FORMAT.md lays it out; None without one."""
    data = open(path, "rb").read()
    foot = data[-32:]
    if foot[:8] != b"ULPOMAP1":
        return None
    u32 = lambda b, o: int.from_bytes(b[o:o + 4], "little")  # noqa: E731
    u64 = lambda b, o: int.from_bytes(b[o:o + 8], "little")  # noqa: E731
    n = u64(foot, 8)
    body = data[len(data) - 32 - n:len(data) - 32]
    check(zlib.crc32(body) == u32(foot, 24) and u32(foot, 28) == 0, "%s: map CRC" % path)
    m = {"hdf5_end": len(data) - 32 - n, "seal": u64(foot, 16), "version": u32(body, 0),
         "flags": u32(body, 4), "journal": u64(body, 8), "format_version": u64(body, 16),
         "created": u64(body, 24)}
    nrun, nenv, nruns = u32(body, 32), u32(body, 36), u64(body, 40)
    pos = 48
    m["runs"] = []
    for _ in range(nruns):
        m["runs"].append((u64(body, pos), u64(body, pos + 8)))
        pos += 16

    def string():
        nonlocal pos
        k = u32(body, pos)
        s = body[pos + 4:pos + 4 + k]
        check(body[pos + 4 + k] == 0, "%s: a map string without its NUL" % path)
        pos += 4 + k + 1
        return s.decode()

    m["format"], m["label"], m["writer"] = string(), string(), string()
    m["run"] = dict((string(), string()) for _ in range(nrun))
    m["env"] = dict((string(), string()) for _ in range(nenv))
    check(pos == len(body), "%s: %d bytes left over in the map" % (path, len(body) - pos))
    m["records"] = b"".join(data[o:o + k] for o, k in m["runs"])
    return m


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def check_map(path):
    m = parse_map(path)
    if not check(m is not None, "%s: no open map" % path):
        return None
    with h5py.File(path, "r") as f:
        check(m["version"] == 1 and m["flags"] == 0, "%s: version/flags" % path)
        check(m["format"] == text(f.attrs["format"]) and
              m["format_version"] == int(f.attrs["format_version"]) and
              m["label"] == text(f.attrs["label"]) and m["writer"] == text(f.attrs["writer"]) and
              m["created"] == int(f.attrs["created_unix_ns"]), "%s: root attributes" % path)
        check(m["run"] == {k: text(v) for k, v in f["run"].attrs.items()}, "%s: /run" % path)
        check(m["env"] == {k: text(v) for k, v in f["env"].attrs.items()}, "%s: /env" % path)
        check(m["journal"] == f["journal"].id.get_offset(), "%s: journal offset" % path)
        check(m["seal"] == f["index/seal"].id.get_offset(), "%s: seal offset" % path)
        check(m["records"] == f["index/records"][:].tobytes(), "%s: records' runs" % path)
        seal = f["index/seal"][:].tobytes()
        check(int.from_bytes(seal[16:24], "little") == os.path.getsize(path),
              "%s: the seal's size leaves the map out" % path)
        chunked = f["index/records"].chunks is not None
    r = subprocess.run(["h5dump", "-H", path], capture_output=True)
    check(r.returncode == 0, "%s: h5dump -H exit %d" % (path, r.returncode))
    return chunked


def check_copy_map(path):
    """The map of a copy `ulpprof repair` wrote, against h5py."""
    m = parse_map(path)
    if not check(m is not None, "%s: no open map" % path):
        return
    with h5py.File(path, "r") as f:
        check(m["version"] == 1 and m["flags"] == 0 and m["journal"] == (1 << 64) - 1,
              "%s: version/flags/journal %r" % (path, (m["version"], m["flags"], m["journal"])))
        check("journal" not in f, "%s: a copy with a journal" % path)
        check(m["format"] == text(f.attrs["format"]) and
              m["format_version"] == int(f.attrs["format_version"]) and
              m["label"] == text(f.attrs["label"]) and m["writer"] == text(f.attrs["writer"]) and
              m["created"] == int(f.attrs.get("created_unix_ns", 0)), "%s: root attributes" % path)
        for g in ("run", "env"):
            want = {k: text(v) for k, v in f[g].attrs.items()} if g in f else {}
            check(m[g] == want, "%s: /%s %r, h5py %r" % (path, g, m[g], want))
        check(m["seal"] == f["index/seal"].id.get_offset(), "%s: seal offset" % path)
        check(m["records"] == f["index/records"][:].tobytes(), "%s: records' runs" % path)
        seal = f["index/seal"][:].tobytes()
        check(int.from_bytes(seal[16:24], "little") == os.path.getsize(path),
              "%s: the seal's size leaves the map out" % path)
    rc, out, err = run(["ls", path], "1")
    check(rc == 0, "%s: not opened from its map: %r" % (path, err))


def same_output(tag, args, want_rc):
    got, want = run(args, "1"), run(args, "0")
    check(got == want, "%s: %s: from the map %r, through HDF5 %r" % (tag, args, got[:1], want[:1]))
    check(got[0] == want_rc, "%s: %s: exit %d, not %d: %s" % (tag, args, got[0], want_rc, got[2]))


def not_from_map(tag, path, args, want, **kw):
    """`path` is not opened from its map: =1 refuses it naming it, and the
    default gives `want` (what the HDF5 way gave the intact file)."""
    rc, out, err = run(["ls", path], "1", **kw)
    check(rc == 2 and path in err and "open map" in err and err.count("\n") == 1,
          "%s: ULPPROF_OPEN_MAP=1: exit %d, %r" % (tag, rc, err))
    got = run(args, "", **kw)
    check(got == want, "%s: %s: %r, not %r" % (tag, args, got[:1], want[:1]))


def set_mtime(path, ns):
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, ns))


def write_with_package(path, n, label, run_attrs, twice):
    sys.path.insert(0, os.path.join(SRC, "python"))
    os.environ["ULPPROF_CAPTURE_LIBRARY"] = LIB
    from ulpprof import _lib
    rng = np.random.default_rng(n)
    with _lib.Session(path, label=label, run=run_attrs) as s:
        for k, v in twice.items():
            s.set_run(k, v)
        for i in range(n):
            a = rng.standard_normal(8 + i % 5).astype(np.float32)
            s.capture("model.layers.%d.out" % (i % 3), a.ctypes.data, "f32", a.shape, layer=i % 3)


def main():
    tmp = tempfile.mkdtemp(prefix="ulp-openmap-")
    long_value = "x" * 16382 + "\u00e9"  # 16 KiB exactly: the largest, variable-length
    run_attrs = {"engine": "vLLM", "tp": "4", "caf\u00e9 \u2603": "\u00fcber", "long": long_value,
                 "empty": ""}
    small, big = os.path.join(tmp, "small.h5"), os.path.join(tmp, "big.h5")
    write_with_package(small, 5, "r\u00e9f\u00e9rence", run_attrs, {"tp": "8"})
    write_with_package(big, 3000, "", {}, {})
    check(not check_map(small), "small.h5: records not contiguous")
    check(check_map(big), "big.h5: records not chunked")
    with h5py.File(small, "r") as f:
        check(text(f["run"].attrs["tp"]) == "8", "small.h5: /run tp set twice is not the last")
        check(h5py.check_string_dtype(f["run"].attrs.get_id("long").dtype).length is None,
              "small.h5: the long /run value is not variable-length")

    a, b = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    subprocess.run([LOOP, "--out", a, "--count", "1200", "--elements", "64", "--names", "9"],
                   check=True, capture_output=True)
    subprocess.run([LOOP, "--out", b, "--count", "1200", "--elements", "64", "--names", "9",
                    "--flip-from", "1100"], check=True, capture_output=True)
    check_map(a)
    for path in (small, big, a):
        same_output(path, ["ls", path], 0)
        same_output(path, ["ls", "--json", path], 0)
    for fmt in ("table", "markdown", "csv", "json"):
        same_output("pair", ["diff", "-f", fmt, a, b], 1)
        same_output("itself", ["diff", "-f", fmt, small, small], 0)
    rc, out, err = run(["ls", "--json", small], "1")
    j = json.loads(out)[0] if rc == 0 else {}
    check(j.get("run", {}).get("long") == long_value and j.get("label") == "r\u00e9f\u00e9rence",
          "small.h5: ls --json from the map: %r" % {k: j.get(k) for k in ("label",)})

    want = run(["diff", "-f", "json", a, b], "0")
    # A byte of the map's body changed, the mtime set back to the stamp: the
    # seal is trusted, the map's CRC is not, the index still is.
    stamp = os.stat(a).st_mtime_ns
    m = parse_map(a)
    damaged = os.path.join(tmp, "damaged.h5")
    shutil.copy2(a, damaged)
    with open(damaged, "r+b") as fh:
        fh.seek(m["hdf5_end"] + 60)
        byte = fh.read(1)
        fh.seek(m["hdf5_end"] + 60)
        fh.write(bytes([byte[0] ^ 1]))
    set_mtime(damaged, stamp)
    want_d = run(["diff", "-f", "json", a.replace(a, damaged), b], "0")
    check(want_d[0] == 1 and want_d[1] == want[1].replace(a, damaged),
          "damaged.h5 through HDF5 differs from a.h5's")
    not_from_map("damaged map", damaged, ["diff", "-f", "json", damaged, b], want_d)
    # Touched: the stamp no longer matches.
    touched = os.path.join(tmp, "touched.h5")
    shutil.copy2(a, touched)
    set_mtime(touched, stamp + 1)
    want_t = run(["diff", "-f", "json", touched, b], "0")
    not_from_map("touched", touched, ["diff", "-f", "json", touched, b], want_t)
    # The index left out, or hashed: the map is not used.
    not_from_map("ULPPROF_INDEX=0", a, ["diff", "-f", "json", a, b], want, index="0")
    not_from_map("ULPPROF_INDEX=hash", a, ["diff", "-f", "json", a, b], want, index="hash")
    # A kernel trace: flagged, read through HDF5.
    traced = os.path.join(tmp, "traced.h5")
    subprocess.run([LOOP, "--out", traced, "--count", "20", "--elements", "16", "--names", "3",
                    "--kernels", "4"], check=True, capture_output=True)
    mt = parse_map(traced)
    check(mt is not None and mt["flags"] == 1, "traced.h5: the map does not flag /trace")
    want_k = run(["kernels", "--json", traced, traced], "0")
    check(want_k[0] == 0 and '"launches": 80' in want_k[1], "traced.h5: ulpprof kernels: %r" % (want_k,))
    not_from_map("traced", traced, ["kernels", "--json", traced, traced], want_k)
    # No closed mark (as a killed writer leaves it): read through the journal.
    unclosed = os.path.join(tmp, "unclosed.h5")
    shutil.copy2(a, unclosed)
    with open(unclosed, "r+b") as fh:
        fh.seek(m["journal"] + 28)
        check(fh.read(4) == b"CLSD", "a.h5: no closed mark")
        fh.seek(m["journal"] + 28)
        fh.write(bytes(4))
    set_mtime(unclosed, stamp)
    want_u = run(["ls", "--json", unclosed], "0")
    check(want_u[0] == 0 and "did not close it" in want_u[2], "unclosed.h5: %r" % (want_u[2],))
    not_from_map("unclosed", unclosed, ["ls", "--json", unclosed], want_u)

    # A footer whose length claims the whole file, on a file whose seal is
    # not trusted (here: none at the offset it names): the body is never
    # read, so the open does not read the file into memory (512 MiB, sparse).
    huge = os.path.join(tmp, "huge_footer.h5")
    shutil.copy(a, huge)
    with open(huge, "r+b") as fh:
        fh.truncate(512 << 20)
        fh.seek((512 << 20) - 32)
        fh.write(b"ULPOMAP1" + ((512 << 20) - 32).to_bytes(8, "little") + bytes(16))
    def ls_rss(path):
        env = dict(os.environ, ULPPROF_OPEN_MAP="")
        p = subprocess.Popen([ULPPROF, "ls", path], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        return os.waitstatus_to_exitcode(status), usage.ru_maxrss

    # Against the same open of the file it was copied from: a sanitizer's
    # own memory (ASan: ~270 MiB) is in both.
    _, base = ls_rss(a)
    rc, rss = ls_rss(huge)
    check(rc == 0 and rss < base + (128 << 10),
          "huge_footer.h5: exit %d, peak RSS %d KiB against %d for a.h5 (the map's body read "
          "before the seal was trusted)" % (rc, rss, base))
    os.unlink(huge)

    # Copies written by `ulpprof repair` open from their map too.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import make_snapshots as ms
    plain = os.path.join(tmp, "plain.h5")
    ms.write_plain(plain, label="h5py")
    with h5py.File(plain, "r+") as f:
        f.require_group("run").attrs["batch"] = np.int64(8)
        f["run"].attrs["cache"] = "hit"
    copies = {}
    for src in (small, a, b, plain):
        dst = src[:-3] + "_copy.h5"
        r = subprocess.run([ULPPROF, "repair", src, dst], capture_output=True, text=True)
        check(r.returncode == 0, "repair %s: %r" % (src, r.stderr))
        copies[src] = dst
        check_copy_map(dst)
        same_output(dst, ["ls", dst], 0)
        same_output(dst, ["ls", "--json", dst], 0)
    for fmt in ("table", "json"):
        same_output("copies", ["diff", "-f", fmt, copies[a], copies[b]], 1)
    check(run(["diff", "-f", "json", copies[a], copies[b]], "1")[1] ==
          want[1].replace(a, copies[a]).replace(b, copies[b]),
          "the copies' diff is not the originals'")

    if not failures:
        shutil.rmtree(tmp)
        print("open map: 3 writers' files and 4 repaired copies read from the map as through "
              "HDF5; 6 kinds of file left to HDF5")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Adversarial inputs to the `ulpprof` program:

  A. output flags onto inputs: `diff --out`, `diff --plot`, `plot -o` never
     replace a snapshot they read (directly, through a symbolic or a hard
     link): exit 2, one line, the input unchanged byte for byte;
  B. links out of the file: `/captures` as an external link, a soft link
     through one, a virtual dataset (its source present or missing): refused;
  C. inputs that are not regular files (a FIFO, /dev/zero) are refused at
     once, not after the open timeout; a file that shrinks while `diff`
     reads it gives one line naming it, not a SIGBUS;
  D. names, labels and /run keys and values with newlines, escape
     sequences, backticks, '|', '=' at the start and bytes that are not
     UTF-8: JSON keeps them losslessly (invalid bytes as \\udcXX, Python's
     surrogateescape), distinct names stay distinct, the table escapes them
     as `ls` does, Markdown and CSV stay well-formed (checked with Python's
     csv module and by counting cells);
  E. messages: a missing filter is named, paths with newlines and long paths
     give one line, absurd --context / --max-hunks / --seed are refused.
Every expectation here comes from h5py/numpy or from the file system, not
from ulpprof's own output.
"""
import csv
import hashlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "reliability"))
import relcheck as rc  # noqa: E402
from relcheck import check  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import make_snapshots as ms  # noqa: E402

SHRINK = os.path.join(rc.BUILD, "tests", "reliability", "shrinkfile.so")


def sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def one_line(r, tag, word=None, name=None):
    lines = r.stderr.splitlines()
    check(r.returncode == 2, "%s: exit %d, want 2 (stderr %r)" % (tag, r.returncode, r.stderr[:300]))
    check(len(lines) == 1, "%s: %d stderr lines: %r" % (tag, len(lines), r.stderr[:600]))
    check("HDF5-DIAG" not in r.stderr and "infinite loop" not in r.stderr, "%s: HDF5 noise" % tag)
    if lines and word is not None:
        check(word in lines[0], "%s: message lacks %r: %r" % (tag, word, lines[0]))
    if lines and name is not None:
        check(name in lines[0], "%s: message does not name %r: %r" % (tag, name, lines[0]))


# --- A. Output flags onto inputs ------------------------------------------------------

def part_a(tmp):
    a, b = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    ms.write_golden(a)
    ms.write_golden(b)
    os.symlink("a.h5", os.path.join(tmp, "a_sym.h5"))
    os.link(a, os.path.join(tmp, "a_hard.h5"))
    # Each file against its own bytes: h5py stamps object headers to the
    # second, so two writes of the golden file differ across a second's turn.
    want, want_b = sha(a), sha(b)
    for flag, target in (("--out", "a.h5"), ("--out", "b.h5"), ("-o", "a_sym.h5"),
                         ("--out", "a_hard.h5"), ("--out", "./a.h5")):
        r = rc.ulpprof(["diff", flag, target, "a.h5", "b.h5"], cwd=tmp)
        one_line(r, "diff %s %s" % (flag, target), "input", target)
        check(sha(a) == want and sha(b) == want_b, "diff %s %s changed an input" % (flag, target))
    # The plot writers' files (name.dat, name.gp, name.png, name.svg) onto an input.
    pdir = os.path.join(tmp, "plots")
    os.mkdir(pdir)
    p = os.path.join(pdir, "amplification.dat")
    shutil.copy(a, p)
    for args in (["plot", "-o", pdir, p, "b.h5"], ["diff", "--plot", pdir, "b.h5", p]):
        r = rc.ulpprof(args, cwd=tmp)
        one_line(r, " ".join(args[:3]), "input", "amplification.dat")
        check(sha(p) == want, "%s changed an input" % " ".join(args[:3]))
    # Not an input: still written.
    r = rc.ulpprof(["diff", "--out", "report.txt", "a.h5", "b.h5"], cwd=tmp)
    check(r.returncode == 0 and os.path.getsize(os.path.join(tmp, "report.txt")) > 0,
          "diff --out report.txt: exit %d %r" % (r.returncode, r.stderr))


# --- B. Links out of the file --------------------------------------------------------

def part_b(tmp):
    ms.write_golden(os.path.join(tmp, "golden.h5"))
    # A partner whose data sit at other offsets than the linked file's.
    with h5py.File(os.path.join(tmp, "other.h5"), "w") as f:
        ms.root(f)
        f.create_dataset("pad", data=np.arange(50000, dtype=np.uint8))
        w = ms.Writer(f)
        w.capture("embed", 0, 0, "bf16", (64,))

    def ext_captures(f):
        ms.root(f)
        f["captures"] = h5py.ExternalLink("other.h5", "/captures")

    def soft_through_ext(f):
        ms.root(f)
        f["ext"] = h5py.ExternalLink("other.h5", "/")
        f["captures"] = h5py.SoftLink("/ext/captures")

    def vds(src):
        def build(f):
            ms.root(f)
            lay = h5py.VirtualLayout(shape=(8,), dtype=np.uint16)
            lay[:] = h5py.VirtualSource(src, "d", shape=(8,))
            d = f.require_group("captures").require_group("x").create_virtual_dataset(
                "0", lay, fillvalue=0)
            d.attrs["dtype"] = "bf16"
            d.attrs["seq"] = np.int64(0)
        return build

    with h5py.File(os.path.join(tmp, "src.h5"), "w") as f:
        f["d"] = np.arange(8, dtype=np.uint16)
    cases = (("ext_captures.h5", ext_captures, "external"),
             ("soft_ext.h5", soft_through_ext, "external"),
             ("vds.h5", vds("src.h5"), "virtual"),
             ("vds_missing.h5", vds("missing.h5"), "virtual"))
    for fname, build, word in cases:
        with h5py.File(os.path.join(tmp, fname), "w") as f:
            build(f)
        one_line(rc.ulpprof(["ls", fname], cwd=tmp), "ls " + fname, word, fname)
        for pair in ((fname, "golden.h5"), ("golden.h5", fname)):
            one_line(rc.ulpprof(["diff"] + list(pair), cwd=tmp), "diff %s %s" % pair, word, fname)
        one_line(rc.ulpprof(["repair", fname, "copy_" + fname], cwd=tmp), "repair " + fname,
                 word, fname)


# --- C. Non-regular inputs, a file that shrinks ---------------------------------------

def part_c(tmp):
    ms.write_golden(os.path.join(tmp, "golden.h5"))
    fifo = os.path.join(tmp, "fifo.h5")
    os.mkfifo(fifo)
    env = dict(os.environ, ULPPROF_OPEN_TIMEOUT="600")
    for args in (["ls", "fifo.h5"], ["diff", "fifo.h5", "golden.h5"], ["diff", "golden.h5", "fifo.h5"],
                 ["ls", "/dev/zero"]):
        try:
            r = subprocess.run([rc.ULPPROF] + args, cwd=tmp, env=env, capture_output=True,
                               text=True, timeout=30)
        except subprocess.TimeoutExpired:
            check(False, "%s: still blocked after 30 s" % " ".join(args))
            continue
        one_line(r, " ".join(args), "not a regular file", args[1] if args[1] != "golden.h5" else args[2])

    # A large pair; the shim truncates A to 64 KiB when diff starts its threads,
    # after both files were opened and checked.
    a, b = os.path.join(tmp, "big_a.h5"), os.path.join(tmp, "big_b.h5")
    for p in (a, b):
        with h5py.File(p, "w") as f:
            ms.root(f)
            w = ms.Writer(f)
            for i in range(4):
                w.capture("t%d" % i, 0, i, "bf16", (1 << 20,))
    if not os.path.exists(SHRINK):
        check(False, "C: %s not built" % SHRINK)
        return
    env = dict(os.environ, LD_PRELOAD=SHRINK, ULP_SHRINK_PATH=a, ULP_SHRINK_SIZE="65536")
    r = subprocess.run([rc.ULPPROF, "diff", "-j", "2", a, b], env=env, capture_output=True,
                       text=True, timeout=120)
    check(os.path.getsize(a) == 65536, "C: the shim did not shrink %s" % a)
    one_line(r, "diff of a file that shrank", "shrank", "big_a.h5")


# --- D. Output that stays well-formed ------------------------------------------------

NAMES = [b"plain", b"new\nline", b"esc\x1b[31mred", b"tick`s`|pipe", b"=cmd|' -C calc'!A0",
         b"bad\xff", b"bad\xfe", b"caf\xc3\xa9", b"back\\slash"]


def d_file(path, flip):
    with h5py.File(path, "w") as f:
        ms.root(f, label=None)
        f.attrs["label"] = np.bytes_(b"lab\nel\xff`")
        run = f.create_group("run")
        run.attrs["cache"] = np.bytes_(b"miss" if flip else b"hit")
        run.attrs[b"k\xffey".decode("latin-1")] = np.bytes_(b"v\n`|\xfe" + (b"1" if flip else b"2"))
        g = f.create_group("captures")
        for i, n in enumerate(NAMES):
            gid = h5py.h5g.create(g.id, n)
            bits = ms.pattern_bits(i, 16, 2)
            if flip:
                bits[3] ^= 1
            space = h5py.h5s.create_simple((16,))
            ftype = ms.file_type("bf16")
            d = h5py.h5d.create(gid, b"0", ftype, space)
            d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(bits), mtype=ftype)
            ds = h5py.Dataset(d)
            ds.attrs["dtype"] = "bf16"
            ds.attrs["seq"] = np.int64(i)


def raw(s):
    return s.encode("utf-8", "surrogateescape")


def part_d(tmp):
    a, b = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    d_file(a, False)
    d_file(b, True)
    with h5py.File(a, "r") as f:  # what h5py lists, as bytes
        names = list(f["captures"].id.__iter__())
    check(sorted(names) == sorted(NAMES), "D: h5py lists %r" % names)

    r = rc.ulpprof(["diff", "-f", "json", a, b])
    check(r.returncode == 1, "D json: exit %d %r" % (r.returncode, r.stderr))
    j = json.loads(r.stdout)
    got = sorted(raw(row["name"]) for row in j["rows"])
    check(got == sorted(NAMES), "D json: row names %r" % got)
    check(raw(j["a"]["label"]) == b"lab\nel\xff`", "D json: label %r" % j["a"].get("label"))
    keys = {raw(k["key"]): (raw(k["a"]), raw(k["b"])) for k in j["ladder"]["keys"]}
    want_key = b"k\xc3\xbfey"  # h5py wrote the str attribute name as UTF-8
    check(keys.get(want_key) == (b"v\n`|\xfe2", b"v\n`|\xfe1"), "D json: /run keys %r" % keys)

    # Run directories whose paths are not UTF-8: the paths come out as \udcXX
    # too, in the frame as in the rank reports, not as a failure.
    ra, rb = os.path.join(os.fsencode(tmp), b"run\xff"), os.path.join(os.fsencode(tmp), b"run2")
    for d, src in ((ra, a), (rb, b)):
        os.mkdir(d)
        shutil.copy(src, os.path.join(d, b"r.h5"))
    r = subprocess.run([os.fsencode(rc.ULPPROF), b"diff", b"-f", b"json", ra, rb],
                       capture_output=True, timeout=60)
    check(r.returncode == 1, "D json of run directories: exit %d %r" % (r.returncode, r.stderr))
    if r.returncode == 1:
        j = json.loads(r.stdout)
        got = (raw(j["a"]), raw(j["b"]), raw(j["ranks"][0]["a"]))
        check(got == (ra, rb, os.path.join(ra, b"r.h5")), "D json of run directories: %r" % (got,))

    r = rc.ulpprof(["ls", "--json", a])
    j = json.loads(r.stdout)[0]
    got = [raw(c["name"]) for c in j["captures"]]
    check(sorted(got) == sorted(NAMES) and len(set(got)) == len(NAMES), "D ls --json: %r" % got)

    r = subprocess.run([rc.ULPPROF, "diff", a, b], capture_output=True, timeout=60)
    out = r.stdout
    check(b"\x1b" not in out and b"\xff" not in out and b"\xfe" not in out,
          "D table: raw escape or invalid bytes reach the terminal")
    for n in NAMES:
        esc = n.replace(b"\\", b"\\\\").replace(b"\n", b"\\n").replace(b"\x1b", b"\\x1b") \
               .replace(b"\xff", b"\\xff").replace(b"\xfe", b"\\xfe")
        check(esc in out, "D table: %r not shown as %r" % (n, esc))
    rows = [ln for ln in out.split(b"\n") if ln.endswith(b"bf16") or b" bf16 " in ln]
    check(len(rows) >= len(NAMES), "D table: %d rows for %d captures" % (len(rows), len(NAMES)))

    r = subprocess.run([rc.ULPPROF, "diff", "-f", "markdown", a, b], capture_output=True, timeout=60)
    md = r.stdout
    check(b"\xff" not in md and b"\x1b" not in md, "D markdown: raw bytes")
    table = [ln for ln in md.split(b"\n") if ln.startswith(b"|")]
    cells = {len(ln.replace(b"\\|", b"").split(b"|")) for ln in table}
    check(len(table) >= len(NAMES) + 2 and len(cells) == 1,
          "D markdown: table rows with different cell counts %r" % cells)
    for ln in md.split(b"\n"):
        check(ln.count(b"`") % 2 == 0, "D markdown: unbalanced code span in %r" % ln)

    r = subprocess.run([rc.ULPPROF, "diff", "-f", "csv", a, b], capture_output=True, timeout=60)
    rows = list(csv.reader(io.StringIO(r.stdout.decode("utf-8", "surrogateescape"), newline="")))
    check(len(rows) == len(NAMES) + 1 and len({len(x) for x in rows}) == 1,
          "D csv: %d records, cell counts %r" % (len(rows), {len(x) for x in rows}))
    for x in rows[1:]:
        check(x[0][:1] not in ("=", "+", "-", "@"), "D csv: formula cell %r" % x[0])
    csv_names = sorted(raw(x[0][1:] if x[0].startswith("'=") else x[0]) for x in rows[1:])
    check(csv_names == sorted(NAMES), "D csv: names %r" % csv_names)


# --- E. Messages and absurd flags ----------------------------------------------------

def part_e(tmp):
    ms.write_golden(os.path.join(tmp, "golden.h5"))
    # A filter this HDF5 lacks (h5py registers lzf in its own process only).
    with h5py.File(os.path.join(tmp, "lzf.h5"), "w") as f:
        ms.root(f)
        d = f.require_group("captures").require_group("x").create_dataset(
            "0", data=np.arange(64, dtype=np.uint16), chunks=(16,), compression="lzf")
        d.attrs["dtype"] = "bf16"
        d.attrs["seq"] = np.int64(0)
    for args in (["ls", "lzf.h5"], ["diff", "lzf.h5", "golden.h5"]):
        one_line(rc.ulpprof(args, cwd=tmp), " ".join(args), "lzf", "lzf.h5")

    # A path with a newline, and a long one, still make one line.
    nl = os.path.join(tmp, "new\nline.h5")
    with open(nl, "wb") as fh:
        fh.write(b"not hdf5" * 100)
    one_line(rc.ulpprof(["ls", nl]), "ls of a path with a newline", "not an HDF5 file")
    one_line(rc.ulpprof(["diff", nl, "golden.h5"], cwd=tmp), "diff of a path with a newline")
    deep = tmp
    while len(deep) < 3000:
        deep = os.path.join(deep, "d" * 200)
    os.makedirs(deep)
    longp = os.path.join(deep, "x" * 200 + ".h5")
    shutil.copy(nl, longp)
    one_line(rc.ulpprof(["ls", longp]), "ls of a 3,000-byte path", "not an HDF5 file")
    for args in (["kernels", "--context", "99999999999999999999", "golden.h5", "golden.h5"],
                 ["kernels", "--context", "9223372036854775807", "golden.h5", "golden.h5"],
                 ["kernels", "--max-hunks", "9223372036854775807", "golden.h5", "golden.h5"],
                 ["demo", "--seed", "99999999999999999999", "--dir", "demo"],
                 ["demo", "--seed", "-1", "--dir", "demo"]):
        one_line(rc.ulpprof(args, cwd=tmp), " ".join(args[:3]), args[2])
    check(not os.path.exists(os.path.join(tmp, "demo")), "demo ran with an absurd seed")


def main():
    tmp = rc.tmpdir("adversarial")
    for part in (part_a, part_b, part_c, part_d, part_e):
        d = os.path.join(tmp, part.__name__)
        os.mkdir(d)
        part(d)
    if not rc.failures:
        shutil.rmtree(tmp)
    return rc.finish("adversarial inputs refused or escaped")


if __name__ == "__main__":
    sys.exit(main())

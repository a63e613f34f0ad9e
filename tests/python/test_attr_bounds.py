#!/usr/bin/python3
"""Attributes read from a damaged file never carry heap bytes.

One flipped bit in the dataspace of an attribute (its element count grown
past the bytes its message holds) made HDF5 1.10 copy the value from past
the message: `ls --json` then exited 0 with a different `inputs` string on
every run.  Here such files, written by the library's own writer (version 1
object headers) and by h5py with libver="latest" (version 2 headers), are
refused by `ls` and `diff` with exit 2 and one line naming the file and the
attribute, the same line on two runs; a bit that shrinks the count (a value
that is still inside its message) reads as what it now says.

Also: a capture that lists itself among its `inputs` is not "carried in" from
itself (origin in `diff --format json`)."""
import json
import os
import struct
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capwriter  # noqa: E402
import make_snapshots as ms  # noqa: E402

BUILD = os.environ["ULPPROF_BUILD_DIR"]
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def run(*args):
    return subprocess.run([ULPPROF] + list(args), capture_output=True, text=True, timeout=120)


def attr_dims_at(blob, name, which=0):
    """File offset of the first extent of attribute `name`'s dataspace (the
    which-th message of that name), read by the published layout of an
    attribute message (versions 1 and 3) and of a dataspace (1 and 2)."""
    key = name.encode() + b"\0"
    found = []
    at = blob.find(key)
    while at >= 0:
        for body, ver in ((at - 8, 1), (at - 9, 3)):
            if body >= 0 and blob[body] == ver and struct.unpack_from("<H", blob, body + 2)[0] \
                    == len(key):
                nsz, tsz, ssz = struct.unpack_from("<HHH", blob, body + 2)
                pad = (lambda x: (x + 7) & ~7) if ver == 1 else (lambda x: x)
                ds = at + pad(nsz) + pad(tsz)
                found.append(ds + (8 if blob[ds] == 1 else 4))
        at = blob.find(key, at + 1)
    return found[which]


def grow(src, dst, name, bit, which=0):
    """dst: src with bit `bit` of attribute name's first extent flipped (the
    maximum extent too, so that only the count is wrong); returns the new count."""
    blob = bytearray(open(src, "rb").read())
    at = attr_dims_at(blob, name, which)
    (n,) = struct.unpack_from("<Q", blob, at)
    v2 = blob.rfind(b"OHDR", 0, at) >= 0
    if v2:
        start, end = reseal_v2(blob, at)
        assert struct.unpack_from("<I", blob, end)[0] == lookup3(blob[start:end]), "lookup3"
    struct.pack_into("<Q", blob, at, n ^ (1 << bit))
    if v2:
        struct.pack_into("<I", blob, end, lookup3(blob[start:end]))
    open(dst, "wb").write(bytes(blob))
    return n ^ (1 << bit)


def lookup3(data):
    """Bob Jenkins' lookup3 hashlittle(data, 0): the checksum of a version 2
    object header (HDF5 file format, "Jenkins' lookup3")."""
    m = 0xffffffff

    def rot(x, k):
        return ((x << k) | (x >> (32 - k))) & m

    a = b = c = (0xdeadbeef + len(data)) & m
    k = bytes(data)
    while len(k) > 12:
        x, y, z = struct.unpack_from("<III", k)
        a, b, c = (a + x) & m, (b + y) & m, (c + z) & m
        a = ((a - c) & m) ^ rot(c, 4); c = (c + b) & m
        b = ((b - a) & m) ^ rot(a, 6); a = (a + c) & m
        c = ((c - b) & m) ^ rot(b, 8); b = (b + a) & m
        a = ((a - c) & m) ^ rot(c, 16); c = (c + b) & m
        b = ((b - a) & m) ^ rot(a, 19); a = (a + c) & m
        c = ((c - b) & m) ^ rot(b, 4); b = (b + a) & m
        k = k[12:]
    if not k:
        return c
    x, y, z = struct.unpack("<III", k + b"\0" * (12 - len(k)))
    a, b, c = (a + x) & m, (b + y) & m, (c + z) & m
    c ^= b; c = (c - rot(b, 14)) & m
    a ^= c; a = (a - rot(c, 11)) & m
    b ^= a; b = (b - rot(a, 25)) & m
    c ^= b; c = (c - rot(b, 16)) & m
    a ^= c; a = (a - rot(c, 4)) & m
    b ^= a; b = (b - rot(a, 14)) & m
    c ^= b; c = (c - rot(b, 24)) & m
    return c


def reseal_v2(blob, at):
    """Recomputes the checksum of the version 2 header chunk 0 holding offset
    `at` (after checking that it matched before the change at `at`)."""
    start = blob.rfind(b"OHDR", 0, at)
    flags = blob[start + 5]
    p = start + 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
    width = 1 << (flags & 3)
    size = int.from_bytes(blob[p:p + width], "little")
    end = p + width + size
    assert start < at < end
    return start, end


def refused(path, attr, tag, partner):
    for args in (["ls", path], ["ls", "--json", path], ["diff", path, partner],
                 ["diff", partner, path]):
        outs = [run(*args) for _ in range(2)]
        p = outs[0]
        check(p.returncode == 2 and p.stdout in ("", "[]\n") and p.stderr.count("\n") == 1
              and path in p.stderr and "'%s'" % attr in p.stderr and "declares more bytes"
              in p.stderr, "%s: %s: exit %d, stdout %r, stderr %r"
              % (tag, args[0], p.returncode, p.stdout[:200], p.stderr))
        check(outs[1].stdout == p.stdout and outs[1].stderr == p.stderr,
              "%s: %s: two runs differ" % (tag, args[0]))


def inputs_of(path, name):
    with h5py.File(path, "r") as f:
        v = f["captures"][name]["0"].attrs.get("inputs")
        return None if v is None else [x.decode() if isinstance(x, bytes) else str(x)
                                       for x in np.atleast_1d(v)]


with tempfile.TemporaryDirectory() as tmp:
    # The library's writer: fixed-length strings, version 1 headers.
    good = os.path.join(tmp, "good.h5")
    w = capwriter.Writer(good, run={"cache": "miss"})
    w.capture("layers.0", np.zeros((2, 4), np.uint16), "bf16", positions=[0, 1],
              inputs=["embed"], layer=0)
    w.capture("layers.1", np.zeros((2, 4), np.uint16), "bf16", positions=[0, 1],
              inputs=["layers.0", "layers.1"], layer=1)
    w.close()
    p = run("ls", "--json", good)
    check(p.returncode == 0, "good: %d %r" % (p.returncode, p.stderr))
    # 2 strings of 9 bytes -> 3, 6, 10 and 258: all past the 24 bytes the
    # message keeps for them (2 -> 6 is the one that read heap bytes).
    for bit in (0, 2, 3, 8):
        bad = os.path.join(tmp, "inputs%d.h5" % bit)
        grow(good, bad, "inputs", bit, which=1)
        refused(bad, "inputs", "inputs bit %d" % bit, good)
    # 2 -> 0: a value that still lies in its message reads as what it says.
    shrunk = os.path.join(tmp, "shrunk.h5")
    check(grow(good, shrunk, "inputs", 1, which=1) == 0, "shrink")
    p = run("ls", "--json", shrunk)
    check(p.returncode == 0, "shrunk: %d %r" % (p.returncode, p.stderr))
    # The same in /run and among the root's attributes (h5py, the earliest format).
    plain = os.path.join(tmp, "plain.h5")
    with h5py.File(plain, "w") as f:
        ms.root(f, label="plain")
        f.attrs["extra"] = np.arange(3, dtype=np.int64)
        f.create_group("run").attrs["ids"] = np.arange(3, dtype=np.int64)
        ms.Writer(f).capture("a", 0, 0, "bf16", [2, 8])
    check(run("ls", plain).returncode == 0, "plain")
    for attr, tag in (("ids", "/run"), ("extra", "root")):
        bad = os.path.join(tmp, "%s.h5" % attr)
        grow(plain, bad, attr, 4)
        refused(bad, attr, tag, good)

    # h5py with the newest format: version 2 headers, version 3 messages.
    v2 = os.path.join(tmp, "v2.h5")
    with h5py.File(v2, "w", libver="latest") as f:
        ms.root(f, label="v2")
        ms.Writer(f).capture("a", 0, 0, "bf16", [2, 8], attrs={
            "inputs": np.array([b"embed", b"a"], dtype="S6")})
    p = run("ls", "--json", v2)
    check(p.returncode == 0, "v2 good: %d %r" % (p.returncode, p.stderr))
    bad = os.path.join(tmp, "v2bad.h5")
    grow(v2, bad, "inputs", 3)
    refused(bad, "inputs", "v2 inputs", good)

    # A capture that lists itself: its own difference is not carried in from itself.
    for ins, want in ((["layers.1"], "unknown"), (["layers.0", "layers.1"], "introduced")):
        paths = []
        for side in ("a", "b"):
            path = os.path.join(tmp, "self_%s_%d.h5" % (side, len(ins)))
            w = capwriter.Writer(path)
            w.capture("layers.0", np.zeros((2, 4), np.uint16), "bf16", positions=[0, 1],
                      layer=0)
            h = np.zeros((2, 4), np.uint16)
            if side == "b":
                h[1, 2] = 1  # one ULP at position 1
            w.capture("layers.1", h, "bf16", positions=[0, 1], inputs=ins, layer=1)
            w.close()
            check(inputs_of(path, "layers.1") == ins, "inputs written %s" % ins)
            paths.append(path)
        p = run("diff", "--format", "json", *paths)
        check(p.returncode == 1, "self %s: diff exit %d %r" % (ins, p.returncode, p.stderr))
        if p.returncode == 1:
            rep = json.loads(p.stdout)
            rows = [r for r in rep["rows"] if r["name"] == "layers.1"]
            got = [r.get("origin") for r in rows]
            check(got == [want], "self %s: origin %s, want %s" % (ins, got, want))

for f in fails:
    print("FAIL:", f)
if not fails:
    print("test_attr_bounds: all passed")
sys.exit(1 if fails else 0)

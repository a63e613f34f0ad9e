#!/usr/bin/python3
"""Randomized h5py-written snapshots (no capture index) read the same with
the object header reader (format/snapshot_hdr.c) as through HDF5.

For pairs of files drawn from a fixed seed -- every dtype (bf16 and f16 as
FORMAT.md stores them), ranks 0..4 with empty extents, contiguous (written
or never allocated), compact and chunked (plain, deflated) layouts, a user
block or none, libver earliest (version 1 headers, which the reader reads)
or latest (version 2, left to HDF5), attributes of every type FORMAT.md
allows (integers of each width and signedness, scalar or of one element,
variable-length and fixed-length strings null-terminated, null- or
space-padded, two-element ranges), unknown attributes, creation-order
tracking, many attributes, token attributes -- it checks:
- `ulpprof ls --json` of each file and `ulpprof diff -f json` of each pair
  give byte-identical output, the same exit status and the same message with
  ULPPROF_HEADERS=0 (every capture through HDF5);
- the header reader itself (tests/python/hdr_probe.c) describes every
  capture this writes in the form it reads (version 1 header, contiguous,
  at most 20 attributes, no token or creation-order attribute), and gives
  the dtype, shape, data offset and role h5py reads: so that the first
  check does not pass because every capture went to HDF5;
- each capture's dtype, shape and seq in `ls --json` are what was written;
- a dataset whose storage was never allocated, after a user block, reads
  as zeros (its fill value, as h5py reads it) both ways.
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import diffsnap as ds  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
PROBE = os.path.join(BUILD, "tests", "hdr_probe")
PAIRS = int(os.environ.get("FOREIGN_RANDOM_PAIRS", "24"))
DTYPES = sorted(ds.STORAGE)
ROLES = ["activation", "logits", "kv", "input", "weight"]
INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def ulpprof(args, headers):
    env = dict(os.environ)
    env.pop("ULPPROF_HEADERS", None)
    if not headers:
        env["ULPPROF_HEADERS"] = "0"
    p = subprocess.run([ULPPROF] + args, capture_output=True, env=env)
    return p.returncode, p.stdout, p.stderr


def same_both_ways(args, what):
    fast, slow = ulpprof(args, True), ulpprof(args, False)
    check(fast == slow, "%s: differs with ULPPROF_HEADERS=0: exit %d/%d, stderr %r / %r" % (
        what, fast[0], slow[0], fast[2][:200], slow[2][:200]))
    return fast


def int_attr(rng, value, lo_ok=True):
    """value as a random integer type that holds it (scalar, or one element)."""
    fits = [t for t in INT_TYPES
            if np.iinfo(t).min <= value <= np.iinfo(t).max]
    t = fits[rng.integers(len(fits))]
    return np.array([value], dtype=t) if rng.random() < 0.15 else t(value)


def string_type(rng, text):
    """A fixed-length string type with a random padding, and its bytes."""
    pad = [h5py.h5t.STR_NULLTERM, h5py.h5t.STR_NULLPAD, h5py.h5t.STR_SPACEPAD][rng.integers(3)]
    raw = text.encode()
    size = len(raw) + int(rng.integers(0, 4)) + (pad == h5py.h5t.STR_NULLTERM)
    t = h5py.h5t.C_S1.copy()
    t.set_size(max(size, 1))
    t.set_strpad(pad)
    fill = b" " if pad == h5py.h5t.STR_SPACEPAD else b"\0"
    return t, np.frombuffer(raw.ljust(max(size, 1), fill), dtype="S%d" % max(size, 1))


def set_string(rng, obj, name, text):
    if rng.random() < 0.5:
        obj.attrs[name] = text  # variable length, in the global heap
        return
    t, value = string_type(rng, text)
    a = h5py.h5a.create(obj.id, name.encode(), t, h5py.h5s.create(h5py.h5s.SCALAR))
    a.write(value.reshape(()), mtype=t)


def write_capture(rng, g, occ, seq, cap, data, plan):
    """One dataset and its attributes; plan says the layout and the extras."""
    dtype, shape = cap["dtype"], cap["shape"]
    tid = ds.h5_file_type(dtype)
    space = h5py.h5s.create_simple(shape) if shape else h5py.h5s.create(h5py.h5s.SCALAR)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    if plan["track_order"]:
        dcpl.set_attr_creation_order(h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED)
    layout = plan["layout"]
    if layout == "compact":
        dcpl.set_layout(h5py.h5d.COMPACT)
    elif layout in ("chunked", "deflate"):
        dcpl.set_chunk(tuple(max(1, (d + 1) // 2) for d in shape))
        if layout == "deflate":
            dcpl.set_deflate(1)
    dsid = h5py.h5d.create(g.id, str(occ).encode(), tid, space, dcpl=dcpl)
    if layout != "unallocated" and data.size:
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=tid)
    d = h5py.Dataset(dsid)
    set_string(rng, d, "dtype", dtype)
    d.attrs["seq"] = int_attr(rng, seq)
    if cap["layer"] is not None:
        d.attrs["layer"] = int_attr(rng, cap["layer"])
    if cap["role"] is not None:
        set_string(rng, d, "role", cap["role"])
    for key in ("step", "device_ptr", "stream", "time_ns"):
        if rng.random() < 0.3:
            hi = 2**64 - 1 if key in ("device_ptr", "stream") else 2**62
            d.attrs[key] = int_attr(rng, int(rng.integers(0, 1000)) if rng.random() < 0.7
                                    else int(rng.integers(0, hi, dtype=np.uint64)))
    for key in ("kernels", "gemms"):
        if rng.random() < 0.3:
            first = int(rng.integers(0, 50))
            t = INT_TYPES[rng.integers(len(INT_TYPES))]
            d.attrs[key] = np.array([first, first + int(rng.integers(0, 5))], dtype=t)
    if rng.random() < 0.2:
        d.attrs["graph_replay"] = np.array([int(rng.integers(0, 9)), int(rng.integers(0, 99))],
                                           dtype=np.int64)
    if plan["unknown"]:
        d.attrs["note"] = rng.random()
        d.attrs["tags"] = np.array([b"a", b"bc"])
        d.attrs["ints"] = np.arange(3, dtype=np.int16)
    for i in range(plan["many"]):
        d.attrs["extra_%02d" % i] = np.int32(i)
    if plan["positions"] and len(shape) >= 1 and shape[0] > 0:
        d.attrs["positions"] = np.arange(shape[0], dtype=np.int64)
    return d


def plan_file(rng):
    """The captures of one pair: dtype, shape, layer, role, layout, extras."""
    caps = []
    for i in range(int(rng.integers(3, 9))):
        rank = int(rng.integers(0, 5))
        shape = tuple(int(rng.integers(0, 5)) if rng.random() < 0.15 else int(rng.integers(1, 6))
                      for _ in range(rank))
        layout = ["contiguous"] * 5 + ["unallocated", "compact", "chunked", "deflate"]
        caps.append({
            "dtype": DTYPES[rng.integers(len(DTYPES))], "shape": shape,
            "layer": None if rng.random() < 0.2 else int(rng.integers(-3, 40)),
            "role": None if rng.random() < 0.3 else ROLES[rng.integers(len(ROLES))],
            "plan": {"layout": layout[rng.integers(len(layout))] if shape else "contiguous",
                     "track_order": rng.random() < 0.08, "unknown": rng.random() < 0.25,
                     "many": 24 if rng.random() < 0.06 else 0,
                     "positions": rng.random() < 0.06}})
        if caps[-1]["plan"]["layout"] == "compact" and np.prod(shape or (1,)) * 8 > 4000:
            caps[-1]["plan"]["layout"] = "contiguous"
    return caps


def write_pair(rng, caps, paths, libver, userblock):
    """Both files of a pair: the same captures; B differs in some elements."""
    addrs = []
    seqs = np.cumsum(rng.integers(1, 4, len(caps))) - 1
    names = ["m.layers.%d.out" % (i % 3) for i in range(len(caps))]
    bits = []
    for cap in caps:
        raw, _ = ds.STORAGE[cap["dtype"]]
        n = int(np.prod(cap["shape"])) if cap["shape"] else 1
        info = np.iinfo(raw)
        a = rng.integers(info.min, info.max, n, dtype=raw, endpoint=True)
        b = a.copy()
        if n and rng.random() < 0.5:
            b[rng.integers(n)] ^= raw(1)
        bits.append((a.reshape(cap["shape"]), b.reshape(cap["shape"])))
    for side, path in enumerate(paths):
        kw = {"libver": libver}
        if userblock:
            kw["userblock_size"] = userblock
        with h5py.File(path, "w", **kw) as f:
            f.attrs["format"] = "ulpprof-snapshot"
            f.attrs["format_version"] = np.int32(1)
            f.attrs["label"] = "ab"[side]
            f.attrs["writer"] = "test_foreign_random.py"
            f.attrs["created_unix_ns"] = np.int64(0)
            f.create_group("run").attrs["cache"] = "miss"
            f.create_group("env")
            g = f.create_group("captures")
            occs = {}
            mine = []
            for i, cap in enumerate(caps):
                grp = g.require_group(names[i])
                occ = occs.get(names[i], 0)
                occs[names[i]] = occ + 1
                # the same random attribute encodings on both sides
                sub = np.random.default_rng(int(seqs[i]) * 7919 + 11)
                d = write_capture(sub, grp, occ, int(seqs[i]), cap, bits[i][side], cap["plan"])
                mine.append((h5py.h5o.get_info(d.id).addr, d))
            sa, sl = f.id.get_create_plist().get_sizes()
            offsets = []
            for addr, d in mine:
                try:
                    off = d.id.get_offset()
                except Exception:
                    off = None
                offsets.append(off)
            addrs.append(([a for a, _ in mine], offsets, sa, sl))
    return names, seqs, addrs


def readable(cap, libver):
    """Whether the header reader should describe this capture itself."""
    p = cap["plan"]
    return (libver == "earliest" and p["layout"] in ("contiguous", "unallocated") and
            not p["track_order"] and not p["many"] and
            not (p["positions"] and cap["shape"] and cap["shape"][0] > 0))


def probe(path, caps, libver, userblock, addrs, offsets, sa, sl):
    out = subprocess.run([PROBE, path, str(sa), str(sl), str(userblock)] +
                         [str(a) for a in addrs], capture_output=True, text=True, check=True)
    lines = out.stdout.split("\n")
    read = 0
    for cap, line, off in zip(caps, lines, offsets):
        f = line.split()
        if not readable(cap, libver):
            continue
        check(f[1] == "1", "%s: the header reader left %s to HDF5: %s" % (path, cap, line))
        if f[1] != "1":
            continue
        read += 1
        shape = ",".join(str(x) for x in cap["shape"]) or "-"
        check(f[2] == cap["dtype"] and f[3] == shape, "%s: %s read as %s" % (path, cap, line))
        n = int(np.prod(cap["shape"])) if cap["shape"] else 1
        # h5py's offset is the file's (user block included); none when unallocated or empty
        # (HDF5 1.10 gives a user block's size - 1 for storage never allocated)
        unalloc = cap["plan"]["layout"] == "unallocated"
        want = "-" if off is None or n == 0 or unalloc else str(off)
        check(f[4] == want, "%s: %s: offset %s, h5py %s" % (path, cap, f[4], want))
        check(f[5] == (cap["role"] or "-"), "%s: %s: role %s" % (path, cap, f[5]))
    return read


def unallocated(tmp):
    """Storage never allocated, after a user block: reads as its fill value.

    HDF5 1.10's H5Dget_offset() answers the user block's size - 1 for it,
    which the reader took for the data's offset (docs/hdf5.md)."""
    paths = [os.path.join(tmp, "u%s.h5" % s) for s in "ab"]
    for side, path in enumerate(paths):
        with h5py.File(path, "w", userblock_size=4096) as f:
            f.attrs["format"] = "ulpprof-snapshot"
            f.attrs["format_version"] = np.int32(1)
            f.attrs["label"] = "ab"[side]
            f.attrs["writer"] = "test_foreign_random.py"
            f.attrs["created_unix_ns"] = np.int64(0)
            f.create_group("run")
            f.create_group("env")
            d = f.create_group("captures").create_group("m").create_dataset(
                "0", shape=(5,), dtype=np.float32, data=np.zeros(5, np.float32) if side else None)
            d.attrs["dtype"] = "f32"
            d.attrs["seq"] = np.int64(0)
            check(np.all(d[()] == 0), "h5py does not read zeros")
    for headers in (True, False):
        rc, out, err = ulpprof(["diff", "-f", "json"] + paths, headers)
        rows = json.loads(out)["rows"] if rc in (0, 1) else []
        check(rc == 0 and len(rows) == 1 and rows[0]["status"] == "identical" and
              rows[0]["max_abs"] == 0.0,
              "unallocated f32[5] after a user block (headers %s): exit %d, %s %r" % (
                  headers, rc, rows, err[:200]))


def main():
    rng = np.random.default_rng(20261202)
    read = total = 0
    with tempfile.TemporaryDirectory() as tmp:
        unallocated(tmp)
        for k in range(PAIRS):
            libver = "latest" if k % 4 == 3 else "earliest"
            userblock = [0, 0, 512, 4096][int(rng.integers(4))]
            caps = plan_file(rng)
            paths = [os.path.join(tmp, "%d%s.h5" % (k, s)) for s in "ab"]
            names, seqs, addrs = write_pair(rng, caps, paths, libver, userblock)
            for path, (a, offs, sa, sl) in zip(paths, addrs):
                read += probe(path, caps, libver, userblock, a, offs, sa, sl)
                total += len(caps)
                rc, out, err = same_both_ways(["ls", "--json", path], "ls --json %s" % path)
                check(rc == 0, "ls %s: exit %d %r" % (path, rc, err[:300]))
                if rc != 0:
                    continue
                got = json.loads(out)[0]["captures"]
                want = sorted((int(s), n, c["dtype"], list(c["shape"]))
                              for s, n, c in zip(seqs, names, caps))
                check(sorted((c["seq"], c["name"], c["dtype"], c["shape"]) for c in got) == want,
                      "ls %s: captures %s, written %s" % (path, got, want))
            rc, _, err = same_both_ways(["diff", "-f", "json"] + paths, "diff %s" % paths)
            check(rc in (0, 1), "diff %s: exit %d %r" % (paths, rc, err[:300]))
    print("foreign random: %d pairs, %d captures, %d described from their headers" % (
        PAIRS, total, read))
    check(read >= total // 3, "only %d of %d captures were described from their headers" % (
        read, total))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("foreign random: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Writes the seeds of fuzz_hdr (corpus/hdr/) and fuzz_snapshot's h5py-written
seed without ulpprof's index (corpus/snapshot/h5py_noindex.h5).

A fuzz_hdr seed is fuzz_hdr.c's 25-byte prefix (flags: sizes of offsets and
lengths; the user block; the addresses of two captures' object headers)
and then a small h5py-written file whose captures carry every attribute
kind the header reader reads: variable-length strings (in a global heap
collection), fixed-length strings, integers of several widths and
signedness, two-element ranges, unknown attributes; scalar, empty and
rank-4 shapes; a chunked one (which the reader leaves to HDF5).  The
tokens_* seeds add captures with token attributes: `positions` and
`requests` (int64 2-D and int32, uint8 1-D), `inputs` as variable- and
fixed-length string arrays, an empty one.

Usage: make_hdr_seeds.py FUZZ_DIR   (writes FUZZ_DIR/corpus/...)
"""
import os
import struct
import sys
import tempfile

import h5py
import numpy as np


def capture(g, name, data, ftype=None, chunks=None, **attrs):
    if ftype is not None:
        space = h5py.h5s.create_simple(data.shape) if data.shape else h5py.h5s.create(h5py.h5s.SCALAR)
        dsid = h5py.h5d.create(g.id, name.encode(), ftype, space)
        if data.size:
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=ftype)
        d = h5py.Dataset(dsid)
    else:
        d = g.create_dataset(name, data=data, chunks=chunks)
    for k, v in attrs.items():
        d.attrs[k] = v
    return d


def bf16():
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)
    t.set_size(2)
    t.set_ebias(127)
    return t


def write(path, userblock=0, libver=None, tokens=False):
    kw = {"userblock_size": userblock} if userblock else {}
    if libver:
        kw["libver"] = libver
    addrs = []
    with h5py.File(path, "w", **kw) as f:
        f.attrs["format"] = "ulpprof-snapshot"
        f.attrs["format_version"] = np.int32(1)
        f.attrs["label"] = "h5py"
        f.attrs["writer"] = "make_hdr_seeds.py"
        f.create_group("run").attrs["cache"] = "miss"
        caps = f.create_group("captures")
        g = caps.create_group("m.layers.0.out")
        ds = [
            capture(g, "0", np.arange(12, dtype=np.uint16).reshape(3, 4), ftype=bf16(),
                    dtype="bf16", seq=np.int64(0), layer=np.int32(0), role="activation",
                    kernels=np.array([0, 2], dtype=np.int64)),
            capture(g, "1", np.float32(1.5), dtype=np.bytes_(b"f32"), seq=np.uint8(1),
                    layer=np.int8(-3), role=np.bytes_(b"logits"), step=np.int16(4),
                    time_ns=np.uint32(7), device_ptr=np.uint64(2**63 + 1), other=2.5),
            capture(g, "2", np.zeros((1, 0, 2, 3), dtype=np.int32), dtype="i32",
                    seq=np.int64(2), gemms=np.array([1, 1], dtype=np.int32),
                    graph_replay=np.array([5, -1], dtype=np.int64), stream=np.uint16(9)),
        ]
        capture(caps.create_group("m.x"), "0", np.arange(8, dtype=np.float16),
                chunks=(4,), dtype="f16", seq=np.int64(3))
        if tokens:
            t = caps.create_group("m.tok")
            ds += [
                capture(t, "0", np.arange(12, dtype=np.float32).reshape(2, 3, 2), dtype="f32",
                        seq=np.int64(4), positions=np.array([[0, 1, 2], [0, 1, 5]], np.int64),
                        requests=np.array([[0, 0, 0], [1, 1, 1]], np.int32),
                        inputs=np.array(["m.layers.0.out", "m.x"], dtype=h5py.string_dtype())),
                capture(t, "1", np.arange(4, dtype=np.int32), dtype="i32", seq=np.int64(5),
                        positions=np.array([3, 1, 2, 0], np.uint8),
                        inputs=np.array([b"m.tok", b"m.x"])),
                capture(t, "2", np.zeros((0, 4), dtype=np.int32), dtype="i32", seq=np.int64(6),
                        positions=np.zeros(0, np.int64),
                        inputs=np.array([], dtype=h5py.string_dtype())),
            ]
        for d in ds:
            addrs.append(h5py.h5o.get_info(d.id).addr)
        sa, sl = f.id.get_create_plist().get_sizes()
    return addrs, sa, sl


def seed(path, out, a, b, sa, sl, base):
    flags = (1 if sa == 8 else 0) | (2 if sl == 8 else 0)
    with open(path, "rb") as src, open(out, "wb") as dst:
        dst.write(struct.pack("<BQQQ", flags, base, a, b) + src.read())


def main():
    here = sys.argv[1]
    os.makedirs(os.path.join(here, "corpus", "hdr"), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, ub, libver, pick in (("vlen_bf16", 0, None, (0, 1)),
                                       ("fixed_scalar", 0, None, (1, 2)),
                                       ("userblock_empty", 512, None, (2, 0)),
                                       ("latest", 0, "latest", (0, 2))):
            p = os.path.join(tmp, name + ".h5")
            addrs, sa, sl = write(p, ub, libver)
            seed(p, os.path.join(here, "corpus", "hdr", name), addrs[pick[0]], addrs[pick[1]],
                 sa, sl, ub)
        for name, ub, pick in (("tokens_2d_vlen", 0, (3, 4)), ("tokens_empty", 512, (5, 3))):
            p = os.path.join(tmp, name + ".h5")
            addrs, sa, sl = write(p, ub, None, tokens=True)
            seed(p, os.path.join(here, "corpus", "hdr", name), addrs[pick[0]], addrs[pick[1]],
                 sa, sl, ub)
        # fuzz_snapshot: the same file, with no index, reaches snapshot_hdr.c
        write(os.path.join(here, "corpus", "snapshot", "h5py_noindex.h5"))


if __name__ == "__main__":
    main()

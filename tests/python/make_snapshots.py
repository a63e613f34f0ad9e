#!/usr/bin/python3
"""Writes a corpus of snapshot files with h5py, independently of ulpprof's writer.

    make_snapshots.py OUTDIR

Valid files exercise everything FORMAT.md allows (all dtypes, bf16/fp16 as
HDF5 floats with the exact fields, fixed and variable-length strings, seq of
several integer types, scalars, empty tensors, non-ASCII names, chunked and
compressed layouts, /run, /env, /trace).  Malformed files break one rule
each.  OUTDIR/manifest.json says what each file is:

    {"pattern": "...",
     "good": {file: {"captures": [{name, occurrence, seq, dtype, shape, layer,
                                   role}...], "label", "writer", "run", "env",
                     "kernels": [...]}},
     "bad": {file: {"status": "ULP_E...", "word": "<word the message contains>"}}}

Tensor data follow one formula, so readers can check every element without
the writer: element i (row-major) of the capture with seq s holds the bits
    (i * 0x9E3779B1 + s * 0x85EBCA77 + 0x1234567) mod 2^64, cut to the dtype's width.
"""
import json
import os
import shutil
import struct
import sys

import h5py
import numpy as np

PATTERN = "(i * 0x9E3779B1 + s * 0x85EBCA77 + 0x1234567) mod 2^64, low bits"

# FORMAT.md: name -> (bytes, kind); written here from the table, not from ulpprof.
DTYPES = {
    "f64": (8, "f"), "f32": (4, "f"), "f16": (2, "f"), "bf16": (2, "f"),
    "f8e4m3": (1, "u"), "f8e5m2": (1, "u"),
    "i64": (8, "i"), "i32": (4, "i"), "i16": (2, "i"), "i8": (1, "i"), "u8": (1, "u"),
}


def pattern_bits(seq, n, size):
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        v = i * np.uint64(0x9E3779B1) + np.uint64((seq * 0x85EBCA77 + 0x1234567) % 2**64)
    return v.astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])


def narrow_float(sign_pos, exp_pos, exp_bits, man_bits, bias):
    """A 2-byte HDF5 float type, in the call order HDF5 1.10 accepts."""
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(sign_pos, exp_pos, exp_bits, 0, man_bits)
    t.set_size(2)
    t.set_ebias(bias)
    return t


def file_type(dtype):
    """The HDF5 file type FORMAT.md prescribes for a dtype."""
    return {
        "f64": h5py.h5t.IEEE_F64LE, "f32": h5py.h5t.IEEE_F32LE,
        "f16": narrow_float(15, 10, 5, 10, 15), "bf16": narrow_float(15, 7, 8, 7, 127),
        "f8e4m3": h5py.h5t.STD_U8LE, "f8e5m2": h5py.h5t.STD_U8LE,
        "i64": h5py.h5t.STD_I64LE, "i32": h5py.h5t.STD_I32LE, "i16": h5py.h5t.STD_I16LE,
        "i8": h5py.h5t.STD_I8LE, "u8": h5py.h5t.STD_U8LE,
    }[dtype]


def fixed_str(s):
    """A fixed-length (not variable-length) string attribute value."""
    return np.bytes_(s.encode())


def root(f, label="run", writer="make_snapshots.py", version=1, created=1700000000123456789,
         fmt="ulpprof-snapshot", fixed=False):
    if fmt is not None:
        f.attrs["format"] = fixed_str(fmt) if fixed else fmt
    if version is not None:
        f.attrs["format_version"] = np.int32(version)
    if label is not None:
        f.attrs["label"] = fixed_str(label) if fixed else label
    if writer is not None:
        f.attrs["writer"] = writer
    if created is not None:
        f.attrs["created_unix_ns"] = np.int64(created)


class Writer:
    """Adds captures to an open file and remembers what it wrote."""

    def __init__(self, f):
        self.f = f
        self.captures = []

    def capture(self, name, occ, seq, dtype, shape, layer=None, role=None, seq_type=np.int64,
                fixed_dtype=False, chunks=None, compression=None, compact=False,
                storage=None, attrs=None, data=True):
        grp = self.f.require_group("captures").require_group(name)
        n = int(np.prod(shape, dtype=np.uint64)) if len(shape) else 1
        size = DTYPES[dtype][0] if dtype in DTYPES else 2
        ftype = storage if storage is not None else file_type(dtype)
        space = h5py.h5s.create_simple(tuple(shape)) if len(shape) else h5py.h5s.create(h5py.h5s.SCALAR)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        if chunks is not None:
            dcpl.set_chunk(tuple(chunks))
            if compression:
                dcpl.set_deflate(compression)
        elif compact:
            dcpl.set_layout(h5py.h5d.COMPACT)
        occ_name = str(occ)
        dsid = h5py.h5d.create(grp.id, occ_name.encode(), ftype, space, dcpl=dcpl)
        if data and n > 0:
            bits = pattern_bits(seq, n, size).reshape(shape) if len(shape) else pattern_bits(seq, 1, size).reshape(())
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(bits), mtype=ftype)
        d = grp[occ_name]
        if dtype is not None:
            d.attrs["dtype"] = fixed_str(dtype) if fixed_dtype else dtype
        if seq is not None:
            d.attrs["seq"] = seq_type(seq)
        if layer is not None:
            d.attrs["layer"] = np.int32(layer)
        if role is not None:
            d.attrs["role"] = role
        for k, v in (attrs or {}).items():
            d.attrs[k] = v
        self.captures.append({"name": name, "occurrence": occ, "seq": seq, "dtype": dtype,
                              "shape": list(shape), "layer": -1 if layer is None else layer,
                              "role": role or "activation"})
        return d


def add_trace(f, names, rows, bad=None):
    t = f.create_group("trace")
    if bad == "names_int":
        t.create_dataset("names", data=np.arange(3, dtype=np.int32))
    else:
        t.create_dataset("names", data=np.array(names, dtype=object),
                         dtype=h5py.string_dtype("utf-8"))
    grid_t = ("<i4", (3,)) if bad != "grid_scalar" else "<i4"
    dt = np.dtype([("seq", "<u8"), ("correlation_id", "<u4"), ("name_id", "<u4"),
                   ("grid", grid_t), ("block", ("<i4", (3,))), ("shared_static", "<i4"),
                   ("shared_dynamic", "<i4"), ("registers", "<i4"), ("stream", "<u8"),
                   ("device", "<u4"), ("start_ns", "<u8"), ("end_ns", "<u8"),
                   ("extra_field", "<f8")])
    a = np.zeros(len(rows), dtype=dt)
    for i, r in enumerate(rows):
        for k, v in r.items():
            if bad == "grid_scalar" and k == "grid":
                v = v[0]
            a[i][k] = v
    t.create_dataset("kernels", data=a)


KERNELS = [
    {"seq": 0, "correlation_id": 11, "name_id": 0, "grid": (64, 1, 1), "block": (256, 1, 1),
     "shared_static": 1024, "shared_dynamic": 0, "registers": 32, "stream": 7, "device": 0,
     "start_ns": 1000, "end_ns": 2000},
    {"seq": 1, "correlation_id": 12, "name_id": 1, "grid": (8, 4, 2), "block": (128, 2, 1),
     "shared_static": 0, "shared_dynamic": 49152, "registers": 128, "stream": 7, "device": 1,
     "start_ns": 2500, "end_ns": 9000},
    {"seq": 2, "correlation_id": 13, "name_id": 99, "grid": (1, 1, 1), "block": (32, 1, 1),
     "shared_static": 0, "shared_dynamic": 0, "registers": 16, "stream": 2**63 + 5, "device": 0,
     "start_ns": 9100, "end_ns": 9200},
]
KERNEL_NAMES = ["void gemm_kernel<128, 64>(float const*, float*)", "rms_norm_kernel"]


def write_all_dtypes(path):
    """Every dtype, several layouts and attribute forms; seq order differs from name order."""
    with h5py.File(path, "w") as f:
        root(f, label="miss", writer="make_snapshots.py 1")
        run = f.create_group("run")
        run.attrs["cache"] = "miss"
        run.attrs["batch_size"] = "1"
        run.attrs["model"] = fixed_str("tiny-llm")
        run.attrs["threads"] = np.int32(4)
        run.attrs["scale"] = np.float64(0.25)
        run.attrs["prompt"] = "line one\nline two"
        env = f.create_group("env")
        env.attrs["hostname"] = "testhost"
        env.attrs["env:OPENBLAS_NUM_THREADS"] = "1"
        env.attrs["pid"] = np.int64(4242)
        w = Writer(f)
        shapes = {"f64": [3], "f32": [2, 3], "f16": [4, 5], "bf16": [2, 3, 4, 5],
                  "f8e4m3": [7], "f8e5m2": [3, 3], "i64": [2], "i32": [5], "i16": [2, 2, 2],
                  "i8": [9], "u8": [10]}
        seq_types = [np.int64, np.int32, np.uint8, np.int16, np.uint64, np.int8]
        # seq numbers out of name order: 30, 29, ... for the dtypes.
        for k, (dt, shape) in enumerate(shapes.items()):
            w.capture("dtype." + dt, 0, 30 - k, dt, shape, layer=k,
                      seq_type=seq_types[k % len(seq_types)], fixed_dtype=(k % 2 == 1),
                      attrs={"step": np.int64(k), "kernels": np.array([0, 2], dtype=np.int64),
                             "device_ptr": np.uint64(0xdeadbeef00 + k), "stream": np.uint64(7),
                             "time_ns": np.int64(1000 + k)})
        w.capture("scalar", 0, 0, "f32", [], role="input")
        w.capture("empty", 0, 1, "bf16", [0, 4])
        w.capture("model.layers.0.out", 0, 2, "bf16", [1, 64], layer=0)
        w.capture("model.layers.0.out", 1, 3, "bf16", [1, 64], layer=0)
        w.capture("model.layers.0.out", 2, 4, "bf16", [1, 64], layer=0)
        w.capture("model.layers.0.out", 10, 5, "bf16", [1, 64], layer=0)
        w.capture("modèle.层.ünï", 0, 6, "f16", [3], layer=1)
        w.capture("chunked.gzip", 0, 7, "bf16", [5, 7, 9], chunks=[2, 3, 4], compression=4)
        w.capture("chunked.plain", 0, 8, "i32", [6, 11], chunks=[4, 4])
        w.capture("compact", 0, 9, "u8", [16], compact=True)
        w.capture("lm_head", 0, 10, "f32", [2, 32], role="logits", layer=None)
        w.capture("bf16.as.u16", 0, 11, "bf16", [4], storage=h5py.h5t.STD_U16LE)
        w.capture("unwritten", 0, 12, "f32", [4], data=False)
        add_trace(f, KERNEL_NAMES, KERNELS)
        return w


def write_golden(path):
    """Small and fixed: the hand-written expected `ulpprof ls` output depends on it."""
    with h5py.File(path, "w") as f:
        root(f, label="golden", writer="make_snapshots.py golden", created=1700000000000000000)
        f.create_group("run").attrs["cache"] = "hit"
        f["run"].attrs["batch_size"] = "8"
        f.create_group("env").attrs["hostname"] = "box"
        w = Writer(f)
        w.capture("embed", 0, 0, "bf16", [1, 92160])
        w.capture("model.layers.0.out", 0, 1, "bf16", [1, 4096], layer=0)
        w.capture("model.layers.1.out", 0, 2, "f16", [2, 4096], layer=1)
        w.capture("logits", 0, 3, "f32", [1, 32000], role="logits")
        w.capture("ids", 0, 4, "i64", [7], role="input")
        return w


def write_big(path):
    """One large tensor per storage path, for bounded chunked reads."""
    with h5py.File(path, "w") as f:
        root(f, label="big")
        w = Writer(f)
        w.capture("big.contig", 0, 0, "bf16", [3, 1000, 700])
        w.capture("big.chunked", 0, 1, "bf16", [3, 1000, 700], chunks=[1, 64, 700], compression=1)
        # One 4 MiB compressed chunk: slab reads need a chunk cache that holds it.
        w.capture("big.onechunk", 0, 2, "bf16", [3, 1000, 700], chunks=[3, 1000, 700],
                  compression=1)
        return w


def write_plain(path, **kw):
    with h5py.File(path, "w") as f:
        root(f, **kw)
        w = Writer(f)
        w.capture("a", 0, 0, "bf16", [2, 8])
        w.capture("b", 0, 1, "f32", [4])
        return w


def bad(path, build):
    with h5py.File(path, "w") as f:
        build(f)


def patch_superblock_eof(path, new_size):
    """Cuts a file and rewrites the superblock's end-of-file address (superblock
    version 0: at byte 40; version 1, which a chunk B-tree K of its own makes, 4
    bytes later), so HDF5 opens it and only the data is missing."""
    with open(path, "r+b") as fh:
        head = fh.read(48)
        assert head[:8] == b"\x89HDF\r\n\x1a\n" and head[8] in (0, 1), "expected superblock v0/1"
        fh.truncate(new_size)
        fh.seek(40 + 4 * head[8])
        fh.write(struct.pack("<Q", new_size))


def main():
    out = sys.argv[1]
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    p = lambda n: os.path.join(out, n)
    good, badf = {}, {}

    def record(name, w, path):
        with h5py.File(path, "r") as f:
            txt = lambda v: v.decode() if isinstance(v, bytes) else str(v)
            g = {"captures": w.captures, "label": txt(f.attrs.get("label", "")),
                 "writer": txt(f.attrs.get("writer", ""))}
        good[name] = g

    for name, fn in [("all_dtypes.h5", write_all_dtypes), ("golden.h5", write_golden),
                     ("big.h5", write_big)]:
        record(name, fn(p(name)), p(name))
    # JSON readers hold integers in int64: larger ones go in as strings.
    good["all_dtypes.h5"]["kernels"] = [
        {k: (str(v) if isinstance(v, int) and v >= 2**63 else v) for k, v in r.items()}
        for r in KERNELS]
    good["all_dtypes.h5"]["kernel_names"] = KERNEL_NAMES
    with h5py.File(p("empty.h5"), "w") as f:
        root(f, label="nothing")
    good["empty.h5"] = {"captures": [], "label": "nothing", "writer": "make_snapshots.py"}
    record("fixed_root.h5", write_plain(p("fixed_root.h5"), fixed=True, label="fixed"),
           p("fixed_root.h5"))
    record("no_label.h5", write_plain(p("no_label.h5"), label=None, writer=None, created=None),
           p("no_label.h5"))

    # --- Malformed files: one broken rule each --------------------------------------
    def B(name, status, word, build=None):
        if build is not None:
            bad(p(name), build)
        badf[name] = {"status": status, "word": word}

    with open(p("not_hdf5.h5"), "w") as fh:
        fh.write("this is not an HDF5 file, just text\n" * 20)
    B("not_hdf5.h5", "ULP_ENOTHDF5", "HDF5")
    open(p("empty_file.h5"), "w").close()
    B("empty_file.h5", "ULP_ENOTHDF5", "empty")

    src = p("golden.h5")
    size = os.path.getsize(src)
    for cut in (size - 1, size // 2, 4096, 1000, 200, 60):
        name = "truncated_%d.h5" % cut
        with open(src, "rb") as a, open(p(name), "wb") as b:
            b.write(a.read(cut))
        B(name, "ULP_ETRUNC", "truncated")
    # Cut with the superblock's EOF rewritten, so that HDF5 opens the file:
    # (1) inside the last dataset's data, which only the reader's own
    # offset check sees; (2) inside the first one, losing metadata after it.
    with h5py.File(src, "r") as f:
        spans = sorted((f["captures"][n]["0"].id.get_offset(),
                        f["captures"][n]["0"].id.get_storage_size()) for n in f["captures"])
    assert spans[-1][0] + spans[-1][1] == size, "the last dataset's data must end the file"
    shutil.copy(src, p("truncated_data.h5"))
    patch_superblock_eof(p("truncated_data.h5"), spans[-1][0] + spans[-1][1] // 2)
    B("truncated_data.h5", "ULP_ETRUNC", "truncated")
    shutil.copy(src, p("truncated_meta.h5"))
    patch_superblock_eof(p("truncated_meta.h5"), spans[0][0] + spans[0][1] // 2)
    B("truncated_meta.h5", "ULP_ETRUNC", "truncated")

    def cap(f, name="x", occ="0", dtype="bf16", seq=0, shape=(4,), storage=None):
        g = f.require_group("captures").require_group(name)
        d = g.create_dataset(occ, shape=shape, dtype=storage or "<u2")
        if dtype is not None:
            d.attrs["dtype"] = dtype
        if seq is not None:
            d.attrs["seq"] = np.int64(seq)
        return d

    B("wrong_format.h5", "ULP_EFORMAT", "format",
      lambda f: (root(f, fmt="something-else"), cap(f)))
    B("no_format.h5", "ULP_EFORMAT", "format", lambda f: (root(f, fmt=None), cap(f)))
    B("format_int.h5", "ULP_EFORMAT", "format",
      lambda f: (root(f, fmt=None), f.attrs.create("format", np.int32(1)), cap(f)))
    B("version2.h5", "ULP_EVERSION", "version", lambda f: (root(f, version=2), cap(f)))
    B("version0.h5", "ULP_EVERSION", "version", lambda f: (root(f, version=0), cap(f)))
    B("no_version.h5", "ULP_EBADATTR", "format_version", lambda f: (root(f, version=None), cap(f)))
    B("version_str.h5", "ULP_EBADATTR", "format_version",
      lambda f: (root(f, version=None), f.attrs.create("format_version", "1"), cap(f)))
    B("label_int.h5", "ULP_EBADATTR", "label",
      lambda f: (root(f, label=None), f.attrs.create("label", np.int32(3)), cap(f)))
    B("missing_seq.h5", "ULP_EDUPSEQ", "seq",
      lambda f: (root(f), cap(f, "a", seq=0), cap(f, "b", seq=None)))
    B("dup_seq.h5", "ULP_EDUPSEQ", "seq",
      lambda f: (root(f), cap(f, "a", seq=3), cap(f, "b", seq=1), cap(f, "c", seq=3)))
    B("seq_str.h5", "ULP_EBADATTR", "seq",
      lambda f: (root(f), cap(f, seq=None).attrs.create("seq", "zero")))
    B("seq_negative.h5", "ULP_EBADATTR", "seq", lambda f: (root(f), cap(f, seq=-1)))
    B("seq_float.h5", "ULP_EBADATTR", "seq",
      lambda f: (root(f), cap(f, seq=None).attrs.create("seq", np.float64(1.0))))
    B("unknown_dtype.h5", "ULP_EDTYPE", "f128", lambda f: (root(f), cap(f, dtype="f128")))
    B("missing_dtype.h5", "ULP_EBADATTR", "dtype", lambda f: (root(f), cap(f, dtype=None)))
    B("dtype_size.h5", "ULP_EDTYPE", "4-byte",
      lambda f: (root(f), cap(f, dtype="bf16", storage="<f4")))
    B("dtype_bigendian.h5", "ULP_EDTYPE", "big-endian",
      lambda f: (root(f), cap(f, dtype="f32", storage=">f4")))
    B("dtype_string.h5", "ULP_EDTYPE", "string",
      lambda f: (root(f), cap(f, dtype="u8", storage="S1")))
    B("rank9.h5", "ULP_ESHAPE", "rank", lambda f: (root(f), cap(f, shape=(1,) * 9)))

    def absurd(f):
        root(f)
        g = f.require_group("captures").require_group("huge")
        d = g.create_dataset("0", shape=(2**31, 2**31), dtype="<u2", chunks=(1, 1024))
        d.attrs["dtype"] = "bf16"
        d.attrs["seq"] = np.int64(0)
    B("absurd_shape.h5", "ULP_ESHAPE", "absurd", absurd)
    B("occ_name.h5", "ULP_EFORMAT", "occurrence", lambda f: (root(f), cap(f, occ="first")))
    B("occ_leading_zero.h5", "ULP_EFORMAT", "occurrence", lambda f: (root(f), cap(f, occ="01")))
    B("occ_negative.h5", "ULP_EFORMAT", "occurrence", lambda f: (root(f), cap(f, occ="-1")))
    B("group_for_dataset.h5", "ULP_EFORMAT", "group",
      lambda f: (root(f), cap(f), f["captures/x"].create_group("1")))
    B("captures_dataset.h5", "ULP_EFORMAT", "/captures",
      lambda f: (root(f), f.create_dataset("captures", data=np.zeros(3))))
    B("capture_is_dataset.h5", "ULP_EFORMAT", "dataset",
      lambda f: (root(f), f.create_group("captures").create_dataset("x", data=np.zeros(3))))
    B("layer_str.h5", "ULP_EBADATTR", "layer",
      lambda f: (root(f), cap(f).attrs.create("layer", "zero")))
    B("kernels_len3.h5", "ULP_EBADATTR", "kernels",
      lambda f: (root(f), cap(f).attrs.create("kernels", np.array([0, 1, 2], dtype=np.int64))))
    B("run_dataset.h5", "ULP_EFORMAT", "/run",
      lambda f: (root(f), f.create_dataset("run", data=np.zeros(2)), cap(f)))
    B("trace_grid.h5", "ULP_EFORMAT", "grid",
      lambda f: (root(f), cap(f), add_trace(f, KERNEL_NAMES, KERNELS, bad="grid_scalar")))
    B("trace_names.h5", "ULP_EFORMAT", "/trace/names",
      lambda f: (root(f), cap(f), add_trace(f, KERNEL_NAMES, KERNELS, bad="names_int")))
    B("trace_group.h5", "ULP_EFORMAT", "/trace",
      lambda f: (root(f), cap(f), f.create_dataset("trace", data=np.zeros(2))))

    with open(p("manifest.json"), "w") as fh:
        json.dump({"pattern": PATTERN, "good": good, "bad": badf}, fh, indent=1,
                  ensure_ascii=False)


if __name__ == "__main__":
    main()

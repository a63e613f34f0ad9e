"""Writes ulpprof snapshots (FORMAT.md) with h5py from raw bit patterns, and
decodes every element format with numpy alone -- the independent side of the
`ulpprof diff` tests (test_diff_numpy.py, tests/cli/test_diff.sh,
tests/perf/bench_diff.sh).

Nothing here uses ulpprof code: the decoders follow FORMAT.md's format table
(IEEE binary16/32/64, bfloat16, OCP fp8 e4m3fn and e5m2).
"""
import math

import h5py
import numpy as np

STORAGE = {  # dtype -> (numpy raw bits type, bytes)
    "f64": (np.uint64, 8), "f32": (np.uint32, 4), "f16": (np.uint16, 2),
    "bf16": (np.uint16, 2), "f8e4m3": (np.uint8, 1), "f8e5m2": (np.uint8, 1),
    "i64": (np.int64, 8), "i32": (np.int32, 4), "i16": (np.int16, 2),
    "i8": (np.int8, 1), "u8": (np.uint8, 1),
}
# (exponent bits, mantissa bits, bias, has_inf) of the float formats
FLOATS = {"f64": (11, 52, 1023, True), "f32": (8, 23, 127, True), "f16": (5, 10, 15, True),
          "bf16": (8, 7, 127, True), "f8e4m3": (4, 3, 7, False), "f8e5m2": (5, 2, 15, True)}


def h5_file_type(dtype):
    if dtype == "f64":
        return h5py.h5t.IEEE_F64LE.copy()
    if dtype == "f32":
        return h5py.h5t.IEEE_F32LE.copy()
    if dtype in ("f16", "bf16"):
        t = h5py.h5t.IEEE_F32LE.copy()
        if dtype == "f16":
            t.set_fields(15, 10, 5, 0, 10)
            t.set_size(2)
            t.set_ebias(15)
        else:
            t.set_fields(15, 7, 8, 0, 7)
            t.set_size(2)
            t.set_ebias(127)
        return t
    return {"f8e4m3": h5py.h5t.STD_U8LE, "f8e5m2": h5py.h5t.STD_U8LE, "u8": h5py.h5t.STD_U8LE,
            "i8": h5py.h5t.STD_I8LE, "i16": h5py.h5t.STD_I16LE, "i32": h5py.h5t.STD_I32LE,
            "i64": h5py.h5t.STD_I64LE}[dtype].copy()


def write_snapshot(path, captures, label="run", run=None, kernels=None, kernel_names=None,
                   env=None):
    """captures: list of dicts with name, bits (ndarray of STORAGE raw type,
    shaped), dtype, and optionally occurrence (0), seq (list order), layer,
    role, kernels ([first,last)), chunks (a chunk shape: chunked and
    deflated instead of contiguous).  kernels: list of (name_id, grid, block)."""
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "ulpprof-snapshot"
        f.attrs["format_version"] = np.int32(1)
        f.attrs["label"] = label
        f.attrs["writer"] = "diffsnap.py (tests)"
        f.attrs["created_unix_ns"] = np.int64(0)
        g = f.create_group("run")
        for k, v in (run or {}).items():
            g.attrs[k] = v
        ge = f.create_group("env")
        for k, v in (env or {}).items():
            ge.attrs[k] = v
        caps = f.create_group("captures")
        for i, c in enumerate(captures):
            grp = caps.require_group(c["name"])
            bits = np.array(c["bits"], dtype=STORAGE[c["dtype"]][0], order="C")  # keeps 0-d
            tid = h5_file_type(c["dtype"])
            space = h5py.h5s.create_simple(bits.shape) if bits.ndim else h5py.h5s.create(
                h5py.h5s.SCALAR)
            occ = str(c.get("occurrence", 0)).encode()
            dcpl = None
            if c.get("chunks") is not None:  # chunked and deflated: read through HDF5
                dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
                dcpl.set_chunk(tuple(c["chunks"]))
                dcpl.set_deflate(1)
            dsid = h5py.h5d.create(grp.id, occ, tid, space, dcpl=dcpl)
            if bits.size:
                dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=tid)
            d = h5py.Dataset(dsid)
            d.attrs["dtype"] = c["dtype"]
            d.attrs["seq"] = np.int64(c.get("seq", i))
            if c.get("layer") is not None:
                d.attrs["layer"] = np.int32(c["layer"])
            if c.get("role"):
                d.attrs["role"] = c["role"]
            if c.get("positions") is not None:
                d.attrs["positions"] = np.array(c["positions"], dtype=np.int64)
            if c.get("requests") is not None:
                d.attrs["requests"] = np.array(c["requests"], dtype=np.int64)
            if c.get("kernels") is not None:
                d.attrs["kernels"] = np.array(c["kernels"], dtype=np.int64)
        if kernels is not None:
            tr = f.create_group("trace")
            names = tr.create_dataset("names", (len(kernel_names),),
                                      dtype=h5py.string_dtype("utf-8"))
            names[:] = kernel_names
            kt = np.dtype([("seq", "<u8"), ("correlation_id", "<u4"), ("name_id", "<u4"),
                           ("grid", "<i4", (3,)), ("block", "<i4", (3,)),
                           ("shared_static", "<i4"), ("shared_dynamic", "<i4"),
                           ("registers", "<i4"), ("stream", "<u8"), ("device", "<u4"),
                           ("start_ns", "<u8"), ("end_ns", "<u8")])
            rows = np.zeros(len(kernels), dtype=kt)
            for i, (nid, grid, block) in enumerate(kernels):
                rows[i]["seq"] = i
                rows[i]["correlation_id"] = i + 1
                rows[i]["name_id"] = nid
                rows[i]["grid"] = grid
                rows[i]["block"] = block
            tr.create_dataset("kernels", data=rows)


def decode(dtype, bits):
    """Values (float64) of raw bits, by the format's definition."""
    bits = np.asarray(bits)
    if dtype not in FLOATS:
        return bits.astype(np.float64)
    if dtype == "f64":
        return bits.astype(np.uint64).view(np.float64).copy()
    if dtype == "f32":
        with np.errstate(invalid="ignore"):
            return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    e_bits, m_bits, bias, has_inf = FLOATS[dtype]
    b = bits.astype(np.int64)
    width = 1 + e_bits + m_bits
    sign = np.where((b >> (width - 1)) & 1, -1.0, 1.0)
    e = (b >> m_bits) & ((1 << e_bits) - 1)
    m = (b & ((1 << m_bits) - 1)).astype(np.float64)
    emax = (1 << e_bits) - 1
    with np.errstate(over="ignore"):
        v = np.where(e == 0, m * 2.0 ** (1 - bias - m_bits),
                     (1.0 + m / 2.0 ** m_bits) * np.exp2((e - bias).astype(np.float64)))
    if has_inf:
        v = np.where(e == emax, np.where(m == 0, np.inf, np.nan), v)
    else:  # e4m3fn: only S.1111.111 is NaN, no infinities
        v = np.where((e == emax) & (m == (1 << m_bits) - 1), np.nan, v)
    return sign * v


def ulp_spacing(dtype, x):
    """Spacing of the format's values at |x| (FORMAT/dtype.h ulp_at semantics):
    2^(e - mbits) with e = floor(log2 |x|) clamped to [emin, emax]."""
    if dtype not in FLOATS:
        return 1.0
    e_bits, m_bits, bias, has_inf = FLOATS[dtype]
    emin = 1 - bias
    emax = ((1 << e_bits) - 2 if has_inf else (1 << e_bits) - 1) - bias
    ax = abs(float(x))
    if ax == 0:
        e = emin
    elif np.isinf(ax):
        e = emax
    else:
        e = math.frexp(ax)[1] - 1        # ax in [2^e, 2^(e+1))
        e = min(max(e, emin), emax)
    return math.ldexp(1.0, e - m_bits)

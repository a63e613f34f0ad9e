"""The numpy + h5py baseline of tests/perf/bench_diff.sh, written the way a
competent user writes it: raw reads (memory type = file type, no HDF5
conversion), whole tensors at once, and the per-element work only on the
elements that differ (np.flatnonzero of a != b).  It prints the numbers
`ulpprof diff` prints, from format/FORMAT.md's definitions, one JSON object
per line (check_numpy.py compares them with ulpprof's JSON report):

  {"name", "occurrence", "differing", "max_ulp", "mean_ulp", "max_abs_diff",
   "max_abs", "nonfinite_mismatch"}                      every shared capture
  {"logits", "argmax_a", "argmax_b", "margin_a", "margin_b",
   "max_perturbation", "flips"}                          role = logits

Formats: bf16, f16 and f32 (the benchmarks' pairs).
Usage: diff_numpy.py A.h5 B.h5"""
import json
import sys

import h5py
import numpy as np

# dtype -> (raw type, wider signed type for ordered values, sign bit, smallest non-finite magnitude,
#           float view: (raw type, shift) to a float32 pattern, or None for f16)
FORMATS = {
    "bf16": (np.uint16, np.int32, 0x8000, 0x7F80),
    "f16": (np.uint16, np.int32, 0x8000, 0x7C00),
    "f32": (np.uint32, np.int64, 0x80000000, 0x7F800000),
}


def raw(d, t):
    out = np.empty(d.shape, t)
    if out.size:
        d.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=d.id.get_type())
    return out


def values(bits, dtype):
    """float64 values of raw bits (exact for these formats)."""
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float64)
    return bits.view(np.float32).astype(np.float64)


def compare(name, occ, dtype, a, b):
    t, wide, sign, nf = FORMATS[dtype]
    a = a.ravel()
    b = b.ravel()
    mag_mask = t(sign - 1)
    # The largest finite magnitude of either side, on the bits (ordered like the values).
    mags = [m[m < nf] for m in (a & mag_mask, b & mag_mask)]
    max_mag = max([int(m.max()) for m in mags if m.size] or [0])
    idx = np.flatnonzero(a != b)
    x, y = a[idx], b[idx]
    mx, my = (x & mag_mask).astype(wide), (y & mag_mask).astype(wide)
    fin = (mx < nf) & (my < nf)
    ox = np.where(x & t(sign), -mx, mx)[fin]
    oy = np.where(y & t(sign), -my, my)[fin]
    ulp = np.abs(ox - oy)
    absd = np.abs(values(x[fin], dtype) - values(y[fin], dtype))
    return {"name": name, "occurrence": occ, "differing": int(idx.size),
            "max_ulp": int(ulp.max()) if ulp.size else 0,
            "mean_ulp": float(ulp.sum(dtype=np.float64) / ulp.size) if ulp.size else 0.0,
            "max_abs_diff": float(absd.max()) if absd.size else 0.0,
            "max_abs": float(values(np.array([max_mag], t), dtype)[0]),
            "nonfinite_mismatch": int(idx.size - np.count_nonzero(fin))}


def logits(name, dtype, a, b):
    va = values(a, dtype).reshape(-1, a.shape[-1])
    vb = values(b, dtype).reshape(-1, b.shape[-1])
    out = {"logits": name}
    for side, v in (("a", va), ("b", vb)):
        top2 = np.partition(v, -2, axis=1)[:, -2:]
        out["argmax_" + side] = v.argmax(axis=1).tolist()
        out["margin_" + side] = (top2[:, 1] - top2[:, 0]).tolist()
    out["max_perturbation"] = np.abs(va - vb).max(axis=1).tolist()
    out["flips"] = int(np.count_nonzero(np.array(out["argmax_a"]) != np.array(out["argmax_b"])))
    return out


def attr(d, key, default):
    v = d.attrs.get(key, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def main():
    fa, fb = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
    for name in fa["captures"]:
        for occ in fa["captures"][name]:
            da = fa["captures"][name][occ]
            db = fb["captures"][name][occ]
            dtype = attr(da, "dtype", "")
            a, b = raw(da, FORMATS[dtype][0]), raw(db, FORMATS[dtype][0])
            print(json.dumps(compare(name, int(occ), dtype, a, b)))
            if attr(da, "role", "activation") == "logits":
                print(json.dumps(logits(name, dtype, a, b)))


if __name__ == "__main__":
    main()

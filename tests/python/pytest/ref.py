"""Independent recomputation, from the HDF5 files with h5py and numpy, of
what the tests compare the API's answers with (FORMAT.md "Rows and
tokens"): per capture name, every (request, position) row of every
occurrence, compared bit for bit; ULP distance of float32 as the distance
of the ordered integers."""
import h5py
import numpy as np


def _rows(f, name):
    """{(request, position): row bits (uint32)} over every occurrence, and
    the first occurrence's seq; None when a capture has no positions."""
    out = {}
    seq = None
    for occ, ds in sorted(f["captures"][name].items(), key=lambda kv: int(kv[0])):
        if "positions" not in ds.attrs:
            return None, None
        pos = np.asarray(ds.attrs["positions"]).reshape(-1)
        req = np.asarray(ds.attrs["requests"]).reshape(-1) if "requests" in ds.attrs else \
            np.zeros_like(pos)
        k = np.asarray(ds.attrs["positions"]).ndim
        data = ds[()]
        bits = data.view(np.uint32) if data.dtype == np.float32 else data
        flat = bits.reshape((int(np.prod(data.shape[:k])),) + data.shape[k:])
        for r, p, row in zip(req, pos, flat):
            out[(int(r), int(p))] = row
        if seq is None or int(ds.attrs["seq"]) < seq:
            seq = int(ds.attrs["seq"])
    return out, seq


def _ordered(bits):
    b = bits.astype(np.int64)
    return np.where(b & 0x80000000, 0x80000000 - b, b)


def compare(a, b):
    """{name: (differing elements, max ULP, seq in A, shared keys)} of the
    names both files have with positions (float32 ones get a ULP), plus the
    argmax flips of `lm_head` rows ({key: (argmax_a, argmax_b)})."""
    out = {}
    flips = {}
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        for name in fa["captures"]:
            if name not in fb["captures"]:
                continue
            ra, seq = _rows(fa, name)
            rb, _ = _rows(fb, name)
            if ra is None or rb is None:
                continue
            keys = sorted(set(ra) & set(rb))
            diff = 0
            ulp = 0
            for k in keys:
                x, y = ra[k], rb[k]
                ne = x != y
                diff += int(ne.sum())
                if ne.any() and x.dtype == np.uint32:
                    ulp = max(ulp, int(np.abs(_ordered(x) - _ordered(y)).max()))
                if name == "lm_head":
                    xa = int(np.argmax(x.view(np.float32)))
                    xb = int(np.argmax(y.view(np.float32)))
                    if xa != xb:
                        flips[k] = (xa, xb)
            out[name] = (diff, ulp, seq, len(keys))
    return out, flips


def first_differing(cmp):
    """The name that differs first in A's capture order, or None."""
    bad = [(v[2], n) for n, v in cmp.items() if v[0]]
    return min(bad)[1] if bad else None

"""The aligned comparison of FORMAT.md ("Rows and tokens", "Aligned diff"),
recomputed with h5py and numpy alone -- the independent side of the
token-alignment tests (test_align.py, test_plots.py).

A capture with `positions` of shape S (its first len(S) extents) is viewed
as prod(S) rows of the remaining axes; `requests` (same shape) names each
row's request, 0 when absent.  All occurrences of a name are gathered per
(request, position) key; two sides are compared on the keys both have, in
key order.
"""
import h5py
import numpy as np


def raw_bits(ds):
    """The dataset's stored bits, unconverted, in its shape."""
    size = ds.id.get_type().get_size()
    arr = np.empty(ds.shape, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])
    if arr.size:
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, arr, mtype=ds.id.get_type())
    return arr


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def has_positions(f, name):
    g = f["captures"].get(name)
    return g is not None and len(g) > 0 and all("positions" in g[o].attrs for o in g)


def gather(f, name):
    """{(request, position): (occurrence, row bits)} and the row shape.
    Raises ValueError for a key seen twice."""
    rows, rshape = {}, None
    for occ in f["captures"][name]:
        ds = f["captures"][name][occ]
        pos = np.asarray(ds.attrs["positions"], dtype=np.int64)
        req = np.asarray(ds.attrs["requests"], dtype=np.int64) if "requests" in ds.attrs else \
            np.zeros_like(pos)
        bits = raw_bits(ds)
        k = pos.ndim
        assert bits.shape[:k] == pos.shape, (name, occ, bits.shape, pos.shape)
        rshape = bits.shape[k:]
        flat = bits.reshape((int(np.prod(pos.shape)),) + tuple(rshape))
        for i, (r, p) in enumerate(zip(req.reshape(-1), pos.reshape(-1))):
            key = (int(r), int(p))
            if key in rows:
                raise ValueError("%s: key %s twice" % (name, key))
            rows[key] = (int(occ), flat[i])
    return rows, rshape


def inputs_of(f, name):
    for occ in f["captures"][name]:
        ds = f["captures"][name][occ]
        if "inputs" in ds.attrs:
            return [text(x) for x in np.atleast_1d(ds.attrs["inputs"])]
    return []


def dtype_of(f, name):
    g = f["captures"][name]
    return text(g[next(iter(g))].attrs["dtype"])


def ordered(bits, dtype):
    """Ordered integers of float bits (the ULP scale)."""
    width = {"bf16": 16, "f16": 16, "f32": 32, "f64": 64}[dtype]
    b = bits.astype(np.int64) if width < 64 else bits.view(np.int64)
    mag = b & ((1 << (width - 1)) - 1)
    return np.where((b >> (width - 1)) & 1 != 0, -mag, mag)


def values(bits, dtype):
    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "f32":
        return bits.view(np.float32).astype(np.float64)
    if dtype == "f64":
        return bits.view(np.float64)
    raise AssertionError(dtype)


def compare(fa, fb, name):
    """The aligned row of `name`, as FORMAT.md defines it."""
    ra, rshape = gather(fa, name)
    rb, _ = gather(fb, name)
    keys = sorted(set(ra) & set(rb))
    dtype = dtype_of(fa, name)
    A = np.stack([ra[k][1] for k in keys]) if keys else np.zeros((0,) + tuple(rshape))
    B = np.stack([rb[k][1] for k in keys]) if keys else np.zeros((0,) + tuple(rshape))
    fa_, fb_ = A.reshape(len(keys), -1), B.reshape(len(keys), -1)
    differs = [bool(np.any(fa_[i] != fb_[i])) for i in range(len(keys))]
    oa, ob = ordered(fa_, dtype), ordered(fb_, dtype)
    ulp = np.abs(oa - ob)
    va, vb = values(fa_, dtype), values(fb_, dtype)
    out = {
        "keys": keys, "differs": differs, "dtype": dtype, "row_shape": tuple(rshape),
        "positions_compared": len(keys),
        "positions_only_in_a": len(set(ra) - set(rb)),
        "positions_only_in_b": len(set(rb) - set(ra)),
        "positions_differing": sum(differs),
        "elements": int(fa_.size),
        "differing": int(np.count_nonzero(fa_ != fb_)),
        "max_ulp": int(ulp.max()) if ulp.size else 0,
        "max_abs_diff": float(np.abs(va - vb).max()) if va.size else 0.0,
        "occ_a": [ra[k][0] for k in keys], "occ_b": [rb[k][0] for k in keys],
        "A": fa_, "B": fb_,
    }
    out["first_differing"] = None
    if any(differs):
        k = keys[differs.index(True)]
        out["first_differing"] = {"request": k[0], "position": k[1]}
    if out["max_ulp"] > 0:
        flat = int(np.argmax(ulp.reshape(-1) == out["max_ulp"]))
        k = keys[flat // fa_.shape[1]]
        out["worst_key"] = {"request": k[0], "position": k[1]}
        out["worst_flat"] = flat
    return out


def runs(keys, labels):
    """Runs of consecutive positions of one request with the same label (None: skip)."""
    out = []
    for (r, p), lab in zip(keys, labels):
        if lab is None:
            continue
        if out and out[-1][0] == r and out[-1][2] == p - 1 and out[-1][3] == lab:
            out[-1][2] = p
        else:
            out.append([r, p, p, lab])
    return [tuple(x) for x in out]


def origins(fa, fb, rows):
    """Origin of every differing key of every aligned row: {name: [label or None]}.
    rows: {name: compare(...)} for the aligned names."""
    res = {}
    for name, row in rows.items():
        ins = inputs_of(fa, name)
        labels = []
        for (r, p), d in zip(row["keys"], row["differs"]):
            if not d:
                labels.append(None)
                continue
            if not ins:
                labels.append(("unknown", None))
                continue
            worst, which = 0, None
            for i in ins:
                if i not in rows:
                    v = 1
                else:
                    ir = rows[i]
                    sel = [j for j, (rr, pp) in enumerate(ir["keys"]) if rr == r and pp <= p]
                    if any(ir["differs"][j] for j in sel):
                        v = 2
                    elif len(sel) != p + 1:
                        v = 1
                    else:
                        v = 0
                if v > worst:
                    worst, which = v, i
                if worst == 2:
                    break
            labels.append(({0: "introduced", 1: "not_captured", 2: "carried_in"}[worst], which))
        res[name] = labels
    return res


def first_seq(f, name):
    return min(int(f["captures"][name][o].attrs["seq"]) for o in f["captures"][name])


def check_report(pa, pb, doc):
    """Every aligned row of a `ulpprof diff --format json` report against the
    recomputation; returns (mismatches, rows, origins)."""
    bad = []
    fa, fb = h5py.File(pa, "r"), h5py.File(pb, "r")
    # Float captures: the token ids the helper records (integers) are the
    # pairing's input, checked by test_request_tokens.py.
    names = [n for n in fa["captures"] if has_positions(fa, n) and has_positions(fb, n)
             and dtype_of(fa, n) in ("bf16", "f16", "f32", "f64")]
    rows = {n: compare(fa, fb, n) for n in names}
    org = origins(fa, fb, rows)
    got = {r["name"]: r for r in doc["rows"]}
    for n, want in rows.items():
        g = got[n]
        if not g["aligned"]:
            bad.append("%s: not aligned" % n)
            continue
        for k in ("positions_compared", "positions_only_in_a", "positions_only_in_b",
                  "positions_differing", "elements", "differing", "max_ulp", "first_differing",
                  "max_abs_diff"):
            if g[k] != want[k]:
                bad.append("%s: %s %r, recomputed %r" % (n, k, g[k], want[k]))
        if g["status"] != ("differs" if want["differing"] else "identical"):
            bad.append("%s: status %s" % (n, g["status"]))
        if g["shape"] != [want["positions_compared"], *want["row_shape"]]:
            bad.append("%s: shape %r" % (n, g["shape"]))
        if want["max_ulp"] and (g["worst_key"] != want["worst_key"] or
                                g["worst_flat"] != want["worst_flat"]):
            bad.append("%s: worst %r %r vs %r %r" % (n, g["worst_key"], g["worst_flat"],
                                                     want["worst_key"], want["worst_flat"]))
        wr = runs(want["keys"], org[n])
        gr = [(x["request"], x["first"], x["last"], (x["origin"], x["input"]))
              for x in g["differing_positions"]]
        if gr != wr:
            bad.append("%s: runs %r, recomputed %r" % (n, gr[:4], wr[:4]))
        for x in g["differing_positions"]:
            sel = [i for i, (r, p) in enumerate(want["keys"])
                   if r == x["request"] and x["first"] <= p <= x["last"]]
            for side in ("a", "b"):
                if sorted(set(x["occurrences_" + side])) != \
                        sorted({want["occ_" + side][i] for i in sel}):
                    bad.append("%s: occurrences_%s of %r" % (n, side, x))
    order = sorted(fa["captures"], key=lambda n: first_seq(fa, n))
    first = next((n for n in order if n in rows and rows[n]["differing"]), None)
    fd = doc["first_divergence"]
    if first is None:
        if fd is not None:
            bad.append("first divergence %r, recomputed none" % fd)
    elif fd is None or fd["name"] != first or \
            {"request": fd["request"], "position": fd["position"]} != rows[first]["first_differing"]:
        bad.append("first divergence %r, recomputed %s at %r" % (
            fd and (fd["name"], fd["request"], fd["position"]), first,
            rows[first]["first_differing"]))
    elif fd["origin"] != org[first][rows[first]["differs"].index(True)][0]:
        bad.append("first divergence origin %s, recomputed %s" % (
            fd["origin"], org[first][rows[first]["differs"].index(True)]))
    return bad, rows, org

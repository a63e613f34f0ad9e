"""/digests read with h5py alone, in every layout (format/FORMAT.md,
"Digests": a dataset per occurrence, packed-1, packed-2), independently of
ulpprof's C reader: the tests' one way to see what a digest-mode file
holds.

    read(f) -> {capture name: [Occurrence, ...]}   (in occurrence order)

An Occurrence looks like the old layout's dataset /digests/<name>/<occ>:
`occ[()]`, `occ[i, j]`, `occ.shape` (the capture's row axes) and
`occ.attrs` (dtype, seq, role, time_ns, shape, ndim, and layer, step,
positions, requests, inputs, kernels, gemms, graph_replay, device_ptr,
stream where the capture had them), whichever layout the file has.

kept(f) -> {capture name: [Capture, ...]} and captures(f, name) read the
captures a digest-mode file keeps in /digests (the produced tokens, the fed
token ids: rows of /digests/<name>/value, occurrences marked `kept`) as a
/captures dataset looks to h5py: `c[()]` (shaped as the capture), `c.shape`,
`c.dtype`, `c.attrs` (its seq the captures' counter, kept_seq);
captures(f, name) gives a name's /captures datasets and kept captures alike,
in occurrence order, whichever the file holds.

write_old(path_or_file, name, occurrence, digests, **attrs) writes an
occurrence in the layout of files made before `packed-1` (a dataset per
occurrence, no /digests `layout`), for tests that check old files still
read as before.
"""
import h5py
import numpy as np

ALGORITHM = "xxh64, seed = row position"


class Occurrence:
    def __init__(self, digests, attrs):
        self.digests = digests
        self.attrs = attrs
        self.shape = digests.shape
        self.dtype = digests.dtype

    def __getitem__(self, key):
        return self.digests[key]


def _old(g):
    occs = []
    for k in sorted(g, key=int):
        ds = g[k]
        occs.append(Occurrence(ds[()], dict(ds.attrs)))
    return occs


def _str(v):
    return v if isinstance(v, bytes) else bytes(v)


class _Tables(dict):
    """One name's tables of a packed-2 /digests, sliced out of the shared ones: reads as
    its group of packed-1 does here (g["digest"][()], "inputs" in g, g.name)."""

    def __init__(self, name, tables):
        super().__init__(tables)
        self.name = "/digests/%s" % name


def _shared(dg):
    """[(name, its _Tables)] of a packed-2 /digests, in the names table's order, every
    range checked against the shared datasets."""
    names = dg["names"][()]
    occ, dig = dg["occurrences"][()], dg["digest"][()]
    pos, req = dg["position"][()], dg["request"][()]
    inputs = dg["inputs"][()] if "inputs" in dg else np.zeros(0, dtype=object)
    if not (len(dig) == len(pos) == len(req)):
        raise ValueError("%s: digest, position, request differ in length" % dg.name)
    out = []
    for e in names:
        name = e["name"].decode() if isinstance(e["name"], bytes) else str(e["name"])
        o0, no = int(e["occurrences_first"]), int(e["occurrences"])
        r0, nr = int(e["rows_first"]), int(e["rows"])
        i0, ni = int(e["inputs_first"]), int(e["inputs"])
        if o0 + no > len(occ) or r0 + nr > len(dig) or i0 + ni > len(inputs):
            raise ValueError("%s: %s's ranges lie past the shared datasets" % (dg.name, name))
        t = {"occurrences": occ[o0:o0 + no], "digest": dig[r0:r0 + nr],
             "position": pos[r0:r0 + nr], "request": req[r0:r0 + nr]}
        if ni > 0:
            t["inputs"] = inputs[i0:i0 + ni]
        if e["has_value"]:
            t["value"] = dg["value"][name][()]
        out.append((name, _Tables(name, t)))
    return out


def _groups(f):
    """[(name, its tables)] of a packed /digests, either packed layout."""
    if layout(f) == "packed-2":
        return _shared(f["digests"])
    return list(f["digests"].items())


def _packed(g):
    table = g["occurrences"][()]
    dig, pos, req = g["digest"][()], g["position"][()], g["request"][()]
    if not (len(dig) == len(pos) == len(req)):
        raise ValueError("%s: digest, position, request differ in length" % g.name)
    inputs = g["inputs"][()] if "inputs" in g else np.zeros(0, dtype=object)
    occs = []
    for i, o in enumerate(table):
        if int(o["occurrence"]) != i:
            raise ValueError("%s: occurrence %d at index %d" % (g.name, o["occurrence"], i))
        a, n = int(o["first"]), int(o["rows"])
        if a + n > len(dig):
            raise ValueError("%s: occurrence %d rows past the datasets" % (g.name, i))
        axes, at = _attrs(o, pos, req, inputs, a, n)
        occs.append(Occurrence(dig[a:a + n].reshape(axes), at))
    return occs


def _attrs(o, pos, req, inputs, a, n):
    """(row axes, attributes) of occurrence `o` of a packed table, its rows [a, a + n)."""
    ndim, rr = int(o["ndim"]), int(o["row_rank"])
    shape = [int(x) for x in o["shape"][:ndim]]
    axes = tuple(shape[:rr]) if ndim > 0 else (1,)
    if int(np.prod(axes)) != n:
        axes = (n,)
    at = {"dtype": _str(o["dtype"]), "seq": np.int64(o["seq"]), "role": _str(o["role"]),
          "time_ns": np.int64(o["time_ns"]),
          "shape": np.array(shape, dtype=np.int64) if ndim > 0 else np.int64(0),
          "ndim": np.int32(ndim)}
    if o["has_layer"]:
        at["layer"] = np.int32(o["layer"])
    if o["has_step"]:
        at["step"] = np.int64(o["step"])
    if o["has_positions"]:
        at["positions"] = pos[a:a + n].reshape(axes)
    if o["has_requests"]:
        at["requests"] = req[a:a + n].reshape(axes)
    k, c = int(o["inputs_first"]), int(o["inputs_count"])
    if c > 0:
        at["inputs"] = np.array([s if isinstance(s, bytes) else s.encode()
                                 for s in inputs[k:k + c]])
    for f in ("kernels", "gemms", "graph_replay"):
        if o["has_" + f]:
            at[f] = np.array(o[f], dtype=np.int64)
    for f in ("device_ptr", "stream"):
        if int(o[f]) != 0:
            at[f] = np.uint64(o[f])
    return axes, at


class Capture:
    """A capture kept in /digests, as h5py shows a /captures dataset."""

    def __init__(self, name, occurrence, data, attrs):
        self.name = "/captures/%s/%d" % (name, occurrence)
        self.occurrence = occurrence
        self._data = data
        self.attrs = attrs
        self.shape = data.shape
        self.dtype = data.dtype
        self.size = data.size

    def __getitem__(self, key):
        return self._data[key]

    def __len__(self):
        return len(self._data)


def kept(f):
    """{name: [Capture]} of the captures /digests keeps (occurrences marked kept)."""
    if not isinstance(f, h5py.File):
        with h5py.File(f, "r") as h:
            return kept(h)
    out = {}
    if layout(f) not in ("packed-1", "packed-2"):
        return out
    for name, g in _groups(f):
        if "value" not in g:
            continue
        table = g["occurrences"][()]
        value, pos, req = g["value"][()], g["position"][()], g["request"][()]
        inputs = g["inputs"][()] if "inputs" in g else np.zeros(0, dtype=object)
        for o in table:
            if not o["kept"]:
                continue
            a, n = int(o["first"]), int(o["rows"])
            _, at = _attrs(o, pos, req, inputs, a, n)
            at["seq"] = np.int64(o["kept_seq"])
            shape = tuple(int(x) for x in o["shape"][:int(o["ndim"])])
            data = np.ascontiguousarray(value[a:a + n]).reshape(shape)
            out.setdefault(name, []).append(Capture(name, int(o["kept_occurrence"]), data, at))
    return out


def captures(f, name):
    """The captures named `name`, in /captures or kept in /digests, by occurrence."""
    out = []
    if "captures" in f and name in f["captures"]:
        g = f["captures"][name]
        out += [(int(k), g[k]) for k in g]
    out += [(c.occurrence, c) for c in kept(f).get(name, [])]
    return [c for _, c in sorted(out, key=lambda t: t[0])]


def capture_names(f):
    """The names of the file's captures, in /captures or kept in /digests."""
    names = set(f["captures"]) if "captures" in f else set()
    return sorted(names | set(kept(f)))


def layout(f):
    """The /digests `layout` ("packed-1", or "packed-2": a digest file rewritten at its
    close), None for the old layout or no /digests."""
    if "digests" not in f:
        return None
    v = f["digests"].attrs.get("layout")
    return None if v is None else (v.decode() if isinstance(v, bytes) else str(v))


def read(f):
    """{name: [Occurrence]} of an open h5py.File (or a path)."""
    if not isinstance(f, h5py.File):
        with h5py.File(f, "r") as h:
            return read(h)
    if "digests" not in f:
        return {}
    lay = layout(f)
    if lay not in (None, "packed-1", "packed-2"):
        raise ValueError("unknown /digests layout %r" % lay)
    if lay is None:
        return {name: _old(f["digests"][name]) for name in f["digests"]}
    return {name: _packed(g) for name, g in _groups(f)}


def write_old(f, name, occurrence, digests, **attrs):
    """One occurrence in the old layout: /digests/<name>/<occurrence> with `attrs`."""
    if "digests" not in f:
        g = f.create_group("digests")
        g.attrs["algorithm"] = np.bytes_(ALGORITHM)
    ds = f["digests"].require_group(name).create_dataset(
        str(occurrence), data=np.asarray(digests, dtype="<u8"))
    for k, v in attrs.items():
        ds.attrs[k] = v
    return ds

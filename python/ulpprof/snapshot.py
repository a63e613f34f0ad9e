"""A snapshot file as Python objects: its run, its captures, their arrays.

    snap = ulpprof.open("miss.h5")
    snap.run["cache"]                        # "miss"
    t = snap["model.layers.0"]               # occurrence 0; snap.read(name, 1) the next
    t.array, t.positions, t.requests         # numpy arrays

What a file holds (label, /run, /env, the captures and their token rows) is
what `ulpprof ls --json` prints: the C reader validates the file, and a
file it refuses raises SnapshotError with its one-line message.  The arrays
are read with h5py (`pip install h5py`) from /captures/<name>/<occurrence>,
bits as stored; bf16 and the fp8 formats come back as float32 (exactly:
every value of those formats is a float32).
"""
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple, Union

from ._digest_tables import digest_tables
from ._program import SnapshotError, run_json

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Snapshot", "CaptureInfo", "Tensor", "open_snapshot"]

_NP_DTYPES = {"f64": "<f8", "f32": "<f4", "f16": "<f2", "i64": "<i8", "i32": "<i4",
              "i16": "<i2", "i8": "i1", "u8": "u1"}
_BITS = {"bf16": "<u2", "f8e4m3": "u1", "f8e5m2": "u1"}


def _e4m3_table() -> "np.ndarray":
    """float32 of each f8e4m3 (fn: no infinities, S.1111.111 is NaN) byte."""
    import numpy as np

    out = np.empty(256, np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            v = float("nan")
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        out[b] = -v if s else v
    return out


def decode(bits: "np.ndarray", dtype: str) -> "np.ndarray":
    """float32 values of bf16 / f8e4m3 / f8e5m2 bit patterns (unsigned ints)."""
    import numpy as np

    if dtype == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    if dtype == "f8e5m2":  # the high byte of an f16
        return (bits.astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    if dtype == "f8e4m3":
        return _e4m3_table()[bits]
    raise ValueError("no decoding for dtype %r" % dtype)


@dataclass(frozen=True)
class CaptureInfo:
    """One capture as `ulpprof ls --json` lists it (FORMAT.md).  positions
    and requests: one entry per row (the first row_rank axes), flat and
    row-major; None when the capture has no token rows."""

    seq: int
    name: str
    occurrence: int
    layer: Optional[int]
    role: str
    dtype: str
    shape: Tuple[int, ...]
    elements: int
    bytes: int
    row_rank: int = 0
    positions: Optional[Tuple[int, ...]] = None
    requests: Optional[Tuple[int, ...]] = None
    inputs: Tuple[str, ...] = ()

    @classmethod
    def from_json(cls, o: dict) -> "CaptureInfo":
        pos = o.get("positions")
        req = o.get("requests")
        return cls(seq=int(o["seq"]), name=o["name"], occurrence=int(o["occurrence"]),
                   layer=o.get("layer"), role=o["role"], dtype=o["dtype"],
                   shape=tuple(o["shape"]), elements=int(o["elements"]), bytes=int(o["bytes"]),
                   row_rank=int(o.get("row_rank", 0)),
                   positions=tuple(pos) if pos is not None else None,
                   requests=tuple(req) if req is not None else None,
                   inputs=tuple(o.get("inputs", ())))

    def request_positions(self) -> Dict[int, List[int]]:
        """{request: its positions in this capture, ascending}; {} without rows."""
        out: Dict[int, List[int]] = {}
        if self.positions is None:
            return out
        reqs = self.requests or (0,) * len(self.positions)
        for r, p in zip(reqs, self.positions):
            out.setdefault(r, []).append(p)
        for v in out.values():
            v.sort()
        return out


@dataclass
class Tensor:
    """A capture's data: `array` has the capture's shape; `positions` and
    `requests` (int64) have its first row_rank extents, or are None."""

    info: CaptureInfo
    array: "np.ndarray"
    positions: "Optional[np.ndarray]" = None
    requests: "Optional[np.ndarray]" = None


@dataclass
class Snapshot:
    """A snapshot file: what `ulpprof ls --json` says of it.  Index it by a
    capture name (`snap[name]`, `snap[name, occurrence]`) for its data."""

    path: str
    label: str
    writer: str
    format_version: int
    created_unix_ns: int
    run: Dict[str, str]
    env: Dict[str, str]
    kernels: int
    captures: List[CaptureInfo]
    warning: Optional[str] = None
    _by_key: Dict[Tuple[str, int], CaptureInfo] = field(default_factory=dict, repr=False)
    _copy: Optional[str] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._by_key = {(c.name, c.occurrence): c for c in self.captures}

    @property
    def names(self) -> List[str]:
        """The capture names, each once, in the order of their first capture."""
        seen: Dict[str, None] = {}
        for c in sorted(self.captures, key=lambda c: c.seq):
            seen.setdefault(c.name, None)
        return list(seen)

    def occurrences(self, name: str) -> List[CaptureInfo]:
        """Every capture of `name`, by occurrence."""
        return sorted((c for c in self.captures if c.name == name), key=lambda c: c.occurrence)

    def info(self, name: str, occurrence: int = 0) -> CaptureInfo:
        """The listing of one capture; KeyError when the file has none such."""
        try:
            return self._by_key[(name, int(occurrence))]
        except KeyError:
            raise KeyError("%s has no capture %s occurrence %d" % (self.path, name,
                                                                   occurrence)) from None

    def _repaired(self) -> str:
        """A copy by `ulpprof repair` (made once, removed with the snapshot): of a killed
        writer's file, the captures its groups or tables lost are read from it (the kept
        captures that only its capture journal holds: format/FORMAT.md "Capture journal")."""
        if self._copy is None:
            import shutil
            import tempfile
            import warnings
            import weakref

            from ._program import run_text

            d = tempfile.mkdtemp(prefix="ulpprof-repaired-")
            weakref.finalize(self, shutil.rmtree, d, True)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the file's warning, said at its open
                run_text(["repair", self.path, os.path.join(d, "copy.h5")])
            self._copy = os.path.join(d, "copy.h5")
        return self._copy

    def read(self, name: str, occurrence: int = 0) -> Tensor:
        """The data of one capture, with its token positions (needs h5py)."""
        info = self.info(name, occurrence)
        import numpy as np

        try:
            import h5py  # noqa: F401
        except ImportError:
            raise ImportError("reading a capture's data needs h5py (pip install h5py)") from None
        where = "/captures/%s/%d" % (name, info.occurrence)
        try:
            try:
                where, arr = _read_data(self.path, name, info)
            except (OSError, KeyError, ValueError):
                if self.warning is None:
                    raise
                # A killed writer's file: what the reader found through the journal.
                where, arr = _read_data(self._repaired(), name, info)
            arr = np.asarray(arr).reshape(info.shape)
        except (OSError, KeyError, ValueError) as e:
            raise SnapshotError("ulpprof: cannot read '%s' %s: %s" % (self.path, where, e)) from None
        pos = req = None
        if info.positions is not None:
            rows = info.shape[:info.row_rank]
            pos = np.asarray(info.positions, np.int64).reshape(rows)
            req = np.asarray(info.requests or [0] * len(info.positions), np.int64).reshape(rows)
        return Tensor(info, arr, pos, req)

    def __getitem__(self, key: Union[str, Tuple[str, int]]) -> Tensor:
        if isinstance(key, tuple):
            return self.read(key[0], key[1])
        return self.read(key)

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self.captures)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.captures)


def _read_data(path: str, name: str, info: CaptureInfo) -> Tuple[str, Any]:
    """(where, array) of capture `info` in file `path`: its /captures dataset, or its rows
    of /digests/<name>/value."""
    import h5py
    import numpy as np

    where = "/captures/%s/%d" % (name, info.occurrence)
    with h5py.File(path, "r") as f:
        if where not in f:
            # Kept in /digests (format/FORMAT.md "Digests": a digest-mode file's
            # tokens and fed ids), rows of the name's `value`.
            where, raw = _kept_rows(f, name, info.occurrence, _BITS.get(info.dtype))
            arr = decode(raw, info.dtype) if info.dtype in _BITS \
                else raw.astype(_NP_DTYPES[info.dtype], copy=False)
        elif info.dtype in _BITS:
            ds = f[where]
            raw = np.empty(ds.shape, _BITS[info.dtype])
            ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=ds.id.get_type())
            arr = decode(raw, info.dtype)
        else:
            arr = f[where][()].astype(_NP_DTYPES[info.dtype], copy=False)
    return where, arr


def _kept_rows(f: Any, name: str, occurrence: int,
               bits: Optional[str]) -> Tuple[str, "np.ndarray"]:
    """(the path of the name's `value`, the rows of it that /digests keeps of capture
    (name, occurrence)) (its table's `kept_occurrence`; KeyError when it keeps none such);
    with `bits` (a numpy dtype), the stored bits as that, not h5py's conversion (bf16,
    fp8)."""
    import h5py
    import numpy as np

    # the name's tables in either packed layout; rows relative to the name's in both
    t = dict(digest_tables(f["digests"]))[name]
    table, ds = t["occurrences"][()], t["value"]
    for o in table:
        if o["kept"] and int(o["kept_occurrence"]) == occurrence:
            a, n = int(o["first"]), int(o["rows"])
            if bits is None:
                return ds.name, ds[a:a + n]
            raw = np.empty((n, ds.shape[1]), bits)
            if n > 0:
                fs = ds.id.get_space()
                fs.select_hyperslab((a, 0), (n, ds.shape[1]))
                ms = h5py.h5s.create_simple((n, ds.shape[1]))
                ds.id.read(ms, fs, raw, mtype=ds.id.get_type())
            return ds.name, raw
    raise KeyError("no kept occurrence %d" % occurrence)


def open_snapshot(path: str) -> Snapshot:
    """Opens a snapshot file.  SnapshotError (the program's one line) when
    the file is not a readable snapshot."""
    doc, _ = run_json(["ls", "--json", path])
    if not isinstance(doc, list) or len(doc) != 1:
        raise SnapshotError("ulpprof: '%s': `ls --json` printed %s, not one snapshot"
                            % (path, type(doc).__name__))
    o = doc[0]
    return Snapshot(path=o["path"], label=o.get("label") or "", writer=o.get("writer") or "",
                    format_version=int(o["format_version"]),
                    created_unix_ns=int(o.get("created_unix_ns") or 0), run=dict(o["run"]),
                    env=dict(o["env"]), kernels=int(o.get("kernels", 0)),
                    captures=[CaptureInfo.from_json(c) for c in o["captures"]],
                    warning=o.get("warning"))

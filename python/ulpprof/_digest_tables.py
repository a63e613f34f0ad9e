"""Each capture name's tables of a packed /digests (format/FORMAT.md
"Digests"), read with h5py, for the Python readers of kept captures
(ulpprof.open()'s, ulpprof.ray's): in layout packed-1 the name's own group;
in packed-2 (a digest file rewritten at its close) its ranges of the
datasets all names share, as a dict that reads as the group does
(t["occurrences"][()], "value" in t, t["value"] the name's h5py dataset)."""
from typing import Any, List, Tuple


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def digest_tables(dg: Any) -> List[Tuple[str, Any]]:
    """[(name, its tables)] of the h5py group /digests; [] for another layout."""
    import h5py
    lay = _text(dg.attrs.get("layout", ""))
    if lay == "packed-1":
        return [(n, g) for n, g in dg.items() if isinstance(g, h5py.Group)]
    if lay != "packed-2":
        return []
    occ, pos, req = dg["occurrences"][()], dg["position"][()], dg["request"][()]
    out: List[Tuple[str, Any]] = []
    for e in dg["names"][()]:
        name = _text(e["name"])
        o0, no = int(e["occurrences_first"]), int(e["occurrences"])
        r0, nr = int(e["rows_first"]), int(e["rows"])
        t = {"occurrences": occ[o0:o0 + no], "position": pos[r0:r0 + nr],
             "request": req[r0:r0 + nr]}
        if e["has_value"]:
            t["value"] = dg["value"][name]
        out.append((name, t))
    return out

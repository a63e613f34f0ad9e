"""`ulpprof diff` of two multi-rank runs whose per-rank files sit on several
Ray nodes, compared where they lie (docs/ray.md).

    import ulpprof.ray
    report = ulpprof.ray.diff({node_a: "/data/runA", node_b: "/data/runA"},
                              {node_a: "/data/runB", node_b: "/data/runB"})

`a` and `b` map a Ray node id (hex, as `ray.nodes()` names it) to that
run's directory on that node; a list of directories, one per alive node in
the order `ray.nodes()` lists them, also works.  Each node lists its own
directory (a Ray task pinned to it with NodeAffinitySchedulingStrategy);
the driver numbers the ranks as `ulpprof diff DIR DIR` numbers the files
of one directory (their /env rank when every file of the run has one, else
the order of the file names) and pairs rank r of A with rank r of B.  A
pair whose two files are on one node is compared there by
`ulpprof diff -f json`, and only its report (per-layer rows) comes back;
a pair whose files are on two nodes moves B's file to A's node less the
data of every capture that A's file holds bit for bit (each node hashes
its file's capture data, BLAKE2b, and only the hashes travel; the bytes
left out are taken from A's file, so B's file is rebuilt exactly): the
captures from the one where the pair parts on, and the file's metadata.  The result is the document `ulpprof diff -f json DIR DIR`
prints on the same files gathered in one directory (format
"ulpprof-diff-ranks"), with each file named `NODE:PATH`.

`ulpprof.ray.streams(runs)` is `ulpprof streams --activations -f json` of
runs (each a snapshot or a directory of per-rank files) that sit on several
nodes: each node reads its runs' token streams and fed token ids and only
those travel; the
driver groups them; each completion's first run is then compared with the
common one's by row digests on the common one's node, a representative on
another node moving there as its digest-only file (a run captured with
its tensors as its digest-only rendition, made on its own node; see
streams()).

Ray is an optional dependency: importing this module needs it.
"""
import hashlib
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._digest_tables import digest_tables
from ._program import SnapshotError, UlpprofError, run_json, run_text

__all__ = ["diff", "streams"]

Runs = Union[Mapping[str, str], Sequence[str]]


def _is_h5(name: str) -> bool:
    # As the C reader lists a run directory: *.h5, not hidden.
    return len(name) > 3 and name.endswith(".h5") and not name.startswith(".")


def _list_run(directory: str) -> List[Tuple[str, int]]:
    """(file name, /env rank or -1) of each *.h5 file of `directory`, on
    the node the task runs on."""
    try:
        names = sorted(n for n in os.listdir(directory)
                       if _is_h5(n) and os.path.isfile(os.path.join(directory, n)))
    except OSError as e:
        raise SnapshotError("ulpprof: cannot open '%s': %s" % (directory, e.strerror)) from None
    out = []
    for n in names:
        doc, _ = run_json(["ls", "--json", os.path.join(directory, n)])
        env = doc[0].get("env") or {}
        r = env.get("rank")
        out.append((n, int(r) if isinstance(r, str) and r.isdigit() and int(r) < 1 << 20 else -1))
    return out


def _diff_pair(pa: str, pb: str, b_bytes: Optional[bytes] = None,
               holes: Sequence[Tuple[int, int, int]] = ()) -> Tuple[Dict[str, Any], int]:
    """The report `ulpprof diff -f json DIR DIR` gives rank pair (pa, pb):
    run on two one-file directories (links to the files; B's file written
    from `b_bytes` when it was shipped from another node), so that the
    report is made as the directory diff makes it, and named by pa and pb;
    `holes` are the ranges of B's file left out of `b_bytes`, filled from
    A's file (see _unpack)."""
    with tempfile.TemporaryDirectory(prefix="ulpprof-ray-") as tmp:
        da, db = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        os.mkdir(da)
        os.mkdir(db)
        os.symlink(os.path.abspath(pa), os.path.join(da, "rank.h5"))
        if b_bytes is None:
            os.symlink(os.path.abspath(pb), os.path.join(db, "rank.h5"))
        else:
            _unpack(b_bytes, list(holes), pa, os.path.join(db, "rank.h5"))
        doc, _ = run_json(["diff", "-f", "json", da, db], ok=(0, 1))
    rep = doc["ranks"][0]["report"]
    for side, path in (("a", pa), ("b", pb)):
        if isinstance(rep.get(side), dict) and "path" in rep[side]:
            rep[side]["path"] = path
    return rep, 0 if b_bytes is None else len(b_bytes)


def _extents(path: str) -> Optional[Dict[str, Tuple[int, int, bytes]]]:
    """Per capture dataset of a file: (file offset, size, BLAKE2b of its
    data bytes as stored), for those stored contiguously (ours always are);
    None when h5py cannot read the file here (then the whole file moves)."""
    try:
        import h5py
    except ImportError:
        return None
    out: Dict[str, Tuple[int, int, bytes]] = {}
    try:
        with h5py.File(path, "r") as f, open(path, "rb") as raw:
            caps = f.get("captures")

            def visit(name, obj):
                if not isinstance(obj, h5py.Dataset) or obj.chunks is not None:
                    return
                off, size = obj.id.get_offset(), obj.id.get_storage_size()
                if off is None or size <= 0:
                    return
                data = os.pread(raw.fileno(), size, off)
                if len(data) == size:
                    out[name] = (off, size, hashlib.blake2b(data, digest_size=16).digest())

            if isinstance(caps, h5py.Group):
                caps.visititems(visit)
    except (OSError, ValueError):
        return None
    return out


def _pack(path: str, holes: List[Tuple[int, int]]) -> bytes:
    """The bytes of a file with the ranges `holes` [(offset, size)], sorted
    and disjoint, left out: what moves of B's file when A's node holds those
    captures' data already."""
    parts, at = [], 0
    with open(path, "rb") as f:
        for off, size in holes:
            f.seek(at)
            parts.append(f.read(off - at))
            at = off + size
        f.seek(at)
        parts.append(f.read())
    return b"".join(parts)


def _unpack(packed: bytes, holes: List[Tuple[int, int, int]], pa: str, out: str) -> None:
    """Writes B's file at `out` from its packed bytes, filling each hole
    (B offset, size, A offset) with the same bytes of A's file `pa`."""
    with open(pa, "rb") as fa, open(out, "wb") as f:
        at = 0
        for off, size, a_off in holes:
            n = off - f.tell()
            f.write(packed[at:at + n])
            at += n
            fa.seek(a_off)
            data = fa.read(size)
            if len(data) != size:
                raise SnapshotError("ulpprof: '%s' changed while it was compared" % pa)
            f.write(data)
        f.write(packed[at:])


def _get(refs):
    """ray.get, raising a task's own ulpprof error (its one line) rather than
    Ray's wrapper of it."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, UlpprofError):
            raise cause from None
        raise


def _alive_nodes() -> List[str]:
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive")]


def _placed(runs: Runs, what: str) -> List[Tuple[str, str]]:
    """[(node id, directory)] of one side's argument."""
    if isinstance(runs, Mapping):
        placed = [(str(k), os.fspath(v)) for k, v in runs.items()]
    else:
        dirs = [os.fspath(d) for d in runs]
        nodes = _alive_nodes()
        if len(dirs) > len(nodes):
            raise ValueError("ulpprof.ray.diff: %s names %d directories but the cluster has %d "
                             "alive nodes" % (what, len(dirs), len(nodes)))
        placed = list(zip(nodes, dirs))
    if not placed:
        raise ValueError("ulpprof.ray.diff: %s names no directory" % what)
    alive = set(_alive_nodes())
    for node, _ in placed:
        if node not in alive:
            raise ValueError("ulpprof.ray.diff: %s: node %s is not an alive node of the cluster"
                             % (what, node))
    return placed


_REMOTE: Dict[Any, Any] = {}


def _on(node: str, fn):
    """`fn` as a Ray task that runs on `node` and nowhere else."""
    if fn not in _REMOTE:
        _REMOTE[fn] = ray.remote(num_cpus=1, max_retries=0)(fn)
    return _REMOTE[fn].options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False))


def _ranked(placed: List[Tuple[str, str]], listed: List[List[Tuple[str, int]]],
            what: str) -> Dict[int, Tuple[str, str]]:
    """rank -> (node, path), numbered as `ulpprof diff` numbers one directory."""
    files = [(name, rank, node, os.path.join(d, name))
             for (node, d), lst in zip(placed, listed) for name, rank in lst]
    if not files:
        raise SnapshotError("ulpprof: run %s holds no *.h5 file on any of its nodes" % what)
    if not all(r >= 0 for _, r, _, _ in files):
        files.sort(key=lambda f: (f[0].encode("utf-8", "surrogateescape"), f[2]))
        files = [(n, i, node, p) for i, (n, _, node, p) in enumerate(files)]
    out: Dict[int, Tuple[str, str]] = {}
    for name, r, node, p in files:
        if r in out:
            raise SnapshotError("ulpprof: run %s: '%s:%s' and '%s:%s' are both rank %d (their "
                                "/env rank): not one multi-rank run"
                                % (what, out[r][0], out[r][1], node, p, r))
        out[r] = (node, p)
    return out


def _describe(placed: List[Tuple[str, str]]) -> str:
    return ",".join("%s:%s" % nd for nd in placed)


def diff(a: Runs, b: Runs, address: Optional[str] = None,
         stats: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    """The `ulpprof diff -f json` document of runs `a` and `b` (see the
    module's text).  Connects to the cluster at `address` (ray.init's
    meaning) unless Ray is already initialized.  Raises SnapshotError when a
    file cannot be used, ValueError on a bad argument.  `stats`, a dict,
    receives `pairs_across_nodes`, `bytes_moved` (of B's files shipped
    to A's nodes) and `captures_moved` (the captures whose data moved with
    them; None when a node could not hash its file, so that all of it
    moved)."""
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    pa, pb = _placed(a, "a"), _placed(b, "b")
    listed = _get([_on(node, _list_run).remote(d) for node, d in pa + pb])
    ra = _ranked(pa, listed[:len(pa)], "a")
    rb = _ranked(pb, listed[len(pa):], "b")
    common = sorted(set(ra) & set(rb))
    if not common:
        raise SnapshotError("ulpprof: '%s' and '%s' have no rank in common"
                            % (_describe(pa), _describe(pb)))
    across = [r for r in common if ra[r][0] != rb[r][0]]
    ext = _get([_on(side[r][0], _extents).remote(side[r][1]) for r in across for side in (ra, rb)])
    jobs, moved, caps_moved = [], 0, 0
    for r in common:
        (na, fa), (nb, fb) = ra[r], rb[r]
        if na == nb:
            jobs.append(_on(na, _diff_pair).remote(fa, fb))
            continue
        # Across nodes: B's file moves to A's node less the captures whose
        # data A's file holds bit for bit (their bytes are taken from it).
        i = across.index(r)
        ea, eb = ext[2 * i] or {}, ext[2 * i + 1] or {}
        holes = sorted((eb[k][0], eb[k][1], ea[k][0]) for k in eb
                       if k in ea and ea[k][1:] == eb[k][1:])
        packed = _on(nb, _pack).remote(fb, [(o, n) for o, n, _ in holes])
        jobs.append(_on(na, _diff_pair).remote(fa, fb, packed, holes))
        moved += 1
        if caps_moved is not None:  # None once a node could not hash its file: all of it moved
            caps_moved = None if ext[2 * i + 1] is None else caps_moved + len(eb) - len(holes)
    reports = _get(jobs)
    if stats is not None:
        stats["pairs_across_nodes"] = moved
        stats["bytes_moved"] = sum(n for _, n in reports)
        stats["captures_moved"] = caps_moved
    reports = [rep for rep, _ in reports]
    ranks = []
    for r, rep in zip(common, reports):
        (na, fa), (nb, fb) = ra[r], rb[r]
        ranks.append({"rank": r, "a": "%s:%s" % (na, fa), "b": "%s:%s" % (nb, fb),
                      "report": rep})
    only_a = sorted(set(ra) - set(rb))
    only_b = sorted(set(rb) - set(ra))
    identical = not only_a and not only_b and all(x["report"].get("identical") for x in ranks)
    return {"format": "ulpprof-diff-ranks", "format_version": 1, "a": _describe(pa),
            "b": _describe(pb), "ranks": ranks, "ranks_only_a": only_a, "ranks_only_b": only_b,
            "identical": identical}


# --- ulpprof streams over runs on several nodes ---------------------------


# Integer dtypes (ulpprof/dtype.h): a capture of fed token ids holds one of these.
_ID_DTYPES = ("i64", "i32", "i16", "i8", "u8")


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _fed_ids(occ: Any) -> bool:
    """As the program's test for fed token ids (FORMAT.md "Parted token
    streams"): role `input`, an integer dtype, `positions`, one element a
    row."""
    import numpy as np
    a = occ.attrs
    if _text(a.get("role", "")) != "input" or _text(a.get("dtype", "")) not in _ID_DTYPES \
            or "positions" not in a:
        return False
    return int(np.asarray(a["positions"]).size) == int(np.prod(occ.shape, dtype=np.int64))


def _ids_names(f: Any) -> List[str]:
    """The names of /captures whose every capture holds fed token ids (the
    program reads the first written of them)."""
    import h5py
    caps = f.get("captures")
    if not isinstance(caps, h5py.Group):
        return []
    out = []
    for name, grp in caps.items():
        if name == "tokens" or not isinstance(grp, h5py.Group) or len(grp) == 0:
            continue
        if all(isinstance(o, h5py.Dataset) and _fed_ids(o) for o in grp.values()):
            out.append(name)
    return out


def _kept(f: Any) -> List[Tuple[Any, ...]]:
    """The captures a digest-mode file keeps in /digests (FORMAT.md
    "Digests": its tokens and fed token ids), as (seq, name, dtype, role,
    rows [rows, width] as stored, positions, requests or None), each
    occurrence its table marks `kept`."""
    import h5py
    import numpy as np
    out: List[Tuple[Any, ...]] = []
    dg = f.get("digests")
    if not isinstance(dg, h5py.Group):
        return out
    for name, g in digest_tables(dg):
        if "value" not in g:
            continue
        table = g["occurrences"][()]
        if "kept" not in (table.dtype.names or ()):
            continue
        value, pos, req = g["value"][()], g["position"][()], g["request"][()]
        for o in table:
            if not o["kept"] or not o["has_positions"]:
                continue
            a, n = int(o["first"]), int(o["rows"])
            out.append((int(o["kept_seq"]), name, _text(o["dtype"]), _text(o["role"]),
                        np.ascontiguousarray(value[a:a + n]), pos[a:a + n].astype(np.int64),
                        req[a:a + n].astype(np.int64) if o["has_requests"] else None))
    return out


def _kept_ids(t: Tuple[Any, ...]) -> bool:
    """Whether a kept capture of _kept() holds fed token ids."""
    return t[3] == "input" and t[2] in _ID_DTYPES and t[4].ndim == 2 and t[4].shape[1] == 1


def _token_captures(path: str) -> List[Tuple[Any, ...]]:
    """What `ulpprof streams` reads of a file, in write (seq) order, each as
    (name, dtype, role, rows, positions, requests or None): its `tokens`
    captures (f64, [rows, 2], positions over axis 0; FORMAT.md "Produced
    tokens") and its captures of fed token ids (by which a request is
    known across runs: its prompt), their rows as stored."""
    import h5py
    import numpy as np
    out = []
    try:
        with h5py.File(path, "r") as f:
            grp = f.get("captures/tokens")
            if isinstance(grp, h5py.Group):
                for occ in grp.values():
                    a = occ.attrs
                    if not isinstance(occ, h5py.Dataset) or len(occ.shape) != 2 \
                            or occ.shape[1] != 2 or _text(a.get("dtype", "")) != "f64" \
                            or "positions" not in a:
                        continue
                    pos = np.asarray(a["positions"], dtype=np.int64).reshape(-1)
                    req = np.asarray(a["requests"], dtype=np.int64).reshape(-1) \
                        if "requests" in a else np.zeros_like(pos)
                    if len(pos) != occ.shape[0] or len(req) != len(pos):
                        continue
                    out.append((int(a.get("seq", 0)), "tokens", "f64", "activation",
                                np.ascontiguousarray(occ[()], np.float64), pos, req))
            # Fed ids: the names all of whose captures hold them, in /captures, kept in
            # /digests, or both (a run that switched modes); the program picks among them.
            kept = _kept(f)
            caps = f.get("captures")
            in_caps = set(caps) if isinstance(caps, h5py.Group) else set()
            caps_ids = set(_ids_names(f))
            kept_other = {t[1] for t in kept if not _kept_ids(t)}
            names = {n for n in caps_ids | {t[1] for t in kept if _kept_ids(t)}
                     if n != "tokens" and n not in kept_other and (n not in in_caps or n in caps_ids)}
            for name in sorted(caps_ids & names):
                for occ in f["captures"][name].values():
                    a = occ.attrs
                    pos = np.asarray(a["positions"], dtype=np.int64).reshape(-1)
                    req = np.asarray(a["requests"], dtype=np.int64).reshape(-1) \
                        if "requests" in a else None
                    if req is not None and len(req) != len(pos):
                        req = None  # the program reads such a capture as request 0's
                    out.append((int(a.get("seq", 0)), name, _text(a["dtype"]), "input",
                                np.ascontiguousarray(occ[()]).reshape(-1), pos, req))
            for t in kept:
                if t[1] == "tokens" and t[2] == "f64" and t[4].shape[1:] == (2,):
                    out.append(t[:3] + ("activation", t[4].astype(np.float64),
                                        t[5], t[6] if t[6] is not None else np.zeros_like(t[5])))
                elif t[1] in names:
                    out.append(t[:3] + ("input", t[4].reshape(-1), t[5], t[6]))
    except (OSError, ValueError, KeyError) as e:
        raise SnapshotError("ulpprof: cannot read the tokens of '%s': %s" % (path, e)) from None
    out.sort(key=lambda t: t[0])
    return [t[1:] for t in out]


def _stream_bytes(caps: List[Tuple[Any, ...]]) -> Tuple[int, int]:
    """(bytes of the `tokens` rows, bytes of the fed ids' rows), each row with
    its position and request."""
    tok = ids = 0
    for name, _, role, rows, pos, req in caps:
        n = rows.nbytes + pos.nbytes + (req.nbytes if req is not None else 0)
        if role == "input":
            ids += n
        else:
            tok += n
    return tok, ids


def _node_streams(paths: Sequence[str]) -> List[Tuple[str, List[Tuple[Any, ...]]]]:
    """On a run's node: per run, the file `ulpprof streams` reads of it (a
    directory's first rank, as the program resolves it) and that file's
    token and fed-id captures.  The program itself checks the runs (one line naming
    the file when one cannot be used)."""
    if not paths:
        return []
    doc, _ = run_json(["streams", "-f", "json"] + list(paths), ok=(0, 1))
    files = doc["runs"]
    return [(f, _token_captures(f)) for f in files]


def _digest_only(path: str) -> bool:
    """As ulp_digest_only(), the fed token ids aside: /digests holds rows and
    /captures nothing but `tokens` and captures of fed token ids (a few
    bytes a position, as the tokens)."""
    import h5py
    try:
        with h5py.File(path, "r") as f:
            dg, caps = f.get("digests"), f.get("captures")
            has = isinstance(dg, h5py.Group) and len(dg) > 0
            small = ["tokens"] + _ids_names(f)
            data = isinstance(caps, h5py.Group) and any(k not in small and len(caps[k]) > 0
                                                         for k in caps)
            return has and not data
    except (OSError, ValueError):
        return False


def _digest_file(path: str) -> bytes:
    """On a representative's node: what moves of it to the common one's
    node, its digest-only file (token rows, fed token ids, one 8-byte
    digest a row of every other capture, the metadata; no tensor).  A file
    captured with its tensors (mode "data" or "both") moves as its
    digest-only rendition, made here by `ulpprof repair --digests`: the
    digests a capture of the same tensors in mode "digest" writes."""
    if _digest_only(path):
        with open(path, "rb") as f:
            return f.read()
    with tempfile.TemporaryDirectory(prefix="ulpprof-ray-") as tmp:
        out = os.path.join(tmp, "digests.h5")
        run_text(["repair", "--digests", path, out])
        with open(out, "rb") as f:
            return f.read()


def _parting_of(pc: str, pg: str, g_bytes: Optional[bytes] = None,
                g_name: str = "") -> Tuple[Dict[int, Any], int]:
    """On the common run's node: `ulpprof streams --activations -f json` of
    the common completion's first run `pc` and another's `pg` (written from
    `g_bytes`, its digest-only file, when it came from another node): of
    two runs that part, the first is the common one (ties go to the lowest
    run), so the second's completion holds the activations that the
    analysis of all runs gives for that pair.  Returns {request:
    activations} for each request where the two part."""
    with tempfile.TemporaryDirectory(prefix="ulpprof-ray-") as tmp:
        if g_bytes is not None:
            local = os.path.join(tmp, "run.h5")
            with open(local, "wb") as f:
                f.write(g_bytes)
        else:
            local = pg
        try:
            doc, _ = run_json(["streams", "--activations", "-f", "json", pc, local], ok=(0, 1))
        except SnapshotError as e:
            raise SnapshotError(str(e).replace(local, g_name or pg)) from None
    out = {}
    for q in doc["requests"]:
        for g in q["completions"]:
            if not g["common"] and g["runs"] == [1]:
                out[int(q["request"])] = g.get("activations")
    return out, 0 if g_bytes is None else len(g_bytes)


def _placed_runs(runs: Any) -> List[Tuple[str, List[str]]]:
    """[(node id, [run path...])] of streams()' argument."""
    if isinstance(runs, Mapping):
        placed = [(str(k), [os.fspath(p) for p in ([v] if isinstance(v, (str, bytes, os.PathLike))
                                                   else v)]) for k, v in runs.items()]
    else:
        lists = [[os.fspath(p) for p in ([v] if isinstance(v, (str, bytes, os.PathLike)) else v)]
                 for v in runs]
        nodes = _alive_nodes()
        if len(lists) > len(nodes):
            raise ValueError("ulpprof.ray.streams: runs names %d nodes' runs but the cluster has "
                             "%d alive nodes" % (len(lists), len(nodes)))
        placed = list(zip(nodes, lists))
    alive = set(_alive_nodes())
    for node, _ in placed:
        if node not in alive:
            raise ValueError("ulpprof.ray.streams: node %s is not an alive node of the cluster"
                             % node)
    if not any(paths for _, paths in placed):
        raise ValueError("ulpprof.ray.streams: runs names no run")
    return placed


def _replay_tokens(path: str, caps: List[Tuple[Any, ...]]) -> None:
    """A file holding only these captures (tokens and fed ids), written in
    their order through the capture API as a program writes them, with
    their name, dtype, role, positions and requests: what `ulpprof streams`
    groups."""
    import numpy as np

    from . import _lib
    s = _lib.Session(path, label="tokens")
    try:
        for name, dtype, role, rows, pos, req in caps:
            rows = np.ascontiguousarray(rows)
            st = s.capture(name, rows.ctypes.data, dtype, list(rows.shape), role=role,
                           positions=pos.tolist(),
                           requests=None if req is None else req.tolist(), row_rank=1)
            if st != 0:
                raise SnapshotError("ulpprof: cannot write the tokens of '%s' here: %s"
                                    % (path, _lib.status_str(st)))
    finally:
        st = s.close()
    if st != 0:
        raise SnapshotError("ulpprof: cannot write '%s': %s" % (path, _lib.status_str(st)))


def streams(runs: Any, address: Optional[str] = None, activations: bool = True,
            stats: Optional[Dict[str, int]] = None) -> Dict[str, Any]:
    """The `ulpprof streams [--activations] -f json` document of runs that
    sit on several Ray nodes.  `runs` maps a Ray node id to the runs on
    that node (a list of paths, or one path); each run is a snapshot or a
    directory of per-rank files (its first rank is read, as the program
    reads it).  A list of such lists, one per alive node in `ray.nodes()`
    order, also works.  The runs are numbered as `ulpprof streams DIR`
    numbers the runs of one directory they were gathered in: by their
    names (the last path component), byte order, a name on two nodes in
    the order of `runs`; `runs` in the result names each run's file as
    `NODE:PATH`.

    Each node reads its runs' token captures (16 bytes a generated token)
    and captures of fed token ids (a few bytes a fed position; by which
    the program knows a request across runs by its prompt), needing h5py
    there, and only those reach the driver, which writes them back through
    the capture API and groups them with the program.  With `activations`,
    each other completion's first run is compared with the common one's
    by row digests on the common one's node: a representative on another
    node moves there as its digest-only file (no tensor but the fed ids); a
    run captured with its tensors (mode "data" or "both") moves as its
    digest-only rendition, made on its own node by `ulpprof repair
    --digests` (the digests mode "digest" would have written).  Raises SnapshotError when a
    run cannot be used, ValueError on a bad argument.  `stats`, a dict,
    receives `runs`, `token_bytes` and `id_bytes` (what reached the
    driver: the tokens' and the fed ids' rows, each with its position and
    request), `pairs`, `pairs_across_nodes` and `bytes_moved` (the digest
    files moved between nodes, each representative's digest-only file or
    rendition)."""
    if not ray.is_initialized():
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    placed = _placed_runs(runs)
    got = _get([_on(node, _node_streams).remote(paths) for node, paths in placed if paths])
    per_node = iter(got)
    order = []  # (name, place in runs, node, given path, file read, token captures)
    for i, (node, paths) in enumerate(placed):
        if not paths:
            continue
        for given, (f, caps) in zip(paths, next(per_node)):
            name = os.path.basename(os.path.normpath(given))
            order.append((name.encode("utf-8", "surrogateescape"), i, node, given, f, caps))
    order.sort(key=lambda r: (r[0], r[1]))
    token_bytes = sum(_stream_bytes(r[5])[0] for r in order)
    id_bytes = sum(_stream_bytes(r[5])[1] for r in order)
    with tempfile.TemporaryDirectory(prefix="ulpprof-ray-streams-") as tmp:
        local = []
        for k, r in enumerate(order):
            local.append(os.path.join(tmp, "%08d.h5" % k))
            _replay_tokens(local[-1], r[5])
        try:
            doc, _ = run_json(["streams", "-f", "json"] + local, ok=(0, 1))
        except SnapshotError as e:
            msg = str(e)
            for p, r in zip(local, order):
                msg = msg.replace(p, "%s:%s" % (r[2], r[4]))
            raise SnapshotError(msg) from None
    doc["runs"] = ["%s:%s" % (r[2], r[4]) for r in order]
    pairs, across, moved = {}, 0, 0
    if activations:
        for q in doc["requests"]:
            common = next(g for g in q["completions"] if g["common"])["runs"][0]
            # The pair's report numbers the request as its first run, the common one, does.
            req = int(next((e["request"] for e in q.get("in_runs", ()) if e["run"] == common),
                           q["request"]))
            for g in q["completions"]:
                if not g["common"]:
                    pairs.setdefault((common, g["runs"][0]), []).append((req, g))
        jobs, moving = [], {}
        for c, g in pairs:
            nc, fc, ng, fg = order[c][2], order[c][4], order[g][2], order[g][4]
            if nc == ng:
                jobs.append(_on(nc, _parting_of).remote(fc, fg))
                continue
            if g not in moving:  # one move per representative, whichever pairs it serves
                moving[g] = _on(ng, _digest_file).remote(fg)
            jobs.append(_on(nc, _parting_of).remote(fc, fg, moving[g], "%s:%s" % (ng, fg)))
            across += 1
        done = _get(jobs)
        moved = sum(n for _, n in done)
        for (c, g), (parts, _) in zip(pairs, done):
            for req, grp in pairs[(c, g)]:
                grp["activations"] = parts.get(req)
    if stats is not None:
        stats.update(runs=len(order), token_bytes=token_bytes, id_bytes=id_bytes, pairs=len(pairs),
                     pairs_across_nodes=across, bytes_moved=moved)
    return doc

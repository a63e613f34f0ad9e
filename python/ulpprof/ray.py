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

Ray is an optional dependency: importing this module needs it.
"""
import hashlib
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from ._program import SnapshotError, UlpprofError, run_json

__all__ = ["diff"]

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
    receives `pairs_across_nodes` and `bytes_moved` (of B's files shipped
    to A's nodes)."""
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
    jobs, moved = [], 0
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
    reports = _get(jobs)
    if stats is not None:
        stats["pairs_across_nodes"] = moved
        stats["bytes_moved"] = sum(n for _, n in reports)
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

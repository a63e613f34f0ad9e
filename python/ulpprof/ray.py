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
a pair whose files are on two nodes moves B's file to A's node, for that
pair only.  The result is the document `ulpprof diff -f json DIR DIR`
prints on the same files gathered in one directory (format
"ulpprof-diff-ranks"), with each file named `NODE:PATH`.

Ray is an optional dependency: importing this module needs it.
"""
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


def _diff_pair(pa: str, pb: str, b_bytes: Optional[bytes] = None) -> Dict[str, Any]:
    """The report `ulpprof diff -f json DIR DIR` gives rank pair (pa, pb):
    run on two one-file directories (links to the files; B's file written
    from `b_bytes` when it was shipped from another node), so that the
    report is made as the directory diff makes it, and named by pa and pb."""
    with tempfile.TemporaryDirectory(prefix="ulpprof-ray-") as tmp:
        da, db = os.path.join(tmp, "a"), os.path.join(tmp, "b")
        os.mkdir(da)
        os.mkdir(db)
        os.symlink(os.path.abspath(pa), os.path.join(da, "rank.h5"))
        if b_bytes is None:
            os.symlink(os.path.abspath(pb), os.path.join(db, "rank.h5"))
        else:
            with open(os.path.join(db, "rank.h5"), "wb") as f:
                f.write(b_bytes)
        doc, _ = run_json(["diff", "-f", "json", da, db], ok=(0, 1))
    rep = doc["ranks"][0]["report"]
    for side, path in (("a", pa), ("b", pb)):
        if isinstance(rep.get(side), dict) and "path" in rep[side]:
            rep[side]["path"] = path
    return rep


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


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


def diff(a: Runs, b: Runs, address: Optional[str] = None) -> Dict[str, Any]:
    """The `ulpprof diff -f json` document of runs `a` and `b` (see the
    module's text).  Connects to the cluster at `address` (ray.init's
    meaning) unless Ray is already initialized.  Raises SnapshotError when a
    file cannot be used, ValueError on a bad argument."""
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
    jobs = []
    for r in common:
        (na, fa), (nb, fb) = ra[r], rb[r]
        if na == nb:
            jobs.append(_on(na, _diff_pair).remote(fa, fb))
        else:
            shipped = _on(nb, _read_bytes).remote(fb)
            jobs.append(_on(na, _diff_pair).remote(fa, fb, shipped))
    reports = _get(jobs)
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

"""`ulpprof.ray.diff` on a real Ray cluster of 3 nodes started here.

Two runs of 5 ranks each (per-rank files written by the C capture API, no
/env rank, so numbered by file name) are spread over three nodes, each node
told only its own directories (a custom resource names the node; the call
maps the node's id to them).  Ranks 0-3 of A and B sit on one node per
pair, except rank 3, whose A file is on node 1 and B file on node 2 (the
pair's B file moves, less the data of the captures A's file holds bit
for bit); rank 4 is in A only.  Checked:
- the report equals `ulpprof diff -f json` of the same files gathered in
  two local directories, key for key, the file names aside;
- against numpy, independently of ulpprof: which rank pairs are bitwise
  identical, the first capture that differs in each, and its largest ULP
  distance (hand-made perturbations of known size);
- a list of directories (one per node, in `ray.nodes()` order) gives the
  same report.
Exit 77 (skipped) only when Ray cannot be installed (.ci/pyenv could not
give an interpreter that imports it).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
import ray_cluster  # noqa: E402  (first: it may re-exec this test under the venv)
from ray_cluster import BUILD, ULPPROF, check  # noqa: E402

import capwriter  # noqa: E402
import numpy as np  # noqa: E402

import ulpprof.ray  # noqa: E402

LAYERS = 4
SHAPE = (6, 32)  # 6 token rows of 32 floats


def ulp_bump(x, k):
    """x (float32) moved k ULPs up, by its bits."""
    return (x.view(np.uint32) + np.uint32(k)).view(np.float32)


def tensors(rank, perturb):
    """Per layer the f32 tensor of a rank; perturb = (layer, ulps) bumps
    element [2, 5] of that layer and every later one (a divergence that
    propagates), by `ulps` ULPs."""
    rng = np.random.default_rng(100 + rank)
    out = []
    for layer in range(LAYERS):
        t = rng.standard_normal(SHAPE).astype(np.float32)
        if perturb and layer >= perturb[0]:
            t[2, 5] = ulp_bump(t[2:3, 5:6], perturb[1] + layer)[0, 0]
        out.append(t)
    return out


def write(path, ts):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    w = capwriter.Writer(path, label=os.path.basename(os.path.dirname(path)))
    pos = np.arange(SHAPE[0], dtype=np.int64)
    for layer, t in enumerate(ts):
        st = w.capture("layers.%d.out" % layer, t, "f32", positions=pos,
                       requests=np.zeros_like(pos), layer=layer)
        assert st == 0, st
    w.close()


def max_ulp(x, y):
    """Largest ULP distance between two f32 arrays, from their bits (finite, same sign)."""
    xi, yi = x.view(np.int32).astype(np.int64), y.view(np.int32).astype(np.int64)
    return int(np.abs(xi - yi).max())


def strip_paths(o):
    """A report with every file name left out (they differ between the two places)."""
    if isinstance(o, dict):
        return {k: strip_paths(v) for k, v in o.items()
                if k != "path" and not (k in ("a", "b") and isinstance(v, str))}
    if isinstance(o, list):
        return [strip_paths(v) for v in o]
    return o


def first_difference(x, y, where="report"):
    """Where two JSON values first differ (a path and both values), or None."""
    if isinstance(x, dict) and isinstance(y, dict):
        for k in sorted(set(x) | set(y)):
            d = first_difference(x.get(k), y.get(k), "%s.%s" % (where, k))
            if d:
                return d
        return None
    if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
        for i, (p, q) in enumerate(zip(x, y)):
            d = first_difference(p, q, "%s[%d]" % (where, i))
            if d:
                return d
        return None
    return None if x == y else "%s: %r vs %r" % (where, x, y)


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-ray-")
    try:
        # rank -> perturbation of B: (first layer, ulps); None = bitwise equal.
        perturb = {0: None, 1: (2, 3), 2: None, 3: (1, 1)}
        # rank -> (node of A's file, node of B's file)
        where = {0: (0, 0), 1: (0, 0), 2: (1, 1), 3: (1, 2), 4: (2, None)}
        a_ts = {r: tensors(r, None) for r in where}
        b_ts = {r: tensors(r, perturb[r]) for r in perturb}
        for r, (na, nb) in where.items():
            write(os.path.join(tmp, "node%d" % na, "A", "%d.h5" % r), a_ts[r])
            write(os.path.join(tmp, "gathered", "A", "%d.h5" % r), a_ts[r])
            if nb is not None:
                write(os.path.join(tmp, "node%d" % nb, "B", "%d.h5" % r), b_ts[r])
                write(os.path.join(tmp, "gathered", "B", "%d.h5" % r), b_ts[r])
        for n in range(3):  # every node holds a directory of each run
            for side in "AB":
                os.makedirs(os.path.join(tmp, "node%d" % n, side), exist_ok=True)
        # Node 2's B directory has rank 3 only; give node 1's B its rank 2 (above).

        local = subprocess.run([ULPPROF, "diff", "-f", "json", os.path.join(tmp, "gathered", "A"),
                                os.path.join(tmp, "gathered", "B")], capture_output=True,
                               text=True, timeout=600)
        check(local.returncode == 1, "local diff exit %d: %s" % (local.returncode, local.stderr))
        want = json.loads(local.stdout)

        with ray_cluster.started() as ids:
            on_cluster(tmp, ids, where, perturb, a_ts, b_ts, want)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ray_cluster.finish()


def on_cluster(tmp, ids, where, perturb, a_ts, b_ts, want):
    """The checks that need the cluster (ids: {n: node id})."""
    a = {ids[n]: os.path.join(tmp, "node%d" % n, "A") for n in range(3)}
    b = {ids[n]: os.path.join(tmp, "node%d" % n, "B") for n in range(3)}
    stats = {}
    got = ulpprof.ray.diff(a, b, stats=stats)
    # Rank 3's B file moved less its layer 0, which A holds bit for bit.  Its
    # divergence is introduced at layer 1 and carried into 2 and 3: the data of
    # all three moves, as numpy counts the layers whose bytes differ, since
    # the report gives each of them its ULP numbers (both tensors needed).
    b3 = os.path.join(tmp, "node2", "B", "3.h5")
    differ = sum(not np.array_equal(x.view(np.uint32), y.view(np.uint32))
                 for x, y in zip(a_ts[3], b_ts[3]))
    check(differ == 3, "numpy: rank 3 differs in %d layers" % differ)
    check(stats == {"pairs_across_nodes": 1, "captures_moved": differ,
                    "bytes_moved": os.path.getsize(b3) - b_ts[3][0].nbytes},
          "moved %r; file %d bytes, layer 0 %d" % (stats, os.path.getsize(b3),
                                                   b_ts[3][0].nbytes))

    # Same document as the local diff of the gathered files, paths aside.
    check(sorted(got) == sorted(want), "keys %r vs %r" % (sorted(got), sorted(want)))
    check(strip_paths(got) == strip_paths(want), "ray report differs from the local one: %s"
          % first_difference(strip_paths(got), strip_paths(want)))
    for x in got["ranks"]:
        na, nb = where[x["rank"]]
        check(x["a"] == "%s:%s" % (ids[na], os.path.join(tmp, "node%d" % na, "A",
                                                          "%d.h5" % x["rank"])),
              "rank %d a %r" % (x["rank"], x["a"]))
        check(x["b"].endswith(os.path.join("node%d" % nb, "B", "%d.h5" % x["rank"])),
              "rank %d b %r" % (x["rank"], x["b"]))

    # The rebuilt file is B's, byte for byte.
    a3 = os.path.join(tmp, "node1", "A", "3.h5")
    ea, eb = ulpprof.ray._extents(a3), ulpprof.ray._extents(b3)
    holes = sorted((eb[k][0], eb[k][1], ea[k][0]) for k in eb if ea[k][1:] == eb[k][1:])
    check([h[1] for h in holes] == [b_ts[3][0].nbytes], "holes %r" % holes)
    ulpprof.ray._unpack(ulpprof.ray._pack(b3, [h[:2] for h in holes]), holes, a3,
                        os.path.join(tmp, "rebuilt.h5"))
    with open(b3, "rb") as f, open(os.path.join(tmp, "rebuilt.h5"), "rb") as g:
        check(f.read() == g.read(), "the rebuilt B file is not B's")

    # Against numpy.
    check([x["rank"] for x in got["ranks"]] == [0, 1, 2, 3], "ranks compared %r"
          % [x["rank"] for x in got["ranks"]])
    check(got["ranks_only_a"] == [4] and got["ranks_only_b"] == [],
          "only %r %r" % (got["ranks_only_a"], got["ranks_only_b"]))
    check(got["identical"] is False, "identical %r" % got["identical"])
    for x in got["ranks"]:
        r, rep = x["rank"], x["report"]
        same = [np.array_equal(p.view(np.uint32), q.view(np.uint32))
                for p, q in zip(a_ts[r], b_ts[r])]
        check(rep["identical"] == all(same), "rank %d identical %r" % (r, rep["identical"]))
        if all(same):
            continue
        first = same.index(False)
        fd = rep.get("first_divergence") or {}
        check(fd.get("name") == "layers.%d.out" % first,
              "rank %d first divergence %r, numpy: layers.%d.out" % (r, fd, first))
        rows = {c["name"]: c for c in rep["rows"]}
        for layer in range(LAYERS):
            u = max_ulp(a_ts[r][layer], b_ts[r][layer])
            c = rows.get("layers.%d.out" % layer, {})
            check(c.get("max_ulp") == u, "rank %d layer %d max_ulp %r, numpy %d"
                  % (r, layer, c.get("max_ulp"), u))

    # A list of directories, one per node in ray.nodes() order.
    order = ray_cluster.alive_order()
    got2 = ulpprof.ray.diff([a[i] for i in order], [b[i] for i in order])
    check(strip_paths(got2) == strip_paths(got), "the list form gives another report")
    check([x["a"] for x in got2["ranks"]] == [x["a"] for x in got["ranks"]],
          "list form names %r" % [x["a"] for x in got2["ranks"]])

    # Digest-only runs (/env ranks, names in reverse order), the same way.
    from ulpprof import _lib
    os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture",
                                                         "libulpprof_capture.so")
    dg = {r: (n, n if r != 1 else 2) for r, n in ((0, 0), (1, 1), (2, 2))}
    for r, (na, nb) in dg.items():
        os.environ["RANK"] = str(r)
        for side, node, ts in (("DA", na, a_ts[r]), ("DB", nb, b_ts[r])):
            for d in (os.path.join(tmp, "node%d" % node, side),
                      os.path.join(tmp, "gathered", side)):
                os.makedirs(d, exist_ok=True)
                s = _lib.Session(os.path.join(d, "f%d.h5" % (9 - r)), label=side)
                s.set_capture_mode("digest")
                for layer, t in enumerate(ts):
                    s.capture("layers.%d.out" % layer, t.ctypes.data, "f32", t.shape,
                              positions=list(range(SHAPE[0])), requests=[0] * SHAPE[0],
                              row_rank=1)
                s.close()
    os.environ.pop("RANK")
    for n in range(3):
        for side in ("DA", "DB"):
            os.makedirs(os.path.join(tmp, "node%d" % n, side), exist_ok=True)
    local = subprocess.run([ULPPROF, "diff", "-f", "json", os.path.join(tmp, "gathered", "DA"),
                            os.path.join(tmp, "gathered", "DB")], capture_output=True,
                           text=True, timeout=600)
    check(local.returncode == 1, "digest local diff exit %d: %s"
          % (local.returncode, local.stderr))
    want_d = json.loads(local.stdout) if local.returncode == 1 else {}
    got_d = ulpprof.ray.diff({ids[n]: os.path.join(tmp, "node%d" % n, "DA") for n in range(3)},
                             {ids[n]: os.path.join(tmp, "node%d" % n, "DB") for n in range(3)})
    check(strip_paths(got_d) == strip_paths(want_d), "digest ray report differs: %s"
          % first_difference(strip_paths(got_d), strip_paths(want_d)))
    fd = {x["rank"]: x["report"].get("first_divergence") for x in got_d["ranks"]}
    # numpy: rank 1 parts at layer 2, row 2 (element [2, 5]); ranks 0 and 2 are identical.
    check(fd == {0: None, 1: {"capture": "layers.2.out", "request": 0, "position": 2},
                 2: None}, "digest first divergences %r" % fd)

    # Bad input: one clear error, no report.
    try:
        ulpprof.ray.diff({ids[0]: os.path.join(tmp, "nowhere")}, b)
        check(False, "a missing directory gave a report")
    except ulpprof.SnapshotError as e:
        check("nowhere" in str(e) and "Traceback" not in str(e), "missing dir: %s" % e)
    try:
        ulpprof.ray.diff({"ab" * 28: a[ids[0]]}, b)
        check(False, "an unknown node gave a report")
    except ValueError as e:
        check("not an alive node" in str(e), "unknown node: %s" % e)


if __name__ == "__main__":
    main()

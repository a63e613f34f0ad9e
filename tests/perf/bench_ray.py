"""The Ray path (ulpprof.ray.diff over the nodes of a local cluster) against
the local `ulpprof diff -f json DIR DIR` of the same files gathered in one
place.  A benchmark, not a test: it prints times and checks only that both
give the same report (file names aside).

    bench_ray.py [BUILD_DIR] [--nodes 3] [--ranks 6] [--layers 16] [--rows 64]
                 [--width 1024] [--cross 1] [--rounds 3]

Ranks are spread round robin over the nodes; the last `--cross` ranks of B
sit on the next node over, so their B files move.  Run it with an
interpreter that imports ray (bash .ci/pyenv prints one).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.environ.get("ULPPROF_BUILD_DIR", "build"))
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--ranks", type=int, default=6)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--cross", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    o = ap.parse_args()
    build = os.path.abspath(o.build)
    os.environ["ULPPROF_BUILD_DIR"] = build
    os.environ["ULPPROF_PROGRAM"] = os.path.join(build, "programs", "ulpprof")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(SRC, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(
            os.pathsep) if p])
    sys.path[:0] = [os.path.join(SRC, "python"), os.path.join(SRC, "tests", "python")]
    import json

    import numpy as np
    import ray
    from ray.cluster_utils import Cluster

    import capwriter
    import ulpprof.ray
    from test_ray_diff import strip_paths

    tmp = tempfile.mkdtemp(prefix="ulpprof-bench-ray-")
    cluster = None
    try:
        pos = np.arange(o.rows, dtype=np.int64)
        size = 0
        for r in range(o.ranks):
            rng = np.random.default_rng(r)
            ts = [rng.standard_normal((o.rows, o.width)).astype(np.float32)
                  for _ in range(o.layers)]
            tb = [t.copy() for t in ts]
            for t in tb[o.layers // 2:]:  # B parts halfway, by one ULP at one element
                t.view(np.uint32)[1, 3] += 1
            na = r % o.nodes
            nb = (na + 1) % o.nodes if r >= o.ranks - o.cross else na
            for side, node, tensors in (("A", na, ts), ("B", nb, tb)):
                for d in (os.path.join(tmp, "node%d" % node, side), os.path.join(tmp, "all", side)):
                    os.makedirs(d, exist_ok=True)
                    w = capwriter.Writer(os.path.join(d, "%d.h5" % r), label=side)
                    for i, t in enumerate(tensors):
                        w.capture("layers.%d.out" % i, t, "f32", positions=pos,
                                  requests=np.zeros_like(pos), layer=i)
                    w.close()
            size += os.path.getsize(os.path.join(tmp, "all", "A", "%d.h5" % r))
        for n in range(o.nodes):
            for side in "AB":
                os.makedirs(os.path.join(tmp, "node%d" % n, side), exist_ok=True)
        print("%d ranks x %d layers of %dx%d f32 (%.1f MiB a run), %d nodes, %d pair(s) across "
              "nodes" % (o.ranks, o.layers, o.rows, o.width, size / 2**20, o.nodes, o.cross))

        local_t, want = [], None
        for _ in range(o.rounds):
            t0 = time.perf_counter()
            p = subprocess.run([os.environ["ULPPROF_PROGRAM"], "diff", "-f", "json",
                                os.path.join(tmp, "all", "A"), os.path.join(tmp, "all", "B")],
                               capture_output=True, text=True)
            local_t.append(time.perf_counter() - t0)
            want = json.loads(p.stdout)

        t0 = time.perf_counter()
        small = {"num_cpus": 1, "object_store_memory": 80 << 20, "include_dashboard": False}
        cluster = Cluster(initialize_head=True, head_node_args=dict(small, resources={"n0": 1}))
        for n in range(1, o.nodes):
            cluster.add_node(**dict(small, resources={"n%d" % n: 1}))
        cluster.wait_for_nodes(timeout=600)
        ray.init(address=cluster.address, log_to_driver=False)
        start_t = time.perf_counter() - t0
        ids = {n: node["NodeID"] for node in ray.nodes() for n in range(o.nodes)
               if node.get("Alive") and node["Resources"].get("n%d" % n)}
        a = {ids[n]: os.path.join(tmp, "node%d" % n, "A") for n in range(o.nodes)}
        b = {ids[n]: os.path.join(tmp, "node%d" % n, "B") for n in range(o.nodes)}
        ray_t, got, stats = [], None, {}
        for _ in range(o.rounds):
            t0 = time.perf_counter()
            got = ulpprof.ray.diff(a, b, stats=stats)
            ray_t.append(time.perf_counter() - t0)
        same = strip_paths(got) == strip_paths(want)
        print("local ulpprof diff DIR DIR: best %.3f s of %d" % (min(local_t), o.rounds))
        print("ulpprof.ray.diff:           best %.3f s of %d (cluster start %.1f s, not counted)"
              % (min(ray_t), o.rounds, start_t))
        print("moved between nodes: %.2f MiB for %d pair(s) (%.2f MiB a B file)"
              % (stats["bytes_moved"] / 2**20, stats["pairs_across_nodes"], size / o.ranks / 2**20))
        print("reports equal (file names aside): %s" % same)
        return 0 if same else 1
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

"""The Ray path (ulpprof.ray.diff over the nodes of a local cluster) against
the local `ulpprof diff -f json DIR DIR` of the same files gathered in one
place.  A benchmark, not a test: it prints times and checks only that both
give the same report (file names aside).

    bench_ray.py [BUILD_DIR] [--nodes 3] [--ranks 6] [--layers 16] [--rows 64]
                 [--width 1024] [--cross 1] [--rounds 3] [--runs 60] [--steps 32]

Ranks are spread round robin over the nodes; the last `--cross` ranks of B
sit on the next node over, so their B files move.  Then `--runs` digest-mode
generations (`--layers` captures of `--rows` positions, `--steps` produced
tokens; every fifth run parts at a step of its own) spread round robin over
the nodes: ulpprof.ray.streams against the local `ulpprof streams
--activations -f json DIR` of the same runs.  Run it with an
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
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--steps", type=int, default=32)
    o = ap.parse_args()
    build = os.path.abspath(o.build)
    os.environ["ULPPROF_BUILD_DIR"] = build
    os.environ["ULPPROF_PROGRAM"] = os.path.join(build, "programs", "ulpprof")
    os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(build, "capture", "libulpprof_capture.so")
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
        print("ray / local: %.2fx" % (min(ray_t) / min(local_t)))
        print("moved between nodes: %.2f MiB for %d pair(s) (%.2f MiB a B file)"
              % (stats["bytes_moved"] / 2**20, stats["pairs_across_nodes"], size / o.ranks / 2**20))
        print("reports equal (file names aside): %s" % same)
        same_s = bench_streams(o, tmp, ids)
        return 0 if same and same_s else 1
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def bench_streams(o, tmp, ids):
    """ulpprof.ray.streams against `ulpprof streams --activations -f json DIR`."""
    import json

    import numpy as np

    import ulpprof.ray
    from ulpprof import _lib

    rows = o.rows
    prompt = rows - o.steps if rows > o.steps else 1
    base = np.random.default_rng(0).standard_normal((o.layers, rows, o.width)).astype(np.float32)
    size = 0
    for i in range(o.runs):
        part = (i // 5) % o.steps if i % 5 == 4 else None  # every fifth run parts
        toks = [[100 + k + (1 if part is not None and k >= part else 0), 0.5]
                for k in range(o.steps)]
        if part is not None:
            toks[part][1] = 1e-3
        for d in (os.path.join(tmp, "s%d" % (i % o.nodes)), os.path.join(tmp, "sall")):
            os.makedirs(d, exist_ok=True)
            s = _lib.Session(os.path.join(d, "run%05d.h5" % i), label="run%d" % i)
            s.set_capture_mode("digest")
            pos = list(range(rows))
            for layer in range(o.layers):
                t = base[layer].copy()
                if part is not None and layer >= o.layers // 2:
                    t[min(prompt - 1 + part, rows - 1):].view(np.uint32)[:, 0] += 1
                s.capture("layers.%d.out" % layer, t.ctypes.data, "f32", t.shape, layer=layer,
                          positions=pos, requests=[0] * rows, row_rank=1)
            a = np.array(toks, np.float64)
            s.capture("tokens", a.ctypes.data, "f64", a.shape,
                      positions=[prompt - 1 + k for k in range(o.steps)],
                      requests=[0] * o.steps, row_rank=1)
            s.close()
        size += os.path.getsize(os.path.join(tmp, "sall", "run%05d.h5" % i))
    print("\nstreams: %d digest-mode runs (%d captures of %dx%d f32 digested, %d steps; "
          "%.1f KiB a run), %d nodes" % (o.runs, o.layers, rows, o.width, o.steps,
                                         size / o.runs / 1024, o.nodes))
    local_t, want = [], None
    for _ in range(o.rounds):
        t0 = time.perf_counter()
        p = subprocess.run([os.environ["ULPPROF_PROGRAM"], "streams", "--activations", "-f",
                            "json", os.path.join(tmp, "sall")], capture_output=True, text=True)
        local_t.append(time.perf_counter() - t0)
        want = json.loads(p.stdout)
    runs = {ids[n]: sorted(os.path.join(tmp, "s%d" % n, f)
                           for f in os.listdir(os.path.join(tmp, "s%d" % n)))
            for n in range(o.nodes) if os.path.isdir(os.path.join(tmp, "s%d" % n))}
    ray_t, got, stats = [], None, {}
    for _ in range(o.rounds):
        t0 = time.perf_counter()
        got = ulpprof.ray.streams(runs, stats=stats)
        ray_t.append(time.perf_counter() - t0)
    same = {k: v for k, v in got.items() if k != "runs"} == \
        {k: v for k, v in want.items() if k != "runs"}
    print("local ulpprof streams --activations DIR: best %.3f s of %d"
          % (min(local_t), o.rounds))
    print("ulpprof.ray.streams:                     best %.3f s of %d"
          % (min(ray_t), o.rounds))
    print("ray / local: %.2fx" % (min(ray_t) / min(local_t)))
    print("to the driver: %.1f KiB of tokens; %d pair(s) compared, %d across nodes, %.1f KiB of "
          "digest files moved" % (stats["token_bytes"] / 1024, stats["pairs"],
                                  stats["pairs_across_nodes"], stats["bytes_moved"] / 1024))
    print("reports equal (run names aside): %s" % same)
    return same


if __name__ == "__main__":
    sys.exit(main())

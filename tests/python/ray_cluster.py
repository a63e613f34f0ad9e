"""What the tests of ulpprof.ray share: the interpreter that has Ray (or
exit 77, ctest's skip, when .ci/pyenv cannot give one), the environment
the Ray workers inherit (the program, the capture library, this checkout's
Python package), a real cluster of three nodes started on this machine,
and the failure list with its exit.

    import ray_cluster                      # first: it may re-exec the test
    from ray_cluster import check
    with ray_cluster.started() as ids:      # {0: node id, 1: ..., 2: ...}
        ...
    ray_cluster.finish()                    # "ok", or the failures and exit 1

Node n of the cluster has the custom resource `n<n>` (one CPU, a small
object store, no dashboard), by which `ids` names it.
"""
import contextlib
import os
import sys

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.path.abspath(os.environ.get("ULPPROF_BUILD_DIR", os.path.join(SRC, "build")))
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("ray", skip=True)
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

sys.path.insert(0, os.path.join(SRC, "python"))
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
# The Ray workers inherit these from the nodes this process starts.
os.environ["ULPPROF_BUILD_DIR"] = BUILD
os.environ["ULPPROF_PROGRAM"] = ULPPROF
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.join(SRC, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                     if p])

FAILS = []


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


@contextlib.contextmanager
def started(nodes=3):
    """A Ray cluster of `nodes` nodes on this machine, this process its
    driver; yields {n: node id}.  Shut down (driver and nodes) on the way
    out, whatever happened inside."""
    cluster = None
    try:
        small = {"num_cpus": 1, "object_store_memory": 80 << 20, "include_dashboard": False}
        cluster = Cluster(initialize_head=True, head_node_args=dict(small, resources={"n0": 1}))
        for n in range(1, nodes):
            cluster.add_node(**dict(small, resources={"n%d" % n: 1}))
        cluster.wait_for_nodes(timeout=600)
        ray.init(address=cluster.address, log_to_driver=False)
        ids = {}
        for node in ray.nodes():
            for n in range(nodes):
                if node.get("Alive") and node["Resources"].get("n%d" % n):
                    ids[n] = node["NodeID"]
        check(sorted(ids) == list(range(nodes)), "cluster nodes %r" % ids)
        yield ids
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()


def alive_order():
    """The alive nodes' ids in `ray.nodes()` order (the list form's order)."""
    return [n["NodeID"] for n in ray.nodes() if n.get("Alive")]


def finish():
    """Exit 1 with the count when a check failed, else print "ok"."""
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
    print("ok")

"""`ulpprof.ray.streams` on a real Ray cluster of 3 nodes started here.

Twelve digest-mode runs of one small workload (written through the C
capture API: three activation captures with positions, then the produced
`tokens`), split 4/4/4 over three nodes, each node told only its own runs;
some runs (3, 7, 11) are directories of two per-rank files (/env rank 0 is the second
name, so the program's first rank is not the first name).  The runs part
by construction: request 0 has a common completion (6 runs) and three
others (parting at steps 3 and 5, and one that ends early); request 1 has
one run that parts at step 1.  Their representatives sit on the common
one's node and on others (their digest files move).  Checked:
- the report equals `ulpprof streams --activations -f json` of the same
  runs gathered in one local directory, field for field, the run names
  aside (those are `NODE:PATH` of the file each node read);
- against numpy, independently of ulpprof: the groups, their parting steps,
  tokens and margins (from the arrays written), and where each group's
  first run's activations first part from the common one's (the rows
  compared bit for bit, in write order) with the --select spec;
- without activations, the same as `ulpprof streams -f json`;
- a run that holds tensors is refused when its digests would have to move,
  a missing run names its file.
Exit 77 (skipped) only when Ray cannot be installed.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.path.abspath(os.environ.get("ULPPROF_BUILD_DIR", os.path.join(SRC, "build")))


def need_ray():
    try:
        import ray  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("ULPPROF_PYENV_REEXEC"):
        print("SKIP: Ray is not importable in %s (.ci/pyenv could not install it)"
              % sys.executable)
        sys.exit(77)
    py = subprocess.run(["bash", os.path.join(SRC, ".ci", "pyenv")], capture_output=True,
                        text=True)
    exe = py.stdout.strip()
    if py.returncode != 0 or not exe:
        print("SKIP: .ci/pyenv made no interpreter, so no Ray: %s" % py.stderr.strip()[-300:])
        sys.exit(77)
    os.environ["ULPPROF_PYENV_REEXEC"] = "1"
    os.execv(exe, [exe] + sys.argv)


need_ray()
import numpy as np  # noqa: E402
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

sys.path.insert(0, os.path.join(SRC, "python"))
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
# The Ray workers inherit these from the nodes this process starts.
os.environ["ULPPROF_PROGRAM"] = ULPPROF
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [os.path.join(SRC, "python")] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                     if p])
import ulpprof  # noqa: E402
import ulpprof.ray  # noqa: E402
from ulpprof import _lib  # noqa: E402

FAILS = []
RUNS = 12
PROMPT = 4  # prompt positions 0-3; step k's logits sit at position 3 + k
STEPS = 8
POS = PROMPT + STEPS  # activation rows: positions 0..11 of each request
WIDTH = 8
LAYERS = 3
NAMES = ["layers.%d.out" % i for i in range(LAYERS)] + ["tokens"]  # write order

# request 0: run -> (group, parting step); request 1: one run parts at step 1.
GROUP0 = {0: "A", 1: "A", 4: "A", 6: "A", 8: "A", 10: "A", 2: "B", 5: "B", 9: "B", 3: "C",
          7: "C", 11: "D"}
PART0 = {"B": 3, "C": 5, "D": 6}
# Activation perturbations (request, layer, positions) of each group's runs.
BUMPS = {"B": [(0, 2, [5, 6, 7]), (0, 1, [6, 7])], "C": [(0, 0, [7])], "D": [],
         "E": [(1, 0, [4, 5])]}


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


def node_of(i):
    return i % 3


def is_dir_run(i):
    return i % 4 == 3


def run_name(i):
    return "run%02d" % i + ("" if is_dir_run(i) else ".h5")


def tokens_of(i, request):
    """(tokens, margins) of run i's completion of `request`."""
    base = [100 + 7 * k + request for k in range(STEPS)]
    marg = [0.5 + 0.125 * k for k in range(STEPS)]
    if request == 0:
        g = GROUP0[i]
        if g == "D":
            return base[:PART0["D"]], marg[:PART0["D"]]
        if g in PART0:
            k = PART0[g]
            base[k:] = [t + (1 if g == "B" else 2) for t in base[k:]]
            marg[k] = 1.0 / 1024
    elif i == 7:
        base[1:] = [t + 3 for t in base[1:]]
        marg[1] = 1.0 / 512
    return base, marg


def activations_of(i):
    """{name: [request, position, width] f32} of run i, before the tokens."""
    rng = np.random.default_rng(7)
    acts = {}
    for layer in range(LAYERS):
        acts[NAMES[layer]] = rng.standard_normal((2, POS, WIDTH)).astype(np.float32)
    groups = [GROUP0.get(i, "A")] + (["E"] if i == 7 else [])
    for g in groups:
        for req, layer, positions in BUMPS.get(g, []):
            for p in positions:
                acts[NAMES[layer]][req, p].view(np.uint32)[0] += 1
    return acts


def write_file(path, i, rank, tokens_too=True, mode="digest"):
    os.environ["RANK"] = str(rank)
    s = _lib.Session(path, label="run%d" % i)
    s.set_capture_mode(mode)
    acts = activations_of(i)
    pos = list(range(POS)) * 2
    req = [0] * POS + [1] * POS
    for layer in range(LAYERS):
        t = np.ascontiguousarray(acts[NAMES[layer]].reshape(2 * POS, WIDTH))
        st = s.capture(NAMES[layer], t.ctypes.data, "f32", t.shape, layer=layer, positions=pos,
                       requests=req, row_rank=1)
        assert st == 0, st
    if tokens_too:
        rows, tp, tr = [], [], []
        for r in (0, 1):
            tk, mg = tokens_of(i, r)
            for k, (t, m) in enumerate(zip(tk, mg)):
                rows.append((t, m))
                tp.append(PROMPT - 1 + k)
                tr.append(r)
        a = np.array(rows, dtype=np.float64)
        st = s.capture("tokens", a.ctypes.data, "f64", a.shape, positions=tp, requests=tr,
                       row_rank=1)
        assert st == 0, st
    assert s.close() == 0
    os.environ.pop("RANK")


def write_run(base, i):
    """Run i under directory `base`: one file, or a directory of two ranks
    whose rank 0 (by /env) is the second name and rank 1 has no tokens."""
    os.makedirs(base, exist_ok=True)
    if not is_dir_run(i):
        write_file(os.path.join(base, run_name(i)), i, 0)
        return os.path.join(base, run_name(i))
    d = os.path.join(base, run_name(i))
    os.makedirs(d, exist_ok=True)
    write_file(os.path.join(d, "a.h5"), 100 + i, 1, tokens_too=False)
    write_file(os.path.join(d, "b.h5"), i, 0)
    return d


def read_of(tmp, i):
    """The file of run i that its node reads: the run, or its directory's rank 0."""
    f = os.path.join(tmp, "node%d" % node_of(i), run_name(i))
    return os.path.join(f, "b.h5") if is_dir_run(i) else f


def expected_groups(request):
    """numpy/hand: the completions of `request` as ulpprof should give them."""
    gens = [tokens_of(i, request) for i in range(RUNS)]
    by = collections.OrderedDict()
    for i, (t, _) in enumerate(gens):
        by.setdefault(tuple(t), []).append(i)
    groups = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    common, crun = list(groups[0][0]), groups[0][1][0]
    out = []
    for toks, runs in groups:
        toks = list(toks)
        k = 0
        while k < min(len(toks), len(common)) and toks[k] == common[k]:
            k += 1
        m, mc = gens[runs[0]][1], gens[crun][1]
        out.append({"runs": runs, "tokens": toks, "common": runs[0] == crun,
                    "part": k, "token": toks[k] if k < len(toks) else None,
                    "token_common": common[k] if k < len(common) else None,
                    "margin": m[k] if k < len(m) else None,
                    "margin_common": mc[k] if k < len(mc) else None,
                    "activations": expected_parting(crun, runs[0], request, PROMPT - 1 + k)})
    return out


def rows_of(i):
    """{name: {(request, position): row bytes}} of run i as written."""
    acts = activations_of(i)
    out = {}
    for name in NAMES[:LAYERS]:
        out[name] = {(r, p): acts[name][r, p].tobytes() for r in (0, 1) for p in range(POS)}
    out["tokens"] = {}
    for r in (0, 1):
        tk, mg = tokens_of(i, r)
        for k, (t, m) in enumerate(zip(tk, mg)):
            out["tokens"][(r, PROMPT - 1 + k)] = np.array([t, m], np.float64).tobytes()
    return out


def expected_parting(c, g, request, last_fed):
    """Where run g's rows of `request` first differ from run c's: the least
    position where any capture differs, the first capture in write order
    there, and that capture's differing positions of the request, up to
    `last_fed`, the position whose logits emitted the parting token (after
    it the two runs were fed different tokens)."""
    a, b = rows_of(c), rows_of(g)
    best = None
    for name in NAMES:
        diff = sorted(p for (r, p), v in a[name].items()
                      if r == request and p <= last_fed and (r, p) in b[name] and
                      b[name][(r, p)] != v)
        if diff and (best is None or diff[0] < best[1]):
            best = (name, diff[0], diff[-1])
    if best is None:
        return None
    name, first, last = best
    return {"capture": name, "layer": NAMES.index(name) if name != "tokens" else None,
            "request": request, "position": first, "last_position": last,
            "select": "%s@%d:%d-%d" % (name, request, first, last),
            "request_common": request, "select_common": "%s@%d:%d-%d" % (name, request, first, last)}


def compare_numpy(doc, what):
    check(len(doc["runs"]) == RUNS, "%s: %d runs" % (what, len(doc["runs"])))
    for q in doc["requests"]:
        want = expected_groups(q["request"])
        got = q["completions"]
        check(len(got) == len(want), "%s: request %d: %d completions, numpy %d"
              % (what, q["request"], len(got), len(want)))
        hist = collections.Counter()
        for g, w in zip(got, want):
            tag = "%s: request %d, runs %s" % (what, q["request"], w["runs"])
            check(g["runs"] == w["runs"] and g["count"] == len(w["runs"]),
                  "%s: runs %s" % (tag, g["runs"]))
            check(g["tokens"] == w["tokens"], "%s: tokens" % tag)
            check(g["common"] == w["common"], "%s: common %r" % (tag, g["common"]))
            if w["common"]:
                continue
            hist[w["part"]] += len(w["runs"])
            for k in ("token", "token_common", "margin", "margin_common"):
                check(g[k] == w[k], "%s: %s %r, numpy %r" % (tag, k, g[k], w[k]))
            check(g["part_step"] == w["part"], "%s: part_step %r, numpy %r"
                  % (tag, g["part_step"], w["part"]))
            check(g.get("activations") == w["activations"], "%s: activations %r, numpy %r"
                  % (tag, g.get("activations"), w["activations"]))
        check(q["parting_steps"] == [{"step": s, "runs": n} for s, n in sorted(hist.items())],
              "%s: request %d parting steps %r" % (what, q["request"], q["parting_steps"]))


def without_runs(doc):
    return {k: v for k, v in doc.items() if k != "runs"}


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-ray-streams-")
    cluster = None
    try:
        gathered = os.path.join(tmp, "gathered")
        os.makedirs(gathered)
        placed = {n: [] for n in range(3)}
        for i in range(RUNS):
            write_run(gathered, i)
            placed[node_of(i)].append(write_run(os.path.join(tmp, "node%d" % node_of(i)), i))
        check([len(v) for v in placed.values()] == [4, 4, 4], "split %r" % placed)
        # A run that holds tensors, for the refusal below.
        full = os.path.join(tmp, "full")
        os.makedirs(full)
        write_file(os.path.join(full, "run99.h5"), 3, 0, mode="data")  # run 3, with tensors

        local = subprocess.run([ULPPROF, "streams", "--activations", "-f", "json", gathered],
                               capture_output=True, text=True, timeout=300)
        check(local.returncode == 1, "local streams exit %d: %s"
              % (local.returncode, local.stderr))
        want = json.loads(local.stdout)
        plain = subprocess.run([ULPPROF, "streams", "-f", "json", gathered],
                               capture_output=True, text=True, timeout=300)
        want_plain = json.loads(plain.stdout)
        compare_numpy(want, "local")  # the expectations themselves hold

        small = {"num_cpus": 1, "object_store_memory": 80 << 20, "include_dashboard": False}
        cluster = Cluster(initialize_head=True, head_node_args=dict(small, resources={"n0": 1}))
        for n in (1, 2):
            cluster.add_node(**dict(small, resources={"n%d" % n: 1}))
        cluster.wait_for_nodes(timeout=600)
        ray.init(address=cluster.address, log_to_driver=False)
        ids = {}
        for node in ray.nodes():
            for n in range(3):
                if node.get("Alive") and node["Resources"].get("n%d" % n):
                    ids[n] = node["NodeID"]
        check(sorted(ids) == [0, 1, 2], "cluster nodes %r" % ids)

        runs = {ids[n]: placed[n] for n in range(3)}
        stats = {}
        got = ulpprof.ray.streams(runs, stats=stats)
        check(without_runs(got) == without_runs(want), "ray report differs from the local one:\n"
              "%s\n%s" % (json.dumps(without_runs(got))[:2000],
                          json.dumps(without_runs(want))[:2000]))
        compare_numpy(got, "ray")
        # Each run named by its node and the file that node read (rank 0 of a directory).
        for i, name in enumerate(got["runs"]):
            check(name == "%s:%s" % (ids[node_of(i)], read_of(tmp, i)), "run %d named %r"
                  % (i, name))
        # Pairs: (0, 2) B, (0, 3) C, (0, 11) D, (0, 7) E; 2, 11 and 7 sit on other nodes.
        check(stats["pairs"] == 4 and stats["pairs_across_nodes"] == 3,
              "pairs %r" % stats)
        sizes = sum(os.path.getsize(read_of(tmp, i)) for i in (2, 7, 11))
        check(stats["bytes_moved"] == sizes, "moved %r, the three digest files %d"
              % (stats, sizes))
        # What reached the driver: 32 bytes a generated token (token, margin, position, request).
        check(stats["token_bytes"] == sum(32 * (len(tokens_of(i, 0)[0]) + len(tokens_of(i, 1)[0]))
                                          for i in range(RUNS)), "token bytes %r" % stats)

        # Without activations: `ulpprof streams -f json`.
        got_plain = ulpprof.ray.streams(runs, activations=False)
        check(without_runs(got_plain) == without_runs(want_plain),
              "ray report without activations differs from the local one")

        # A list, one entry per node in ray.nodes() order.
        order = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        got_list = ulpprof.ray.streams([runs[i] for i in order])
        check(got_list == got, "the list form gives another report")

        # Bad input: one clear error each.
        bad = {ids[0]: placed[0], ids[1]: placed[1] + [os.path.join(full, "run99.h5")]}
        try:
            # Run 3's tokens on node 1, named to come before run03: it heads completion C,
            # whose digests would move to node 0, the common run's.
            os.rename(os.path.join(full, "run99.h5"), os.path.join(full, "run00a.h5"))
            bad[ids[1]][-1] = os.path.join(full, "run00a.h5")
            ulpprof.ray.streams(bad)
            check(False, "a run with tensors moved")
        except ulpprof.SnapshotError as e:
            check("holds captured tensors" in str(e) and "run00a.h5" in str(e),
                  "tensors: %s" % e)
        try:
            ulpprof.ray.streams({ids[2]: [os.path.join(tmp, "nowhere.h5")]})
            check(False, "a missing run gave a report")
        except ulpprof.SnapshotError as e:
            check("nowhere.h5" in str(e) and "Traceback" not in str(e), "missing: %s" % e)
        try:
            ulpprof.ray.streams({"ab" * 28: placed[0]})
            check(False, "an unknown node gave a report")
        except ValueError as e:
            check("not an alive node" in str(e), "unknown node: %s" % e)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

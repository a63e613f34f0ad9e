"""The digests-first flow over many greedy generations, in one command.

64 greedy generations of one prompt (request 0, batch row 0) by a small
random HF Llama on CPU, each batched with 0-7 other random prompts (left
padded), captured with ulpprof.torch.capture(mode="digest", tokens=True).
OPENBLAS_CORETYPE=Haswell before torch loads, and lm_head row 7 made a near
tie with row 39, a token the model emits (each element one ULP away, up or
down), so that the batch-size-dependent rounding of the GEMMs decides some
steps: nothing is injected, the runs part through real batching alone.
Then:

  ulpprof streams --activations -f json DIR

gives the distinct completions and counts, where each parts from the most
common one (step, tokens, margins), the first (capture, layer, position)
of request 0 where its first run's activations differ from the common
one's, and the --select spec.  Every number is recomputed here: completions
and margins from generate()'s own sequences and scores (top-1 minus top-2),
the parting activations from the files' /digests datasets read with h5py.
Then each parted completion's first run and the common one's first run are
run again (the same batch) with mode="data", select=SPEC, and `ulpprof diff
-f json` of the two gives the selected capture's max ULP, checked against
numpy over the captured tensors.  When nothing parts (a BLAS whose kernels
do not depend on M), the test checks that the tool says exactly that: one
completion, exit 0.  On this Xeon (Haswell kernels) 64 runs give 5
completions (50/7/5/1/1), parting at steps 1 and 4.

Then, when this interpreter has ray, the first ULPPROF_FLOW_RAY_RUNS runs
(64; 0: no Ray step) are spread over a 3-node Ray cluster started here
(run i on node i % 3, each node given only its own directory), and
ulpprof.ray.streams(..., activations=True) must equal the local
`streams --activations -f json` of the same runs, field for field.
Started under the .ci/pyenv interpreter when this one lacks transformers."""
import collections
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("transformers")
import digests_h5  # noqa: E402  (h5py alone, both layouts)
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

SRC = os.environ.get("ULPPROF_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
import ulpprof.torch  # noqa: E402

RUNS = int(os.environ.get("ULPPROF_FLOW_RUNS", "64"))
# Runs (the first ones) that the Ray step spreads over 3 nodes; 0: no Ray step.
RAY_RUNS = int(os.environ.get("ULPPROF_FLOW_RAY_RUNS", "64"))
STEPS = 16
PROMPT = [5, 17, 42, 8, 61]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def make_model():
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        # A near tie that rounding decides: lm_head row 7 is row 39 (a token this model emits)
        # with each element moved by one ULP, up or down (seeded).  The margin (w7 - w39).h is
        # then about one ULP of the logits, the size of the difference between two reduction
        # orders, so where 39 would win, the batch's GEMM kernels decide between 39 and 7.  (A
        # scaled copy, w7 = w39 * (1 + e), would not do: both logits then move alike with any
        # rounding of h and the margin's sign never changes.)
        w = model.lm_head.weight
        w39 = w[39].numpy()
        up = np.random.default_rng(0).integers(0, 2, w39.shape).astype(bool)
        toward = np.where(up, np.inf, -np.inf).astype(np.float32)
        w7 = np.nextafter(w39, toward)
        assert w7.dtype == np.float32 and np.all(np.abs(w7.view(np.int32) - w39.view(np.int32))
                                                 == 1)
        w[7] = torch.from_numpy(w7)
    return model


def batch_of(run):
    """Run i's batch: the prompt in row 0, then 0-7 random prompts (seeded by i)."""
    rng = np.random.default_rng(1000 + run)
    others = [list(rng.integers(1, 128, rng.integers(2, 9))) for _ in range(rng.integers(0, 8))]
    rows = [PROMPT] + others
    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for k, r in enumerate(rows):
        ids[k, width - len(r):] = torch.tensor(r)
        mask[k, width - len(r):] = 1
    return ids, mask


def generate(model, run, path, batch=None, others=None, **capture):
    """Runs and captures one generation; returns request 0's tokens and margins.  `others`,
    a list, gets (run, request, prompt, greedy tokens) of every other row: its unpadded
    prompt and each step's argmax of the logits, from generate()'s own scores."""
    ids, mask = (batch or batch_of)(run)
    # Request 0 is the prompt; the other rows are requests of this run alone.
    reqs = [0] + [100 * (run + 1) + k for k in range(1, ids.shape[0])]
    with torch.no_grad(), ulpprof.torch.capture(model, path, sublayers=False, tokens=True,
                                                requests=reqs, **capture):
        out = model.generate(ids, attention_mask=mask, max_new_tokens=STEPS, do_sample=False,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    toks = out.sequences[0, ids.shape[1]:].tolist()
    for k in range(1, ids.shape[0] if others is not None else 0):
        prompt = tuple(int(t) for t, m in zip(ids[k], mask[k]) if int(m))
        others.append((run, reqs[k], prompt, tuple(int(torch.argmax(sc[k])) for sc in out.scores)))
    margins = []
    for s in out.scores:
        v = torch.topk(s[0].double(), 2).values
        margins.append(float(v[0] - v[1]))
    return toks, margins


def expected_groups(gens):
    by = collections.OrderedDict()
    for i, (t, _) in enumerate(gens):
        by.setdefault(tuple(t), []).append(i)
    return sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))


def digest_rows(path):
    """{capture name: (seq, layer, {(request, position): digest})} from /digests."""
    out = {}
    for name, occs in digests_h5.read(path).items():
        for ds in occs:
            seq = int(np.atleast_1d(ds.attrs["seq"])[0])
            layer = int(np.atleast_1d(ds.attrs.get("layer", -1))[0])
            req, pos = ds.attrs["requests"], ds.attrs["positions"]
            s0, l0, rows = out.get(name, (seq, layer, {}))
            for r, p, d in zip(np.ravel(req), np.ravel(pos), np.ravel(ds[()])):
                rows[(int(r), int(p))] = int(d)
            out[name] = (min(s0, seq), l0, rows)
    return out


def step_positions(path, request=0):
    """The position of each step's logits: request's rows of the `tokens` captures, read with
    h5py, in position order."""
    pos = []
    with h5py.File(path, "r") as f:
        for occ in digests_h5.captures(f, "tokens"):  # /captures, or kept in /digests
            pos += [int(p) for p, r in zip(np.ravel(occ.attrs["positions"]),
                                           np.ravel(occ.attrs["requests"])) if int(r) == request]
    return sorted(pos)


def expected_parting(pa, pb, upto, request=0):
    """Min differing position of request at or before upto (the position of the logits that
    emitted the parting token: later positions were fed other tokens), first capture in A's
    write order there; its select spans to min(its last differing position, upto)."""
    a, b = digest_rows(pa), digest_rows(pb)
    best = None
    for name in sorted(a, key=lambda n: a[n][0]):
        if name not in b:
            continue
        diff = sorted(p for (r, p), d in a[name][2].items()
                      if r == request and (r, p) in b[name][2] and b[name][2][(r, p)] != d)
        if diff and diff[0] <= upto and (best is None or diff[0] < best["position"]):
            best = {"capture": name, "layer": a[name][1], "position": diff[0],
                    "last": min(diff[-1], upto)}
    return best


def ordered(bits):
    bits = bits.astype(np.int64)
    return np.where(bits & 0x80000000, 0x80000000 - bits, bits)


def max_ulp(pa, pb, name, request):
    """numpy: max |ordered(a) - ordered(b)| over the rows both files captured of request."""
    rows = []
    for path in (pa, pb):
        got = {}
        with h5py.File(path, "r") as f:
            for occ in f["captures"][name]:
                ds = f["captures"][name][occ]
                data = np.asarray(ds[()]).view(np.uint32)
                req, pos = ds.attrs["requests"], ds.attrs["positions"]
                data = data.reshape(np.size(pos), -1)  # row axes first (FORMAT.md)
                for k, (r, p) in enumerate(zip(np.ravel(req), np.ravel(pos))):
                    if int(r) == request:
                        got[int(p)] = data[k]
        rows.append(got)
    keys = sorted(set(rows[0]) & set(rows[1]))
    if not keys:
        return None
    return max(int(np.max(np.abs(ordered(rows[0][k]) - ordered(rows[1][k])))) for k in keys)


def check_flow(model, tmp, n_runs, batch=None):
    """Captures `n_runs` generations in digest mode under tmp/runs, checks `streams
    --activations -f json` and each parted completion's re-capture against numpy.
    Returns (generations, report, [(completion, expected parting, numpy max ULP)])."""
    d = os.path.join(tmp, "runs")
    os.makedirs(d)
    gens, others = [], []
    for i in range(n_runs):
        gens.append(generate(model, i, os.path.join(d, "run%03d.h5" % i), batch, others,
                             mode="digest"))
    # streams identifies a request across runs by its prompt: two runs whose random other
    # prompts happen to be equal hold one request, whose completions may differ (another
    # batch around it).  What numpy expects of each such prompt: its distinct completions.
    prompt_of, completions_of = {}, collections.defaultdict(set)
    for run, req, prompt, toks in others:
        prompt_of[(run, req)] = prompt
        completions_of[prompt].add(toks)
    names = ["run%03d.h5" % i for i in range(n_runs)]
    parted = []
    groups = expected_groups(gens)
    print("%d runs, %d distinct completions: %s" % (n_runs, len(groups),
                                                    [len(g[1]) for g in groups]))
    t0 = time.monotonic()
    p = subprocess.run([ULPPROF, "streams", "--activations", "-f", "json", d],
                       capture_output=True, text=True)
    print("streams --activations over %d runs: %.1f s (not checked)" % (n_runs,
                                                                       time.monotonic() - t0))
    parts = len(groups) > 1 or any(len(c) > 1 for c in completions_of.values())
    check(p.returncode == (1 if parts else 0),
          "streams exit %d with %d completions: %s" % (p.returncode, len(groups), p.stderr))
    rep = json.loads(p.stdout)
    check([os.path.basename(x) for x in rep["runs"]] == names, "run order")
    req0 = [q for q in rep["requests"] if q["request"] == 0]
    check(len(req0) == 1, "request 0 is there")
    others_rep = [q for q in rep["requests"] if q["request"] != 0]
    check(len(others_rep) == len(completions_of),
          "other requests: %d, want one per distinct prompt (%d)"
          % (len(others_rep), len(completions_of)))
    for q in others_rep:
        prompts = {prompt_of.get((names.index(os.path.basename(rep["runs"][e["run"]])),
                                  e["request"])) for e in q["in_runs"]}
        want = completions_of.get(next(iter(prompts))) if len(prompts) == 1 else None
        check(want is not None and len(q["completions"]) == len(want)
              and {tuple(c["tokens"]) for c in q["completions"]} == want,
              "other request %d: completions %s, want %s"
              % (q["request"], [c["tokens"] for c in q["completions"]], want))
    got = req0[0]["completions"]
    hist = collections.Counter(next(s for s in range(STEPS) if t[s] != groups[0][0][s])
                               for t, _ in gens if tuple(t) != groups[0][0])
    print("parting steps (step: runs): %s" % dict(sorted(hist.items())))
    check(req0[0]["parting_steps"] == [{"step": k, "runs": n} for k, n in sorted(hist.items())],
          "parting steps %s, numpy %s" % (req0[0]["parting_steps"], sorted(hist.items())))
    check(len(got) == len(groups), "%d completions, want %d" % (len(got), len(groups)))
    common_toks, common_runs = groups[0]
    mc = gens[common_runs[0]][1]
    for g, (toks, runs) in zip(got, groups):
        check(g["runs"] == runs and g["count"] == len(runs), "runs %s vs %s" % (g["runs"], runs))
        check(g["tokens"] == list(toks), "tokens of %s" % runs)
        check(g["common"] == (runs == common_runs), "common flag of %s" % runs)
        if g["common"]:
            check("activations" not in g, "the common completion has no parting")
            continue
        k = next(s for s in range(STEPS) if toks[s] != common_toks[s])
        m = gens[runs[0]][1]
        check(g["part_step"] == k, "part %s vs %d" % (g["part_step"], k))
        check(g["token"] == toks[k] and g["token_common"] == common_toks[k], "tokens at part")
        for key, want in (("margin", m[k]), ("margin_common", mc[k])):
            check(abs(g[key] - want) <= 1e-6 * max(1.0, abs(want)),
                  "%s %s vs %s" % (key, g[key], want))
        pa = os.path.join(d, names[common_runs[0]])
        pb = os.path.join(d, names[runs[0]])
        # The group's first run's logits at step k (the common one's when it ended first).
        upto = (step_positions(pb) + [None] * STEPS)[k]
        upto = upto if upto is not None else step_positions(pa)[k]
        want = expected_parting(pa, pb, upto)
        act = g["activations"]
        check(want is not None and act is not None, "a parted completion's activations part")
        if want is None or act is None:
            continue
        check(act["capture"] == want["capture"] and act["layer"] == want["layer"] and
              act["position"] == want["position"] and act["request"] == 0 and
              act["last_position"] == want["last"],
              "activations %s vs numpy %s" % (act, want))
        spec = "%s@0:%d-%d" % (want["capture"], want["position"], want["last"])
        check(act["select"] == spec, "select %s vs %s" % (act["select"], spec))
        # The re-capture of both runs, in full where the select says.
        fa, fb = os.path.join(tmp, "full_a.h5"), os.path.join(tmp, "full_b.h5")
        for f in (fa, fb):
            if os.path.exists(f):
                os.remove(f)
        ra = generate(model, common_runs[0], fa, batch, mode="data", select=act["select"])
        rb = generate(model, runs[0], fb, batch, mode="data", select=act["select"])
        check(ra == gens[common_runs[0]] and rb == gens[runs[0]], "the re-runs repeat")
        q = subprocess.run([ULPPROF, "diff", "-f", "json", fa, fb], capture_output=True,
                           text=True)
        check(q.returncode == 1, "diff of the re-capture: exit %d %s" % (q.returncode,
                                                                        q.stderr))
        drep = json.loads(q.stdout)
        # The re-capture keeps the fed token ids: the diff says where the streams part (the
        # token emitted at step k is fed at the next position, when there is a next step) and
        # puts the first divergence at the selected capture, not at the produced tokens.
        sp = [(x["request"], x["position"], x["token_a"], x["token_b"])
              for x in drep["streams_part"]]
        want_sp = [(0, upto + 1, common_toks[k], toks[k])] if k < STEPS - 1 else []
        check(sp == want_sp, "streams part %s vs %s" % (sp, want_sp))
        fd = drep["first_divergence"] or {}
        check((fd.get("name"), fd.get("request"), fd.get("position")) ==
              (want["capture"], 0, want["position"]), "first divergence %s vs %s" % (fd, want))
        ulps = [r["max_ulp"] for r in drep["rows"] if r["name"] == want["capture"]]
        ref = max_ulp(fa, fb, want["capture"], 0)
        print("completion of %d runs parts at step %d (%d, common %d; margin %.3g, common %.3g);"
              " activations at %s layer %d position %d, select %s, max ULP %s"
              % (len(runs), k, toks[k], common_toks[k], m[k], mc[k], want["capture"],
                 want["layer"], want["position"], act["select"], ulps))
        check(ref is not None and ref > 0, "numpy finds the selected rows differ")
        check(ulps and max(ulps) == ref, "diff max ULP %s vs numpy %s" % (ulps, ref))
        parted.append((g, want, ref))
    if len(groups) == 1:
        check(req0[0]["parting_steps"] == [], "nothing parts: no parting step")
        t = subprocess.run([ULPPROF, "streams", "--activations", d], capture_output=True,
                           text=True)
        check("request 0: %d runs, 1 distinct completions" % n_runs in t.stdout and
              "parting steps: none" in t.stdout,
              "nothing parts, said so: %s" % t.stdout)
    return gens, rep, parted


def check_ray(tmp, n_runs, want):
    """The same analysis on a 3-node Ray cluster started here: the first n_runs runs of
    tmp/runs, run i on node i % 3 (a directory of its own on each node, each node told only
    its runs), through ulpprof.ray.streams(..., activations=True).  Its report must equal
    `want`, the local `streams --activations -f json` of those runs gathered in one directory
    (the run names aside: Ray's are NODE:PATH)."""
    import ray  # noqa: E402
    from ray.cluster_utils import Cluster  # noqa: E402
    import ulpprof.ray  # noqa: E402
    placed = {n: [] for n in range(3)}
    for i in range(n_runs):
        node = os.path.join(tmp, "node%d" % (i % 3))
        os.makedirs(node, exist_ok=True)
        dst = os.path.join(node, "run%03d.h5" % i)
        shutil.copyfile(os.path.join(tmp, "runs", "run%03d.h5" % i), dst)
        placed[i % 3].append(dst)
    # The Ray workers inherit these from the nodes this process starts.
    os.environ["ULPPROF_PROGRAM"] = os.path.abspath(ULPPROF)
    os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.abspath(os.environ["ULPPROF_CAPTURE_LIBRARY"])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [os.path.abspath(os.path.join(SRC, "python"))] +
        [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x])
    small = {"num_cpus": 1, "object_store_memory": 80 << 20, "include_dashboard": False}
    cluster = None
    try:
        cluster = Cluster(initialize_head=True, head_node_args=dict(small, resources={"n0": 1}))
        for n in (1, 2):
            cluster.add_node(**dict(small, resources={"n%d" % n: 1}))
        cluster.wait_for_nodes(timeout=600)
        ray.init(address=cluster.address, log_to_driver=False)
        ids = {n: node["NodeID"] for node in ray.nodes() for n in range(3)
               if node.get("Alive") and node["Resources"].get("n%d" % n)}
        check(sorted(ids) == [0, 1, 2], "cluster nodes %r" % ids)
        stats = {}
        t0 = time.monotonic()
        got = ulpprof.ray.streams({ids[n]: placed[n] for n in range(3)}, activations=True,
                                  stats=stats)
        elapsed = time.monotonic() - t0
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
    rest = {k: v for k, v in got.items() if k != "runs"}
    same = rest == {k: v for k, v in want.items() if k != "runs"}
    check(same,
          "ray report differs from the local one:\n%s\n%s"
          % (json.dumps(rest)[:2000], json.dumps(want)[:2000]))
    check(got["runs"] == ["%s:%s" % (ids[i % 3], placed[i % 3][i // 3]) for i in range(n_runs)],
          "ray run names %s" % got["runs"][:4])
    print("ray: %d runs on 3 nodes in %.1f s (not checked), report %s the local one; %s"
          % (n_runs, elapsed, "equals" if same else "DIFFERS from", stats))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        _, rep, _ = check_flow(make_model(), tmp, RUNS)
        if RAY_RUNS and importlib.util.find_spec("ray") is None:
            print("ray step skipped: this interpreter has no ray")
        elif RAY_RUNS:
            n = min(RAY_RUNS, RUNS)
            if n < RUNS:  # the local report of the first n runs, gathered in one directory
                sub = os.path.join(tmp, "first")
                os.makedirs(sub)
                for i in range(n):
                    os.link(os.path.join(tmp, "runs", "run%03d.h5" % i),
                            os.path.join(sub, "run%03d.h5" % i))
                p = subprocess.run([ULPPROF, "streams", "--activations", "-f", "json", sub],
                                   capture_output=True, text=True)
                check(p.returncode in (0, 1), "streams of the first %d: %s" % (n, p.stderr))
                rep = json.loads(p.stdout)
            check_ray(tmp, n, rep)
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

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
- a run captured with its tensors (mode "data") that heads a completion
  on another node than the common run's moves as its digest-only
  rendition (`ulpprof repair --digests`): the report equals the local one
  and numpy's, and what moved is the digest files and the rendition;
- a missing run names its file, an unknown node is refused;
- nine runs more that record their fed token ids (`input_ids`, kept in
  full; the activations in digest mode), each numbering three prompts in
  another order, 3/3/3 over the nodes: requests are identified by prompt
  (the ids reach the driver), the report equals the local one field for
  field, and against numpy: each prompt's numbers in every run, its
  groups, parting steps, and where the activations part in each run's
  numbering.
Exit 77 (skipped) only when Ray cannot be installed.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
import ray_cluster  # noqa: E402  (first: it may re-exec this test under the venv)
from ray_cluster import ULPPROF, check  # noqa: E402

import numpy as np  # noqa: E402
import ray  # noqa: E402

import ulpprof  # noqa: E402
import ulpprof.ray  # noqa: E402
from ulpprof import _lib  # noqa: E402

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


# --- runs that record their fed token ids, requests in permuted order -------
P_RUNS = 9
P_PROMPTS = 3
P_NAMES = ["input_ids", "layers.0.out", "layers.1.out", "tokens"]  # write order
PERMS = [(0, 1, 2), (2, 0, 1), (1, 2, 0), (0, 2, 1), (2, 1, 0), (1, 0, 2), (2, 0, 1), (0, 1, 2),
         (1, 2, 0)]  # PERMS[i][q]: run i's number of prompt q
# prompt -> {run: (group, parting step)}; the other runs give the common completion.
# Prompt 0's common completion is first given by run 1, which numbers it 2 (run 0: 0).
P_PART = {0: {0: ("B", 2), 4: ("B", 2), 7: ("B", 2), 5: ("C", 4)}, 2: {8: ("F", 1)}}
# (prompt, capture, positions) bumped in each group's runs: all at or before P = 3 + step.
P_BUMPS = {"B": [(0, "layers.1.out", [5, 6]), (0, "layers.0.out", [6])],
           "C": [(0, "layers.0.out", [7])], "F": [(2, "layers.1.out", [3, 4])]}


def p_prompt(q):
    return [10 * (q + 1) + k for k in range(PROMPT)]


def p_tokens(i, q):
    """(tokens, margins) of run i's completion of prompt q."""
    base = [200 + 11 * k + 3 * q for k in range(STEPS)]
    marg = [0.25 + 0.125 * k for k in range(STEPS)]
    if i in P_PART.get(q, {}):
        g, k = P_PART[q][i]
        base[k:] = [t + 1 for t in base[k:]]
        marg[k] = 1.0 / 2048
    return base, marg


def p_rows(i):
    """{name: {(prompt, position): row bytes}} of run i as written."""
    rng = np.random.default_rng(11)
    acts = {n: rng.standard_normal((P_PROMPTS, POS, WIDTH)).astype(np.float32)
            for n in P_NAMES[1:3]}
    for q, (g, _) in ((q, v[i]) for q, v in P_PART.items() if i in v):
        for bq, name, positions in P_BUMPS[g]:
            for p in positions:
                acts[name][bq, p].view(np.uint32)[0] += 1
    out = {n: {(q, p): acts[n][q, p].tobytes() for q in range(P_PROMPTS) for p in range(POS)}
           for n in acts}
    out["input_ids"], out["tokens"] = {}, {}
    for q in range(P_PROMPTS):
        tk, mg = p_tokens(i, q)
        fed = p_prompt(q) + tk[:-1]  # position PROMPT + k is fed step k's token
        for p, t in enumerate(fed):
            out["input_ids"][(q, p)] = np.array([t], np.int64).tobytes()
        for k, (t, m) in enumerate(zip(tk, mg)):
            out["tokens"][(q, PROMPT - 1 + k)] = np.array([t, m], np.float64).tobytes()
    return out


def p_write(path, i):
    """Run i: the prompts' ids (prefill, then the decode feeds) in full (the
    feeds of an odd run in digest mode: kept in /digests), the activations in
    digest mode, the tokens; rows in run i's request order."""
    rows = p_rows(i)
    order = sorted(range(P_PROMPTS), key=lambda q: PERMS[i][q])  # prompts by number
    s = _lib.Session(path, label="prompts%d" % i)

    def put(name, dtype, role, keys, layer=-1):
        a = np.frombuffer(b"".join(rows[name][k] for k in keys),
                          np.int64 if dtype == "i64" else
                          np.float64 if dtype == "f64" else np.float32)
        a = np.ascontiguousarray(a.reshape(len(keys), -1))
        st = s.capture(name, a.ctypes.data, dtype, list(a.shape), layer=layer, role=role,
                       positions=[p for _, p in keys], requests=[PERMS[i][q] for q, _ in keys],
                       row_rank=1)
        assert st == 0, st

    put("input_ids", "i64", "input", [(q, p) for q in order for p in range(PROMPT)])
    if i % 2:  # the decode feeds kept in /digests, the prefill's in /captures: both are read
        s.set_capture_mode("digest")
    put("input_ids", "i64", "input", [k for q in order for k in sorted(rows["input_ids"])
                                      if k[0] == q and k[1] >= PROMPT])
    s.set_capture_mode("digest")
    for layer, name in enumerate(P_NAMES[1:3]):
        put(name, "f32", "activation", [(q, p) for q in order for p in range(POS)], layer)
    put("tokens", "f64", "activation", [k for q in order for k in sorted(rows["tokens"])
                                        if k[0] == q])
    assert s.close() == 0


def p_expected(q):
    """numpy/hand: prompt q's completions, with where the activations part."""
    gens = [p_tokens(i, q) for i in range(P_RUNS)]
    by = collections.OrderedDict()
    for i, (t, _) in enumerate(gens):
        by.setdefault(tuple(t), []).append(i)
    groups = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    common, crun = list(groups[0][0]), groups[0][1][0]
    out = []
    for toks, runs in groups:
        toks, g = list(toks), runs[0]
        k = 0
        while k < min(len(toks), len(common)) and toks[k] == common[k]:
            k += 1
        acts = None
        if g != crun:
            a, b = p_rows(crun), p_rows(g)
            best = None
            for name in P_NAMES:  # write order: the first capture differing at the least position
                diff = sorted(p for (r, p), v in a[name].items()
                              if r == q and p <= PROMPT - 1 + k and b[name].get((r, p)) != v)
                if diff and (best is None or diff[0] < best[1]):
                    best = (name, diff[0], diff[-1])
            if best is not None:
                name, first, last = best
                acts = {"capture": name, "layer": P_NAMES.index(name) - 1
                        if name.startswith("layers") else None,
                        "request": PERMS[g][q], "position": first, "last_position": last,
                        "select": "%s@%d:%d-%d" % (name, PERMS[g][q], first, last),
                        "request_common": PERMS[crun][q],
                        "select_common": "%s@%d:%d-%d" % (name, PERMS[crun][q], first, last)}
        out.append({"runs": runs, "tokens": toks, "common": g == crun, "part": k,
                    "token": None if g == crun else toks[k],
                    "token_common": None if g == crun else common[k],
                    "margin": None if g == crun else gens[g][1][k],
                    "margin_common": None if g == crun else gens[crun][1][k],
                    "activations": acts})
    return out


def p_compare_numpy(doc, what):
    check(doc.get("requests_by") == "prompt" and doc.get("ids") == "input_ids",
          "%s: requests by %r, ids %r" % (what, doc.get("requests_by"), doc.get("ids")))
    check(len(doc["requests"]) == P_PROMPTS, "%s: %d requests" % (what, len(doc["requests"])))
    seen = set()
    for d in doc["requests"]:
        q = next((q for q in range(P_PROMPTS) if PERMS[0][q] == d["request"]), None)
        check(q is not None, "%s: request %r is none of run 0's" % (what, d["request"]))
        if q is None:
            continue
        seen.add(q)
        tag = "%s: prompt %d" % (what, q)
        check(d["in_runs"] == [{"run": i, "request": PERMS[i][q]} for i in range(P_RUNS)]
              and d["runs_missing"] == [] and d["runs"] == P_RUNS,
              "%s: in runs %r, missing %r" % (tag, d["in_runs"], d["runs_missing"]))
        want, got = p_expected(q), d["completions"]
        check(len(got) == len(want), "%s: %d completions, numpy %d" % (tag, len(got), len(want)))
        hist = collections.Counter()
        for g, w in zip(got, want):
            t = "%s, runs %s" % (tag, w["runs"])
            check(g["runs"] == w["runs"] and g["tokens"] == w["tokens"]
                  and g["common"] == w["common"], "%s: got %r" % (t, g))
            if w["common"]:
                continue
            hist[w["part"]] += len(w["runs"])
            for k in ("token", "token_common", "margin", "margin_common"):
                check(g[k] == w[k], "%s: %s %r, numpy %r" % (t, k, g[k], w[k]))
            check(g["part_step"] == w["part"], "%s: part_step %r" % (t, g["part_step"]))
            check(g.get("activations") == w["activations"], "%s: activations %r, numpy %r"
                  % (t, g.get("activations"), w["activations"]))
        check(d["parting_steps"] == [{"step": s, "runs": n} for s, n in sorted(hist.items())],
              "%s: parting steps %r" % (tag, d["parting_steps"]))
    check(seen == set(range(P_PROMPTS)), "%s: prompts %r" % (what, seen))


def check_prompts(tmp, ids):
    """The runs with fed token ids, on the cluster of main()."""
    gathered = os.path.join(tmp, "p-gathered")
    os.makedirs(gathered)
    placed = {n: [] for n in range(3)}
    for i in range(P_RUNS):
        name = "p%02d.h5" % i
        p_write(os.path.join(gathered, name), i)
        d = os.path.join(tmp, "p-node%d" % node_of(i))
        os.makedirs(d, exist_ok=True)
        p_write(os.path.join(d, name), i)
        placed[node_of(i)].append(os.path.join(d, name))
    local = subprocess.run([ULPPROF, "streams", "--activations", "-f", "json", gathered],
                           capture_output=True, text=True, timeout=300)
    check(local.returncode == 1, "prompts: local streams exit %d: %s"
          % (local.returncode, local.stderr))
    want = json.loads(local.stdout)
    p_compare_numpy(want, "prompts local")
    runs = {ids[n]: placed[n] for n in range(3)}
    stats = {}
    got = ulpprof.ray.streams(runs, stats=stats)
    check(without_runs(got) == without_runs(want), "prompts: ray report differs from the local "
          "one:\n%s\n%s" % (json.dumps(without_runs(got))[:3000],
                             json.dumps(without_runs(want))[:3000]))
    p_compare_numpy(got, "prompts ray")
    # Pairs (1, 0) B, (1, 5) C of prompt 0 and (0, 8) F of prompt 2, each across nodes.
    check(stats["pairs"] == 3 and stats["pairs_across_nodes"] == 3, "prompts: pairs %r" % stats)
    sizes = sum(os.path.getsize(placed[node_of(i)][i // 3]) for i in (0, 5, 8))
    check(stats["bytes_moved"] == sizes, "prompts: moved %r, the three files %d" % (stats, sizes))
    # 24 bytes a fed id (i64 token, position, request), 32 a generated token.
    fed = sum(len(p_prompt(q)) + STEPS - 1 for q in range(P_PROMPTS)) * P_RUNS
    check(stats["id_bytes"] == 24 * fed and stats["token_bytes"] == 32 * STEPS * P_PROMPTS * P_RUNS,
          "prompts: bytes %r, fed ids %d" % (stats, fed))
    plain = subprocess.run([ULPPROF, "streams", "-f", "json", gathered], capture_output=True,
                           text=True, timeout=300)
    got_plain = ulpprof.ray.streams(runs, activations=False)
    check(without_runs(got_plain) == without_runs(json.loads(plain.stdout)),
          "prompts: ray report without activations differs from the local one")


def check_data_mode(tmp, ids, placed):
    """A run captured with its tensors (mode "data": run 3's, named to come
    right after run00) on node 1 heads completion C, whose activations are
    compared on node 0, the common run's: it moves there as its digest-only
    rendition (`ulpprof repair --digests`, made on node 1), and the report
    equals the local one of the same files gathered, field for field."""
    full = os.path.join(tmp, "full")
    os.makedirs(full)
    data = os.path.join(full, "run00a.h5")
    write_file(data, 3, 0, mode="data")
    gathered = os.path.join(tmp, "gathered-data")
    shutil.copytree(os.path.join(tmp, "gathered"), gathered)
    shutil.copy(data, gathered)
    local = subprocess.run([ULPPROF, "streams", "--activations", "-f", "json", gathered],
                           capture_output=True, text=True, timeout=300)
    check(local.returncode == 1, "data mode: local streams exit %d: %s"
          % (local.returncode, local.stderr))
    want = json.loads(local.stdout) if local.returncode == 1 else {}
    runs = {ids[n]: placed[n] + ([data] if n == 1 else []) for n in range(3)}
    stats = {}
    got = ulpprof.ray.streams(runs, stats=stats)
    check(without_runs(got) == without_runs(want), "data mode: ray report differs from the local "
          "one:\n%s\n%s" % (json.dumps(without_runs(got))[:2000],
                             json.dumps(without_runs(want))[:2000]))
    # Completion C of request 0 is headed by run00a (run 1 now): against numpy, its
    # activations part where run 3's do from run 0's.
    q0 = next(q for q in got["requests"] if q["request"] == 0)
    c = next((g for g in q0["completions"] if g["runs"][:1] == [1]), {})
    check(c.get("activations") == expected_parting(0, 3, 0, PROMPT - 1 + PART0["C"]),
          "data mode: run00a's activations %r" % c.get("activations"))
    rendition = os.path.join(tmp, "run00a-digests.h5")
    p = subprocess.run([ULPPROF, "repair", "--digests", data, rendition], capture_output=True,
                       text=True, timeout=300)
    check(p.returncode == 0, "repair --digests exit %d: %s" % (p.returncode, p.stderr))
    # What moved: the digest files of runs 2, 7 and 11, and run00a's rendition, never its tensors.
    sizes = sum(os.path.getsize(read_of(tmp, i)) for i in (2, 7, 11))
    check(stats["pairs"] == 4 and stats["pairs_across_nodes"] == 4 and
          stats["bytes_moved"] == sizes + os.path.getsize(rendition),
          "data mode: moved %r; digest files %d, rendition %d"
          % (stats, sizes, os.path.getsize(rendition)))
    import h5py
    import digests_h5
    with h5py.File(rendition, "r") as f:
        check(sorted(f["captures"]) == [] and sorted(digests_h5.kept(f)) == ["tokens"] and
              sorted(digests_h5.read(f)) == sorted(NAMES),
              "data mode: the rendition holds /captures %r, keeps %r, /digests %r"
              % (sorted(f["captures"]), sorted(digests_h5.kept(f)), sorted(digests_h5.read(f))))


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-ray-streams-")
    try:
        gathered = os.path.join(tmp, "gathered")
        os.makedirs(gathered)
        placed = {n: [] for n in range(3)}
        for i in range(RUNS):
            write_run(gathered, i)
            placed[node_of(i)].append(write_run(os.path.join(tmp, "node%d" % node_of(i)), i))
        check([len(v) for v in placed.values()] == [4, 4, 4], "split %r" % placed)

        local = subprocess.run([ULPPROF, "streams", "--activations", "-f", "json", gathered],
                               capture_output=True, text=True, timeout=300)
        check(local.returncode == 1, "local streams exit %d: %s"
              % (local.returncode, local.stderr))
        want = json.loads(local.stdout)
        plain = subprocess.run([ULPPROF, "streams", "-f", "json", gathered],
                               capture_output=True, text=True, timeout=300)
        want_plain = json.loads(plain.stdout)
        compare_numpy(want, "local")  # the expectations themselves hold

        with ray_cluster.started() as ids:
            runs = {ids[n]: placed[n] for n in range(3)}
            stats = {}
            got = ulpprof.ray.streams(runs, stats=stats)
            check(without_runs(got) == without_runs(want), "ray report differs from the local "
                  "one:\n%s\n%s" % (json.dumps(without_runs(got))[:2000],
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
            # What reached the driver: 32 bytes a generated token (token, margin, position,
            # request).
            check(stats["token_bytes"] == sum(32 * (len(tokens_of(i, 0)[0]) +
                                                    len(tokens_of(i, 1)[0]))
                                              for i in range(RUNS)), "token bytes %r" % stats)

            # Without activations: `ulpprof streams -f json`.
            got_plain = ulpprof.ray.streams(runs, activations=False)
            check(without_runs(got_plain) == without_runs(want_plain),
                  "ray report without activations differs from the local one")

            # A list, one entry per node in ray.nodes() order.
            got_list = ulpprof.ray.streams([runs[i] for i in ray_cluster.alive_order()])
            check(got_list == got, "the list form gives another report")

            check_data_mode(tmp, ids, placed)

            # Bad input: one clear error each.
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

            check_prompts(tmp, ids)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ray_cluster.finish()


if __name__ == "__main__":
    main()

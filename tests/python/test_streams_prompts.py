"""`ulpprof streams` identifies a request across runs by its prompt tokens
(FORMAT.md "Produced tokens", "Requests across runs").  Runs written with
the C capture API (capwriter): per run, the fed token ids (`input_ids`,
role input: the prompt in one prefill capture, then one decode capture a
step), the produced `tokens`, and one activation capture a step.

Five prompts, one of them twice in every run (two requests with the same
prompt: kept apart by order of appearance).  Eight runs; in the permuted
copy each run numbers its requests otherwise and writes them in another
row order (the duplicate pair keeps its order of appearance).  Checked
against the groups computed here with numpy from the plan (keyed by
prompt, never from ulpprof's output):
- the permuted runs give the same groups (runs, tokens, parting step,
  tokens and margins there, histogram) as the unpermuted ones, both equal
  to numpy's, and say `requests_by` "prompt";
- without ids, the same files fall back to numbers, say so, and group by
  number (numpy's grouping by number);
- a run that lacks one prompt is reported in `runs_missing`, and the text
  says so;
- --activations: the first differing activation position (numpy, rows
  compared bit for bit up to the parting logits' position) and the
  --select of each run under its own number;
- some runs with ids and some without, and a request producing tokens
  with no prompt fed: exit 2, one stderr line naming the file."""
import collections
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capwriter  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
FAILS = []
RUNS, STEPS = 8, 6
rng = np.random.default_rng(11)
PROMPTS = [list(rng.integers(0, 500, 4)) for _ in range(3)] + [list(rng.integers(0, 500, 6)),
                                                               list(rng.integers(0, 500, 5))]
# Slots: (prompt index); slot 5 repeats prompt 0 (the same prompt twice in a run).
SLOTS = [0, 1, 2, 3, 4, 0]
BASE = {s: list(rng.integers(0, 500, STEPS)) for s in range(len(SLOTS))}
# (slot, run) -> step where that run's completion changes (a second completion).
PARTS = {(1, 2): 3, (1, 5): 3, (3, 4): 1, (5, 6): 2, (0, 7): 0}
MISSING = {(4, 3)}  # slot 4 is not in run 3


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def completion(slot, run):
    toks = list(BASE[slot])
    k = PARTS.get((slot, run))
    if k is not None:
        toks[k] = (toks[k] + 1 + slot) % 500
        toks[k + 1:] = [(t + 7) % 500 for t in toks[k + 1:]]
    margins = [0.25 + 0.01 * s + 0.001 * slot + (0.0001 * run if k is not None and s >= k else 0)
               for s in range(STEPS)]
    return toks, margins


def act_row(slot, run, pos):
    """The activation row of a slot at a position: it moves from the parting logits' position
    of a changed completion on (the runs compute otherwise there)."""
    k = PARTS.get((slot, run))
    plen = len(PROMPTS[SLOTS[slot]])
    bump = 1.0 if k is not None and pos >= plen - 1 + k - 1 else 0.0
    return np.array([SLOTS[slot] * 100.0 + pos, bump], np.float32)


def write(path, run, number, order, ids=True, skip_prompt=None):
    """number: slot -> request number; order: slots in row order."""
    slots = [s for s in order if (s, run) not in MISSING]
    w = capwriter.Writer(path)
    if ids:
        pos = np.concatenate([np.arange(len(PROMPTS[SLOTS[s]])) for s in slots if s != skip_prompt])
        req = np.concatenate([np.full(len(PROMPTS[SLOTS[s]]), number[s]) for s in slots
                              if s != skip_prompt])
        tok = np.concatenate([np.asarray(PROMPTS[SLOTS[s]], np.int64) for s in slots
                              if s != skip_prompt])
        assert w.capture("input_ids", tok, "i64", positions=pos, requests=req, role="input") == 0
    pos = np.concatenate([np.arange(len(PROMPTS[SLOTS[s]])) for s in slots])
    req = np.concatenate([np.full(len(PROMPTS[SLOTS[s]]), number[s]) for s in slots])
    rows = np.stack([act_row(s, run, p) for s in slots for p in range(len(PROMPTS[SLOTS[s]]))])
    assert w.capture("layers.0.out", rows, "f32", positions=pos, requests=req, layer=0) == 0
    for k in range(STEPS):
        lp = [len(PROMPTS[SLOTS[s]]) - 1 + k for s in slots]  # the logits' positions
        if k > 0 and ids:
            fed = np.array([completion(s, run)[0][k - 1] for s in slots], np.int64)
            assert w.capture("input_ids", fed, "i64", positions=np.array(lp),
                             requests=np.array([number[s] for s in slots]), role="input",
                             step=k) == 0
        if k > 0:
            rows = np.stack([act_row(s, run, p) for s, p in zip(slots, lp)])
            assert w.capture("layers.0.out", rows, "f32", positions=np.array(lp),
                             requests=np.array([number[s] for s in slots]), layer=0,
                             step=k) == 0
        t = np.array([[completion(s, run)[0][k], completion(s, run)[1][k]] for s in slots],
                     np.float64)
        assert w.capture("tokens", t, "f64", positions=np.array(lp),
                         requests=np.array([number[s] for s in slots]), step=k) == 0
    w.close()


def expected(keys):
    """keys: slot -> the identity it is grouped under; -> {identity: [(runs, tokens, part,
    token, token_common, margin, margin_common)], hist}."""
    out = {}
    for ident in sorted(set(keys.values())):
        gens = [(run, completion(s, run)) for run in range(RUNS) for s in keys
                if keys[s] == ident and (s, run) not in MISSING]
        by = collections.OrderedDict()
        for run, (t, m) in gens:
            by.setdefault(tuple(t), []).append(run)
        groups = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
        common, crun = groups[0][0], groups[0][1][0]
        mg = dict((run, m) for run, (t, m) in gens)
        res, hist = [], collections.Counter()
        for toks, runs in groups:
            k = 0
            while k < min(len(toks), len(common)) and toks[k] == common[k]:
                k += 1
            part = None if toks == common else k
            if part is not None:
                hist[part] += len(runs)
            res.append((runs, list(toks), part,
                        None if part is None else toks[k], None if part is None else common[k],
                        None if part is None else mg[runs[0]][k],
                        None if part is None else mg[crun][k]))
        out[ident] = (res, dict(hist), sorted({run for run, _ in gens}))
    return out


def got_groups(q):
    res = []
    for g in q["completions"]:
        res.append((g["runs"], g["tokens"], g["part_step"], g.get("token"), g.get("token_common"),
                    g.get("margin"), g.get("margin_common")))
    return res, {h["step"]: h["runs"] for h in q["parting_steps"]}


def streams(*args):
    p = subprocess.run([ULPPROF, "streams"] + list(args), capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def by_prompt(doc, number_of_run):
    """{slot: request doc}: each request doc under the slot its run-0-or-first numbers name."""
    out = {}
    for q in doc["requests"]:
        first = q["in_runs"][0]
        slot = [s for s, n in number_of_run[first["run"]].items() if n == first["request"]]
        out[slot[0]] = q
    return out


def close(a, b):
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-12 * max(1.0, abs(b))


def same(got, want, what):
    g, gh = got
    w, wh, _ = want
    check(len(g) == len(w), "%s: %d completions, want %d" % (what, len(g), len(w)))
    for x, y in zip(g, w):
        check(x[:5] == y[:5] and close(x[5], y[5]) and close(x[6], y[6]),
              "%s: %s vs %s" % (what, x, y))
    check(gh == wh, "%s: histogram %s vs %s" % (what, gh, wh))


def main():
    # Slot -> identity: the duplicate (slot 5) is its own request, as numbers would keep it.
    want = expected({s: s for s in range(len(SLOTS))})
    perm_rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as tmp:
        plain, perm, numbers_plain, numbers_perm = [], [], [], []
        for run in range(RUNS):
            num = {s: s for s in range(len(SLOTS))}
            p = os.path.join(tmp, "plain%d.h5" % run)
            write(p, run, num, list(range(len(SLOTS))))
            plain.append(p)
            numbers_plain.append(num)
            shuffled = [int(x) for x in perm_rng.permutation(len(SLOTS))]
            num = {s: 10 + shuffled[s] for s in range(len(SLOTS))}
            order = sorted(range(len(SLOTS)), key=lambda s: shuffled[s] * 7 % 6)
            if order.index(0) > order.index(5):  # the duplicate pair keeps its appearance order
                i, j = order.index(0), order.index(5)
                order[i], order[j] = 5, 0
            p = os.path.join(tmp, "perm%d.h5" % run)
            write(p, run, num, order)
            perm.append(p)
            numbers_perm.append(num)
        check(any(numbers_perm[r] != numbers_perm[0] for r in range(RUNS)), "runs permuted")
        for what, paths, nums in (("plain", plain, numbers_plain), ("permuted", perm, numbers_perm)):
            rc, out, err = streams("-f", "json", *paths)
            check(rc == 1, "%s: exit %d (%s)" % (what, rc, err))
            doc = json.loads(out)
            check(doc["requests_by"] == "prompt" and doc["ids"] == "input_ids",
                  "%s: requests_by %s" % (what, doc["requests_by"]))
            got = by_prompt(doc, nums)
            check(sorted(got) == list(range(len(SLOTS))), "%s: slots %s" % (what, sorted(got)))
            for s in got:
                same(got_groups(got[s]), want[s], "%s slot %d" % (what, s))
                miss = [r for r in range(RUNS) if (s, r) in MISSING]
                check(got[s]["runs_missing"] == miss,
                      "%s slot %d: missing %s vs %s" % (what, s, got[s]["runs_missing"], miss))
                check([(e["run"], e["request"]) for e in got[s]["in_runs"]] ==
                      [(r, nums[r][s]) for r in want[s][2]], "%s slot %d: in_runs" % (what, s))
        rc, out, _ = streams(*perm)
        check("requests identified by their prompt tokens ('input_ids')" in out, "text: by prompt")
        check("missing from 1 runs (no completion of this prompt there): 3" in out,
              "text: missing run 3")
        # Without ids: numbers, and the permuted runs group by number (numpy's grouping by number).
        noids = []
        for run in range(RUNS):
            p = os.path.join(tmp, "noids%d.h5" % run)
            order = sorted(range(len(SLOTS)), key=lambda s: numbers_perm[run][s])
            write(p, run, numbers_perm[run], order, ids=False)
            noids.append(p)
        rc, out, err = streams("-f", "json", *noids)
        doc = json.loads(out)
        check(doc["requests_by"] == "number" and doc["ids"] is None, "no ids: by number")
        for q in doc["requests"]:
            runs = sorted(r for r in range(RUNS) for s in range(len(SLOTS))
                          if numbers_perm[r][s] == q["request"] and (s, r) not in MISSING)
            check(q["runs"] == len(runs) and q["runs_missing"] ==
                  [r for r in range(RUNS) if r not in runs], "no ids: request %d" % q["request"])
        rc, out, _ = streams(*noids)
        check("requests identified by their number (no run records fed token ids)" in out,
              "text: by number")
        # --activations on the permuted runs: each group's first run against the common one's.
        rc, out, err = streams("-f", "json", "--activations", *perm)
        check(rc == 1, "activations: exit %d (%s)" % (rc, err))
        got = by_prompt(json.loads(out), numbers_perm)
        for s, q in got.items():
            runs_common = [g for g in q["completions"] if g["common"]][0]["runs"]
            for g in q["completions"]:
                if g["common"]:
                    continue
                c, r = runs_common[0], g["runs"][0]
                plen = len(PROMPTS[SLOTS[s]])
                upto = plen - 1 + g["part_step"]
                diff = [p for p in range(plen - 1 + STEPS)
                        if p <= upto and act_row(s, c, p).tobytes() != act_row(s, r, p).tobytes()]
                a = g["activations"]
                check(a is not None and a["position"] == diff[0] and a["last_position"] == diff[-1]
                      and a["request"] == numbers_perm[r][s] and
                      a["request_common"] == numbers_perm[c][s] and
                      a["select"] == "layers.0.out@%d:%d-%d" % (numbers_perm[r][s], diff[0],
                                                                 diff[-1]) and
                      a["select_common"] == "layers.0.out@%d:%d-%d" % (numbers_perm[c][s],
                                                                        diff[0], diff[-1]),
                      "activations slot %d: %s, numpy %s" % (s, a, diff))
        # Bad input: one run without ids among runs with them; a request with no prompt fed.
        rc, out, err = streams(perm[0], noids[1])
        check(rc == 2 and len(err.splitlines()) == 1 and "noids1.h5" in err and
              "perm0.h5" in err, "mixed: %d %r" % (rc, err))
        bad = os.path.join(tmp, "noprompt.h5")
        write(bad, 0, numbers_perm[0], list(range(len(SLOTS))), skip_prompt=2)
        rc, out, err = streams(perm[1], bad)
        check(rc == 2 and len(err.splitlines()) == 1 and "noprompt.h5" in err and
              "request %d" % numbers_perm[0][2] in err, "no prompt: %d %r" % (rc, err))
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

"""Grouping many generations: `ulpprof streams -f json DIR` against a
numpy + h5py script that does the same grouping, wall time and peak RSS.

    /usr/bin/python3 tests/perf/bench_streams.py [BUILD_DIR] [--runs N]
        [--steps S] [--completions C] [--others K] [--dir DIR]

Writes C completion files through the C capture API
(tests/python/capwriter.py): S `tokens` captures (FORMAT.md, "Produced
tokens"), one a step as the PyTorch helper writes them, of request 0 --
completion c > 0 parting from completion 0 at a step of its own -- and of
K other requests of that file (what a batch of other prompts records),
with --layers L f32 [1, 256] captures a step (0 by default), in capture
mode --mode (data by default; digest keeps the tokens in /digests).  The N runs
are byte copies of them, run i's completion drawn with a Zipf-like weight
(every one at least once): a session's open and close cost ~0.2 s on the
loaded 2-core box, so writing 1,000 files one by one would dominate.  Then, each in a child process under
/usr/bin/time -v: `ulpprof streams -f json DIR`, and the same grouping in
numpy + h5py (this file, --reference: read every run's `tokens`, order
rows by position per request, group equal completions, parting step per
group and the histogram).  Checked: both give the same completions, run
lists and parting histogram; exit 1 if not.  Printed: wall time and peak
RSS of each, and their ratios.  A benchmark, not a test.
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def reference(d):
    """The grouping from the files alone: {request: {"completions": [(tokens, runs)],
    "parting_steps": {step: runs}}}."""
    import h5py
    sys.path.insert(0, os.path.join(SRC, "tests", "python"))
    import digests_h5
    names = sorted(n for n in os.listdir(d) if n.endswith(".h5"))
    per = collections.defaultdict(dict)  # request -> run -> tokens
    for i, n in enumerate(names):
        with h5py.File(os.path.join(d, n), "r") as f:
            rows = {}
            for occ in digests_h5.captures(f, "tokens"):  # /captures or kept in /digests
                v = occ[()]
                for (tok, _), p, r in zip(v, occ.attrs["positions"], occ.attrs["requests"]):
                    rows.setdefault(int(r), []).append((int(p), int(tok)))
            for r, pt in rows.items():
                per[r][i] = tuple(t for _, t in sorted(pt))
    out = {}
    for r, runs in per.items():
        by = collections.OrderedDict()
        for i, t in sorted(runs.items()):
            by.setdefault(t, []).append(i)
        groups = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
        common = groups[0][0]
        hist = collections.Counter()
        for t, rs in groups[1:]:
            k = next((s for s in range(min(len(t), len(common))) if t[s] != common[s]),
                     min(len(t), len(common)))
            hist[k] += len(rs)
        out[r] = {"completions": [(list(t), rs) for t, rs in groups],
                  "parting_steps": dict(sorted(hist.items()))}
    return out


def timed(cmd, out_path):
    tf = out_path + ".time"
    with open(out_path, "w") as out:
        p = subprocess.run(["/usr/bin/time", "-v", "-o", tf] + cmd, stdout=out,
                           stderr=subprocess.PIPE, text=True)
    txt = open(tf).read()
    wall = txt.split("Elapsed (wall clock) time (h:mm:ss or m:ss): ")[1].split("\n")[0]
    secs = 0.0
    for part in wall.split(":"):
        secs = secs * 60 + float(part)
    rss = int(txt.split("Maximum resident set size (kbytes): ")[1].split("\n")[0])
    return p.returncode, secs, rss, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.environ.get("ULPPROF_BUILD_DIR",
                                                               os.path.join(SRC, "build")))
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--completions", type=int, default=80)
    ap.add_argument("--others", type=int, default=3)
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--mode", default="data", choices=("data", "digest"),
                    help="the capture mode the runs are written in")
    ap.add_argument("--reference", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.reference:
        res = reference(a.reference)
        print(json.dumps({str(k): v for k, v in res.items()}))
        return 0
    os.environ["ULPPROF_BUILD_DIR"] = a.build
    sys.path.insert(0, os.path.join(SRC, "tests", "python"))
    import capwriter
    ulpprof = os.path.join(a.build, "programs", "ulpprof")
    tmp = tempfile.mkdtemp(prefix="bench_streams.", dir=a.dir)
    try:
        d = os.path.join(tmp, "runs")
        os.makedirs(d)
        rng = np.random.default_rng(5)
        common = rng.integers(0, 32000, a.steps)
        variants = [common]
        for c in range(1, a.completions):
            v = common.copy()
            k = int(rng.integers(1, a.steps))
            v[k:] = rng.integers(0, 32000, a.steps - k)
            variants.append(v)
        w = 1.0 / np.arange(1, a.completions + 1) ** 1.2
        plan = rng.choice(a.completions, a.runs, p=w / w.sum())
        plan[:a.completions] = np.arange(a.completions)  # every completion at least once
        rng.shuffle(plan)
        act = np.zeros((1, 256), np.float32)
        tdir = os.path.join(tmp, "templates")
        os.makedirs(tdir)
        for c in range(a.completions):
            wr = capwriter.Writer(os.path.join(tdir, "c%03d.h5" % c), mode=a.mode)
            for s in range(a.steps):
                reqs = [0] + [1000 * (c + 1) + k for k in range(a.others)]
                toks = [variants[c][s]] + list(rng.integers(0, 32000, a.others))
                rows = np.stack([np.asarray(toks, np.float64),
                                 rng.random(len(toks)) + 0.01], axis=1)
                pos = np.full(len(toks), 16 + s)
                assert wr.capture("tokens", rows, "f64", positions=pos,
                                  requests=np.asarray(reqs)) == 0
                for layer in range(a.layers):
                    assert wr.capture("layers.%d" % layer, act, "f32", layer=layer) == 0
            wr.close()
        for i, c in enumerate(plan):
            shutil.copyfile(os.path.join(tdir, "c%03d.h5" % c), os.path.join(d, "run%04d.h5" % i))
        size = sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
        print("bench_streams: %d runs, request 0 of %d steps in %d completions, %d other "
              "requests a completion file, mode %s; %.1f MiB of files" % (
                  a.runs, a.steps, a.completions, a.others, a.mode, size / 2**20))
        rc, t_u, rss_u, err = timed([ulpprof, "streams", "-f", "json", d],
                                    os.path.join(tmp, "u.json"))
        if rc not in (0, 1):
            print("FAIL: ulpprof streams exit %d: %s" % (rc, err.strip()))
            return 1
        rc, t_n, rss_n, err = timed([sys.executable, os.path.abspath(__file__), "--reference",
                                     d], os.path.join(tmp, "n.json"))
        if rc != 0:
            print("FAIL: the numpy + h5py grouping exit %d: %s" % (rc, err.strip()))
            return 1
        got = json.load(open(os.path.join(tmp, "u.json")))
        want = json.load(open(os.path.join(tmp, "n.json")))
        fails = []
        for q in got["requests"]:
            ref = want.get(str(q["request"]))
            if ref is None:
                fails.append("request %d not in the reference" % q["request"])
                continue
            if [(g["tokens"], g["runs"]) for g in q["completions"]] != \
                    [(t, r) for t, r in ref["completions"]]:
                fails.append("request %d: completions differ" % q["request"])
            if {str(h["step"]): h["runs"] for h in q["parting_steps"]} != ref["parting_steps"]:
                fails.append("request %d: parting steps differ" % q["request"])
        if len(got["requests"]) != len(want):
            fails.append("%d requests, reference %d" % (len(got["requests"]), len(want)))
        print("  ulpprof streams  %7.2f s   peak RSS %7.1f MiB" % (t_u, rss_u / 1024))
        print("  numpy + h5py     %7.2f s   peak RSS %7.1f MiB" % (t_n, rss_n / 1024))
        print("  ratio (numpy / ulpprof): time %.1fx, peak RSS %.1fx" % (
            t_n / max(t_u, 1e-9), rss_n / max(rss_u, 1)))
        for f in fails:
            print("FAIL: " + f)
        return 1 if fails else 0
    finally:
        shutil.rmtree(tmp, True)


if __name__ == "__main__":
    sys.exit(main())

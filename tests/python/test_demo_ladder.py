"""`ulpprof demo --ladder` against a numpy recomputation of every pair.

The demo runs the reference workload ten ways (miss, repeat, batch of 4,
hit, split, chunked prefill, the reduction order of 2 and 4 TP ranks, and
the miss's GEMMs on OpenBLAS and on Debian's reference BLAS) and prints its
ladder.  Every pairwise verdict, first divergence, flip count,
group and rung verdict of its ladder.json is recomputed here from the
snapshots with numpy (test_ladder_numpy.expected_ladder, written from
FORMAT.md), and the verdicts the workload is built to show are checked:
the repeat holds, batch size, cache, chunking and parallelism break, the
split fix equals the hit; rung 7 (the two BLAS libraries) is decided, and
holds or breaks as numpy finds the two runs' bits.  What the workload observed of its GEMMs
(`suffix_gemm`) is in /observed, not among the conditions in /run, so a
plain `ulpprof ladder DIR` over the demo's directory gives, without
`--ignore`, the very ladder the demo prints.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

REF_BLAS = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ladder_numpy as tl  # noqa: E402


def check_observed(rep):
    """Each run's /observed holds suffix_gemm (M = the suffix's rows), /run does not."""
    for r in rep["runs"]:
        with tl.h5py.File(r["path"], "r") as f:
            run = set(f["run"].attrs)
            obs = {k: (v.decode() if isinstance(v, bytes) else v)
                   for k, v in f["observed"].attrs.items()} if "observed" in f else {}
        tl.check("suffix_gemm" not in run and re.match(r"M=\d+", obs.get("suffix_gemm", "")),
                 "%s: suffix_gemm in /observed, not /run: %r %r" % (r["label"], run, obs))
    tl.check(rep["ignored_keys"] == [], "the demo ignores no key: %r" % rep["ignored_keys"])


def check_plain_ladder(d, demo_out, rep):
    """`ulpprof ladder DIR` prints the table the demo printed, and the same JSON."""
    p = subprocess.run([tl.ULPPROF, "ladder", d], capture_output=True, text=True)
    tl.check(p.returncode == 1 and p.stderr == "", "ladder DIR: exit %d %r" % (
        p.returncode, p.stderr))
    lines = demo_out.splitlines()
    start = [i for i, ln in enumerate(lines) if ln.startswith("=== ulpprof ladder")]
    end = [i for i, ln in enumerate(lines) if ln == "What the ladder says"]
    tl.check(len(start) == 1 and len(end) == 1 and lines[start[0]] == "=== ulpprof ladder " + d,
             "the demo's ladder header %r" % (start and lines[start[0]],))
    if len(start) == 1 and len(end) == 1:
        shown = "\n".join(lines[start[0] + 2:end[0] - 1]) + "\n"
        tl.check(shown == p.stdout, "ladder DIR prints what the demo prints:\n%s\n---\n%s" % (
            p.stdout, shown))
    q = subprocess.run([tl.ULPPROF, "ladder", "-f", "json", d], capture_output=True, text=True)
    plain = json.loads(q.stdout) if q.returncode == 1 else None
    tl.check(plain is not None and [r["path"] for r in plain["runs"]] == [
        r["path"] for r in rep["runs"]] and plain["rungs"] == rep["rungs"] and
        plain["pairs"] == rep["pairs"], "ladder -f json DIR is the demo's ladder.json")


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-demo-ladder-")
    try:
        d = os.path.join(tmp, "demo")
        env = dict(os.environ)
        env.pop("ULPPROF_BLAS", None)
        p = subprocess.run([tl.ULPPROF, "demo", "--ladder", "--dir", d], capture_output=True,
                           text=True, env=env)
        tl.check(p.returncode == 0, "demo --ladder exit %d: %s" % (p.returncode, p.stderr))
        with open(os.path.join(d, "ladder.json")) as f:
            rep = json.load(f)
        labels = [r["label"] for r in rep["runs"]]
        runs = [{0: tl.read_snapshot(r["path"])} for r in rep["runs"]]
        # No key ignored: every /run key that differs is a condition the demo varied.
        check_observed(rep)
        check_plain_ladder(d, p.stdout, rep)
        rungs = tl.compare_report("demo", rep, runs)
        verdicts = [r["verdict"] for r in rungs]
        # Rung 7: OpenBLAS against the reference BLAS, whichever way their bits
        # fall (compare_report checked the verdict against numpy); only where
        # either library is missing does the demo leave the pair out.
        blas = "openblas" in labels and "refblas" in labels
        if os.path.exists(REF_BLAS) and "cannot load OpenBLAS" not in p.stdout:
            tl.check(blas, "demo --ladder ran no rung-7 pair: %r" % labels)
        if blas:
            same = tl.compare_files(runs[labels.index("openblas")][0],
                                    runs[labels.index("refblas")][0])[0]
            want7 = "holds" if same else "breaks"
            tl.check(rep["rungs"][7]["keys"] == ["blas"] and
                     rep["rungs"][7]["deciding_pairs"] == 1, "rung 7 %r" % rep["rungs"][7])
        else:
            same, want7 = True, "untested"
            tl.check("(rung 7 not run: " in p.stdout, "the demo says why rung 7 was not run")
        tl.check(verdicts == ["holds", "breaks", "breaks", "breaks", "breaks", "untested",
                              "untested", want7], "demo verdicts %r" % verdicts)
        group = {lab: r["group"] for lab, r in zip(labels, rep["runs"])}
        tl.check(group["hit"] == group["split"] and group["miss"] == group["repeat"] and
                 len(set(group.values())) == 6 + (0 if not blas else 1 if same else 2),
                 "demo groups %r" % group)
        # The printed table says the same, rung by rung.
        for r in rungs:
            name = rep["rungs"][r["level"]]["name"]
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("  %-4d %s" % (
                r["level"], name))]
            tl.check(len(line) == 1 and r["verdict"] in line[0], "table line of rung %d: %r" % (
                r["level"], line))
        for png in ("ladder.png", "ladder_matrix.png"):
            path = os.path.join(d, "plots", png)
            tl.check(os.path.exists(path) and os.path.getsize(path) > 1000, "plot " + png)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tl.FAILS:
        print("%d failures" % len(tl.FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

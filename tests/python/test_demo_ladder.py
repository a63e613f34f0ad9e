"""`ulpprof demo --ladder` against a numpy recomputation of every pair.

The demo runs the reference workload eight ways (miss, repeat, batch of 4,
hit, split, chunked prefill, the reduction order of 2 and 4 TP ranks) and
prints its ladder.  Every pairwise verdict, first divergence, flip count,
group and rung verdict of its ladder.json is recomputed here from the
snapshots with numpy (test_ladder_numpy.expected_ladder, written from
FORMAT.md), and the verdicts the workload is built to show are checked:
the repeat holds, batch size, cache, chunking and parallelism break, the
split fix equals the hit.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ladder_numpy as tl  # noqa: E402


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-demo-ladder-")
    try:
        d = os.path.join(tmp, "demo")
        p = subprocess.run([tl.ULPPROF, "demo", "--ladder", "--dir", d], capture_output=True,
                           text=True)
        tl.check(p.returncode == 0, "demo --ladder exit %d: %s" % (p.returncode, p.stderr))
        with open(os.path.join(d, "ladder.json")) as f:
            rep = json.load(f)
        labels = [r["label"] for r in rep["runs"]]
        runs = [{0: tl.read_snapshot(r["path"])} for r in rep["runs"]]
        rungs = tl.compare_report("demo", rep, runs, ignore=("suffix_gemm",))
        verdicts = [r["verdict"] for r in rungs]
        tl.check(verdicts == ["holds", "breaks", "breaks", "breaks", "breaks", "untested",
                              "untested", "untested"], "demo verdicts %r" % verdicts)
        group = {lab: r["group"] for lab, r in zip(labels, rep["runs"])}
        tl.check(group["hit"] == group["split"] and group["miss"] == group["repeat"] and
                 len(set(group.values())) == 6, "demo groups %r" % group)
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

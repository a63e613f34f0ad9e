"""`ulpprof ladder` over many runs in few classes, against a numpy grouping.

60 runs in 7 classes (tests/perf/make_ladder_runs.py: class files written
once, the rest byte copies, in random name order).  The ladder keeps only a
class's first run open and compares the other runs with it; here every
file is read with h5py and the runs are grouped by the raw bytes of every
capture (name, shape and bits), never through ulpprof.  Checked: the groups
of the JSON report and each run's group index, that every pair inside a
group is identical and every pair across groups is not, and that each
pair's differing keys are its own runs' /run values.
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def content(path):
    """Every capture's name, occurrence, shape and raw bytes, in name order."""
    out = []
    with h5py.File(path, "r") as f:
        for name in sorted(f["captures"]):
            g = f["captures"][name]
            for occ in sorted(g):
                a = np.asarray(g[occ][()])
                out.append((name, occ, a.shape, a.tobytes()))
    return tuple(out)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "runs")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "perf", "make_ladder_runs.py"),
                        d, "60", "7", "--layers", "6", "--tokens", "8", "--hidden", "16",
                        "--seed", "3"], check=True)
        os.remove(os.path.join(d, "classes.json"))  # the grouping is recomputed below
        names = sorted(n for n in os.listdir(d) if n.endswith(".h5"))
        # numpy: runs grouped by content, groups in order of their first run.
        keys, groups = {}, []
        for i, n in enumerate(names):
            c = content(os.path.join(d, n))
            if c not in keys:
                keys[c] = len(groups)
                groups.append([])
            groups[keys[c]].append(i)
        group_of = {i: g for g, members in enumerate(groups) for i in members}
        check(len(groups) == 7, "numpy finds %d classes, not 7" % len(groups))
        runs_of = {}
        for i, n in enumerate(names):
            with h5py.File(os.path.join(d, n), "r") as f:
                runs_of[i] = {k: str(v.decode() if isinstance(v, bytes) else v)
                              for k, v in f["run"].attrs.items()}

        p = subprocess.run([ULPPROF, "ladder", "-f", "json", d], capture_output=True, text=True)
        check(p.returncode in (0, 1), "ladder exit %d: %s" % (p.returncode, p.stderr))
        rep = json.loads(p.stdout)
        check([os.path.basename(r["path"]) for r in rep["runs"]] == names, "run order")
        check(sorted(sorted(g) for g in rep["groups"]) == sorted(groups),
              "groups %s vs numpy %s" % (rep["groups"], groups))
        check(len(rep["pairs"]) == 60 * 59 // 2, "%d pairs" % len(rep["pairs"]))
        for r in rep["runs"]:
            gi = rep["groups"][r["group"]]
            check(r["index"] in gi, "run %d's group %d does not hold it" % (r["index"], r["group"]))
        for pr in rep["pairs"]:
            a, b = pr["a"], pr["b"]
            same = group_of[a] == group_of[b]
            check(bool(pr["identical"]) == same, "pair %d-%d identical %s, numpy %s"
                  % (a, b, pr["identical"], same))
            want = sorted(k for k in set(runs_of[a]) | set(runs_of[b])
                          if runs_of[a].get(k) != runs_of[b].get(k))
            got = sorted(k["key"] for k in pr["keys"])
            check(got == want, "pair %d-%d keys %s, want %s" % (a, b, got, want))
            for k in pr["keys"]:
                check(k["a"] == runs_of[a].get(k["key"]) and k["b"] == runs_of[b].get(k["key"]),
                      "pair %d-%d key %s values" % (a, b, k["key"]))
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok: 60 runs, %d classes" % len(groups))


if __name__ == "__main__":
    main()

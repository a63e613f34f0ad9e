"""`ulpprof ladder`'s memory does not grow with the pairs of runs.

A ladder of N runs has N(N-1)/2 pairs; bitwise-identical runs compare
alike, so the result keeps one summary per compare (a run against its
class's first run, and a pair of classes), and reads each pair from them.
Here: 150 and 600 tiny runs in 5 classes (tests/perf/make_ladder_runs.py),
the text and JSON ladders each run in a child process whose peak RSS
(getrusage) is read.  A ladder that kept every pair (~300 bytes each) adds
~90 KiB per run between the two; the bound is 24 KiB per run, which what
grows with the runs alone (paths, /run, one summary) stays far below.
The JSON report still lists every pair: its count, and that each pair's
"identical" is its runs' classes' (the class of each run read back from
the files' bytes with h5py), are checked too.
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
PEAK = ("import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'w'))\n"
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def peak_kib(out, *cmd):
    """Exit status and peak RSS (KiB) of cmd, run alone in a child of a child."""
    p = subprocess.run([sys.executable, "-c", PEAK, out] + list(cmd), capture_output=True,
                       text=True, check=True)
    rc, kib = p.stdout.split()
    return int(rc), int(kib)


def content(path):
    with h5py.File(path, "r") as f:
        return tuple((n, o, np.asarray(f["captures"][n][o][()]).tobytes())
                     for n in sorted(f["captures"]) for o in sorted(f["captures"][n]))


def make(d, n):
    subprocess.run([sys.executable, os.path.join(HERE, "..", "perf", "make_ladder_runs.py"), d,
                    str(n), "5", "--layers", "2", "--tokens", "4", "--hidden", "8", "--seed",
                    "11"], check=True)
    os.remove(os.path.join(d, "classes.json"))


def main():
    # A sanitizer's allocator keeps freed memory in quarantine and pads every block, so
    # peak RSS per run says nothing of the ladder's own memory under it.
    if any(lib in subprocess.run(["ldd", ULPPROF], capture_output=True, text=True).stdout
           for lib in ("libasan", "libtsan")):
        print("SKIPPED: a sanitized build measures its allocator, not the ladder")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        small, big = os.path.join(tmp, "small"), os.path.join(tmp, "big")
        make(small, 150)
        make(big, 600)
        out = os.path.join(tmp, "out")
        for fmt in ("table", "json"):
            rc_s, kib_s = peak_kib(out, ULPPROF, "ladder", "-f", fmt, small)
            rc_b, kib_b = peak_kib(out, ULPPROF, "ladder", "-f", fmt, big)
            # 5 classes of repeats: the repeat rung breaks (exit 1).
            check(rc_s == 1 and rc_b == 1, "%s ladders exit %d, %d" % (fmt, rc_s, rc_b))
            per_run = (kib_b - kib_s) / (600 - 150)
            print("%s: peak RSS %d KiB at 150 runs, %d KiB at 600: %.1f KiB per added run"
                  % (fmt, kib_s, kib_b, per_run))
            check(per_run < 24, "%s: %.1f KiB more per run" % (fmt, per_run))
        rep = json.load(open(out))
        names = sorted(n for n in os.listdir(big) if n.endswith(".h5"))
        cls, seen = [], {}
        for n in names:
            cls.append(seen.setdefault(content(os.path.join(big, n)), len(seen)))
        check(len(seen) == 5, "numpy finds %d classes" % len(seen))
        check(len(rep["pairs"]) == 600 * 599 // 2, "%d pairs in the JSON" % len(rep["pairs"]))
        want = [(a, b) for a in range(600) for b in range(a + 1, 600)]
        check([(p["a"], p["b"]) for p in rep["pairs"]] == want, "pair order")
        bad = [(p["a"], p["b"]) for p in rep["pairs"]
               if bool(p["identical"]) != (cls[p["a"]] == cls[p["b"]])]
        check(not bad, "%d pairs whose identical is not their classes': %s" % (len(bad), bad[:5]))
        check(len(rep["groups"]) == 5, "%d groups" % len(rep["groups"]))
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

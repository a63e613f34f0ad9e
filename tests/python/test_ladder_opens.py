"""`ulpprof ladder` reads each run's file a fixed number of times, not once per compare.

30 runs in 6 classes (tests/perf/make_ladder_runs.py, h5py-written files).
The ladder is run under `strace -f -e trace=openat` and every open(2) of
each run's file is counted.  A class's first run takes part in a compare
with every other class and with each member of its own, so a ladder that
reopens files per compare (to ask whether they hold digests only, or to
hash a run it had already opened) opens a first run many more times than a
run that is compared once.  Checked: every file is opened equally often,
and at most 5 times: the ladder's one open, which is also the command's
readability check (an ulpprof open is 3 open(2) calls: a probe, HDF5, its
pread descriptor), and one look for /digests.  A command that checks a
run by opening it before the ladder opens it again opens each file 7
times.  The count does not depend on timing.  Skipped (exit 77) without
strace.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def main():
    strace = shutil.which("strace")
    if strace is None:
        print("SKIP: no strace")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "runs")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "perf", "make_ladder_runs.py"),
                        d, "30", "6", "--layers", "4", "--tokens", "8", "--hidden", "16",
                        "--seed", "5"], check=True)
        os.remove(os.path.join(d, "classes.json"))
        names = sorted(n for n in os.listdir(d) if n.endswith(".h5"))
        trace = os.path.join(tmp, "trace.txt")
        p = subprocess.run([strace, "-f", "-qq", "-e", "trace=openat", "-o", trace,
                            ULPPROF, "ladder", "-f", "json", d], capture_output=True, text=True)
        if p.returncode not in (0, 1) and "ptrace" in p.stderr:
            print("SKIP: strace cannot trace here: " + p.stderr.strip())
            return 77
        check(p.returncode in (0, 1), "ladder exit %d: %s" % (p.returncode, p.stderr))
        opens = collections.Counter()
        pat = re.compile(r'openat\([^,]*, "([^"]*)"')
        with open(trace) as f:
            for line in f:
                m = pat.search(line)
                if m and m.group(1).startswith(d + "/"):
                    opens[os.path.basename(m.group(1))] += 1
        counts = [opens[n] for n in names]
        print("opens per file: min %d, max %d" % (min(counts), max(counts)))
        check(min(counts) >= 1, "a run's file was never opened: %s" % counts)
        check(max(counts) == min(counts), "files opened unequally often: %s" % dict(opens))
        check(max(counts) <= 5, "a file opened %d times (at most 5)" % max(counts))
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The perf harness's numpy comparison as a test oracle: runs
tests/perf/diff_numpy.py (vectorized numpy + h5py, no ulpprof code) on a
pair and checks its numbers against an `ulpprof diff -f json` report with
tests/perf/check_numpy.py (test_diff_many.py, test_diff_chunks.py)."""
import os
import subprocess
import sys

PERF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perf")


def agrees(pa, pb, report_json, tmp):
    """True when numpy's numbers for pa, pb are the report's; prints why not."""
    npout = os.path.join(tmp, "numpy.txt")
    with open(npout, "w") as f:
        subprocess.run([sys.executable, os.path.join(PERF, "diff_numpy.py"), pa, pb],
                       stdout=f, check=True)
    p = subprocess.run([sys.executable, os.path.join(PERF, "check_numpy.py"), npout, report_json],
                       capture_output=True, text=True)
    print(p.stdout + p.stderr, end="")
    if p.returncode != 0:
        print("FAIL: numpy's numbers differ")
        return False
    return True

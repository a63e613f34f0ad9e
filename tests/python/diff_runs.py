"""Helpers of the tests that diff one pair under many settings
(test_diff_many.py, test_diff_chunks.py): the JSON reports of every
setting, and the perf harness's numpy comparison as the oracle --
tests/perf/diff_numpy.py (vectorized numpy + h5py, no ulpprof code) checked
against a report by tests/perf/check_numpy.py."""
import json
import os
import subprocess
import sys

PERF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perf")


def json_reports(ulpprof, runs, pa, pb, tmp):
    """{tag: report} of `ulpprof diff -f json ARGS pa pb` under ULPPROF_READ=WAY
    for each tag: (ARGS, WAY) of runs, each expected to exit 1 (the pair
    differs); None after printing why when one does not."""
    reports = {}
    for tag, (args, way) in runs.items():
        out = os.path.join(tmp, tag + ".json")
        p = subprocess.run([ulpprof, "diff", "-f", "json", "-o", out] + args + [pa, pb],
                           capture_output=True, text=True, env=dict(os.environ, ULPPROF_READ=way))
        if p.returncode != 1:
            print("FAIL: %s: exit %d, %s" % (tag, p.returncode, p.stderr))
            return None
        with open(out) as f:
            reports[tag] = json.load(f)
    return reports


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

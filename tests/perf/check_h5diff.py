"""Checks h5diff's answer against `ulpprof diff -f json` for the same pair
(tests/perf/bench_diff.sh runs it after timing both).  h5diff answers
less: per dataset, how many elements differ ("N differences found"; a
dataset it does not name has none), no ULP distance, no logits.  Every
capture's count must be the report's `differing`.  Exit 0 when all agree,
1 with the first mismatches.
Usage: check_h5diff.py H5DIFF_OUTPUT ULPPROF_JSON"""
import json
import re
import sys


def main():
    counts = {}
    dataset = None
    for line in open(sys.argv[1]):
        m = re.match(r"dataset: </captures/(.+)/(\d+)> and ", line)
        if m:
            dataset = (m.group(1), int(m.group(2)))
            continue
        m = re.match(r"(\d+) differences? found", line)
        if m and dataset is not None:
            counts[dataset] = int(m.group(1))
        dataset = None
    rep = json.load(open(sys.argv[2]))
    bad = []
    n = 0
    for r in rep["rows"]:
        if r["status"] not in ("identical", "differs"):
            continue
        n += 1
        got = counts.pop((r["name"], r["occurrence"]), 0)
        if got != r["differing"]:
            bad.append("%s/%d: ulpprof %d differing, h5diff %d" % (r["name"], r["occurrence"],
                                                                   r["differing"], got))
    bad += ["%s/%d: h5diff counts %d, not in the report" % (k[0], k[1], v)
            for k, v in counts.items()]
    if n == 0 or bad:
        print("check_h5diff: MISMATCH\n  " + "\n  ".join(bad[:10] or ["no capture compared"]))
        return 1
    print("check_h5diff: h5diff and ulpprof count the same differing elements in %d captures" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())

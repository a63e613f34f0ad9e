"""Checks that diff_numpy.py and `ulpprof diff -f json` print the same
numbers for the same pair (tests/perf/bench_diff.sh runs it after timing
both): every shared capture's differing, max_ulp, mean_ulp, max_abs_diff,
max_abs and nonfinite_mismatch, and every logits row's argmax, margins and
largest perturbation.  Exit 0 when all agree, 1 with the first mismatches.
The same for diff_torch.py, which prints the same lines.
Usage: check_numpy.py NUMPY_OUTPUT ULPPROF_JSON [TOOL]   (TOOL names it: numpy)"""
import json
import math
import sys


def same(x, y, rel=0.0):
    if isinstance(x, float) or isinstance(y, float):
        if math.isnan(x) and math.isnan(y):
            return True
        return x == y or abs(x - y) <= rel * max(abs(x), abs(y))
    return x == y


def main():
    tool = sys.argv[3] if len(sys.argv) > 3 else "numpy"
    lines = [json.loads(s) for s in open(sys.argv[1]) if s.strip()]
    rep = json.load(open(sys.argv[2]))
    rows = {(r["name"], r["occurrence"]): r for r in rep["rows"]}
    logs = {lg["name"]: lg for lg in rep.get("logits", [])}
    bad = []
    nrows = nlog = 0
    for ln in lines:
        if "logits" in ln:
            lg = logs.get(ln["logits"])
            if lg is None:
                bad.append("%s: no logits analysis in the report" % ln["logits"])
                continue
            nlog += 1
            if lg["argmax_flips"] != ln["flips"]:
                bad.append("%s: flips %d vs %d" % (ln["logits"], lg["argmax_flips"], ln["flips"]))
            for key in ("argmax_a", "argmax_b", "margin_a", "margin_b", "max_perturbation"):
                got, want = lg["per_row"][key], ln[key]
                diffs = [i for i, (g, w) in enumerate(zip(got, want)) if not same(g, w)]
                if len(got) != len(want) or diffs:
                    bad.append("%s %s: %d rows differ (first %s)" % (ln["logits"], key, len(diffs),
                                                                     diffs[:3]))
            continue
        r = rows.get((ln["name"], ln["occurrence"]))
        if r is None:
            bad.append("%s/%d: not in the report" % (ln["name"], ln["occurrence"]))
            continue
        nrows += 1
        for key in ("differing", "max_ulp", "max_abs_diff", "max_abs", "nonfinite_mismatch",
                    "mean_ulp"):
            if not same(r[key], ln[key], 1e-12 if key == "mean_ulp" else 0.0):
                bad.append("%s/%d %s: ulpprof %r, %s %r" % (ln["name"], ln["occurrence"], key,
                                                            r[key], tool, ln[key]))
    if nrows == 0 or nrows != sum(1 for r in rep["rows"] if r["status"] in ("identical",
                                                                              "differs")):
        bad.append("%s compared %d captures, the report %d" % (tool, nrows, len(rows)))
    if nlog != len(logs):
        bad.append("%s analysed %d logits, the report %d" % (tool, nlog, len(logs)))
    if bad:
        print("check_numpy: MISMATCH\n  " + "\n  ".join(bad[:10]))
        return 1
    print("check_numpy: %s and ulpprof agree on %d captures and %d logits" % (tool, nrows, nlog))
    return 0


if __name__ == "__main__":
    sys.exit(main())

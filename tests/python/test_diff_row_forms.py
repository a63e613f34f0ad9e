"""A name whose captures carry positions but rows of several forms (a
dtype or a row shape that changes from one capture to the next) is paired
occurrence by occurrence, not gathered on (request, position) keys into one
compared view -- which took A's first capture's form for every row and
called a file and its own copy a dtype (or shape) mismatch.

Files written by the capture library (capwriter.py); every number checked
with numpy:
  1. mixed dtypes: `h` in f32 at positions 0-3, in f64 at 4-7; the file
     against its copy is identical (exit 0), one row per occurrence;
  2. growing rows, as an engine's decode-step attention scores: `scores`
     [1, p + 1] at position p = 4..9 (a prefill [4, 4] first); against its
     copy identical; with one element moved by 3 ULP in occurrence 3 the
     row of h#3 gives 1 differing element and max_ulp 3, and the first
     divergence names it;
  3. a name of one form keeps the aligned pairing (positions_compared);
  4. two runs batched differently: a mixed-form name gives a shape
     mismatch whose hint says why it was paired by occurrence.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capwriter  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def diff(a, b, *args):
    p = subprocess.run([ULPPROF, "diff", "-f", "json", *args, a, b], capture_output=True,
                       text=True)
    check(p.returncode in (0, 1), "diff %s %s: exit %d: %s" % (a, b, p.returncode, p.stderr))
    return p.returncode, json.loads(p.stdout) if p.returncode in (0, 1) else None


def rows_of(doc):
    return {(r["name"], r["occurrence"]): r for r in doc["rows"]}


def ulp_f32(x, y):
    """The ULP distance of two finite float32 arrays (ordered integers)."""
    def ordered(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(ordered(x) - ordered(y))


def write(path, batched):
    """The run: `h` mixed dtypes, `scores` growing rows, `mlp` one form.
    batched: the prefill's rows as one capture [4, ...] (else 2 + 2)."""
    rng = np.random.default_rng(7)
    w = capwriter.Writer(path, label=os.path.basename(path))
    h32 = rng.standard_normal((4, 4)).astype(np.float32)
    h64 = rng.standard_normal((4, 4))
    mlp = rng.standard_normal((10, 8)).astype(np.float32)
    pre = rng.standard_normal((4, 4)).astype(np.float32)
    steps = [rng.standard_normal((1, p + 1)).astype(np.float32) for p in range(4, 10)]
    if batched:
        w.capture("h", h32, "f32", positions=[0, 1, 2, 3], requests=[0] * 4)
        w.capture("scores", pre, "f32", positions=[0, 1, 2, 3], requests=[0] * 4)
        w.capture("mlp", mlp[:4], "f32", positions=[0, 1, 2, 3], requests=[0] * 4)
    else:
        for lo in (0, 2):
            w.capture("h", h32[lo:lo + 2], "f32", positions=[lo, lo + 1], requests=[0] * 2)
            w.capture("scores", pre[lo:lo + 2], "f32", positions=[lo, lo + 1], requests=[0] * 2)
            w.capture("mlp", mlp[lo:lo + 2], "f32", positions=[lo, lo + 1], requests=[0] * 2)
    w.capture("h", h64, "f64", positions=[4, 5, 6, 7], requests=[0] * 4)
    for k, p in enumerate(range(4, 10)):
        w.capture("scores", steps[k], "f32", positions=[p], requests=[0])
        w.capture("mlp", mlp[p:p + 1], "f32", positions=[p], requests=[0])
    w.close()


def main():
    tmp = tempfile.mkdtemp(prefix="ulp-row-forms.")
    try:
        a, b = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
        write(a, batched=True)
        shutil.copyfile(a, b)

        # 1-3: the file against its own copy.
        rc, doc = diff(a, b)
        check(rc == 0 and doc["identical"], "a vs its copy: exit %d, identical %s" % (
            rc, doc and doc["identical"]))
        rows = rows_of(doc)
        check(("h", 0) in rows and ("h", 1) in rows, "h: a row per occurrence: %s" % list(rows))
        check(rows.get(("h", 1), {}).get("dtype") == "f64", "h#1 is the f64 one")
        check(all(r["status"] == "identical" for r in doc["rows"]),
              "every row identical: %s" % [(r["name"], r["status"]) for r in doc["rows"]])
        check(sum(1 for k in rows if k[0] == "scores") == 7, "scores: 7 occurrences, 7 rows")
        mlp = rows.get(("mlp", 0), {})
        check(mlp.get("positions_compared") == 10, "mlp stays aligned on 10 keys: %s" % mlp)

        # 2: one element of scores#3 (position 6, 7 elements) moved by 3 ULP.
        with h5py.File(b, "r+") as f:
            ds = f["captures/scores/3"]
            before = ds[...]
            bits = before.view(np.int32).copy()
            bits[0, 5] += 3
            ds[...] = bits.view(np.float32)
        with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
            want_ulp = ulp_f32(fa["captures/scores/3"][...], fb["captures/scores/3"][...])
        rc, doc = diff(a, b)
        rows = rows_of(doc)
        s3 = rows.get(("scores", 3), {})
        check(rc == 1 and s3.get("status") == "differs", "scores#3 differs: %s" % s3.get("status"))
        check(s3.get("differing") == int((want_ulp > 0).sum()) == 1,
              "scores#3 differing %s (numpy %d)" % (s3.get("differing"), (want_ulp > 0).sum()))
        check(s3.get("max_ulp") == int(want_ulp.max()) == 3,
              "scores#3 max_ulp %s (numpy %d)" % (s3.get("max_ulp"), want_ulp.max()))
        fd = doc.get("first_divergence") or {}
        check(fd.get("name") == "scores" and fd.get("occurrence") == 3,
              "first divergence scores#3: %s" % fd)
        others = [k for k, r in rows.items() if k != ("scores", 3) and r["status"] != "identical"]
        check(not others, "only scores#3 differs: %s" % others)

        # 4: batched differently (the prefill in two captures of 2 rows).
        c = os.path.join(tmp, "c.h5")
        write(c, batched=False)
        rc, doc = diff(a, c)
        rows = rows_of(doc)
        h0 = rows.get(("h", 0), {})
        check(h0.get("status") == "shape_mismatch", "h#0 of 4 rows vs 2: %s" % h0.get("status"))
        check("several dtypes or row shapes" in (h0.get("hint") or ""),
              "the hint says why: %r" % h0.get("hint"))
        mlp = rows.get(("mlp", 0), {})
        check(mlp.get("positions_compared") == 10 and mlp.get("status") == "identical",
              "mlp aligned across batchings: %s %s" % (mlp.get("status"),
                                                      mlp.get("positions_compared")))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("%d check(s) failed" % len(FAILS))
        sys.exit(1)
    print("test_diff_row_forms: all checks passed")


if __name__ == "__main__":
    main()

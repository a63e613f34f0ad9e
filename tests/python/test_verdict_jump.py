#!/usr/bin/python3
"""The logits-jump evidence of `ulpprof diff`'s verdict (docs/verdicts.md):
a pair whose activations differ by rounding-sized amounts, whose logits
move by a few ULP on every row but one, and on that row by far more than
its top-2 margins and 16x the median row perturbation (the vLLM case of a
replay that changes the output at some prompt lengths only), is "not
rounding: looks like a defect", with the jump as its evidence.  The same
pair without the jump stays rounding.  Every count is recomputed here with
numpy from the arrays written, never read back from ulpprof."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capwriter  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
ROWS, H, V, JUMP_ROW = 8, 16, 50, 5
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)


def runs(jump):
    """(A, B) as arrays: layer 0 one float32 ULP up in B on every row; logits
    a few ULP apart, and with `jump` one row whose runner-up overtakes by 10."""
    rng = np.random.default_rng(11)
    l0 = rng.standard_normal((ROWS, H)).astype(np.float32)
    za = rng.standard_normal((ROWS, V)).astype(np.float32)
    l0b = np.nextafter(l0, np.float32(np.inf))
    zb = za.copy()
    for i in range(ROWS):
        k = int(rng.integers(V))
        zb[i, k] = np.nextafter(np.nextafter(za[i, k], np.float32(np.inf)), np.float32(np.inf))
    if jump:
        order = np.argsort(za[JUMP_ROW])
        zb[JUMP_ROW, order[-2]] = za[JUMP_ROW, order[-1]] + np.float32(10)
    return (l0, za), (l0b, zb)


def write(path, label, l0, z):
    w = capwriter.Writer(path, label)
    pos = np.arange(ROWS)
    assert w.capture("model.layers.0.out", l0, "f32", positions=pos, layer=0) == 0
    assert w.capture("lm_head", z, "f32", positions=pos, role="logits",
                     inputs=["model.layers.0.out"]) == 0
    w.close()


def expected_jumps(za, zb):
    """docs/verdicts.md: rows whose largest |dz| exceeds 16x the median of the
    rows' nonzero largest |dz| and both runs' top-2 margins."""
    a64, b64 = za.astype(np.float64), zb.astype(np.float64)
    p = np.abs(a64 - b64).max(axis=1)
    med = np.sort(p[p > 0])[len(p[p > 0]) // 2]

    def margin(z):
        s = np.sort(z, axis=1)
        return s[:, -1] - s[:, -2]

    mx = np.maximum(margin(a64), margin(b64))
    return int(np.sum((p > 16 * med) & (p > mx)))


def verdict(a, b):
    p = subprocess.run([ULPPROF, "diff", "-f", "json", a, b], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 1, "diff %s %s: exit %d %s" % (a, b, p.returncode, p.stderr))
    return json.loads(p.stdout)["verdict"] if p.returncode == 1 else None


def main():
    with tempfile.TemporaryDirectory() as d:
        for jump in (True, False):
            (l0, za), (l0b, zb) = runs(jump)
            a, b = os.path.join(d, "a%d.h5" % jump), os.path.join(d, "b%d.h5" % jump)
            write(a, "a", l0, za)
            write(b, "b", l0b, zb)
            want = expected_jumps(za, zb)
            check(want == (1 if jump else 0), "numpy finds %d jump rows (jump=%s)" % (want, jump))
            v = verdict(a, b)
            if v is None:
                continue
            check(v["near_ties"]["jump_rows"] == want,
                  "jump=%s: jump_rows %r, numpy %d" % (jump, v["near_ties"]["jump_rows"], want))
            if jump:
                check(v["kind"] == "defect", "with the jump: verdict %s" % v["kind"])
                check(any(e.startswith("a logits jump at lm_head: 1 of %d rows" % ROWS)
                          for e in v["evidence"]), "evidence %r" % v["evidence"])
            else:
                check(v["kind"] == "rounding", "without the jump: verdict %s (%s)"
                      % (v["kind"], v["summary"]))
    print("%d failures" % len(failures) if failures else "ok: the logits jump is a defect")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

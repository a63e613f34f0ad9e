"""`ulpprof diff DIR DIR` of run directories: each differing rank's JSON
report carries the verdict (`verdict`, not null), as `diff A B` of the two
files does; and bad input at a later rank gives exit 2, one stderr line
naming the file, and nothing on stdout (no half-written JSON document).

Two runs of 2 ranks (/env rank), written with h5py
(test_ladder_numpy.write_run): rank 0 equal, B's rank 1 perturbed one bf16
ULP (bits ^ 1) from layer 1 on.  The verdict's bound is recomputed here with
numpy from the tensors (docs/verdicts.md: bound = 2 ulp_bf16(S) + 2 K u S,
K = the last axis, u = 2^-24).  A third run C has a good rank 0 and a rank 1
whose deflated chunk is overwritten with garbage: the file opens (its
metadata is sound) and fails only when rank 1's data is read, after rank 0's
report was made.
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
import diffsnap as ds  # noqa: E402
import test_ladder_numpy as tl  # noqa: E402

ULPPROF = tl.ULPPROF
FAILS = []
RUN = {"batch_size": "1", "cache": "miss", "split": "none", "tp": "1", "block_size": "16"}


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


def ulp_bf16(x):
    """The spacing of bf16 at |x| (normal range)."""
    return 2.0 ** (np.floor(np.log2(abs(x))) - 7)


def layer_values(path, name):
    """The capture's values (h5py reads the file's bf16 type as float32)."""
    with h5py.File(path, "r") as f:
        return np.array(f["captures"][name]["0"][()], dtype=np.float64)


def run(args):
    p = subprocess.run([ULPPROF] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def main():
    tmp = tempfile.mkdtemp(prefix="ulp-ranks-verdict-")
    try:
        a, b, c = (os.path.join(tmp, x) for x in "abc")
        for d in (a, b, c):
            os.mkdir(d)
        for r in range(2):
            tl.write_run("%s/%d.h5" % (a, r), RUN, "a", env={"rank": str(r)})
            tl.write_run("%s/%d.h5" % (b, r), RUN, "b", env={"rank": str(r)},
                         perturb=(1, 2) if r == 1 else None)
        # C: rank 0 as A's; rank 1 one deflated capture whose chunk is garbage.
        shutil.copy("%s/0.h5" % a, "%s/0.h5" % c)
        bad = "%s/1.h5" % c
        x = tl.base_tensors()[0][0]
        ds.write_snapshot(bad, [{"name": "model.layers.0.out", "bits": x, "dtype": "bf16",
                                 "layer": 0, "chunks": x.shape}],
                          label="c", run=RUN, env={"rank": "1"})
        with h5py.File(bad, "r") as f:
            info = f["captures/model.layers.0.out/0"].id.get_chunk_info(0)
        with open(bad, "r+b") as f:
            f.seek(info.byte_offset)
            f.write(b"\xff" * info.size)

        # The verdict of each rank pair, as the two-file diff gives it.
        rc, out, err = run(["diff", "--format", "json", a, b])
        check(rc == 1, "diff A B (dirs): exit %d, want 1 (%s)" % (rc, err.strip()))
        doc = json.loads(out)
        ranks = {e["rank"]: e["report"] for e in doc["ranks"]}
        check(sorted(ranks) == [0, 1], "ranks %s" % sorted(ranks))
        check(ranks[0]["identical"] is True and ranks[0].get("verdict") is None,
              "rank 0: identical, no verdict: %s" % ranks[0].get("verdict"))
        v = ranks[1].get("verdict")
        check(v is not None, "rank 1: verdict null in the run-directory JSON")
        rc2, out2, _ = run(["diff", "--format", "json", "%s/1.h5" % a, "%s/1.h5" % b])
        check(rc2 == 1, "diff of the rank-1 files: exit %d" % rc2)
        check(v == json.loads(out2)["verdict"], "rank 1 verdict differs from the two-file diff's")
        if v is not None:
            name = "model.layers.1.out"
            xa = layer_values("%s/1.h5" % a, name)
            xb = layer_values("%s/1.h5" % b, name)
            d = float(np.max(np.abs(xa - xb)))
            s = float(max(np.max(np.abs(xa)), np.max(np.abs(xb))))
            k = xa.shape[-1]
            bound = 2 * ulp_bf16(s) + 2 * k * 2.0 ** -24 * s
            bd = v["bound"]
            check(v["kind"] == "rounding" and bd["site"] == name, "verdict %s at %s"
                  % (v["kind"], bd["site"]))
            check(bd["max_abs_diff"] == d and bd["scale"] == s and bd["k"] == k,
                  "bound inputs %s, numpy |a-b| %r S %r K %d" % (bd, d, s, k))
            check(abs(bd["bound"] - bound) <= 1e-12 * bound, "bound %r, numpy %r"
                  % (bd["bound"], bound))
        # The table and Markdown show it as well.
        rc, out, _ = run(["diff", "--color", "never", a, b])
        check(rc == 1 and "rounding: introduced at model.layers.1.out" in out,
              "table of dirs: exit %d, no verdict line" % rc)

        # Bad input at rank 1: exit 2, one stderr line naming the file, stdout empty.
        for fmt in ("json", "table", "markdown"):
            rc, out, err = run(["diff", "--format", fmt, a, c])
            check(rc == 2, "diff %s A C: exit %d, want 2" % (fmt, rc))
            check(out == "", "diff %s A C: stdout holds %d bytes of a report: %r"
                  % (fmt, len(out), out[:80]))
            lines = err.strip().splitlines()
            check(len(lines) == 1 and bad in err, "diff %s A C: stderr %r" % (fmt, err))
    finally:
        shutil.rmtree(tmp)
    if FAILS:
        print("%d failures" % len(FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

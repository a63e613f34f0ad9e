"""Conditions, observations and the ladder's verdicts, on hand-built runs.

Runs are written with h5py (test_ladder_numpy.write_run: the same tensors,
optionally one perturbed from a chosen layer and row on); the verdicts each
set must give are derived by hand from FORMAT.md's rules and written out
below, never taken from ulpprof:

- Several keys of one rung that differ together decide that rung only when
  the runs differ: `hit` (cache=hit) and `split` (split=at prefix_len) are
  bitwise identical, and their pair must not make rung 2 hold when the miss,
  which each of them differs from, is left out.
- `/observed` is never compared: runs that differ only there are repeats.
- A run that cannot be read is named in one stderr line, the ladder of the
  others is printed as it would be without it, and the exit status is 2.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ladder_numpy as tl  # noqa: E402

check = tl.check
BASE = {"batch_size": "1", "cache": "miss", "split": "none", "tp": "1"}


def ladder(args):
    p = subprocess.run([tl.ULPPROF, "ladder", "-f", "json"] + args, capture_output=True,
                       text=True)
    rep = json.loads(p.stdout) if p.stdout.strip() else None
    return p.returncode, rep, p.stderr


def rung(rep, level):
    g = rep["rungs"][level]
    return g["verdict"], g["deciding_pairs"], g["breaking_pairs"], g["mixed_pairs"]


def write(tmp, name, over, perturb=None, observed=None):
    path = os.path.join(tmp, name + ".h5")
    tl.write_run(path, dict(BASE, **over), name, perturb=perturb)
    if observed is not None:
        with h5py.File(path, "a") as f:
            g = f.create_group("observed")
            for k, v in observed.items():
                g.attrs[k] = v
    return path


def offsetting_keys(tmp):
    miss = write(tmp, "miss", {})
    hit = write(tmp, "hit", {"cache": "hit"}, perturb=(1, 2))
    split = write(tmp, "split", {"split": "at prefix_len"}, perturb=(1, 2))   # = hit
    both = write(tmp, "both", {"cache": "hit", "split": "at prefix_len"}, perturb=(2, 0))

    # hit vs split: cache and split both differ and the runs are identical.
    # Nothing varies one key of rung 2 alone: untested (0 deciding, 1 mixed).
    rc, rep, err = ladder([hit, split])
    check(rc == 0 and rep is not None, "hit, split: exit %d %r" % (rc, err))
    if rep:
        check(rung(rep, 2) == ("untested", 0, 0, 1), "hit, split: rung 2 %r" % (rung(rep, 2),))
        check(rep["pairs"][0]["identical"] and rep["pairs"][0]["rung"] is None,
              "hit, split: the pair decides nothing %r" % rep["pairs"][0])

    # With the miss: miss-hit (cache alone) and miss-split (split alone) both
    # differ and decide rung 2; hit-split is mixed.  Breaks, 2 of 2.
    rc, rep, err = ladder([miss, hit, split])
    check(rc == 1 and rep is not None, "miss, hit, split: exit %d %r" % (rc, err))
    if rep:
        check(rung(rep, 2) == ("breaks", 2, 2, 1), "miss, hit, split: rung 2 %r" % (rung(rep, 2),))

    # Two keys of rung 2 differ and the runs differ: rung 2 breaks whichever
    # key did it (1 of 1).
    rc, rep, err = ladder([miss, both])
    check(rc == 1 and rep is not None, "miss, both: exit %d %r" % (rc, err))
    if rep:
        check(rung(rep, 2) == ("breaks", 1, 1, 0), "miss, both: rung 2 %r" % (rung(rep, 2),))


def observations(tmp):
    # The same tensors and /run; /observed differs: a repeat, which holds.
    a = write(tmp, "oa", {}, observed={"suffix_gemm": "M=127: 128x128"})
    b = write(tmp, "ob", {}, observed={"suffix_gemm": "M=15: 16x64, split-K 4"})
    # batch_size differs, and the tensors: rung 1 breaks, /observed aside.
    c = write(tmp, "oc", {"batch_size": "4"}, perturb=(0, 1), observed={"wall_ms": "12"})
    rc, rep, err = ladder([a, b, c])
    check(rc == 1 and rep is not None, "observed: exit %d %r" % (rc, err))
    if rep:
        check(rung(rep, 0) == ("holds", 1, 0, 0), "observed: rung 0 %r" % (rung(rep, 0),))
        check(rung(rep, 1) == ("breaks", 2, 2, 0), "observed: rung 1 %r" % (rung(rep, 1),))
        check(all("suffix_gemm" not in p["differing_keys"] for p in rep["pairs"]),
              "observed: no pair lists an observation among its keys")
    p = subprocess.run([tl.ULPPROF, "ls", "--json", a], capture_output=True, text=True)
    got = json.loads(p.stdout)[0] if p.returncode == 0 else {}
    check(got.get("observed") == {"suffix_gemm": "M=127: 128x128"} and
          "suffix_gemm" not in got.get("run", {}), "ls --json of oa: %r" % (got,))


def unreadable_run(tmp):
    d = os.path.join(tmp, "dir")
    os.makedirs(d)
    runs = [write(d, "a", {}), write(d, "b", {}), write(d, "c", {"tp": "2"}, perturb=(3, 3))]
    bad = os.path.join(d, "bb.h5")
    with open(bad, "wb") as f:
        f.write(b"not a snapshot\n" * 10)
    rc0, alone, _ = ladder(runs)
    rc, rep, err = ladder([d])
    lines = err.strip().splitlines()
    check(rc == 2, "a bad run in the directory: exit %d, expected 2" % rc)
    check(len(lines) == 1 and bad in lines[0], "one stderr line naming %s: %r" % (bad, lines))
    check(rep is not None and alone is not None and
          [r["path"] for r in rep["runs"]] == runs, "the other runs' ladder is printed")
    if rep and alone:
        check([rung(rep, g) for g in range(8)] == [rung(alone, g) for g in range(8)] and
              rung(rep, 0) == ("holds", 1, 0, 0) and rung(rep, 4) == ("breaks", 2, 2, 0),
              "the ladder without the bad run: %r" % [rung(rep, g) for g in range(8)])
    # Named on the command line, the same; only one readable run left: no ladder.
    rc, rep, err = ladder([runs[0], bad])
    check(rc == 2 and rep is None and len(err.strip().splitlines()) == 2 and bad in err,
          "one readable run of two: exit %d, %r" % (rc, err))
    # A run directory with a bad rank file, and one with no snapshot, among
    # the runs: each named once, the others' ladder printed in their order.
    rdir, empty = os.path.join(tmp, "ranks"), os.path.join(tmp, "empty")
    os.makedirs(rdir)
    os.makedirs(empty)
    shutil.copy(runs[0], os.path.join(rdir, "0.h5"))
    rbad = os.path.join(rdir, "1.h5")
    shutil.copy(bad, rbad)
    rc, rep, err = ladder([runs[0], rdir, runs[1], empty, runs[2]])
    lines = err.strip().splitlines()
    check(rc == 2 and len(lines) == 2 and rbad in lines[0] and empty in lines[1],
          "bad run directories: exit %d, %r" % (rc, lines))
    check(rep is not None and [r["path"] for r in rep["runs"]] == runs,
          "bad run directories: the other runs' ladder, in order")


def attrs(path, group):
    with h5py.File(path, "r") as f:
        if group not in f:
            return None
        return {k: (v.decode() if isinstance(v, bytes) else str(v))
                for k, v in f[group].attrs.items()}


def writers(tmp):
    """The Python helper, the capture library's ULPPROF_OBSERVED and `ulpprof import`."""
    src, build = os.environ.get("ULPPROF_SOURCE_DIR", "."), tl.BUILD
    env = dict(os.environ, PYTHONPATH=os.path.join(src, "python"), ULPPROF_PYTHON=sys.executable,
               ULPPROF_CAPTURE_LIBRARY=os.path.join(build, "capture",
                                                    "libulpprof_capture.so"))
    try:
        import numpy as np
        import torch  # noqa: F401
    except ImportError:
        print("SKIPPED: the Python helper's part needs torch and numpy")
        return
    out = os.path.join(tmp, "torch.h5")
    code = ("import sys, torch, ulpprof.torch\n"
            "sys.path.insert(0, %r)\n"
            "import tiny_model\n"
            "m, ids = tiny_model.make(1, tokens=4, layers=1, dtype='float32')\n"
            "with torch.no_grad(), ulpprof.torch.capture(m, %r, label='t', "
            "run={'cache': 'miss'}, observed={'wall_ms': 7}):\n"
            "    m(ids)\n" % (os.path.join(src, "samples", "pytorch"), out))
    p = subprocess.run([sys.executable, "-c", code], env=dict(env, ULPPROF_OBSERVED="host=h1"),
                       capture_output=True, text=True)
    check(p.returncode == 0, "torch capture with observed=: %r" % p.stderr[-2000:])
    if p.returncode == 0:
        check(attrs(out, "run") == {"cache": "miss"} and
              attrs(out, "observed") == {"wall_ms": "7", "host": "h1"},
              "torch.h5: /run %r /observed %r" % (attrs(out, "run"), attrs(out, "observed")))
    npy, imp = os.path.join(tmp, "x.npy"), os.path.join(tmp, "imported.h5")
    np.save(npy, np.arange(8, dtype=np.float32).reshape(2, 4))
    p = subprocess.run([tl.ULPPROF, "import", "-o", imp, "--attr", "cache=hit", "--observed",
                        "dumped_by=sglang", npy], env=env, capture_output=True, text=True)
    check(p.returncode == 0, "import --observed: %r" % p.stderr)
    if p.returncode == 0:
        check(attrs(imp, "run") == {"cache": "hit"} and
              attrs(imp, "observed") == {"imported": "ulpprof import", "dumped_by": "sglang"},
              "imported.h5: /run %r /observed %r" % (attrs(imp, "run"), attrs(imp, "observed")))
    p = subprocess.run([tl.ULPPROF, "import", "-o", imp + "2", "--observed", "novalue", npy],
                       env=env, capture_output=True, text=True)
    check(p.returncode == 2 and len(p.stderr.splitlines()) == 1 and "novalue" in p.stderr,
          "import --observed without '=': %d %r" % (p.returncode, p.stderr))


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-ladder-conditions-")
    try:
        offsetting_keys(tmp)
        observations(tmp)
        unreadable_run(tmp)
        writers(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tl.FAILS:
        print("%d failures" % len(tl.FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

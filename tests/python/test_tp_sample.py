"""The tensor-parallel sample on real torch.distributed, and its ladder.

samples/pytorch/tp_sample.py runs under torchrun (gloo, this CPU machine)
with 1, 2 and 4 ranks, one snapshot per rank.  Checked here with numpy and
h5py, never through ulpprof:
- every rank of a run holds the same replicated tensors, bit for bit (they
  come out of the all-reduce / all-gather);
- `ulpprof ladder` over the three run directories agrees with the numpy
  recomputation of every pair (test_ladder_numpy.expected_ladder, rank by
  rank over common ranks), and rung 4 breaks;
- `ulpprof diff` of two run directories compares rank r with rank r: its
  JSON per rank agrees with numpy on identical / first divergence.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ladder_numpy as tl  # noqa: E402

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLE = os.path.join(SRC, "samples", "pytorch", "tp_sample.py")


def launcher():
    exe = shutil.which("torchrun")
    return [exe] if exe else [sys.executable, "-m", "torch.distributed.run"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_tp(n, out, logs):
    """torchrun with n ranks, in the background (the three runs overlap)."""
    env = dict(os.environ, ULPPROF_CAPTURE_LIBRARY=os.path.join(
        tl.BUILD, "collector", "libulpprof_capture.so"), OMP_NUM_THREADS="1")
    env.pop("ULPPROF_OUTPUT", None)
    cmd = launcher() + ["--redirects", "1", "--tee", "1", "--log_dir", logs,
                        "--nproc_per_node", str(n), "--master_port", str(free_port()),
                        SAMPLE, "--out", out, "--layers", "3", "--tokens", "16"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-tp-")
    try:
        runs_dir = os.path.join(tmp, "runs")
        dirs = [os.path.join(runs_dir, "tp%d" % n) for n in (1, 2, 4)]
        procs = [start_tp(n, d, os.path.join(tmp, "logs%d" % n)) for n, d in zip((1, 2, 4), dirs)]
        for n, p in zip((1, 2, 4), procs):
            out, _ = p.communicate(timeout=600)
            tl.check(p.returncode == 0, "torchrun tp=%d: exit %d\n%s" % (n, p.returncode,
                                                                          out[-2000:]))
        if tl.FAILS:
            raise SystemExit(1)
        runs = []
        for n, d in zip((1, 2, 4), dirs):
            files = sorted(os.listdir(d))
            tl.check(files == ["%d.h5" % r for r in range(n)], "tp%d files %r" % (n, files))
            snaps = {int(tl.read_snapshot(os.path.join(d, f))["env"]["rank"]):
                     tl.read_snapshot(os.path.join(d, f)) for f in files}
            tl.check(sorted(snaps) == list(range(n)), "tp%d ranks %r" % (n, sorted(snaps)))
            tl.check(all(s["run"]["tp"] == str(n) for s in snaps.values()), "tp%d /run tp" % n)
            # Replicated: every rank's tensors are rank 0's, bit for bit.
            for r, s in snaps.items():
                for c0, c in zip(snaps[0]["caps"], s["caps"]):
                    tl.check(c0["name"] == c["name"] and np.array_equal(c0["bits"], c["bits"]),
                             "tp%d rank %d %s is not replicated" % (n, r, c["name"]))
            runs.append(snaps)

        rc, rep, err = tl.run_ladder([runs_dir])
        tl.check(rc == 1, "ladder exit %d: %s" % (rc, err))
        if rep:
            rungs = tl.compare_report("tp", rep, runs)
            tl.check(rungs[4]["verdict"] == "breaks" and rungs[4]["deciding"] == 3,
                     "rung 4: %r" % rungs[4])
            tl.check([len(r["files"]) for r in rep["runs"]] == [1, 2, 4], "rank counts")

        p = subprocess.run([tl.ULPPROF, "diff", "-f", "json", dirs[1], dirs[2]],
                           capture_output=True, text=True)
        tl.check(p.returncode in (0, 1), "diff tp2 tp4: exit %d %s" % (p.returncode, p.stderr))
        if p.returncode in (0, 1):
            d = json.loads(p.stdout)
            tl.check(d["format"] == "ulpprof-diff-ranks" and [x["rank"] for x in d["ranks"]] ==
                     [0, 1] and d["ranks_only_a"] == [] and d["ranks_only_b"] == [2, 3],
                     "diff tp2 tp4 ranks %r" % {k: d[k] for k in d if k != "ranks"})
            for x in d["ranks"]:
                ident, first, flips, _ = tl.compare_files(runs[1][x["rank"]], runs[2][x["rank"]])
                got = x["report"]
                tl.check(got["identical"] == ident, "diff rank %d identical" % x["rank"])
                fd = got["first_divergence"]
                tl.check((fd is None) == (first is None) and
                         (fd is None or fd["name"] == first["capture"]),
                         "diff rank %d first divergence %r vs %r" % (x["rank"], fd, first))
            # Ranks 2 and 3 only in tp4: the runs differ whatever ranks 0 and 1 say.
            tl.check(d["identical"] is False and p.returncode == 1, "diff tp2 tp4 verdict")
        # A run against itself: identical, exit 0; a run without a shared rank: exit 2.
        p = subprocess.run([tl.ULPPROF, "diff", dirs[2], dirs[2]], capture_output=True, text=True)
        tl.check(p.returncode == 0 and "4 rank pairs compared: all bitwise identical" in p.stdout,
                 "diff tp4 tp4: %d" % p.returncode)
        lonely = os.path.join(tmp, "lonely")
        os.makedirs(lonely)
        shutil.copy(os.path.join(dirs[2], "3.h5"), os.path.join(lonely, "3.h5"))
        p = subprocess.run([tl.ULPPROF, "diff", dirs[0], lonely], capture_output=True, text=True)
        tl.check(p.returncode == 2 and "no rank in common" in p.stderr,
                 "no common rank: %d %r" % (p.returncode, p.stderr))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tl.FAILS:
        print("%d failures" % len(tl.FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

"""Rung 7 (vendor) from real runs on this CPU: the reference workload's
GEMMs on OpenBLAS and on the reference BLAS (Debian's libblas3, through
ULPPROF_BLAS), the runs differing only in their /run `blas` key.
`ulpprof ladder` decides rung 7; its first divergence and differing count
are numpy's, from the two files."""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

BUILD = os.environ["ULPPROF_BUILD_DIR"]
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
REFMODEL = os.path.join(BUILD, "workload", "ulpprof-refmodel")
REF_BLAS = "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"


def main():
    if not os.path.exists(REF_BLAS):
        print("SKIP: no reference BLAS (Debian libblas3)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "openblas.h5"), os.path.join(tmp, "refblas.h5")
        env = dict(os.environ)
        env.pop("ULPPROF_BLAS", None)
        p = subprocess.run([REFMODEL, "--gemm", "blas", "--mode", "miss", "--out", a], env=env,
                           capture_output=True, text=True)
        if p.returncode != 0 and "cannot load OpenBLAS" in p.stderr:
            print("SKIP: no OpenBLAS")
            sys.exit(77)
        assert p.returncode == 0, p.stderr
        env["ULPPROF_BLAS"] = REF_BLAS
        p = subprocess.run([REFMODEL, "--gemm", "blas", "--mode", "miss", "--out", b], env=env,
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        with h5py.File(a) as fa, h5py.File(b) as fb:
            def text(v):
                return v.decode() if isinstance(v, bytes) else str(v)
            assert text(fb["run"].attrs["blas"]) == "CBLAS " + REF_BLAS
            assert text(fa["run"].attrs["blas"]).startswith("OpenBLAS")
            # The first capture, in A's seq order, whose bits differ.
            caps = sorted(((fa["captures"][n]["0"].attrs["seq"], n) for n in fa["captures"]))
            first = None
            for _, n in caps:
                x, y = fa["captures"][n]["0"][()], fb["captures"][n]["0"][()]
                if x.shape == y.shape and (x != y).any():
                    first = (n, int((x != y).sum()))
                    break
        p = subprocess.run([ULPPROF, "ladder", "-f", "json", a, b], capture_output=True, text=True)
        assert p.returncode in (0, 1), (p.returncode, p.stderr)
        rung = next(r for r in json.loads(p.stdout)["rungs"] if r["level"] == 7)
        assert rung["keys"] == ["blas"] and rung["deciding_pairs"] == 1, rung
        if first is None:
            assert rung["verdict"] == "holds", rung
        else:
            assert rung["verdict"] == "breaks", rung
            fd = rung["first_break"]["first_divergence"]
            assert fd["capture"] == first[0] and fd["differing"] == first[1], (fd, first)
        print("ok: rung 7 %s (%s)" % (rung["verdict"], first))


if __name__ == "__main__":
    main()

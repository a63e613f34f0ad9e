"""Ladder rungs 6 and 7 decided from real implementations on one set of
weights (docs/sites.md): five runs of a tiny Qwen2-shaped decoder, captured
with the torch helper (tests/python/impl_run.py):

  eager, eager2  HF transformers, eager attention, PyPI torch (MKL/oneDNN)
  sdpa           HF transformers, sdpa attention, PyPI torch
  mkl            the decoder in plain torch, PyPI torch (MKL/oneDNN)
  openblas       the same plain-torch code, Debian's torch (OpenBLAS)

eager/eager2 is a repeat (rung 0), eager/sdpa differs in /run `engine`
(rung 6), mkl/openblas in `vendor` (rung 7); HF against plain differs in
`model` too, which is no rung.  `ulpprof ladder` over the five: each pair's
identity, first divergence (capture, layer, token position, differing
elements) and each rung's verdict and first break are recomputed with numpy
from the files.  The bits decide the verdicts: nothing here expects a rung
to break or hold.  PyPI torch and transformers come from .ci/pyenv-new
(skipped, exit 77, when it cannot be made); Debian's torch is
/usr/bin/python3's (skipped when it has none)."""
import json
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
RUN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "impl_run.py")
DEBIAN = "/usr/bin/python3"
IDS = "3,17,5,60,2,41,9,88"
RUNS = [("eager", "new", "hf-eager"), ("eager2", "new", "hf-eager"), ("sdpa", "new", "hf-sdpa"),
        ("mkl", "new", "plain"), ("openblas", "debian", "plain")]
RUNG_KEYS = {0: set(), 6: {"engine"}, 7: {"vendor"}}


def interpreters():
    made = subprocess.run(["bash", os.path.join(SRC, ".ci", "pyenv-new")], capture_output=True,
                          text=True)
    new = made.stdout.strip()
    if made.returncode != 0 or not new:
        print("SKIPPED: .ci/pyenv-new made no environment (exit %d): %s"
              % (made.returncode, made.stderr.strip()[-500:]))
        sys.exit(77)
    # HF's sdpa attention needs torch >= 2.1.1.
    ver = subprocess.run([new, "-c", "import torch, transformers; print(torch.__version__)"],
                         capture_output=True, text=True)
    major_minor = tuple(int(x) for x in re.findall(r"\d+", ver.stdout)[:2]) or (0, 0)
    if ver.returncode != 0 or major_minor < (2, 2):
        print("FAIL: %s has no torch >= 2.2 with transformers: %r %s"
              % (new, ver.stdout.strip(), ver.stderr.strip()[-300:]))
        sys.exit(1)
    if subprocess.run([DEBIAN, "-c", "import torch"], capture_output=True).returncode != 0:
        print("SKIPPED: %s has no torch (Debian's python3-torch)" % DEBIAN)
        sys.exit(77)
    return {"new": new, "debian": DEBIAN}


def capture_runs(tmp, exe):
    weights = os.path.join(tmp, "weights.npz")
    env = dict(os.environ, ULPPROF_SOURCE_DIR=SRC, ULPPROF_BUILD_DIR=BUILD,
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("ULPPROF_PYENV_REEXEC", None)
    # Written by Debian's torch, read by both.
    p = subprocess.run([DEBIAN, RUN, "--weights", weights, "7"], env=env, capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    # OpenBLAS's Haswell kernels (what AVX2 machines get); on a CPU without
    # AVX2 OpenBLAS picks its own, which is just as much another vendor.
    with open("/proc/cpuinfo") as f:
        avx2 = " avx2" in f.read()
    paths = []
    for label, side, kind in RUNS:
        out = os.path.join(tmp, label + ".h5")
        e = dict(env)
        if side == "debian" and avx2:
            e["OPENBLAS_CORETYPE"] = "Haswell"
        p = subprocess.run([exe[side], RUN, weights, IDS, out, kind], env=e, capture_output=True,
                           text=True)
        assert p.returncode == 0, (label, p.stderr[-2000:])
        paths.append(out)
    return paths


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def load(path):
    """/run, and every capture in seq order: (name, layer, positions, array)."""
    with h5py.File(path, "r") as f:
        run = {k: text(v) for k, v in f["run"].attrs.items()}
        caps = []
        for name in f["captures"]:
            d = f["captures"][name]["0"]
            caps.append((int(d.attrs["seq"]), name, int(d.attrs.get("layer", -1)),
                         np.asarray(d.attrs["positions"]), d[()]))
    return run, [c[1:] for c in sorted(caps)]


def first_divergence(a, b):
    """numpy: the first capture in A's seq order whose bits differ, its layer,
    the token position of its first differing row, and how many elements
    differ; None when the runs are bitwise identical."""
    caps_b = {c[0]: c for c in b[1]}
    assert set(caps_b) == {c[0] for c in a[1]}
    for name, layer, pos, x in a[1]:
        y = caps_b[name][3]
        assert x.shape == y.shape and x.dtype == y.dtype, name
        ne = x.view(np.uint8).reshape(x.shape + (-1,)) != y.view(np.uint8).reshape(y.shape + (-1,))
        ne = ne.any(-1)
        if ne.any():
            tok = ne.reshape(ne.shape[0], ne.shape[1], -1).any(-1)  # [batch, tokens]
            r, t = np.argwhere(tok)[0]
            return {"capture": name, "layer": layer, "position": int(pos[r, t]),
                    "differing": int(ne.sum())}
    return None


def main():
    exe = interpreters()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.environ.get("LADDER_IMPL_KEEP", tmp)
        paths = capture_runs(tmp, exe)
        runs = [load(p) for p in paths]
        labels = [r[0] for r in RUNS]
        assert runs[0][0]["engine"] == runs[1][0]["engine"] != runs[2][0]["engine"]
        assert runs[3][0]["vendor"] != runs[4][0]["vendor"], (runs[3][0], runs[4][0])

        p = subprocess.run([ULPPROF, "ladder", "-f", "json"] + paths, capture_output=True,
                           text=True)
        assert p.returncode in (0, 1), (p.returncode, p.stderr)
        lad = json.loads(p.stdout)
        table = subprocess.run([ULPPROF, "ladder"] + paths, capture_output=True, text=True)
        assert table.returncode == p.returncode, (table.returncode, table.stderr)

        # Every pair against numpy.
        n = len(paths)
        pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
        want = {}
        for j, (a, b) in enumerate(pairs):
            got = lad["pairs"][j]
            assert (got["a"], got["b"]) == (a, b), got
            fd = first_divergence(runs[a], runs[b])
            want[(a, b)] = fd
            assert got["identical"] == (fd is None), (labels[a], labels[b], got, fd)
            g = got["first_divergence"]
            if fd is None:
                assert g is None, g
            else:
                assert {k: g[k] for k in fd} == fd, (labels[a], labels[b], g, fd)

        # Each rung: the pairs that vary its keys alone decide it.
        breaks_any = False
        for level, keys in RUNG_KEYS.items():
            deciding = [(a, b) for a, b in pairs
                        if {k for k in set(runs[a][0]) | set(runs[b][0])
                            if runs[a][0].get(k) != runs[b][0].get(k)} == keys]
            assert deciding, level
            breaking = [ab for ab in deciding if want[ab] is not None]
            rung = lad["rungs"][level]
            verdict = "breaks" if breaking else "holds"
            breaks_any |= bool(breaking)
            assert rung["verdict"] == verdict, (level, rung)
            assert rung["deciding_pairs"] == len(deciding), (level, rung, deciding)
            assert rung["breaking_pairs"] == len(breaking), (level, rung)
            line = next(ln for ln in table.stdout.splitlines()
                        if re.match(r"\s+%d\s+%s\s" % (level, re.escape(rung["name"])), ln))
            assert re.search(r"\s%s\s+%d of %d" % (verdict, len(breaking), len(deciding)),
                             line), line
            if not breaking:
                assert rung["first_break"] is None, rung
                print("rung %d holds (%d pairs)" % (level, len(deciding)))
                continue
            # The earliest layer first (one outside the layers, after them);
            # of equal layers, the first pair.
            a, b = min(breaking, key=lambda ab: (want[ab]["layer"] if want[ab]["layer"] >= 0
                                                 else 1 << 31, pairs.index(ab)))
            fb, fd = rung["first_break"], want[(a, b)]
            assert (fb["a"], fb["b"]) == (a, b), (level, fb, labels[a], labels[b])
            assert {k: fb["first_divergence"][k] for k in fd} == fd, (level, fb, fd)
            shown = "%s vs %s: %s (layer %d) position %d" % (labels[a], labels[b], fd["capture"],
                                                            fd["layer"], fd["position"])
            assert shown in line, (line, shown)
            print("rung %d breaks: %s, %d elements differ" % (level, shown, fd["differing"]))
        assert p.returncode == (1 if breaks_any else 0), p.returncode


if __name__ == "__main__":
    main()

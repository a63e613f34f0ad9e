"""`ulpprof diff DIR DIR` of run directories of digest-only files: each rank
pair gets the digest diff's report (`ulpprof-digest-diff`), as two such
files do, instead of "nothing to compare".

Two runs of 3 ranks (RANK in the environment, so /env rank), written in
digest mode by the C capture API; B's rank 1 differs from layer 1 on, at
one element of position 2, rank 2 at layer 2 position 0.  Checked against
that construction (numpy decides which rows differ): per rank `identical`,
`first_divergence`, and the JSON's per-rank `rank`; the table names the
first difference of each differing rank; exit 1.  And `ulpprof ladder` of
digest-only runs: its bitwise groups and each parted pair's first
divergence (capture, request, position; no ULP number) against numpy.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", ".")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
from ulpprof import _lib  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
FAILS = []
LAYERS, ROWS = 4, 5


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


def tensors(rank, part):
    """Per layer a [ROWS, 16] f32 tensor; part = (layer, row): from that
    layer on, element [row, 3] is bumped one ULP."""
    rng = np.random.default_rng(rank)
    out = []
    for layer in range(LAYERS):
        x = rng.standard_normal((ROWS, 16)).astype(np.float32)
        if part and layer >= part[0]:
            x.view(np.uint32)[part[1], 3] += 1
        out.append(x)
    return out


def write(path, rank, xs):
    os.environ["RANK"] = str(rank)
    s = _lib.Session(path, label=os.path.basename(os.path.dirname(path)))
    s.set_capture_mode("digest")
    for layer, x in enumerate(xs):
        st = s.capture("layers.%d.out" % layer, x.ctypes.data, "f32", x.shape,
                       positions=list(range(ROWS)), requests=[0] * ROWS, row_rank=1)
        check(st == 0, "capture: status %d" % st)
    s.close()


def ladder(tmp):
    """`ulpprof ladder` of digest-only runs: runs 0 and 1 equal, 2 and 3
    equal and parted from 0 at layer 1, row 4 (numpy decides the rows)."""
    parts = [None, None, (1, 4), (1, 4)]
    xs = [tensors(7, part) for part in parts]
    d = os.path.join(tmp, "ladder")
    os.makedirs(d)
    for i, x in enumerate(xs):
        write(os.path.join(d, "run%d.h5" % i), 0, x)
    p = subprocess.run([ULPPROF, "ladder", "-f", "json", d], capture_output=True, text=True)
    check(p.returncode in (0, 1), "ladder exit %d: %s" % (p.returncode, p.stderr.strip()))
    if p.returncode not in (0, 1):
        return
    doc = json.loads(p.stdout)
    same = [[all(np.array_equal(u.view(np.uint32), v.view(np.uint32)) for u, v in zip(x, y))
             for y in xs] for x in xs]
    groups = [r["group"] for r in doc["runs"]]
    for i in range(4):
        for j in range(4):
            check((groups[i] == groups[j]) == same[i][j], "ladder groups %r" % groups)
    for q in doc["pairs"]:
        i, j = q["a"], q["b"]
        check(q["identical"] == same[i][j], "pair %d-%d identical %r" % (i, j, q["identical"]))
        if same[i][j]:
            continue
        fd = q["first_divergence"]
        layer = next(k for k in range(LAYERS)
                     if not np.array_equal(xs[i][k].view(np.uint32), xs[j][k].view(np.uint32)))
        row = int(np.nonzero((xs[i][layer].view(np.uint32) != xs[j][layer].view(np.uint32))
                             .any(axis=1))[0][0])
        check(fd["capture"] == "layers.%d.out" % layer and fd["position"] == row and
              fd["request"] == 0 and fd["max_ulp"] is None and fd["occurrence"] is None,
              "pair %d-%d first divergence %r, numpy layer %d row %d" % (i, j, fd, layer, row))


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-rank-digests-")
    parts = {0: None, 1: (1, 2), 2: (2, 0)}
    a, b = {}, {}
    for r, part in parts.items():
        a[r], b[r] = tensors(r, None), tensors(r, part)
        for side, xs in (("A", a[r]), ("B", b[r])):
            os.makedirs(os.path.join(tmp, side), exist_ok=True)
            # Names in reverse rank order: the /env rank, not the name, must pair them.
            write(os.path.join(tmp, side, "f%d.h5" % (9 - r)), r, xs)
    p = subprocess.run([ULPPROF, "diff", "-f", "json", os.path.join(tmp, "A"),
                        os.path.join(tmp, "B")], capture_output=True, text=True)
    check(p.returncode == 1, "exit %d: %s" % (p.returncode, p.stderr.strip()))
    doc = json.loads(p.stdout) if p.returncode in (0, 1) else {"ranks": []}
    check([x["rank"] for x in doc["ranks"]] == [0, 1, 2], "ranks %r" % doc.get("ranks"))
    check(doc.get("identical") is False, "identical %r" % doc.get("identical"))
    for x in doc["ranks"]:
        r, rep = x["rank"], x["report"]
        check(x["a"].endswith("f%d.h5" % (9 - r)), "rank %d file %s" % (r, x["a"]))
        check(rep.get("format") == "ulpprof-digest-diff", "rank %d format %r"
              % (r, rep.get("format")))
        # numpy: the first layer, then the first row, whose bits differ.
        want = None
        for layer in range(LAYERS):
            rows = np.nonzero((a[r][layer].view(np.uint32) != b[r][layer].view(np.uint32))
                              .any(axis=1))[0]
            if len(rows):
                want = {"capture": "layers.%d.out" % layer, "request": 0,
                        "position": int(rows[0])}
                break
        check(rep.get("identical") == (want is None), "rank %d identical %r" % (r, rep))
        check(rep.get("first_divergence") == want, "rank %d first %r, numpy %r"
              % (r, rep.get("first_divergence"), want))
    t = subprocess.run([ULPPROF, "diff", os.path.join(tmp, "A"), os.path.join(tmp, "B")],
                       capture_output=True, text=True)
    check(t.returncode == 1, "table exit %d: %s" % (t.returncode, t.stderr.strip()))
    check("capture 'layers.1.out', request 0, position 2" in t.stdout and
          "capture 'layers.2.out', request 0, position 0" in t.stdout,
          "table:\n%s" % t.stdout)
    ladder(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("%d failure(s)" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

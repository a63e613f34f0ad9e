"""Produced-token captures of the wrong layout (FORMAT.md "Produced
tokens": `tokens` is f64 [rows, 2] with positions over axis 0).  Files
written by h5py (diffsnap) whose `tokens` capture has another dtype, shape
or no positions are refused by `ulpprof streams`, the bad file first and
second: exit 2, nothing on stdout, one stderr line that names the file and
the problem.  Among them a file whose first `tokens` capture is right and
whose second is f32: streams used to skip it and answer from the first
alone.  `ulpprof diff` compares such a capture as any activation, as it
did before this rule (a dump imported from .npz or safetensors may well
hold the fed ids under the name `tokens`): the bad file against a copy of
itself is identical (exit 0), against the good one it differs (exit 1),
never an error.  The good files still read: their completion is the
tokens written here."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffsnap as ds  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
FAILS = []
GOOD = np.array([[5, 0.5], [7, 0.25], [2, 1.0]], dtype=np.float64)
POS = [3, 4, 5]


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what)
    if not ok:
        FAILS.append(what)


def tokens(bits, dtype, positions=POS, occurrence=0, seq=0):
    return dict(name="tokens", bits=bits, dtype=dtype, positions=positions,
                occurrence=occurrence, seq=seq)


def run(*args):
    return subprocess.run([ULPPROF] + list(args), capture_output=True, text=True, timeout=120)


def main():
    tmp = tempfile.mkdtemp(prefix="tokens_layout.")
    good = os.path.join(tmp, "good.h5")
    ds.write_snapshot(good, [tokens(GOOD.view(np.uint64), "f64")])
    bad = {  # file: (captures, the word the line must carry)
        "f32": ([tokens(GOOD.astype(np.float32).view(np.uint32), "f32")], "dtype is not f64"),
        "i64": ([tokens(GOOD.astype(np.int64), "i64")], "dtype is not f64"),
        "cols3": ([tokens(np.hstack([GOOD, GOOD[:, :1]]).view(np.uint64), "f64")],
                  "shape is not [rows, 2]"),
        "flat": ([tokens(GOOD[:, 0].copy().view(np.uint64), "f64")], "shape is not [rows, 2]"),
        "rank3": ([tokens(GOOD.reshape(3, 2, 1).view(np.uint64), "f64")],
                  "shape is not [rows, 2]"),
        "nopos": ([tokens(GOOD.view(np.uint64), "f64", positions=None)], "no positions"),
        "second_f32": ([tokens(GOOD.view(np.uint64), "f64"),
                        tokens(GOOD.astype(np.float32).view(np.uint32), "f32", positions=[6, 7, 8],
                               occurrence=1, seq=1)], "#1 is f32 [3, 2]"),
    }
    for tag, (caps, word) in bad.items():
        path = os.path.join(tmp, tag + ".h5")
        ds.write_snapshot(path, caps)
        copy = os.path.join(tmp, tag + ".copy.h5")
        shutil.copyfile(path, copy)
        # nopos holds the good bytes (positions are the pairing's, not the data).
        # second_f32 mixes dtypes within one name: paired occurrence by
        # occurrence (FORMAT.md "Aligned diff"), identical to its own copy
        # (it was a dtype mismatch while its occurrences were gathered as one).
        same = 0
        other = 1 if tag != "nopos" else 0
        for pair, rc in (((path, copy), same), ((good, path), other), ((path, good), other)):
            p = run("diff", *pair)
            check(p.returncode == rc and p.stderr == "",
                  "diff %s %s: exit %d, compared as an activation: rc %d, stderr %r"
                  % (os.path.basename(pair[0]), os.path.basename(pair[1]), rc, p.returncode,
                     p.stderr))
        for cmd in ("streams",):
            for pair in ((good, path), (path, good)):
                p = run(cmd, *pair)
                lines = p.stderr.strip().splitlines()
                check(p.returncode == 2 and p.stdout == "" and len(lines) == 1 and
                      "'%s'" % path in lines[0] and word in lines[0] and
                      "capture 'tokens'" in lines[0],
                      "%s %s (%s): exit 2, one line naming the file and '%s': rc %d, stdout "
                      "%d B, stderr %r" % (cmd, tag, "second" if pair[1] == path else "first",
                                           word, p.returncode, len(p.stdout), p.stderr))
    # the good file still reads, in both commands
    good2 = os.path.join(tmp, "good2.h5")
    ds.write_snapshot(good2, [tokens(GOOD.view(np.uint64), "f64")])
    p = run("streams", "-f", "json", good, good2)
    d = json.loads(p.stdout) if p.returncode == 0 else {}
    comps = [c for r in d.get("requests", []) for c in r["completions"]]
    check(p.returncode == 0 and len(comps) == 1 and comps[0]["tokens"] == GOOD[:, 0].tolist()
          and comps[0]["count"] == 2,
          "streams of two good files: one completion %s in 2 runs: rc %d %r"
          % (GOOD[:, 0].astype(int).tolist(), p.returncode, comps or p.stderr))
    p = run("diff", good, good2)
    check(p.returncode == 0 and p.stderr == "", "diff of two good files: identical, rc %d %r"
          % (p.returncode, p.stderr))
    shutil.rmtree(tmp, True)
    if FAILS:
        print("%d FAILED" % len(FAILS))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

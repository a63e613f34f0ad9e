"""The lean pairing (analyzer/diff_lean.c: memory flat in the
capture count) pairs A and B as both stream by in seq order.  Its reports
must be byte for byte those of the pairing over whole tables
(ULPPROF_PAIRING=whole), whatever the order of B's captures against A's:
the same order, swaps near and far, captures only in A or only in B (names
the other side lacks, and occurrences past the other side's count), shape
and dtype mismatches, positions on one side -- in all four formats, in
batches of 1, 3 and the default, with --match, --role and --rows.

ULPPROF_PAIRING=lean makes the diff fail where the lean pairing would not
run: the pairs meant for it must run it, and those it must leave to the
whole tables (occurrences not numbered 0, 1, ... in seq order; positions on
both sides) must not.  The pairing's semantics are checked against
independent computations elsewhere (test_diff_stream, test_diff_numpy,
test_align): here, that the lean pairing changes no byte.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import diffsnap as ds  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
rng = np.random.default_rng(2026)
NAMES = ["model.layers.%d.mlp.out" % i for i in range(5)] + ["lm_head", "embed"]


def bf16(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def sequence(n):
    """(name, occurrence) of n captures in seq order, occurrences numbered per name."""
    seen = {}
    out = []
    for _ in range(n):
        name = NAMES[rng.integers(len(NAMES))]
        out.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    return out


def renumber(seq):
    seen = {}
    out = []
    for name, _ in seq:
        out.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    return out


def perturb(seq, kind):
    """B's (name, occurrence) sequence from A's."""
    b = list(seq)
    if kind in ("swap", "unnumbered"):
        for _ in range(3):
            i, j = rng.integers(len(b), size=2)
            b[i], b[j] = b[j], b[i]
        # "unnumbered": a name's occurrences out of seq order (whole tables)
        return b if kind == "unnumbered" else renumber(b)
    if kind == "reverse":
        return renumber(b[::-1])
    if kind == "drop":  # captures only in A: renumbered, B's counts are smaller
        keep = [x for x in b if rng.random() > 0.2]
        return renumber(keep)
    if kind == "extra":  # captures only in B: a name A lacks and more occurrences
        for _ in range(4):
            b.insert(int(rng.integers(len(b) + 1)), ("only_b.%d" % rng.integers(2), 0))
            b.insert(int(rng.integers(len(b) + 1)), (NAMES[rng.integers(len(NAMES))], 0))
        return renumber(b)
    return b


def captures(seq, data, mutate):
    out = []
    for name, occ in seq:
        x = data.setdefault((name, occ), bf16((3, 4)))
        c = dict(name=name, occurrence=occ, bits=x, dtype="bf16", layer=len(name) % 4,
                 role="logits" if name == "lm_head" else None)
        if mutate:
            c["bits"] = x.copy()
            if rng.random() < 0.5:
                c["bits"].reshape(-1)[rng.integers(12)] ^= np.uint16(1)
            r = rng.random()
            if r < 0.05:
                c["bits"] = bf16((3, 5))  # shape mismatch
            elif r < 0.08:
                c["dtype"] = "f16"
        out.append(c)
    return out


def diff(pa, pb, args, pairing, batch):
    env = dict(os.environ, ULPPROF_PAIRING=pairing)
    env.pop("NO_COLOR", None)
    if batch:
        env["ULPPROF_DIFF_BATCH"] = batch
    p = subprocess.run([ULPPROF, "diff"] + args + [pa, pb], capture_output=True, env=env)
    return p.returncode, p.stdout, p.stderr


def check(tmp, tag, ca, cb, lean, fails):
    """Writes the pair; the lean pairing must run (`lean`) or not, and change no byte."""
    pa, pb = os.path.join(tmp, tag + "-a.h5"), os.path.join(tmp, tag + "-b.h5")
    ds.write_snapshot(pa, ca)
    ds.write_snapshot(pb, cb)
    rc = diff(pa, pb, [], "lean", None)[0]
    if (rc == 2) == lean:
        fails.append("%s: ULPPROF_PAIRING=lean exit %d, the lean pairing %s" %
                     (tag, rc, "should run" if lean else "should not run"))
    for args in (["-f", "table"], ["-f", "json"], ["-f", "csv"], ["-f", "markdown"],
                 ["--match", "model.layers.[13]*"], ["--role", "logits", "-f", "json"],
                 ["--rows", "head:2", "-f", "csv"], ["--match", "nothing*"]):
        for batch in ("1", "3", None):
            ref = diff(pa, pb, args, "whole", batch)
            got = diff(pa, pb, args, "auto", batch)
            if ref[0] not in (0, 1, 2) or (ref[0] == 2 and b"selects no capture" not in ref[2]):
                fails.append("%s %s: reference exit %d: %s" % (tag, args, ref[0], ref[2][-200:]))
            if got != ref:
                fails.append("%s %s batch %s: exit %d/%d, %d/%d bytes" %
                              (tag, args, batch, got[0], ref[0], len(got[1]), len(ref[1])))


def main():
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        for t, kind in enumerate(["same", "swap", "reverse", "drop", "extra"] * 3):
            seq = sequence(int(rng.integers(5, 40)))
            data = {}
            ca = captures(seq, data, False)
            cb = captures(perturb(seq, kind), data, True)
            if t % 2:
                ca, cb = cb, ca
            check(tmp, "%s%d" % (kind, t), ca, cb, True, fails)
        seq = sequence(30)
        data = {}
        cb = captures(perturb(seq, "unnumbered"), data, True)
        if [c["occurrence"] for c in cb] != [o for _, o in renumber([(c["name"], 0) for c in cb])]:
            check(tmp, "unnumbered", captures(seq, data, False), cb, False, fails)
        # Positions on one side only: lean.  On both sides of a name: whole tables.
        seq = renumber(sequence(12) + [("embed", 0), ("lm_head", 0), ("embed", 0)])
        data = {}
        ca, cb = captures(seq, data, False), captures(seq, data, True)
        for c in ca:
            if c["name"] == "embed":
                c["positions"] = [3 * c["occurrence"] + k for k in range(3)]
        check(tmp, "pos1", ca, cb, True, fails)
        for c in cb:
            if c["name"] == "embed":
                c["positions"] = [3 * c["occurrence"] + k for k in range(3)]
        check(tmp, "pos2", ca, cb, False, fails)
        # Occurrences not numbered in seq order: whole tables.
        ca = [dict(name="x", occurrence=o, bits=bf16((4,)), dtype="bf16") for o in (1, 0, 2)]
        cb = [dict(c, bits=c["bits"].copy()) for c in ca]
        check(tmp, "occ", ca, cb, False, fails)
        ca = [dict(name="x", occurrence=o, bits=bf16((4,)), dtype="bf16") for o in (0, 2)]
        check(tmp, "gap", ca, [dict(c) for c in ca], False, fails)
    for f in fails:
        print("FAIL:", f)
    if fails:
        sys.exit(1)
    print("ok: the lean pairing's reports are the whole tables' (%d pairs)" % (15 + 5))


if __name__ == "__main__":
    main()

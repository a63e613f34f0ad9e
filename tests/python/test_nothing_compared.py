"""Nothing compared is never a verdict: missing ranks, no shared capture, empty captures.

Snapshots written with h5py (diffsnap.py); what each report must say is
derived here from the files and FORMAT.md's rules, never through ulpprof:
- a rank only one run has is not compared and makes the runs differ: `diff
  DIR DIR` exits 1 and names it in the table, Markdown and JSON; `ladder`
  does not group such runs and the rung their pair decides breaks there;
- two snapshots that share no capture name compare nothing: `diff` (every
  format) and `ladder` exit 2 with one stderr line, and print no report;
- a capture with 0 rows and positions (an MoE expert that got no tokens) is
  identical to itself (same trailing shape, nothing on either side): `diff`
  of a file with itself exits 0; when every capture compared is empty the
  report says so and gives no rung verdict ("holds" on nothing), and the
  ladder leaves the rung untested.  Empty captures that differ in their
  trailing shape, or rows on one side only, still differ.
The ladder's table and Markdown give each rung the verdict its JSON gives.
"""
import json
import os
import re
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
check = tl.check


def run(*args):
    p = subprocess.run([ULPPROF] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def one_line_error(what, rc, out, err, needle):
    lines = err.strip().splitlines()
    check(rc == 2 and out == "" and len(lines) == 1 and lines[0].startswith("ulpprof") and
          needle in lines[0], "%s: exit %d, stdout %r, stderr %r" % (what, rc, out[:200], err))


def acts(seed, rows=3, hidden=4):
    rng = np.random.default_rng(seed)
    return rng.integers(0x3c00, 0x4000, size=(rows, hidden)).astype(np.uint16)


def write_rank_run(d, ranks, run, perturb_rank=None):
    os.makedirs(d)
    for r in ranks:
        x = acts(r)
        if r == perturb_rank:
            x = x.copy()
            x[1, 2] ^= 1
        ds.write_snapshot(os.path.join(d, "%d.h5" % r),
                          [dict(name="layers.0.out", bits=x, dtype="bf16", layer=0,
                                positions=[0, 1, 2])],
                          label=os.path.basename(d), run=run, env={"rank": str(r)})


def ladder_text_verdicts(text, markdown):
    """{level: verdict} from the ladder section of the table or the Markdown."""
    got = {}
    for line in text.splitlines():
        m = (re.match(r"\| (\d) \| [^|]+ \| [^|]* \| \*\*(\w+)\*\* \|", line) if markdown else
             re.match(r"  (\d)    .{14} .{22} (\w+) ", line))
        if m:
            got[int(m.group(1))] = m.group(2)
    return got


def ladder_all_formats(what, args):
    """The ladder in JSON, table and Markdown: (rc, json doc, table, markdown), and checks
    that the three give every rung the same verdict and exit with the same status."""
    rc, out, err = run("ladder", "-f", "json", *args)
    doc = json.loads(out) if rc in (0, 1) else None
    rct, table, _ = run("ladder", *args)
    rcm, md, _ = run("ladder", "-f", "markdown", *args)
    check(rct == rc and rcm == rc, "%s: exit json %d, table %d, markdown %d" % (what, rc, rct, rcm))
    if doc is not None:
        want = {g["level"]: g["verdict"] for g in doc["rungs"]}
        check(ladder_text_verdicts(table, False) == want,
              "%s: table verdicts %r, json %r" % (what, ladder_text_verdicts(table, False), want))
        check(ladder_text_verdicts(md, True) == want,
              "%s: markdown verdicts %r, json %r" % (what, ladder_text_verdicts(md, True), want))
    else:
        print(err)
    return rc, doc, table, md


def missing_ranks(tmp):
    run_ = {"tp": "2"}
    a, b, a2 = (os.path.join(tmp, "ranks", n) for n in ("a", "b", "a2"))
    write_rank_run(a, [0, 1], run_)
    write_rank_run(b, [0], run_)
    write_rank_run(a2, [0, 1], run_)
    runs = [{r: tl.read_snapshot(os.path.join(d, "%d.h5" % r)) for r in ranks}
            for d, ranks in ((a, [0, 1]), (b, [0]), (a2, [0, 1]))]
    # Rank 0 is bitwise the same file content in a and b (numpy says so).
    ident0 = np.array_equal(runs[0][0]["caps"][0]["bits"], runs[1][0]["caps"][0]["bits"])
    check(ident0, "missing ranks: rank 0 of a and b should be identical")

    for fmt in ("table", "markdown", "json"):
        rc, out, err = run("diff", "-f", fmt, a, b)
        check(rc == 1, "diff a b (%s): exit %d, want 1 (rank 1 only in A): %s" % (fmt, rc, err))
        if fmt == "json" and rc == 1:
            d = json.loads(out)
            check(d["identical"] is False and d["ranks_only_a"] == [1] and
                  d["ranks_only_b"] == [] and [x["rank"] for x in d["ranks"]] == [0] and
                  d["ranks"][0]["report"]["identical"] is True,
                  "diff a b json: %r" % {k: d[k] for k in d if k != "ranks"})
        elif rc == 1:
            check("rank 1: only in A" in out and "1 rank only in A, 0 only in B" in out and
                  "all bitwise identical\n" not in out,
                  "diff a b (%s) does not name rank 1: %s" % (fmt, out[-300:]))
    rc, out, _ = run("diff", "-f", "json", b, a)
    check(rc == 1 and json.loads(out)["ranks_only_b"] == [1] and
          json.loads(out)["identical"] is False, "diff b a: exit %d" % rc)
    rc, out, _ = run("diff", a, a2)
    check(rc == 0 and "2 rank pairs compared: all bitwise identical\n" in out,
          "diff a a2 (the same ranks, identical): exit %d %s" % (rc, out[-200:]))
    # A rank that differs and a rank missing: still 1, both named.
    c = os.path.join(tmp, "ranks", "c")
    write_rank_run(c, [0], run_, perturb_rank=0)
    rc, out, _ = run("diff", a, c)
    check(rc == 1 and "some differ; 1 rank only in A" in out, "diff a c: exit %d" % rc)

    rc, doc, table, md = ladder_all_formats("ladder a b a2", [a, b, a2])
    check(rc == 1, "ladder a b a2: exit %d, want 1 (rung 0 breaks on rank 1)" % rc)
    if doc:
        tl.compare_report("missing ranks", doc, runs)
        check([r["group"] for r in doc["runs"]] == [0, 1, 0], "missing ranks: groups")
        check(doc["rungs"][0]["verdict"] == "breaks" and doc["rungs"][0]["breaking_pairs"] == 2,
              "missing ranks: rung 0 %r" % doc["rungs"][0])
        p01 = doc["pairs"][0]
        check(p01["identical"] is False and p01["ranks_only_a"] == 1 and
              p01["first_divergence"] is None, "missing ranks: pair 0-1 %r" % p01)
        for text, name in ((table, "table"), (md, "markdown")):
            check("rank 1 only in A" in text and "rank 1 only in B" in text,
                  "ladder %s does not name the missing rank" % name)


def no_shared(tmp):
    p = os.path.join(tmp, "p.h5")
    q = os.path.join(tmp, "q.h5")
    ds.write_snapshot(p, [dict(name="x", bits=acts(1), dtype="bf16"),
                          dict(name="x2", bits=acts(2), dtype="bf16")], run={"engine": "a"})
    ds.write_snapshot(q, [dict(name="y", bits=acts(1), dtype="bf16")], run={"engine": "b"})
    for fmt in ("table", "markdown", "csv", "json"):
        rc, out, err = run("diff", "-f", fmt, p, q)
        one_line_error("diff p q (%s)" % fmt, rc, out, err,
                       "share no capture name (2 only in A, 1 only in B): nothing to compare")
    rc, out, err = run("diff", "--match", "x", p, q)
    one_line_error("diff --match x p q", rc, out, err, "share no capture selected")
    for fmt in ("table", "json"):
        rc, out, err = run("ladder", "-f", fmt, p, q)
        one_line_error("ladder p q (%s)" % fmt, rc, out, err, "share no capture name")
    # Per-rank runs whose rank 0 files share no name: the same error, no report.
    da, db = os.path.join(tmp, "np", "a"), os.path.join(tmp, "np", "b")
    os.makedirs(da)
    os.makedirs(db)
    shutil.copy(p, os.path.join(da, "0.h5"))
    shutil.copy(q, os.path.join(db, "0.h5"))
    rc, out, err = run("diff", da, db)
    check(rc == 2 and "share no capture name" in err, "diff of runs sharing no name: exit %d" % rc)


def empty_captures(tmp):
    z = os.path.join(tmp, "z.h5")
    z2 = os.path.join(tmp, "z2.h5")
    empty = dict(bits=np.zeros((0, 4), np.uint16), dtype="bf16", positions=np.zeros(0, np.int64))
    for path in (z, z2):
        ds.write_snapshot(path, [dict(empty, name="experts.3", layer=0),
                                 dict(empty, name="experts.5", layer=1)], run={"batch_size": "1"})
    with h5py.File(z, "r") as f:
        got = [(f["captures"][n]["0"].shape, f["captures"][n]["0"].attrs["positions"].shape)
               for n in ("experts.3", "experts.5")]
    check(got == [((0, 4), (0,))] * 2, "the file holds 0-row captures: %r" % got)

    rc, out, err = run("diff", "-f", "json", z, z)
    check(rc == 0, "diff z z: exit %d, want 0 (a file against itself): %s" % (rc, err))
    if rc == 0:
        d = json.loads(out)
        check([(r["name"], r["status"], r["elements"]) for r in d["rows"]] ==
              [("experts.3", "identical", 0), ("experts.5", "identical", 0)],
              "diff z z rows %r" % [(r["name"], r["status"]) for r in d["rows"]])
        check(d["identical"] is True and d["summary"]["elements_compared"] == 0 and
              d["ladder"]["verdict"] is None and d["first_divergence"] is None,
              "diff z z: %r %r" % (d["summary"], d["ladder"]))
    for fmt in ("table", "markdown"):
        rc, out, _ = run("diff", "-f", fmt, z, z2)
        check(rc == 0 and "all 2 captures are empty on both sides; no element compared" in out and
              "no verdict: every capture compared is empty" in out and "holds" not in out and
              "NOT invariant" not in out, "diff z z2 (%s): exit %d\n%s" % (fmt, rc, out))
    rc, doc, table, md = ladder_all_formats("ladder z z2", [z, z2])
    check(rc == 0, "ladder z z2: exit %d, want 0" % rc)
    if doc:
        r0 = doc["rungs"][0]
        check(r0["verdict"] == "untested" and r0["empty_pairs"] == 1 and
              r0["deciding_pairs"] == 0, "ladder z z2 rung 0 %r" % r0)
        pr = doc["pairs"][0]
        check(pr["identical"] is True and pr["rung"] is None and pr["elements_compared"] == 0,
              "ladder z z2 pair %r" % pr)
        check([r["group"] for r in doc["runs"]] == [0, 0], "ladder z z2: one group")
        check("nothing compared" in table and "nothing compared" in md,
              "ladder z z2: the table and Markdown do not say nothing was compared")

    # Next to a capture with data: identical, the rung holds on the data's elements.
    full = acts(7)
    m, m2, mx = (os.path.join(tmp, n) for n in ("m.h5", "m2.h5", "mx.h5"))
    for path, x in ((m, full), (m2, full), (mx, full ^ np.uint16(1))):
        ds.write_snapshot(path, [dict(empty, name="experts.3", layer=0),
                                 dict(name="layers.0.out", bits=x, dtype="bf16", layer=0,
                                      positions=[0, 1, 2])], run={"batch_size": "1"})
    rc, out, _ = run("diff", "-f", "json", m, m2)
    check(rc == 0 and json.loads(out)["summary"]["elements_compared"] == full.size and
          json.loads(out)["ladder"]["verdict"] == "holds", "diff m m2: exit %d" % rc)
    rc, out, _ = run("diff", "-f", "json", m, mx)
    if rc == 1:
        d = json.loads(out)
        st = {r["name"]: r["status"] for r in d["rows"]}
        check(st == {"experts.3": "identical", "layers.0.out": "differs"} and
              d["first_divergence"]["name"] == "layers.0.out" and
              d["ladder"]["verdict"] == "breaks", "diff m mx: %r" % st)
    else:
        check(False, "diff m mx: exit %d, want 1" % rc)
    rc, doc, _, _ = ladder_all_formats("ladder m m2 mx", [m, m2, mx])
    check(rc == 1 and doc is not None and doc["rungs"][0]["verdict"] == "breaks" and
          doc["rungs"][0]["deciding_pairs"] == 3 and doc["rungs"][0]["breaking_pairs"] == 2,
          "ladder m m2 mx: exit %d" % rc)

    # Still differences: another trailing shape, or rows on one side only.
    w = os.path.join(tmp, "w.h5")
    ds.write_snapshot(w, [dict(name="experts.3", bits=np.zeros((0, 5), np.uint16), dtype="bf16",
                               positions=np.zeros(0, np.int64), layer=0),
                          dict(empty, name="experts.5", layer=1)], run={"batch_size": "1"})
    rc, out, _ = run("diff", "-f", "json", z, w)
    check(rc == 1 and json.loads(out)["rows"][0]["status"] == "shape_mismatch",
          "diff z w ([0,4] vs [0,5]): exit %d" % rc)
    r3 = os.path.join(tmp, "r3.h5")
    ds.write_snapshot(r3, [dict(name="experts.3", bits=acts(3), dtype="bf16", layer=0,
                                positions=[0, 1, 2]),
                           dict(empty, name="experts.5", layer=1)], run={"batch_size": "1"})
    rc, out, _ = run("diff", "-f", "json", z, r3)
    if rc == 1:
        row = json.loads(out)["rows"][0]
        check(row["status"] == "shape_mismatch" and row["positions_only_in_b"] == 3,
              "diff z r3: %r" % row)
    else:
        check(False, "diff z r3 (no rows vs 3 rows): exit %d, want 1" % rc)


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-nothing-")
    try:
        missing_ranks(tmp)
        no_shared(tmp)
        empty_captures(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if tl.FAILS:
        print("%d failures" % len(tl.FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

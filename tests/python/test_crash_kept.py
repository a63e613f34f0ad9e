#!/usr/bin/python3
"""Crash safety of kept captures: a digest-mode writer (kept_loop: a decode
loop feeding token ids and producing tokens, kept in /digests, beside an
activation of digests only) killed with SIGKILL at its writes, plain and
torn at page boundaries (killwrite.so), inside the flushes that rewrite
/digests included, leaves a file whose kept captures are exactly a prefix
of those it accepted, and at least every one accepted before the last
flush that returned (format/FORMAT.md "Capture journal", kind 3).

What was fed is known without ulpprof (kept_loop.c's formula): per step i,
`input_ids` (the prompt's positions at step 0, one after) then `tokens`,
seq 2i and 2i + 1.  Checked at each kill point: `ulpprof ls --json` lists
them in that order, their positions and shapes; the warning counts
what it read through the journal; `ulpprof repair` writes a copy that
h5py reads (its /captures datasets and /digests `value` rows, through
tests/python/digests_h5.py) with the same captures, bit-exact against the
formula; ulpprof.open(FILE).read() of the last one gives what was fed.  ULP_CRASH_FULL=1 tries every kill point (else a sample: every
plain write, every third tear).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "reliability"))
import relcheck as rc  # noqa: E402
from relcheck import check  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import digests_h5  # noqa: E402

sys.path.insert(0, os.path.join(os.environ.get("ULPPROF_SOURCE_DIR", "."), "python"))
os.environ.setdefault("ULPPROF_PROGRAM", rc.ULPPROF)
import ulpprof  # noqa: E402

KILLWRITE = os.path.join(rc.BUILD, "tests", "reliability", "killwrite.so")
KEPT_LOOP = os.path.join(rc.BUILD, "tests", "reliability", "kept_loop")
STEPS, PROMPT, EVERY = 70, 8, 5


def expected():
    """[(name, occurrence, step, positions, values)] in seq order: what kept_loop feeds."""
    out, nxt = [], 0
    for i in range(STEPS):
        rows = PROMPT if i == 0 else 1
        pos = list(range(nxt, nxt + rows))
        nxt += rows
        out.append(("input_ids", i, i, pos, [(p * 7919 + 13) % 32000 for p in pos]))
        out.append(("tokens", i, i, [pos[-1]], [float((i * 104729 + 7) % 32000), i + 0.5]))
    return out


def env_for(k=None, tear=0, log=None):
    env = dict(os.environ, LD_PRELOAD=KILLWRITE)
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    if k is not None:
        env["ULP_KILL_AT"] = str(k)
    if tear:
        env["ULP_KILL_TORN_AT"] = str(tear)
    if log:
        env["ULP_WRITE_LOG"] = log
    return env


def args(path):
    return [KEPT_LOOP, "--out", path, "--steps", str(STEPS), "--prompt", str(PROMPT),
            "--flush-every", str(EVERY)]


def check_listing(what, caps, want, flushed):
    """The kept captures listed: a prefix of `want`, at least the flushed steps'."""
    kept = sorted((c for c in caps if c["name"] in ("input_ids", "tokens")),
                  key=lambda c: c["seq"])
    m = len(kept)
    ok = check(m >= 2 * flushed, "%s: %d kept captures, %d steps were flushed" % (what, m, flushed))
    for i, c in enumerate(kept):
        name, occ, step, pos, _ = want[i] if i < len(want) else (None,) * 5
        if not check(c["seq"] == i and c["name"] == name and c["occurrence"] == occ and
                     c.get("step", step) == step and c.get("positions") == pos and
                     c["shape"] == ([len(pos)] if name == "input_ids" else [1, 2]),
                     "%s: kept capture %d is %r, fed %r" % (what, i, c, want[i][:4]
                                                           if i < len(want) else None)):
            return -1
    return m if ok else -1


def check_copy(what, copy, want, m):
    """The repaired copy, read with h5py: the same m captures, bit-exact against the formula."""
    with h5py.File(copy, "r") as f:
        for name, dt in (("input_ids", np.int64), ("tokens", np.float64)):
            got = digests_h5.captures(f, name)
            fed = [w for w in want[:m] if w[0] == name]
            if not check(len(got) == len(fed), "%s: the copy has %d %s, fed %d" % (
                    what, len(got), name, len(fed))):
                return
            for c, w in zip(got, fed):
                a = np.asarray(c[()]).astype(dt).reshape(-1).tolist()
                if not check(a == w[4], "%s: the copy's %s %d is %r, fed %r" % (
                        what, name, w[1], a, w[4])):
                    return


def check_python(what, path, want, m):
    """ulpprof.open(): the last kept capture listed reads as fed (through the repaired copy
    when only the journal holds it)."""
    import warnings

    name, occ, _, _, vals = want[m - 1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the killed file's warning
        t = ulpprof.open(path).read(name, occ)
    got = np.asarray(t.array).reshape(-1).tolist()
    check(got == vals, "%s: ulpprof.open().read(%r, %d) is %r, fed %r" % (what, name, occ, got,
                                                                          vals))
    return 1


def main():
    os.environ.setdefault("ULPPROF_OPEN_TIMEOUT", "20")
    if not check(os.path.exists(KILLWRITE) and os.path.exists(KEPT_LOOP),
                 "%s or %s not built" % (KILLWRITE, KEPT_LOOP)):
        return rc.finish("")
    tmp = rc.tmpdir("crash_kept")
    want = expected()
    full = os.path.join(tmp, "full.h5")
    log = os.path.join(tmp, "writes.log")
    r = subprocess.run(args(full), env=env_for(log=log), capture_output=True, text=True)
    check(r.returncode == 0, "full run: exit %d %r" % (r.returncode, r.stderr))
    with open(log) as fh:
        writes = [tuple(int(x) for x in ln.split()) for ln in fh]
    ls = rc.ulpprof(["ls", "--json", full])
    check(ls.returncode == 0 and check_listing("full run", json.loads(ls.stdout)[0]["captures"],
                                               want, STEPS) == len(want),
          "full run: not every kept capture")
    full_stride = os.environ.get("ULP_CRASH_FULL") == "1"
    pts = rc.kill_points(writes, (1, 1 if full_stride else 3))
    tried, seen, journaled, python_reads = 0, set(), 0, 0
    tempfile.tempdir = tmp  # the Python API's repaired copies: in the test's directory
    for k, tear in pts:
        path = os.path.join(tmp, "k%d_%d.h5" % (k, tear))
        r = subprocess.run(args(path), env=env_for(k, tear), capture_output=True, text=True)
        lines = r.stdout.split("\n")
        if r.returncode != -signal.SIGKILL or "opened" not in lines:
            if os.path.exists(path):
                os.remove(path)
            continue  # killed while the file was being created: nothing promised
        tried += 1
        flushed = max([int(x.split()[1]) for x in lines if x.startswith("flushed ")] or [0])
        what = "kill at write %d%s (%d steps flushed)" % (
            k, " torn after %d pages" % tear if tear else "", flushed)
        ls = rc.ulpprof(["ls", "--json", path])
        if not check(ls.returncode == 0, "%s: ls: %s" % (what, ls.stderr.strip())):
            os.remove(path)
            continue
        m = check_listing(what, json.loads(ls.stdout)[0]["captures"], want, flushed)
        unclosed = "did not close it" in ls.stderr
        if unclosed:
            # The warning counts what it read through the journal: some, never more than listed.
            n = re.search(r"(\d+) captures? read through the capture journal", ls.stderr)
            check(n is not None and int(n.group(1)) <= max(m, 0) and
                  (m == 0 or int(n.group(1)) > 0), "%s: warning %r" % (what, ls.stderr))
            journaled += 1
        if m >= 0:
            seen.add(m)
            copy = os.path.join(tmp, "copy.h5")
            p = rc.ulpprof(["repair", path, copy])
            if check(p.returncode == 0, "%s: repair: %s" % (what, p.stderr.strip())):
                check_copy(what, copy, want, m)
                lc = rc.ulpprof(["ls", "--json", copy])
                check(lc.returncode == 0 and check_listing(
                    what + " (copy)", json.loads(lc.stdout)[0]["captures"], want, flushed) == m,
                    "%s: the copy lists other captures: %s" % (what, lc.stderr.strip()))
            if os.path.exists(copy):
                os.remove(copy)
            if unclosed and m > 0 and tried % 32 == 1:
                python_reads += check_python(what, path, want, m)
        os.remove(path)
    print("%d kill points after the file opened (of %d writes, %d tears tried); %d distinct "
          "prefixes, %d files read through the journal, %d read by ulpprof.open()" % (
              tried, len(writes), sum(1 for p in pts if p[1]), len(seen), journaled,
              python_reads), flush=True)
    check(len(seen) >= 10 and python_reads > 0,
          "the kills left only %d distinct prefixes (%d Python reads)" % (len(seen), python_reads))
    if not rc.failures:
        shutil.rmtree(tmp)
    return rc.finish("SIGKILL at every write left every kept capture accepted before it")


if __name__ == "__main__":
    sys.exit(main())

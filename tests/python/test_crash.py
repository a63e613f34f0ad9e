#!/usr/bin/python3
"""Crash safety: a capturing program killed with SIGKILL leaves a snapshot that
`ulpprof ls` and `ulpprof diff` read as it is, with every capture that was
complete before the kill.

  A. capture_loop --flush-each: killed right after it printed "flushed k"
     (ulp_session_flush() returned: capture k is in the file), for several k.
     The file must hold captures 0..n-1 with n >= k+1, each bit-exact (checked
     with h5py against make_snapshots.py's formula), and ls/diff must read it.
  B. Mid-write: 4 MiB tensors, killed right after capture k was queued (the
     writer thread is then busy writing) and at points spread over the run by
     the file's growth.  Every capture present is bit-exact, seq has no hole.
  C. The reference workload (ulpprof-refmodel), killed at fixed points of its
     run (the k-th pwrite(2) of the file, through the killwrite.so shim, plain
     and torn): the killed file holds a seq-prefix of the complete run's
     captures, bit-identical to them (ulpprof diff says so); h5py reads some
     of that prefix through the groups, which lag by at most a batch of
     links, each capture bit-identical.
  D. Every write: capture_loop killed at EACH pwrite(2) it makes, plain and
     torn at every page boundary inside it (SIGKILL can cut a multi-page
     write there, and HDF5 rewrites groups in place: a torn group is read
     around through the capture journal).  Once it printed "opened", the
     file must open, with at least the captures it printed as flushed.
No repair step is run anywhere: no h5clear, no copy.
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "reliability"))
import relcheck as rc  # noqa: E402
from relcheck import check  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402


def kill_at_size(args, path, size, tag):
    """Starts args and SIGKILLs it as soon as `path` has at least `size` bytes."""
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while p.poll() is None:
        try:
            if os.stat(path).st_size >= size:
                break
        except FileNotFoundError:
            pass
        time.sleep(0.0005)
    if p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
    p.wait()
    killed = p.returncode == -signal.SIGKILL
    check(killed or p.returncode == 0, "%s: exit %r (%r)" % (tag, p.returncode, p.stderr.read()))
    return killed


def part_a(tmp):
    names, elements, count = 5, 3000, 40
    full = os.path.join(tmp, "loop_full.h5")
    r = rc.run([rc.LOOP, "--out", full, "--count", str(count), "--elements", str(elements),
                "--names", str(names)])
    check(r.returncode == 0, "full loop run: %r" % r.stderr)
    check(rc.check_loop_file(full, elements, "bf16", names, "loop_full", count, count) == count,
          "loop_full: not all captures")
    for k in (0, 1, 2, 7, 23, 38):
        path = os.path.join(tmp, "kill_a%d.h5" % k)
        tag = "A kill after flushed %d" % k
        rc.kill_after_line([rc.LOOP, "--out", path, "--count", str(count), "--elements",
                         str(elements), "--names", str(names), "--flush-each", "--report"],
                        "flushed %d" % k, tag)
        n = rc.check_loop_file(path, elements, "bf16", names, tag, k + 1, count)
        if n < 0:
            continue
        m = rc.ls_seqs(path, tag, n)
        if m >= 0:
            rc.check_prefix_diff(path, full, m, tag, unclosed=True)
        print("%s: %d captures readable (h5py: %d)" % (tag, m, n), flush=True)


def part_b(tmp):
    names, elements, count = 3, 2 << 20, 24   # 4 MiB bf16 tensors
    full = os.path.join(tmp, "big_full.h5")
    r = rc.run([rc.LOOP, "--out", full, "--count", str(count), "--elements", str(elements),
                "--names", str(names), "--queue-mb", "32"])
    check(r.returncode == 0, "big full run: %r" % r.stderr)
    full_size = os.path.getsize(full)
    base = [rc.LOOP, "--elements", str(elements), "--names", str(names), "--count", str(count),
            "--queue-mb", "32"]
    seen = set()
    for k in (1, 4, 11):
        path = os.path.join(tmp, "kill_b%d.h5" % k)
        tag = "B kill after queued %d" % k
        rc.kill_after_line(base + ["--out", path, "--report"], "queued %d" % k, tag)
        n = rc.check_loop_file(path, elements, "bf16", names, tag, 0, k + 1)
        seen.add(n)
        print("%s: %d captures readable, file %d bytes" % (tag, n, os.path.getsize(path)),
              flush=True)
        if n >= 0:
            check(rc.ls_seqs(path, tag, n) >= 0, "%s: ls" % tag)
        os.remove(path)   # 4 MiB per capture: keep the disk free
    for frac in (0.02, 0.13, 0.31, 0.52, 0.77, 0.96):
        path = os.path.join(tmp, "kill_b%02d.h5" % int(frac * 100))
        tag = "B kill at %d%% of the file" % int(frac * 100)
        killed = kill_at_size(base + ["--out", path], path, int(full_size * frac), tag)
        if not killed:
            print("%s: finished before the kill" % tag)
        n = rc.check_loop_file(path, elements, "bf16", names, tag, 0, count)
        # Bytes beyond the last complete capture: the kill landed inside a write.
        partial = os.path.getsize(path) - (os.path.getsize(full) * n // count)
        print("%s: %d captures readable, file %d bytes (%+d past the captures)"
              % (tag, n, os.path.getsize(path), partial), flush=True)
        seen.add(n)
        if n >= 0:
            # Killed by size: perhaps after the close wrote its closed mark.
            m = rc.ls_seqs(path, tag, n, unclosed="maybe" if killed else False)
            if m >= 0:
                rc.check_prefix_diff(path, full, m, tag, unclosed="maybe" if killed else False)
        os.remove(path)
    os.remove(full)
    check(len(seen) >= 3, "B: the kills landed at only %d distinct points %r" % (len(seen), seen))


KILLWRITE = os.path.join(rc.BUILD, "tests", "reliability", "killwrite.so")


def killwrite_env(k=None, torn=False, count_file=None):
    env = dict(os.environ, LD_PRELOAD=KILLWRITE)
    # The shim is not sanitized; an ASan build must accept it ahead of its runtime.
    env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":verify_asan_link_order=0").lstrip(":")
    if k is not None:
        env["ULP_KILL_AT"] = str(k)
        env["ULP_KILL_TORN"] = "1" if torn else "0"
    if count_file:
        env["ULP_WRITE_COUNT"] = count_file
    return env


def count_writes(args, tmp):
    cnt = os.path.join(tmp, "writes.txt")
    r = subprocess.run(args, env=killwrite_env(count_file=cnt), capture_output=True, text=True)
    check(r.returncode == 0, "counting run %r: exit %d %r" % (args[0], r.returncode, r.stderr))
    with open(cnt) as fh:
        return int(fh.read())


def torn_listing(tmp):
    """h5_captures' torn mode on a group that lists a name it cannot open (a
    dangling link stands in for a torn entry): left out and reported, not a
    KeyError that stops the test (once a flake of part C)."""
    path = os.path.join(tmp, "listed_not_openable.h5")
    with h5py.File(path, "w") as f:
        f.require_group("captures").require_group("ok").create_dataset(
            "0", data=np.zeros(4, np.uint16)).attrs.update({"dtype": "bf16", "seq": 0})
        f["captures"]["gone"] = h5py.SoftLink("/nowhere")
    torn = []
    got = rc.h5_captures(path, torn)
    check(got == [(0, "ok", 0, "bf16", (4,))] and torn == ["gone"], "torn listing: %r %r"
          % (got, torn))
    try:
        rc.h5_captures(path)
        check(False, "torn listing: a whole-file read accepted an unopenable name")
    except KeyError:
        pass


def part_c(tmp):
    # Both are built with the tests: missing, the part would pass by not running.
    if not check(os.path.exists(rc.REFMODEL) and os.path.exists(KILLWRITE),
                 "C: %s or %s not built" % (rc.REFMODEL, KILLWRITE)):
        return
    full = os.path.join(tmp, "ref_full.h5")
    args = [rc.REFMODEL, "--mode", "miss", "--out", full]
    nw = count_writes(args, tmp)
    want = rc.h5_captures(full)
    with h5py.File(full, "r") as f:
        ref_bits = {(c[1], c[2]): rc.raw_bits(f["captures"][c[1]][str(c[2])]) for c in want}
    seen = set()
    for frac in (0.1, 0.3, 0.5, 0.7, 0.9, 0.99):
        for torn in (False, True):
            k = max(1, int(nw * frac))
            path = os.path.join(tmp, "ref_kill%d_%d.h5" % (k, torn))
            tag = "C refmodel killed at write %d of %d%s" % (k, nw, " (torn)" if torn else "")
            r = subprocess.run([rc.REFMODEL, "--mode", "miss", "--out", path],
                               env=killwrite_env(k, torn), capture_output=True, text=True)
            check(r.returncode == -signal.SIGKILL, "%s: exit %d" % (tag, r.returncode))
            # A torn kill can leave a group listing a name it cannot open
            # (h5py: "object ... doesn't exist"): those are left out of h5py's
            # view, and ulpprof must still read every capture through the journal.
            unopenable = []
            got = rc.h5_captures(path, unopenable if torn else None)
            n = len(got)
            # The groups may lag the journal by a batch of links, made in one
            # flush that a kill can cut between two groups: h5py's captures
            # are then some of the journal's prefix, each whole.
            m = rc.ls_seqs(path, tag, None if unopenable else n, lag=rc.LINK_BATCH)
            if m < 0:
                continue
            seen.add(m)
            check(m >= n and set(got) <= set(want[:m]),
                  "%s: h5py reads captures outside the journal's prefix" % tag)
            with h5py.File(path, "r") as f:
                for c in got:
                    check(np.array_equal(rc.raw_bits(f["captures"][c[1]][str(c[2])]),
                                         ref_bits[(c[1], c[2])]),
                          "%s: %s/%d differs from the full run" % (tag, c[1], c[2]))
            rc.check_prefix_diff(path, full, m, tag, unclosed=True)
            print("%s: %d of %d captures readable (h5py: %d)" % (tag, m, len(want), n),
                  flush=True)
    check(len(seen) >= 3, "C: the kills landed at only %d distinct points %r" % (len(seen), seen))


def write_log(args, tmp):
    """[(call, offset, bytes)] of every pwrite(2) a complete run makes."""
    log = os.path.join(tmp, "writes.log")
    if os.path.exists(log):
        os.remove(log)
    env = killwrite_env()
    env["ULP_WRITE_LOG"] = log
    r = subprocess.run(args, env=env, capture_output=True, text=True)
    check(r.returncode == 0, "logging run %r: exit %d %r" % (args[0], r.returncode, r.stderr))
    with open(log) as fh:
        return [tuple(int(x) for x in ln.split()) for ln in fh]


def every_write(tmp, tag, names, elements, count, stride=(1, 1), kernels=0):
    """capture_loop killed at each kill point: once it printed "opened", the
    file must open, with at least the captures it printed as flushed, and
    ls must list them.  Returns the number of kill points tried."""
    base = [rc.LOOP, "--count", str(count), "--elements", str(elements), "--names", str(names),
            "--flush-each", "--report"] + (["--kernels", str(kernels)] if kernels else [])
    full = os.path.join(tmp, "%s_full.h5" % tag.replace(" ", "_"))
    pts = rc.kill_points(write_log(base + ["--out", full], tmp), stride, first_tears=kernels > 0)
    bad, tried, dropped = [], 0, 0
    for k, tear in pts:
        path = os.path.join(tmp, "%s_%d_%d.h5" % (tag.replace(" ", "_"), k, tear))
        env = killwrite_env(k)
        if tear:
            env["ULP_KILL_TORN_AT"] = str(tear)
        r = subprocess.run(base + ["--out", path], env=env, capture_output=True, text=True)
        lines = r.stdout.split()
        if r.returncode != -signal.SIGKILL or "opened" not in lines:
            if os.path.exists(path):
                os.remove(path)
            continue    # killed while the file was being created: nothing promised
        tried += 1
        flushed = r.stdout.count("flushed ")
        what = "%s write %d%s (%d flushed)" % (tag, k, " torn after %d pages" % tear if tear else "",
                                               flushed)
        ls = rc.ulpprof(["ls", "--json", path])
        if ls.returncode != 0:
            bad.append("%s: %s" % (what, ls.stderr.strip()))
        else:
            rc.warning_ok(ls, path, what, True)
            dropped += "its kernel trace is left out" in ls.stderr
            n = len(json.loads(ls.stdout)[0]["captures"])
            check(n >= flushed, "%s: ls lists %d captures" % (what, n))
            # The bytes, through the journal, against the complete run's (h5py
            # is not used here: HDF5 can loop forever in a torn group).
            j = rc.diff_json(path, full, what, want_rc=0 if n == count else 1, unclosed=path)
            if j is not None:
                st = [row["status"] for row in j["rows"]]
                check(st.count("identical") == n and st.count("only_in_b") == count - n,
                      "%s: diff against the complete run: %r" % (what, sorted(set(st))))
        os.remove(path)
    print("%s: %d kill points after the file opened (of %d plain, %d torn at a page "
          "boundary): %d unreadable%s" % (tag, tried, sum(1 for p in pts if p[1] == 0),
                                          sum(1 for p in pts if p[1]), len(bad),
                                          ", %d with the torn trace left out" % dropped
                                          if kernels else ""), flush=True)
    for b in bad[:12]:
        print("   ", b)
    check(not bad, "%s: %d of %d kill points left a snapshot that ulpprof cannot open"
          % (tag, len(bad), tried))
    return tried


def part_d(tmp):
    """D. Every write of a short run, plain and torn at every page boundary;
    then a run long enough that the capture journal chains a second and a
    third block, sampled (every 12th plain and every 4th torn kill point)."""
    if not os.path.exists(KILLWRITE):
        print("SKIP D: %s not built" % KILLWRITE)
        return
    every_write(tmp, "D short", 3, 100, 6)
    # ULP_CRASH_FULL=1: every kill point of the long run too (about 2,300; 4 min).
    every_write(tmp, "D long", 3, 100, 260,
                stride=(1, 1) if os.environ.get("ULP_CRASH_FULL") == "1" else (12, 4))
    # A trace written as the CUDA collector writes it (new kernel names, so a
    # global heap grows in place, and /trace's chunk indexes): a torn trace is
    # left out, never a loop in HDF5.  160 names fill the first 4 KiB heap
    # past its first page boundary, where a torn rewrite made HDF5 loop.
    every_write(tmp, "D trace", 3, 100, 16, kernels=10,
                stride=(1, 1) if os.environ.get("ULP_CRASH_FULL") == "1" else (8, 8))


def main():
    # A file HDF5 loops on costs this many seconds before ulpprof gives up.
    os.environ.setdefault("ULPPROF_OPEN_TIMEOUT", "20")
    tmp = rc.tmpdir("crash")
    # ULPPROF_CRASH_PARTS=AB runs a subset: .ci/sanitize's TSan step wants the
    # writer thread killed mid-run, not the hundreds of kill points of C and D
    # (15 minutes under TSan); the plain and ASan suites run every part.
    parts = os.environ.get("ULPPROF_CRASH_PARTS", "ABCD").upper()
    for part, run in (("A", part_a), ("B", part_b), ("B", torn_listing), ("C", part_c),
                      ("D", part_d)):
        if part in parts:
            run(tmp)
    skipped = sorted(set("ABCD") - set(parts))
    if skipped:
        print("parts %s not run (ULPPROF_CRASH_PARTS=%s)" % (", ".join(skipped), parts), flush=True)
    if not rc.failures:
        import shutil
        shutil.rmtree(tmp)
    return rc.finish("SIGKILL at every point left a readable snapshot")


if __name__ == "__main__":
    sys.exit(main())

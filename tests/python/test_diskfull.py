#!/usr/bin/python3
"""Disk full: when the snapshot cannot grow, the capture
library prints ONE clear stderr line, refuses later captures with an error
status, keeps every capture flushed before intact and readable by `ulpprof ls`
and `ulpprof diff`, and the host program runs on to its end.

Two ways to fill the disk:
  - a file-size limit (setrlimit RLIMIT_FSIZE), once with SIGXFSZ left at its
    default (which kills a process whose write passes the limit, unless the
    library keeps the signal away from the host) and once ignored;
  - a 1 MiB tmpfs (only as root; skipped loudly otherwise).
"""
import json
import os
import resource
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "reliability"))
import relcheck as rc  # noqa: E402
from relcheck import check  # noqa: E402

NAMES, ELEMENTS, COUNT = 4, 10000, 120


def limited(nbytes):
    def pre():
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
        # Python ignores SIGXFSZ; give the child the default disposition back.
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    return pre


def full_run(tmp):
    full = os.path.join(tmp, "full.h5")
    r = rc.run([rc.LOOP, "--out", full, "--count", str(COUNT), "--elements", str(ELEMENTS),
                "--names", str(NAMES)])
    check(r.returncode == 0 and r.stderr == "", "full run: %d %r" % (r.returncode, r.stderr))
    return full


def one_case(path, full, tag, errno_text, extra=(), preexec=None):
    args = [rc.LOOP, "--out", path, "--count", str(COUNT), "--elements", str(ELEMENTS),
            "--names", str(NAMES), "--flush-each", "--report", "--keep-going"] + list(extra)
    p = subprocess.run(args, capture_output=True, text=True, preexec_fn=preexec, timeout=300)
    check(p.returncode == 0, "%s: host exit %d (signal if negative); stderr %r"
          % (tag, p.returncode, p.stderr))
    out = p.stdout.splitlines()
    flushed = [ln for ln in out if ln.startswith("flushed ")]
    done = out[-1] if out else ""
    check(done.startswith("done ") and done.endswith(" close=ULP_ENOSPC") and " refused=0 " not in done,
          "%s: last line %r" % (tag, done))
    err = p.stderr.splitlines()
    check(len(err) == 1, "%s: %d stderr lines: %r" % (tag, len(err), p.stderr))
    if err:
        check(err[0].startswith("ulpprof: capture to '%s' failed: " % path) and errno_text in err[0],
              "%s: stderr %r" % (tag, err[0]))
        check("HDF5-DIAG" not in p.stderr, "%s: HDF5 noise" % tag)
    check(0 < len(flushed) < COUNT, "%s: %d captures flushed before the disk was full"
          % (tag, len(flushed)))
    n = rc.check_loop_file(path, ELEMENTS, "bf16", NAMES, tag, len(flushed), len(flushed) + 1)
    if n >= 0:
        # A writer whose close failed leaves no closed mark: then ls reads the
        # journal and says so.  (Its close can also succeed: the disk filled
        # in a capture, and the close has nothing left to write.)
        m = rc.ls_seqs(path, tag, n, unclosed="maybe")
        if m >= 0:
            rc.check_prefix_diff(path, full, m, tag, unclosed="maybe")
    print("%s: %d captures flushed, %d readable; %s" % (tag, len(flushed), n,
                                                        err[0] if err else "no message"),
          flush=True)


def batched_case(tmp, pre, extra):
    """Small captures of one name without a flush after each: the writer
    journals and links them in batches.  `pre` captures and a flush that
    succeeds, then the file may grow `extra` bytes more while 200 more are
    captured.  A batch cut by the full disk must not cost the captures before
    it: `ulpprof ls` reads seq 0..n-1 with n >= pre, without error, as the
    full run's first n."""
    path = os.path.join(tmp, "batched_%d_%d.h5" % (pre, extra))
    tag = "batched: %d flushed, then %d bytes more" % (pre, extra)
    count = pre + 200
    base = [rc.LOOP, "--count", str(count), "--elements", "4", "--dtype", "i32", "--names", "1"]
    full = os.path.join(tmp, "batched_full_%d.h5" % count)
    if not os.path.exists(full):
        r = rc.run(base + ["--out", full])
        check(r.returncode == 0, "%s: full run %d %r" % (tag, r.returncode, r.stderr))
    p = subprocess.run(base + ["--out", path, "--flush-every", str(pre), "--fill-after",
                               "%d:%d" % (pre, extra), "--report", "--keep-going",
                               "--ignore-sigxfsz"], capture_output=True, text=True, timeout=300)
    out = p.stdout.splitlines()
    check(p.returncode == 0 and out and out[-1].startswith("done ") and "flushed %d" % (pre - 1)
          in out and len(p.stderr.splitlines()) <= 1 and "HDF5" not in p.stderr,
          "%s: host exit %d, last line %r, stderr %r" % (tag, p.returncode, out[-1:], p.stderr))
    r = rc.ulpprof(["ls", "--json", path])
    if not check(r.returncode == 0, "%s: ls exit %d: %r" % (tag, r.returncode, r.stderr)):
        return
    seqs = [c["seq"] for c in json.loads(r.stdout)[0]["captures"]]
    check(seqs == list(range(len(seqs))) and len(seqs) >= pre,
          "%s: ls lists %d captures (seq 0..n-1?), %d were flushed" % (tag, len(seqs), pre))
    rc.check_prefix_diff(path, full, len(seqs), tag, unclosed="maybe")
    print("%s: %d readable" % (tag, len(seqs)), flush=True)


def fill_sweep(mnt, tmp):
    """A 256 KiB tmpfs filled to 0..240 KiB before a run of 60 captures of
    2,000 bytes, so that the disk
    fills at different points of the writer's metadata: at some of them
    HDF5's close failed, its exit handler then crashed the host (SIGSEGV,
    stdout lost), and one left a file HDF5 could no longer open.  Every
    level: exit 0 with the last line printed, at most one stderr line, and
    ls/diff read every capture flushed (and at most one more)."""
    path = os.path.join(mnt, "x.h5")
    count, elements, names = 60, 1000, 3
    full = os.path.join(tmp, "sweep_full.h5")
    r = rc.run([rc.LOOP, "--out", full, "--count", str(count), "--elements", str(elements),
                "--names", str(names)])
    check(r.returncode == 0, "sweep: full run %d %r" % (r.returncode, r.stderr))
    for kib in range(0, 241, 10):
        for f in os.listdir(mnt):
            os.remove(os.path.join(mnt, f))
        if kib:
            with open(os.path.join(mnt, "fill"), "wb") as fh:
                fh.write(b"\0" * (kib << 10))
        tag = "256 KiB tmpfs with %d KiB used" % kib
        args = [rc.LOOP, "--out", path, "--count", str(count), "--elements", str(elements),
                "--names", str(names), "--flush-each", "--report", "--keep-going"]
        p = subprocess.run(args, capture_output=True, text=True, timeout=300)
        out = p.stdout.splitlines()
        if p.returncode == 2 and not out:
            # Full before the session could even create its file: refused.
            check(len(p.stderr.splitlines()) == 1 and "No space left" in p.stderr,
                  "%s: the failed open said %r" % (tag, p.stderr))
            continue
        check(p.returncode == 0 and out and out[-1].startswith("done "),
              "%s: host exit %d (signal if negative), last line %r, stderr %r"
              % (tag, p.returncode, out[-1:] if out else None, p.stderr))
        check(len(p.stderr.splitlines()) <= 1 and "HDF5" not in p.stderr
              and "infinite loop" not in p.stderr, "%s: stderr %r" % (tag, p.stderr))
        flushed = sum(1 for ln in out if ln.startswith("flushed "))
        r = rc.ulpprof(["ls", "--json", path])
        if not check(r.returncode == 0, "%s: ls exit %d %r (%d captures were flushed)"
                     % (tag, r.returncode, r.stderr, flushed)):
            continue
        n = len(json.loads(r.stdout)[0]["captures"])
        check(flushed <= n <= flushed + 1, "%s: ls lists %d, %d flushed" % (tag, n, flushed))
        rc.check_prefix_diff(path, full, n, tag, unclosed="maybe")
        print("%s: %d flushed, %d readable" % (tag, flushed, n), flush=True)


def try_mount(d, size="1m"):
    if os.geteuid() != 0:
        return "not root"
    r = rc.run(["mount", "-t", "tmpfs", "-o", "size=" + size, "ulpprof-test", d])
    return None if r.returncode == 0 else "mount failed: " + r.stderr.strip()


def main():
    tmp = rc.tmpdir("diskfull")
    full = full_run(tmp)
    for limit in (65536, 300000, 1 << 20):
        for ign in (False, True):
            tag = "RLIMIT_FSIZE %d, SIGXFSZ %s" % (limit, "ignored" if ign else "default")
            one_case(os.path.join(tmp, "fsize_%d_%d.h5" % (limit, ign)), full, tag,
                     "File too large", ["--ignore-sigxfsz"] if ign else [], limited(limit))
    for pre in (1, 100):
        for extra in (30000, 50000, 70000, 90000):
            batched_case(tmp, pre, extra)
    mnt = os.path.join(tmp, "tmpfs")
    os.mkdir(mnt)
    why = try_mount(mnt)
    if why is not None:
        print("SKIP tmpfs disk-full case: %s" % why)
    else:
        try:
            path = os.path.join(mnt, "x.h5")
            one_case(path, full, "1 MiB tmpfs", "No space left on device")
        finally:
            rc.run(["umount", mnt])
        if try_mount(mnt, "256k") is None:
            try:
                fill_sweep(mnt, tmp)
            finally:
                rc.run(["umount", mnt])
    if not rc.failures:
        import shutil
        shutil.rmtree(tmp)
    return rc.finish("disk full gave one error line, kept the captures, and the host ran on")


if __name__ == "__main__":
    sys.exit(main())

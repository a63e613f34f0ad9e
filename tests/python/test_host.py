#!/usr/bin/python3
"""The host program never hangs, crashes or loses what the library accepted,
and the writer's own failures say so in one line.  Each
case runs tests/reliability/host_abuse.c under a timeout (a hang fails the
case instead of the suite) and checks the file with h5py and `ulpprof`:

  - ulp_capture_close() while three threads capture without pause, and
     main returning while they capture (exit() closes): both end; every
     capture accepted before close is in the file, none after it;
  - captures from a SIGALRM handler while main captures: no deadlock (a
     re-entered call is refused with a status), every accepted one stored;
  - backwards and negative kernel ranges and a 70,000-byte /run key or
     value are refused at the call; the captures around them are kept and
     ls, diff and repair read the file;
  - a second writer on a live writer's path is refused in one line and
     leaves the first writer's file intact; meanwhile `ulpprof ls` says the
     file is locked by a running writer;
  - a failed create says so in one line, without HDF5 noise.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "reliability"))
import relcheck as rc  # noqa: E402
from relcheck import check  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

HOST = os.path.join(rc.BUILD, "tests", "reliability", "host_abuse")
EINVAL, EBUSY, EIO = -1, -21, -3
WANT = (0x3f80 + np.arange(64)).astype(np.uint16)  # host_abuse's tensor


def run(args, tag, timeout=120, **kw):
    try:
        return subprocess.run([HOST] + args, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired:
        check(False, "%s: still running after %d s (hang)" % (tag, timeout))
        return None


def h5_count(path, tag):
    """Captures in the file by h5py, each checked bit for bit; -1 if unreadable."""
    try:
        with h5py.File(path, "r") as f:
            g = f["captures"]
            n = 0
            for name in g:
                for occ in g[name]:
                    d = g[name][occ]
                    check(np.array_equal(rc.raw_bits(d), WANT), "%s: %s/%s bits" % (tag, name, occ))
                    n += 1
            return n
    except Exception as e:  # noqa: BLE001
        check(False, "%s: h5py cannot read %s: %s" % (tag, path, e))
        return -1


def ls_count(path, tag):
    r = rc.ulpprof(["ls", "--json", path])
    if not check(r.returncode == 0 and r.stderr == "", "%s: ls %d %r" % (tag, r.returncode, r.stderr)):
        return -1
    return len(json.loads(r.stdout)[0]["captures"])


def close_race(tmp):
    path = os.path.join(tmp, "close.h5")
    r = run(["close-race", path], "close while capturing")
    if r is None:
        return
    check(r.returncode == 0 and r.stderr == "", "close-race: %d %r" % (r.returncode, r.stderr))
    f = r.stdout.split()
    n, after = int(f[1]), int(f[3])
    check(f[4] == "close=0" and after == 0, "close-race: %r" % r.stdout)
    check(h5_count(path, "close-race") == n and ls_count(path, "close-race") == n,
          "close-race: the file does not hold the %d accepted captures" % n)

    path = os.path.join(tmp, "exit.h5")
    r = run(["exit-race", path], "exit while capturing")
    if r is None:
        return
    check(r.returncode == 0 and r.stderr == "", "exit-race: %d %r" % (r.returncode, r.stderr))
    n = int(r.stdout.split()[1])
    m = ls_count(path, "exit-race")
    check(m >= n and h5_count(path, "exit-race") == m, "exit-race: %d in the file, %d accepted" % (m, n))


def in_signal(tmp):
    path = os.path.join(tmp, "signal.h5")
    r = run(["signal", path], "captures from a signal handler")
    if r is None:
        return
    check(r.returncode == 0, "signal: %d %r" % (r.returncode, r.stderr))
    f = r.stdout.split()
    main_ok, handler_ok = int(f[1]), int(f[3])
    check(main_ok == 4000 and f[6] == "close=0", "signal: %r" % r.stdout)
    n = ls_count(path, "signal")
    check(n == main_ok + handler_ok and h5_count(path, "signal") == n,
          "signal: %d in the file, %d accepted" % (n, main_ok + handler_ok))


def bad_desc(tmp):
    path = os.path.join(tmp, "bad.h5")
    r = run(["bad-desc", path], "bad requests")
    if r is None:
        return
    got = dict(ln.split(" ", 1) if " " in ln else ln.split("=", 1) for ln in r.stdout.splitlines())
    want = {"backwards": str(EINVAL), "negative": str(EINVAL), "long-key": str(EINVAL),
            "long-value": str(EINVAL), "good": "0", "run": "0", "close": "0"}
    check(got == want, "bad-desc: statuses %r" % got)
    check(len(r.stderr.splitlines()) == 4, "bad-desc: stderr %r" % r.stderr)
    check(h5_count(path, "bad-desc") == 2 and ls_count(path, "bad-desc") == 2, "bad-desc: captures")
    with h5py.File(path, "r") as f:
        check(f["run"].attrs.get("cache") in (b"miss", "miss"), "bad-desc: /run lost")
    d = rc.ulpprof(["diff", path, path])
    check(d.returncode == 0, "bad-desc: diff %d %r" % (d.returncode, d.stderr))
    p = rc.ulpprof(["repair", path, os.path.join(tmp, "bad_copy.h5")])
    check(p.returncode == 0, "bad-desc: repair %d %r" % (p.returncode, p.stderr))


def second_writer(tmp):
    path = os.path.join(tmp, "two.h5")
    first = subprocess.Popen([HOST, "hold", path, "10"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        check(first.stdout.readline().strip() == "ready", "second writer: first not ready")
        size = os.path.getsize(path)
        r = run(["open", path], "second writer")
        if r is not None:
            check(r.stdout.strip() == "open=%d" % EIO, "second writer: %r" % r.stdout)
            lines = r.stderr.splitlines()
            check(len(lines) == 1 and "another process" in lines[0] and path in lines[0],
                  "second writer: stderr %r" % r.stderr)
        check(os.path.getsize(path) >= size, "second writer: the first file shrank")
        ls = rc.ulpprof(["ls", path])
        check(ls.returncode == 2 and "locked by a running writer" in ls.stderr
              and len(ls.stderr.splitlines()) == 1, "ls of a live file: %r" % ls.stderr)
        out, err = first.communicate("go\n", timeout=120)
    except subprocess.TimeoutExpired:
        first.kill()
        check(False, "second writer: the first writer hung")
        return
    check(first.returncode == 0 and out.strip() == "close=0" and err == "",
          "first writer: %d %r %r" % (first.returncode, out, err))
    check(h5_count(path, "first writer") == 20 and ls_count(path, "first writer") == 20,
          "first writer: its 20 captures are not all in the file")


def failed_create(tmp):
    r = run(["open", os.path.join(tmp, "no", "such", "dir.h5")], "failed create")
    if r is None:
        return
    lines = r.stderr.splitlines()
    check(r.returncode == 0 and len(lines) == 1 and "cannot create" in lines[0]
          and "HDF5" not in r.stderr and "infinite loop" not in r.stderr,
          "failed create: %r" % r.stderr)


def many_occurrences(tmp):
    """50,000 occurrences of one name: `ls` takes longer than a 1 s open
    watchdog, which must not call a file that is being read hung (it said
    "still decoding its metadata" and exit 2 on every file past a minute of
    reading with the default limit, 1,000,000 captures among them)."""
    path = os.path.join(tmp, "many.h5")
    n = 50000
    r = rc.run([rc.LOOP, "--out", path, "--count", str(n), "--elements", "4", "--names", "1"],
               timeout=600)
    if not check(r.returncode == 0, "many: capture_loop %d %r" % (r.returncode, r.stderr)):
        return
    env = dict(os.environ, ULPPROF_OPEN_TIMEOUT="1")
    r = subprocess.run([rc.ULPPROF, "ls", "--json", path], capture_output=True, text=True,
                       env=env, timeout=600)
    ok = check(r.returncode == 0 and r.stderr == "", "many: ls %d %r" % (r.returncode, r.stderr))
    if ok:
        occ = sorted(c["occurrence"] for c in json.loads(r.stdout)[0]["captures"])
        check(occ == list(range(n)), "many: ls lists %d occurrences, not 0..%d" % (len(occ), n - 1))


def main():
    tmp = rc.tmpdir("host")
    for case in (close_race, in_signal, bad_desc, second_writer, failed_create, many_occurrences):
        case(tmp)
    if not rc.failures:
        import shutil
        shutil.rmtree(tmp)
    return rc.finish("the host program ends, and keeps what was accepted")


if __name__ == "__main__":
    sys.exit(main())

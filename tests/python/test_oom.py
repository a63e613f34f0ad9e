#!/usr/bin/python3
"""Every allocation of `ulpprof ls` and `ulpprof diff` failing in turn (the
reliability standard: no crash, no hang, no silent wrong answer).

tests/reliability/failmalloc.so makes the N-th allocation of the process
return NULL.  For each command below, a first run counts its allocations;
then the command runs once with each of them failing (a deterministic
spread of them when there are more than MAX_RUNS).  Each run must either
  - give the answer of the run without failures: the same exit status,
    the same stdout byte for byte, the same stderr (an allocation whose
    failure is survived, or one made on the way out), or
  - exit 2 with one stderr line that names the problem: out of memory
    when the allocation was the program's own, not some fault of the file,
and never die of a signal, hang, or exit 0/1 with another answer.

Where the allocation that failed was HDF5's own (the first frame of its
stack outside the C library is an H5* function, found with nm), HDF5 1.10
itself may print its error stack, or recurse in it until the stack
overflows (H5E_printf_stack and H5I_inc_ref calling each other when its
initialization fails): those runs are counted and printed, not failed --
ulpprof cannot mend HDF5 -- but they too must never give another answer
with exit 0 or 1.  Snapshots with an open map are opened without HDF5.

The commands: `ls`, `ls --json` and `diff` (table, JSON) of snapshots the
capture library wrote (opened from their open map, and through HDF5 with
ULPPROF_OPEN_MAP=0) and of snapshots h5py wrote; `ladder -f json` over
three runs and `kernels --json` of two kernel traces (300 allocations of
each, spread).

The capture library too, in a host program (capture_loop, 6 captures):
it must neither crash nor exit its host, and lose nothing it accepted
without saying so.  Each run must end its loop (exit 0) and either close
cleanly with every capture it accepted in the file (h5py reads them bit
for bit), or say what failed, on stderr, in lines of its own ("ulpprof:
..."), and return the failure from the capture or the close; or, when the
session could not be opened, exit 2 with such a line.

And `ulpprof repair`: a whole copy, or exit 2 with one line and no output
file left behind.  The answers compared
against are the same program's without failures: what is checked here is
that a failure changes nothing but the exit; the answers themselves are
checked against h5py by the other tests.

And one allocation by its size: the buffer in which ulpprof checks a global
heap collection of /trace/names (a 20 KiB kernel name has one of its own)
before HDF5 decodes it.  Failing, it must say out of memory, not that the
file is damaged.

Skipped under AddressSanitizer, whose allocator the shim would replace.
"""
import bisect
import json
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "reliability"))
import relcheck as rc  # noqa: E402
from relcheck import check  # noqa: E402

import h5py  # noqa: E402

import make_snapshots as ms  # noqa: E402

SHIM = os.path.join(rc.BUILD, "tests", "reliability", "failmalloc.so")
MAX_RUNS = 700  # per command: about 5 s each on a loaded 2-core machine


def sanitized():
    r = subprocess.run(["ldd", rc.ULPPROF], capture_output=True, text=True)
    return "libasan" in r.stdout or "libtsan" in r.stdout


def run(args, env_extra, fail_at=None, count_file=None, who_file=None):
    env = dict(os.environ, LD_PRELOAD=SHIM, **env_extra)
    if fail_at is not None:
        env["ULP_FAIL_MALLOC_AT"] = str(fail_at)
        env["ULP_MALLOC_WHO"] = who_file
    if count_file is not None:
        env["ULP_MALLOC_COUNT"] = count_file
    return subprocess.run([rc.ULPPROF] + args, capture_output=True, timeout=60, env=env)


_symbols = {}


def symbols(obj):
    """(sorted offsets, names) of the functions of an ELF object, by nm."""
    if obj not in _symbols:
        r = subprocess.run(["nm", "-n", "--defined-only", obj], capture_output=True, text=True)
        offs, names = [], []
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tTwW":
                offs.append(int(parts[0], 16))
                names.append(parts[2])
        _symbols[obj] = (offs, names)
    return _symbols[obj]


def hdf5_allocation(who_file):
    """Whether the failed allocation was HDF5's own: the first frame of its
    stack outside the C library and the loader is in an H5* function (or in
    a shared libhdf5)."""
    try:
        with open(who_file) as fh:
            frames = [line.split() for line in fh]
    except OSError:
        return False
    for obj, off in frames:
        base = os.path.basename(obj)
        if base.startswith(("libc.so", "ld-linux", "libgcc_s", "libpthread")):
            continue
        if base.startswith("libhdf5"):
            return True
        offs, names = symbols(obj)
        i = bisect.bisect_right(offs, int(off, 16)) - 1
        return i >= 0 and names[i].startswith("H5")
    return False


def points(n, most=MAX_RUNS):
    """Which allocations to fail: all of them, or `most` spread evenly
    (the first and the last included)."""
    if n <= most:
        return list(range(1, n + 1))
    return sorted({1 + (i * (n - 1)) // (most - 1) for i in range(most)})


def without_time(out):
    """A ladder's JSON without its "seconds" (a timing, different every run);
    b"not JSON" when it does not parse."""
    try:
        doc = json.loads(out)
    except ValueError:
        return b"not JSON"
    doc.pop("seconds", None)
    return json.dumps(doc, sort_keys=True).encode()


def one_command(tag, args, env_extra, d, most=MAX_RUNS, same_as=lambda out: out):
    count_file = os.path.join(d, "count")
    ref = run(args, env_extra, count_file=count_file)
    if not check(ref.returncode in (0, 1), "%s: exit %d without failures: %r"
                 % (tag, ref.returncode, ref.stderr[:300])):
        return
    with open(count_file) as fh:
        n = int(fh.read())
    check(n > 0, "%s: no allocation counted: the shim is not in the process" % tag)
    survived = refused = hdf5s = 0
    hdf5_kinds = {}
    who = os.path.join(d, "who")
    for k in points(n, most):
        if os.path.exists(who):
            os.unlink(who)
        try:
            r = run(args, env_extra, fail_at=k, who_file=who)
        except subprocess.TimeoutExpired:
            check(False, "%s: allocation %d failing: hangs" % (tag, k))
            continue
        what = "%s: allocation %d of %d failing" % (tag, k, n)
        same = (r.returncode == ref.returncode and same_as(r.stdout) == same_as(ref.stdout) and
                r.stderr == ref.stderr)
        if r.returncode in (0, 1):
            check(same, "%s: exit %d and another answer than without failures (stdout %r..., "
                  "stderr %r)" % (what, r.returncode, r.stdout[:200], r.stderr[:300]))
            survived += 1
            continue
        lines = r.stderr.decode(errors="replace").splitlines()
        if r.returncode == 2 and len(lines) == 1 and lines[0].startswith("ulpprof: "):
            # Our own allocation lacking is no damaged file, nor a crash of HDF5's.
            # (The crash guard's line names memory as one cause: not good enough here.)
            ours_said = "memory" in lines[0].lower() and "crashed" not in lines[0]
            check(ours_said or not os.path.exists(who) or hdf5_allocation(who),
                  "%s: our allocation failed, and the line says %r" % (what, lines[0]))
            refused += 1
            continue
        if hdf5_allocation(who):
            hdf5s += 1
            kind = ("signal %d" % -r.returncode if r.returncode < 0 else
                    "exit %d, %s" % (r.returncode, "HDF5's error stack" if b"HDF5-DIAG" in r.stderr
                                     else "%d lines" % len(lines)))
            hdf5_kinds[kind] = hdf5_kinds.get(kind, 0) + 1
            continue
        if r.returncode < 0:
            check(False, "%s: killed by signal %d, stderr %r" % (what, -r.returncode,
                                                                 r.stderr[-300:]))
        else:
            check(False, "%s: exit %d with stderr %r, want exit 2 and one line"
                  % (what, r.returncode, r.stderr[:600]))
    print("%s: %d allocations, %d runs: %d refused (exit 2, one line), %d gave the same answer, "
          "%d HDF5's own allocation and HDF5 did not recover%s"
          % (tag, n, len(points(n, most)), refused, survived, hdf5s,
             " (%s)" % ", ".join("%s: %d" % kv for kv in sorted(hdf5_kinds.items()))
             if hdf5_kinds else ""))


def capture_loop(d):
    """The capture library with each allocation of a host program failing in turn."""
    tag = "capture_loop"
    path = os.path.join(d, "loop.h5")
    args = [rc.LOOP, "--out", path, "--count", "6", "--elements", "64", "--names", "3",
            "--keep-going"]
    count_file, who = os.path.join(d, "count"), os.path.join(d, "who")

    def go(extra):
        if os.path.exists(path):
            os.unlink(path)
        env = dict(os.environ, LD_PRELOAD=SHIM, **extra)
        return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)

    r = go({"ULP_MALLOC_COUNT": count_file})
    if not check(r.returncode == 0 and "done ok=6 refused=0 close=ULP_OK" in r.stdout,
                 "%s without failures: exit %d, %r %r" % (tag, r.returncode, r.stdout[-200:],
                                                         r.stderr[-300:])):
        return
    with open(count_file) as fh:
        n = int(fh.read())
    clean = told = hdf5s = 0
    for k in points(n):
        if os.path.exists(who):
            os.unlink(who)
        try:
            r = go({"ULP_FAIL_MALLOC_AT": str(k), "ULP_MALLOC_WHO": who})
        except subprocess.TimeoutExpired:
            check(False, "%s: allocation %d failing: hangs" % (tag, k))
            continue
        what = "%s: allocation %d of %d failing" % (tag, k, n)
        lines = r.stderr.splitlines()
        ours = all(line.startswith("ulpprof: ") for line in lines)
        done = [line for line in r.stdout.splitlines() if line.startswith("done ")]
        if r.returncode == 0 and ours and done:
            if done[0] == "done ok=6 refused=0 close=ULP_OK":
                got = rc.check_loop_file(path, 64, "bf16", 3, what, n_min=6, n_max=6)
                check(got == 6 and not lines, "%s: a clean close, stderr %r" % (what, r.stderr))
                clean += 1
            else:
                check(len(lines) >= 1, "%s: %r and nothing said" % (what, done[0]))
                told += 1
            continue
        if r.returncode == 2 and ours and len(lines) == 1 and not done:
            told += 1  # the session could not be opened: said so
            continue
        if hdf5_allocation(who):
            hdf5s += 1
            continue
        check(False, "%s: exit %d, stdout %r, stderr %r" % (what, r.returncode, r.stdout[-200:],
                                                              r.stderr[-400:]))
    print("%s: %d allocations, %d runs: %d closed cleanly with every capture, %d said what "
          "failed, %d HDF5's own allocation and HDF5 did not recover"
          % (tag, n, len(points(n)), clean, told, hdf5s))


def gheap_buffer(d):
    """The global heap check's buffer lacking: out of memory, not a damaged file."""
    path, who = os.path.join(d, "gheap.h5"), os.path.join(d, "who")
    with h5py.File(path, "w") as f:
        ms.root(f)
        ms.add_trace(f, ["k" * 20000, "short"], ms.KERNELS[:2])
    with open(path, "rb") as fh:
        data = fh.read()
    sizes, at = [], data.find(b"GCOL")
    while at >= 0:
        sizes.append(struct.unpack("<Q", data[at + 8:at + 16])[0])
        at = data.find(b"GCOL", at + 1)
    if not check(len(sizes) == 2 and max(sizes) > 20000, "gheap: collections %r" % sizes):
        return
    if os.path.exists(who):
        os.unlink(who)
    env = dict(os.environ, LD_PRELOAD=SHIM, ULP_FAIL_MALLOC_SIZE=str(max(sizes)),
               ULP_MALLOC_WHO=who)
    r = subprocess.run([rc.ULPPROF, "ls", path], capture_output=True, text=True, timeout=60,
                       env=env)
    check(os.path.exists(who), "gheap: no allocation of %d bytes failed" % max(sizes))
    lines = r.stderr.splitlines()
    check(r.returncode == 2 and len(lines) == 1 and "out of memory" in lines[0],
          "gheap: its buffer lacking: exit %d, %r" % (r.returncode, r.stderr))


def repair(d, a):
    """`ulpprof repair` with each allocation failing in turn: a whole copy
    (h5py reads the captures bit for bit) with exit 0, or exit 2 with one
    line and no output file left behind (a rerun would refuse it)."""
    tag = "repair"
    out, count_file, who = (os.path.join(d, n) for n in ("copy.h5", "count", "who"))
    ref = run(["repair", a, out], {}, count_file=count_file)
    if not check(ref.returncode == 0, "%s without failures: exit %d, %r"
                 % (tag, ref.returncode, ref.stderr[-300:])):
        return
    os.unlink(out)
    with open(count_file) as fh:
        n = int(fh.read())
    whole = refused = hdf5s = 0
    for k in points(n, 300):
        for stale in (out, who):
            if os.path.exists(stale):
                os.unlink(stale)
        r = run(["repair", a, out], {}, fail_at=k, who_file=who)
        what = "%s: allocation %d of %d failing" % (tag, k, n)
        lines = r.stderr.decode(errors="replace").splitlines()
        if r.returncode == 0:
            got = rc.check_loop_file(out, 64, "bf16", 3, what, n_min=6, n_max=6)
            check(got == 6 and r.stdout == ref.stdout, "%s: exit 0, %d captures" % (what, got))
            whole += 1
        elif r.returncode == 2 and len(lines) == 1 and lines[0].startswith("ulpprof: "):
            check(not os.path.exists(out), "%s: exit 2 (%r) and %s left behind"
                  % (what, lines[0], out))
            refused += 1
        elif hdf5_allocation(who):
            hdf5s += 1
        else:
            check(False, "%s: exit %d, stderr %r" % (what, r.returncode, r.stderr[-400:]))
    print("%s: %d allocations, %d runs: %d whole copies, %d refused (exit 2, one line, no file), "
          "%d HDF5's own allocation and HDF5 did not recover"
          % (tag, n, len(points(n, 300)), whole, refused, hdf5s))


def main():
    if sanitized():
        print("ok: skipped: a sanitized build (the shim would replace its allocator)")
        return 0
    check(os.path.exists(SHIM), "no %s: build the tests first" % SHIM)
    d = rc.tmpdir("oom")
    a, b = os.path.join(d, "a.h5"), os.path.join(d, "b.h5")
    for path, flip in ((a, []), (b, ["--flip-from", "3"])):
        r = rc.run([rc.LOOP, "--out", path, "--count", "6", "--elements", "64", "--names", "3"]
                   + flip)
        check(r.returncode == 0, "capture_loop %s: %r" % (path, r.stderr))
    c, e = os.path.join(d, "c.h5"), os.path.join(d, "e.h5")
    ms.write_plain(c)
    ms.write_plain(e, label="other")
    for env_extra, how in (({}, "map"), ({"ULPPROF_OPEN_MAP": "0"}, "hdf5")):
        one_command("ls (%s)" % how, ["ls", a], env_extra, d)
        one_command("ls --json (%s)" % how, ["ls", "--json", a], env_extra, d)
        one_command("diff (%s)" % how, ["diff", a, b], env_extra, d)
        one_command("diff -f json (%s)" % how, ["diff", "-f", "json", a, b], env_extra, d)
    one_command("ls --json (h5py)", ["ls", "--json", c], {}, d)
    one_command("diff -f json (h5py)", ["diff", "-f", "json", c, e], {}, d)
    capture_loop(d)
    repair(d, a)
    # The ladder over three runs (two rungs' /run keys), and the kernel
    # traces' alignment (files with /trace: read through HDF5).
    runs = []
    for name, attr, flip in (("la", "cache=miss", []), ("lb", "cache=hit", ["--flip-from", "3"]),
                             ("lc", "cache=miss", [])):
        path = os.path.join(d, name + ".h5")
        r = rc.run([rc.LOOP, "--out", path, "--count", "6", "--elements", "64", "--names", "3",
                    "--kernels", "2"] + flip, env=dict(os.environ, ULPPROF_ATTR=attr))
        check(r.returncode == 0, "capture_loop %s: %r" % (path, r.stderr))
        runs.append(path)
    one_command("ladder -f json", ["ladder", "-f", "json"] + runs, {}, d, most=300,
                same_as=without_time)
    one_command("kernels --json", ["kernels", "--json", runs[0], runs[1]], {}, d, most=300)
    gheap_buffer(d)
    return rc.finish("every allocation failing in turn: exit 2 with one line, the same answer, "
                     "or a capture session that says what it lost")


if __name__ == "__main__":
    sys.exit(main())

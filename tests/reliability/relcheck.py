"""Shared helpers of the reliability tests (test_crash.py, test_diskfull.py,
test_hostile.py in tests/python): where the programs are, running them, and
checks of a capture_loop file made with h5py and numpy alone.

The expected bits come from tests/python/make_snapshots.py's formula
(pattern_bits), which is written independently of the C writer.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import make_snapshots  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
LOOP = os.path.join(BUILD, "tests", "reliability", "capture_loop")
REFMODEL = os.path.join(BUILD, "workload", "ulpprof-refmodel")
SIZES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1,
         "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def finish(what):
    if failures:
        print("%d failures" % len(failures))
        return 1
    print("ok:", what)
    return 0


def tmpdir(tag):
    base = os.path.join(BUILD, "tests", "tmp") if BUILD else tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=tag + ".", dir=base)


def run(args, cwd=None, timeout=300, **kw):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)


def ulpprof(args, cwd=None, timeout=300):
    return run([ULPPROF] + list(args), cwd=cwd, timeout=timeout)


def kill_after_line(args, want, tag):
    """Runs capture_loop `args` with --lockstep, answers each line it prints
    until the line `want`, then SIGKILLs it: the program waits for the answer
    before its next capture, so it dies exactly there however loaded the
    machine is.  Returns the lines read."""
    p = subprocess.Popen(args + ["--lockstep"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    lines = []
    for ln in p.stdout:
        lines.append(ln.strip())
        if ln.strip() == want:
            os.kill(p.pid, signal.SIGKILL)
            break
        p.stdin.write("\n")
        p.stdin.flush()
    p.wait()
    err = p.stderr.read()
    for f in (p.stdin, p.stdout, p.stderr):
        try:
            f.close()
        except BrokenPipeError:
            pass
    check(p.returncode == -signal.SIGKILL, "%s: exit %r (stderr %r)" % (tag, p.returncode, err))
    return lines


def open_map_bytes(path):
    """Bytes of the open map at the end of `path` (FORMAT.md, "Open map"), 0 without one."""
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size < 32:
            return 0
        fh.seek(size - 32)
        foot = fh.read(32)
    return 32 + int.from_bytes(foot[8:16], "little") if foot[:8] == b"ULPOMAP1" else 0


def edit_keeping_size(path, edit):
    """Edits `path` in place with h5py and gives it back the bytes HDF5 cut
    at its close -- the open map past HDF5's end -- so that the file keeps
    its size: an edit only the seal's hash finds."""
    size, keep = os.path.getsize(path), open_map_bytes(path)
    with open(path, "rb") as fh:
        fh.seek(size - keep)
        tail = fh.read(keep)
    with h5py.File(path, "r+") as f:
        edit(f)
    if keep and os.path.getsize(path) == size - keep:
        with open(path, "ab") as fh:
            fh.write(tail)


def raw_bits(d):
    """A dataset's bits as unsigned integers, read with memory type = file type."""
    size = d.id.get_type().get_size()
    out = np.empty(d.shape, dtype=UINT[size])
    if out.size:
        d.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=d.id.get_type())
    return out


def h5_captures(path, torn=None):
    """[(seq, name, occurrence, dtype, shape)] in seq order, read by h5py alone.

    torn: a list for a killed writer's file whose last group write may have
    been cut (SIGKILL inside a multi-page write): a group can then list a
    name it cannot open.  Such names are appended to `torn` and left out
    (the capture journal, not the group, is what ulpprof reads there);
    without the list they raise, as in a file that must be whole.  A torn
    name heap can also list an empty name, which h5py refuses with
    ValueError before it looks it up."""
    caps = []
    with h5py.File(path, "r") as f:
        for name in f.get("captures", {}):
            try:
                occs = list(f["captures"][name])
            except (KeyError, OSError, RuntimeError, ValueError):
                if torn is None:
                    raise
                torn.append(name)
                continue
            for occ in occs:
                try:
                    d = f["captures"][name][occ]
                except (KeyError, OSError, RuntimeError, ValueError):
                    if torn is None:
                        raise
                    torn.append("%s/%s" % (name, occ))
                    continue
                dt = d.attrs["dtype"]
                dt = dt.decode() if isinstance(dt, bytes) else str(dt)
                caps.append((int(d.attrs["seq"]), name, int(occ), dt, tuple(d.shape)))
    return sorted(caps)


def loop_expected(seq, elements, dtype, flip_from=None):
    """What capture_loop stored for capture `seq` (make_snapshots' formula)."""
    bits = make_snapshots.pattern_bits(seq, elements, SIZES[dtype])
    if flip_from is not None and seq >= flip_from and elements:
        bits[seq % elements] ^= 1
    return bits


def check_loop_file(path, elements, dtype, names, tag, n_min=0, n_max=None):
    """Checks with h5py that `path` holds captures 0..n-1 of capture_loop, each
    bit-exact, n_min <= n <= n_max.  Returns n (or -1 when it cannot read)."""
    try:
        caps = h5_captures(path)
    except Exception as e:  # noqa: BLE001 - any h5py failure is the finding
        check(False, "%s: h5py cannot read %s: %s" % (tag, path, e))
        return -1
    n = len(caps)
    check(n >= n_min, "%s: %d captures, at least %d were flushed" % (tag, n, n_min))
    if n_max is not None:
        check(n <= n_max, "%s: %d captures, at most %d were made" % (tag, n, n_max))
    with h5py.File(path, "r") as f:
        for i, (seq, name, occ, dt, shape) in enumerate(caps):
            if not check(seq == i and name == "t.%d" % (i % names) and occ == i // names
                         and dt == dtype and shape == (elements,),
                         "%s: capture %d is %r" % (tag, i, (seq, name, occ, dt, shape))):
                continue
            got = raw_bits(f["captures"][name][str(occ)])
            check(np.array_equal(got, loop_expected(seq, elements, dtype)),
                  "%s: capture %d bits differ from the formula" % (tag, i))
    return n


def warning_ok(r, path, tag, unclosed):
    """stderr of ls/diff: empty for a file its writer closed; for one it did
    not (killed, disk full), exactly the one warning line that says the
    captures were read through the capture journal, for that file only."""
    lines = r.stderr.splitlines()
    if not unclosed or (unclosed == "maybe" and r.stderr == ""):
        return check(r.stderr == "", "%s: stderr %r" % (tag, r.stderr))
    want = "ulpprof: warning: '%s': " % path
    return check(len(lines) == 1 and lines[0].startswith(want)
                 and " read through the capture journal" in lines[0],
                 "%s: stderr %r, want one warning about the journal" % (tag, r.stderr))


def ls_json(path, tag, unclosed=False):
    r = ulpprof(["ls", "--json", path])
    if not check(r.returncode == 0, "%s: ls exit %d, stderr %r" % (tag, r.returncode, r.stderr)):
        return None
    warning_ok(r, path, tag, unclosed)
    return json.loads(r.stdout)[0]


def diff_json(a, b, tag, want_rc=None, unclosed=None, mode=True):
    """unclosed: the path of the file (a or b) whose writer did not close it,
    with `mode` as in warning_ok (True or "maybe")."""
    r = ulpprof(["diff", "--format", "json", a, b])
    if want_rc is not None:
        check(r.returncode == want_rc, "%s: diff exit %d, want %d (stderr %r)"
              % (tag, r.returncode, want_rc, r.stderr))
    if r.returncode not in (0, 1):
        check(False, "%s: diff exit %d: %r" % (tag, r.returncode, r.stderr))
        return None
    warning_ok(r, unclosed, tag, mode if unclosed is not None else False)
    return json.loads(r.stdout)


# Captures whose group link may wait after the journal names them
# (ULP__SESSION_LINK_BATCH, capture/session_internal.h).
LINK_BATCH = 512


def ls_seqs(path, tag, n_h5py, unclosed=True, lag=1):
    # unclosed="maybe": a writer that failed may or may not have closed the file.
    """`ulpprof ls` of a file whose writer was stopped: checks that it lists
    seq 0..n-1 with n_h5py <= n <= n_h5py + lag, and returns n (-1 when ls
    fails).  The journal names a capture as soon as it is on disk, a moment
    before the group does: lag 1 for a writer that links at once (its host
    flushed after each capture, or each capture holds 1 MiB or more); up to
    LINK_BATCH when small captures came faster than the writer linked them."""
    j = ls_json(path, tag, unclosed)
    if j is None:
        return -1
    seqs = [c["seq"] for c in j["captures"]]
    n = len(seqs)
    check(seqs == list(range(n)), "%s: ls lists seq %r" % (tag, seqs))
    if n_h5py is not None:  # None: h5py could not read the groups whole
        check(n_h5py <= n <= n_h5py + lag, "%s: ls lists %d captures, h5py %d" % (tag, n, n_h5py))
    return n


def check_prefix_diff(part, full, n, tag, unclosed=False):
    """`ulpprof diff` of a file holding the first n captures of `full`, both ways:
    the n shared captures identical, the rest only in the full file."""
    total = len(h5_captures(full))
    for a, b, only in ((part, full, "only_in_b"), (full, part, "only_in_a")):
        j = diff_json(a, b, tag, want_rc=0 if n == total else 1,
                      unclosed=part if unclosed else None, mode=unclosed)
        if j is None:
            continue
        st = [row["status"] for row in j["rows"]]
        check(len(st) == total, "%s: diff has %d rows, want %d" % (tag, len(st), total))
        check(st.count("identical") == n, "%s: %d identical rows, want %d" % (tag, st.count("identical"), n))
        check(st.count(only) == total - n, "%s: %d %s rows, want %d" % (tag, st.count(only), only, total - n))


def kill_points(writes, stride=(1, 1), first_tears=False):
    """Every write killed plainly (tear 0), and every page boundary inside a
    write as a tear point (tear j: the first j pages of it reached the file);
    with strides (p, t), every p-th plain and every t-th torn point only,
    and with first_tears every write's first boundary as well (a write that
    straddles one page boundary, as a global heap's 4 KiB rewrite does)."""
    plain, torn = [], []
    for k, off, n in writes:
        plain.append((k, 0))
        j = 1
        while (off // 4096 + j) * 4096 < off + n:
            torn.append((k, j))
            j += 1
    torn = [t for i, t in enumerate(torn) if i % stride[1] == 0 or (first_tears and t[1] == 1)]
    return plain[::stride[0]] + torn + ([plain[-1]] if plain else [])

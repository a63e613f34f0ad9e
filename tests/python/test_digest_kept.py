"""The captures a digest-mode file keeps in /digests (FORMAT.md "Digests":
the produced tokens and the fed token ids as rows of /digests/<name>/value,
occurrences marked `kept`), checked against numpy and h5py alone.

- Digest mode writes no /captures dataset: /digests/<name>/value holds the
  ids' and tokens' bytes (h5py, tests/python/digests_h5.py), equal to what
  numpy captured and to the data-mode file's /captures datasets of the same
  run (bytes, occurrence, positions, requests, step); their seqs keep the
  data file's order.
- The C reader shows them as captures (`ulpprof ls --json`: names,
  occurrences, shapes, positions in seq order, as h5py sees them), their
  bytes too (`ulpprof streams -f json`: the tokens numpy produced, two
  requests identified by their prompts); `diff` of the data file and the
  digest file: identical.
- A name whose first occurrences are not kept (f32 activations) and later
  ones are (fed ids): the earlier rows of `value` read as 0 (h5py) and only
  the kept ones are captures.  A kept name that changes dtype: the new one
  goes to /captures, and the reader shows both, occurrences unique.  Mode
  switched data -> digest -> data: occurrences 0..4 unique, /captures 0, 1,
  4 and kept 2, 3.
- `ulpprof repair` keeps /digests with what it keeps.  A file written
  before `value` (ids and tokens in /captures, a table without the kept
  fields), made here with h5py from the digest file: the same captures and
  streams.
- Damage (a `value` of too few rows, of another element size, of the
  other byte order, a kept occurrence past it, a table without the kept
  fields): one stderr line
  naming the file and the name, exit 2.  The same damage to one name in a
  killed writer's file (its journal's closed mark zeroed): the file opens
  with every kept capture, read from the journal's kept records, and the
  warning counts them; `ulpprof repair` copies the names that read whole
  (not the damaged one) and writes the damaged name's kept captures to
  /captures, and the copy reads the same, after a plain copy too.  With the
  journal's records cut off (a writer from before kept records): the
  warning names the damaged name, whose kept captures are left out, the
  other names' are read.  A killed file with nothing damaged: its repair
  keeps every digest (diff: identical).
- ulpprof.open(FILE).read(name) gives a kept capture's data (numpy's); a
  kept capture lists its own name among its inputs, as /captures does; a
  `tokens` row of more than 4096 bytes goes to /captures.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", ".")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ulpprof import _lib  # noqa: E402

import digests_h5  # noqa: E402
import ulpprof  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
os.environ["ULPPROF_PROGRAM"] = ULPPROF  # ulpprof.open() runs it
STEPS = 12
PROMPTS = ([5, 9, 2], [7, 1, 8, 4])  # request 0's and 1's fed prompt
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL:", what)
    return cond


def run(*args):
    return subprocess.run([ULPPROF] + list(args), capture_output=True, text=True, timeout=120)


def produced(step, r):
    return 10 + (3 * step + 7 * r) % 13


def write(path, mode):
    """Two requests: their prompts, then STEPS decode steps, each step feeding the token the
    last emitted; per step the ids, two layers and the tokens (with margins).  Returns
    {request: [produced tokens]}."""
    s = _lib.Session(path, label="kept")
    s.set_capture_mode(mode)
    out = {0: [], 1: []}
    pos = [len(p) for p in PROMPTS]
    for r, p in enumerate(PROMPTS):
        ids = np.array([p], np.int64)
        check(s.capture("input_ids", ids.ctypes.data, "i64", [1, len(p)], role="input",
                        positions=list(range(len(p))), requests=[r] * len(p), row_rank=2,
                        step=0) == 0, "capture the prompt")
    for step in range(STEPS):
        ids = np.array([[out[r][-1] if out[r] else PROMPTS[r][-1]] for r in (0, 1)], np.int64)
        if step > 0:
            s.capture("input_ids", ids.ctypes.data, "i64", [2, 1], role="input",
                      positions=[pos[0], pos[1]], requests=[0, 1], row_rank=1, step=step)
            pos = [pos[0] + 1, pos[1] + 1]
        for layer in range(2):
            h = np.full((2, 8), step + 0.25 * layer, np.float32)
            s.capture("layers.%d" % layer, h.ctypes.data, "f32", [2, 8], layer=layer,
                      positions=[pos[0] - 1, pos[1] - 1], requests=[0, 1], row_rank=1, step=step)
        tok = np.array([[produced(step, r), 0.5 + r] for r in (0, 1)], np.float64)
        s.capture("tokens", tok.ctypes.data, "f64", [2, 2], positions=[pos[0] - 1, pos[1] - 1],
                  requests=[0, 1], row_rank=1, step=step)
        for r in (0, 1):
            out[r].append(produced(step, r))
        if step == 5:
            s.flush()  # the datasets grow after a flush
    check(s.close() == 0, "%s: close" % path)
    return out


def ls(path):
    p = run("ls", "--json", path)
    if not check(p.returncode == 0, "ls %s: exit %d: %s" % (path, p.returncode, p.stderr)):
        return []
    return json.loads(p.stdout)[0]["captures"]


def attrs_of(c):
    a = c.attrs
    return (np.ravel(a["positions"]).tolist(), np.ravel(a.get("requests", [])).tolist(),
            int(a["step"]) if "step" in a else None)


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-kept-")
    data, dig = os.path.join(tmp, "data.h5"), os.path.join(tmp, "digest.h5")
    want = write(data, "data")
    write(dig, "digest")

    # h5py: nothing in /captures, the ids and tokens in /digests, as the data file holds them.
    with h5py.File(dig, "r") as fd, h5py.File(data, "r") as fo:
        caps = sorted(fd["captures"]) if "captures" in fd else []
        kept = digests_h5.kept(fd)
        check(caps == [] and sorted(kept) == ["input_ids", "tokens"],
              "digest file: /captures %r, kept %r" % (caps, sorted(kept)))
        order = []
        for name in ("input_ids", "tokens"):
            ko, do = kept.get(name, []), sorted(fo["captures"][name].items(), key=lambda t: int(t[0]))
            check(len(ko) == len(do), "%s: %d kept, %d in the data file" % (name, len(ko), len(do)))
            for c, (occ, o) in zip(ko, do):
                order.append((int(c.attrs["seq"]), int(o.attrs["seq"])))
                check(c.occurrence == int(occ) and c.shape == o.shape and
                      c[()].tobytes() == o[()].tobytes() and attrs_of(c) == attrs_of(o),
                      "%s/%s: kept %r %r, data file %r %r" % (name, occ, c[()].ravel().tolist(),
                                                              attrs_of(c), o[()].ravel().tolist(),
                                                              attrs_of(o)))
        check(sorted(order) == sorted(order, key=lambda t: t[1]), "kept seqs out of the data "
              "file's order: %r" % sorted(order))
        toks = np.concatenate([c[()] for c in kept.get("tokens", [])])
        check(sorted(toks[:, 0].astype(int).tolist()) == sorted(want[0] + want[1]),
              "kept tokens %r" % toks[:, 0].tolist())

    # The C reader: the same captures, names and occurrences in seq order, and their bytes.
    ld, lo = ls(dig), ls(data)
    keyed = lambda caps: [(c["name"], c["occurrence"], c["shape"], c["positions"], c["requests"])
                          for c in caps if c["name"] in ("input_ids", "tokens")]
    check(keyed(ld) == keyed(lo) and len(ld) == len(keyed(lo)),
          "ls: digest file %r, data file %r" % (keyed(ld)[:4], keyed(lo)[:4]))
    check([c["seq"] for c in ld] == list(range(len(ld))), "ls seqs %r" % [c["seq"] for c in ld])
    p = run("streams", "-f", "json", dig, data)
    doc = json.loads(p.stdout) if p.returncode == 0 else {}
    got = {q["request"]: [g["tokens"] for g in q["completions"]] for q in doc.get("requests", [])}
    check(p.returncode == 0 and got == {0: [want[0]], 1: [want[1]]} and
          doc.get("ids") == "input_ids",
          "streams: exit %d, %r (want %r), ids %r: %s" % (p.returncode, got, want,
                                                          doc.get("ids"), p.stderr))
    p = run("diff", "-f", "json", data, dig)
    doc = json.loads(p.stdout) if p.returncode in (0, 1) else {}
    check(p.returncode == 0 and doc.get("identical") is True,
          "diff data digest: exit %d, %r" % (p.returncode, p.stderr))

    # Kept after rows that were not; a dtype change; modes switched.
    mix = os.path.join(tmp, "mix.h5")
    s = _lib.Session(mix, label="mix")
    s.set_capture_mode("digest")
    f32 = np.ones((1, 1), np.float32)
    for k in range(3):
        s.capture("mix", f32.ctypes.data, "f32", [1, 1], positions=[k], row_rank=1)
    s.flush()
    ids = np.array([[41], [42]], np.int64)
    s.capture("mix", ids.ctypes.data, "i64", [2, 1], role="input", positions=[3, 4], row_rank=1)
    i32 = np.array([[43]], np.int32)
    s.capture("mix", i32.ctypes.data, "i32", [1, 1], role="input", positions=[5], row_rank=1)
    one = np.array([[7]], np.int64)
    for k, mode in enumerate(("data", "data", "digest", "digest", "data")):
        s.set_capture_mode(mode)
        s.capture("sw", one.ctypes.data, "i64", [1, 1], role="input", positions=[k], row_rank=1)
    check(s.close() == 0, "mix: close")
    with h5py.File(mix, "r") as f:
        v = f["digests/mix/value"][()]
        check(v.ravel().tolist() == [0, 0, 0, 41, 42, 0] and v.dtype == np.int64,
              "mix: value %r" % v.ravel().tolist())
        k = digests_h5.kept(f)
        check([c.occurrence for c in k.get("mix", [])] == [3] and
              sorted(f["captures/mix"]) == ["4"] and
              f["captures/mix/4"][()].ravel().tolist() == [43],
              "mix: kept %r, /captures %r" % ([c.occurrence for c in k.get("mix", [])],
                                               sorted(f["captures/mix"])))
        check(sorted(f["captures/sw"], key=int) == ["0", "1", "4"] and
              [c.occurrence for c in k.get("sw", [])] == [2, 3],
              "switched modes: /captures %r, kept %r"
              % (sorted(f["captures/sw"]), [c.occurrence for c in k.get("sw", [])]))
    lm = ls(mix)
    check([(c["name"], c["occurrence"], c["dtype"]) for c in lm] ==
          [("mix", 3, "i64"), ("mix", 4, "i32")] + [("sw", i, "i64") for i in range(5)],
          "mix: ls %r" % [(c["name"], c["occurrence"], c["dtype"]) for c in lm])

    # repair keeps /digests and what it keeps.
    rep = os.path.join(tmp, "repaired.h5")
    p = run("repair", dig, rep)
    check(p.returncode == 0 and keyed(ls(rep)) == keyed(ld), "repair: exit %d %s" %
          (p.returncode, p.stderr))
    p = run("diff", "-f", "json", rep, dig)
    check(p.returncode == 0, "diff repaired digest: exit %d %s" % (p.returncode, p.stderr))

    # A file written before `value`: the ids and tokens in /captures, made with h5py.
    old = os.path.join(tmp, "old.h5")
    shutil.copy(dig, old)
    with h5py.File(old, "r+") as f:
        for name, occs in digests_h5.kept(f).items():
            for c in occs:
                ds = f.create_dataset("captures/%s/%d" % (name, c.occurrence), data=c[()])
                for a in ("seq", "dtype", "role", "positions", "requests", "step", "time_ns"):
                    if a in c.attrs:
                        ds.attrs[a] = c.attrs[a]
            g = f["digests"][name]
            del g["value"]
            t = g["occurrences"][()]
            names = [n for n in t.dtype.names if n not in ("kept", "kept_seq", "kept_occurrence")]
            del g["occurrences"]
            g.create_dataset("occurrences", data=t[names].astype(
                np.dtype([(n, t.dtype.fields[n][0]) for n in names])))
    check(keyed(ls(old)) == keyed(ld), "old layout: ls %r" % keyed(ls(old))[:4])
    p = run("streams", "-f", "json", old, data)
    doc = json.loads(p.stdout) if p.returncode == 0 else {}
    got = {q["request"]: [g["tokens"] for g in q["completions"]] for q in doc.get("requests", [])}
    check(got == {0: [want[0]], 1: [want[1]]}, "old layout: streams %r %s" % (got, p.stderr))

    # Damage: one line naming the file and the name, exit 2.
    def damaged(tag, edit):
        path = os.path.join(tmp, "bad-%s.h5" % tag)
        shutil.copy(dig, path)
        with h5py.File(path, "r+") as f:
            edit(f["digests/tokens"])
        p = run("ls", path)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and path in lines[0] and
              "/digests/tokens" in lines[0], "%s: exit %d, %r" % (tag, p.returncode, lines))

    def short_value(g):
        v = g["value"][()]
        del g["value"]
        g.create_dataset("value", data=v[:-1])

    def other_size(g):
        v = g["value"][()]
        del g["value"]
        g.create_dataset("value", data=v.astype(np.float32))

    def past(g):
        t = g["occurrences"][()]
        t["first"][-1] = 1 << 40
        g["occurrences"][...] = t

    def big_endian(g):
        v = g["value"][()]
        del g["value"]
        g.create_dataset("value", data=v.astype(">f8"))

    def no_fields(g):
        t = g["occurrences"][()]
        names = [n for n in t.dtype.names if n != "kept_seq"]
        del g["occurrences"]
        g.create_dataset("occurrences", data=t[names].astype(
            np.dtype([(n, t.dtype.fields[n][0]) for n in names])))

    for tag, edit in (("short", short_value), ("size", other_size), ("past", past),
                      ("fields", no_fields), ("endian", big_endian)):
        damaged(tag, edit)

    # A killed writer's file: one name's table damaged.  Its journal holds every kept
    # capture (FORMAT.md "Capture journal", kind 3): all are read, the damaged table is not
    # needed; the repair copies the names that read whole and writes the damaged name's
    # kept captures to /captures.
    killed = os.path.join(tmp, "killed.h5")
    shutil.copy(dig, killed)
    with h5py.File(killed, "r+") as f:
        t = f["digests/tokens/occurrences"][()]
        t["first"][-1] = 1 << 40
        f["digests/tokens/occurrences"][...] = t
        off = f["journal"].id.get_offset()
    with open(killed, "r+b") as fh:
        fh.seek(off + 28)  # the journal's closed mark (FORMAT.md "Capture journal")
        fh.write(bytes(4))
    p = run("ls", "--json", killed)
    lk = json.loads(p.stdout)[0]["captures"] if p.returncode == 0 else []
    check(p.returncode == 0 and "left out" not in p.stderr and keyed(lk) == keyed(ld) and
          ("%d captures read through the capture journal" % len(ld)) in p.stderr,
          "killed: exit %d, %d captures, %r" % (p.returncode, len(lk), p.stderr))
    rk = os.path.join(tmp, "killed-repaired.h5")
    p = run("repair", killed, rk)
    check(p.returncode == 0, "repair killed: exit %d %s" % (p.returncode, p.stderr))
    moved = os.path.join(tmp, "moved.h5")
    shutil.copyfile(rk, moved)  # a plain copy: its stamp no longer matches, read through HDF5
    for path in (rk, moved):
        with h5py.File(path, "r") as f:
            names = sorted(f["digests"]) if "digests" in f else []
            ids = digests_h5.captures(f, "input_ids")
            toks = digests_h5.captures(f, "tokens")
            check(names == ["input_ids", "layers.0", "layers.1"] and
                  len(ids) == len(kept.get("input_ids", [])) and
                  sorted(f["captures"]) == ["tokens"] and
                  len(toks) == len(kept.get("tokens", [])),
                  "%s: /digests %r, %d input_ids, %d tokens" % (path, names, len(ids), len(toks)))
        check(keyed(ls(path)) == keyed(lk), "%s: ls %r" % (path, keyed(ls(path))[:3]))

    # The same damage in a killed file of a writer from before kept records (its journal's
    # records cut off: an end mark after the header): the damaged name is left out and the
    # warning names it, the other name's kept captures are read from its table.
    old_killed = os.path.join(tmp, "killed-old.h5")
    shutil.copy(killed, old_killed)
    with open(old_killed, "r+b") as fh:
        fh.seek(off + 32)
        fh.write(bytes(8))
    p = run("ls", "--json", old_killed)
    lo = json.loads(p.stdout)[0]["captures"] if p.returncode == 0 else []
    check(p.returncode == 0 and "/digests/tokens" in p.stderr and "left out" in p.stderr and
          keyed(lo) == [k for k in keyed(ld) if k[0] == "input_ids"] and
          "0 captures read through the capture journal" in p.stderr,
          "old killed: exit %d, %d captures, %r" % (p.returncode, len(lo), p.stderr))
    ro = os.path.join(tmp, "killed-old-repaired.h5")
    p = run("repair", old_killed, ro)
    check(p.returncode == 0 and keyed(ls(ro)) == keyed(lo),
          "repair old killed: exit %d %s" % (p.returncode, p.stderr))
    whole = os.path.join(tmp, "killed-whole.h5")
    shutil.copy(dig, whole)
    with open(whole, "r+b") as fh:
        fh.seek(off + 28)
        fh.write(bytes(4))
    rw = os.path.join(tmp, "killed-whole-repaired.h5")
    p = run("repair", whole, rw)
    q = run("diff", "-f", "json", whole, rw)
    check(p.returncode == 0 and q.returncode == 0 and keyed(ls(rw)) == keyed(ld),
          "killed, nothing torn: repair %d, diff %d %s" % (p.returncode, q.returncode, q.stderr))

    # The Python API reads a kept capture; a kept capture's inputs; a wide `tokens` row.
    snap = ulpprof.open(dig)
    t0 = snap.read("tokens", 0)
    check(t0.array.tolist() == [[produced(0, 0), 0.5], [produced(0, 1), 1.5]] and
          t0.positions.tolist() == [2, 3],
          "ulpprof.open().read('tokens'): %r %r" % (t0.array.tolist(), t0.positions))
    own = os.path.join(tmp, "own.h5")
    s = _lib.Session(own, label="own")
    s.set_capture_mode("digest")
    s.capture("ids", one.ctypes.data, "i64", [1, 1], role="input", positions=[0], row_rank=1,
              inputs=["ids", "x"])
    wide = np.zeros((1, 1024), np.float64)  # 8 KiB a row
    s.capture("tokens", wide.ctypes.data, "f64", [1, 1024], positions=[0], row_rank=1)
    check(s.close() == 0, "own: close")
    lo2 = ls(own)
    with h5py.File(own, "r") as f:
        check(sorted(f["captures"]) == ["tokens"] and sorted(digests_h5.kept(f)) == ["ids"],
              "wide tokens: /captures %r" % sorted(f["captures"]))
    check([c.get("inputs") for c in lo2 if c["name"] == "ids"] == [["ids", "x"]],
          "kept inputs %r" % [c.get("inputs") for c in lo2])

    shutil.rmtree(tmp)
    if fails:
        print("%d failure(s)" % len(fails))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

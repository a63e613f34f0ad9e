#!/usr/bin/python3
"""Snapshots written by h5py (no capture index, no open map) read as their
`ulpprof repair`ed copies do.

The groups' reader describes such captures from their datasets' object
headers (format/snapshot_hdr.c) instead of opening each through HDF5, and
falls back to HDF5 for anything it does not read itself.  Checked here:
- a pair of 2,000 captures written by tests/perf/make_h5py_many.py gives
  the same `diff -f json` rows as the repaired copies (read through the
  index), and byte-identical output with ULPPROF_HEADERS=0 (every capture
  through HDF5);
- every row's numbers (differing, max_ulp, mean_ulp, worst index) against
  numpy on the bits h5py reads;
- captures the header reader leaves to HDF5 -- fixed-length and
  variable-length strings, narrow and unsigned integer attributes, kernels,
  step, an unknown attribute, positions (now read from the header), a
  chunked and deflated dataset --
  read the same both ways (`ls --json`);
- h5repack'd copies (as stored, and deflated) read to the same rows;
- a pair whose captures carry `positions` (make_h5py_many.py TOKENS, as
  engines' and users' files do), which the header reader reads too: the
  same output both ways, as plain and h5repack'd, the positions in
  `ls --json` what was written and the rows' numbers numpy's;
- nothing is written next to or into the user's files.
"""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import diffsnap as ds  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
MAKE = os.path.join(HERE, "..", "perf", "make_h5py_many.py")
N, ELEMENTS, NAMES, DIFFER = 2000, 64, 50, 7
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def run(args, env=None, want=(0, 1)):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([ULPPROF] + args, capture_output=True, text=True, env=e)
    check(p.returncode in want, "%s exited %d: %s" % (args, p.returncode, p.stderr[:300]))
    return p.stdout


def rows_of(a, b, env=None):
    rows = json.loads(run(["diff", "-f", "json", a, b], env))["rows"]
    return {(r["name"], r["occurrence"]): r for r in rows}


def snapshot_state(d):
    return sorted((f, os.path.getsize(os.path.join(d, f)), os.stat(os.path.join(d, f)).st_mtime_ns)
                  for f in os.listdir(d))


def raw(d):
    """A bf16 dataset's bits as uint16, unconverted (h5py would read it as float16)."""
    out = np.empty(d.shape, dtype=np.uint16)
    d.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=d.id.get_type())
    return out


def numpy_rows(a, b):
    """Per capture: (differing, max_ulp, mean_ulp, worst_flat) from the bits alone."""
    out = {}
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        for name in fa["captures"]:
            for occ in fa["captures"][name]:
                x, y = (raw(f["captures"][name][occ]).astype(np.int64) for f in (fa, fb))
                # bf16 bits -> a line on which adjacent values are 1 apart
                lx = np.where(x & 0x8000, -(x & 0x7FFF), x)
                ly = np.where(y & 0x8000, -(y & 0x7FFF), y)
                d = np.abs(lx - ly)
                n = int(np.count_nonzero(d))
                out[(name, int(occ))] = (n, int(d.max()), float(d.sum()) / n if n else 0.0,
                                         int(np.argmax(d)) if n else -1)
    return out


def mixed_file(path):
    """Captures of every attribute kind the header reader reads or leaves to HDF5."""
    rng = np.random.default_rng(3)
    caps = []
    for i in range(12):
        caps.append({"name": "mix.%d" % (i % 4), "occurrence": i // 4, "dtype": "f32",
                     "bits": rng.integers(0, 2**31, 24, dtype=np.uint32).reshape(4, 6),
                     "layer": i, "role": "activation",
                     "kernels": [i, i + 2] if i % 3 == 0 else None,
                     "positions": list(range(4)) if i == 5 else None,
                     "chunks": (2, 6) if i == 7 else None})
    ds.write_snapshot(path, caps, label="mix", run={"cache": "miss"})
    with h5py.File(path, "r+") as f:
        g = f["captures"]
        g["mix.1"]["0"].attrs["step"] = np.uint8(3)
        g["mix.2"]["0"].attrs["role"] = np.bytes_(b"logits")  # fixed-length string
        g["mix.3"]["0"].attrs["layer"] = np.int8(-7 + 14)
        g["mix.0"]["1"].attrs["something_else"] = np.float64(2.5)
        g["mix.0"]["2"].attrs["device_ptr"] = np.uint64(2**63 + 5)
        g["mix.1"]["1"].attrs["time_ns"] = np.int16(-7)
        g["mix.2"]["1"].attrs["dtype"] = np.bytes_(b"f32")  # fixed-length


def token_pair(tmp):
    """Captures shaped [TOKENS, ELEMENTS / TOKENS] with `positions`."""
    n, tokens = 600, 4
    src = os.path.join(tmp, "tok")
    os.mkdir(src)
    subprocess.run([sys.executable, MAKE, src, str(n), str(ELEMENTS), str(NAMES), str(DIFFER),
                    str(tokens)], check=True, stdout=subprocess.DEVNULL)
    a, b = os.path.join(src, "a.h5"), os.path.join(src, "b.h5")
    pairs = [("h5py", a, b)]
    if subprocess.run(["sh", "-c", "command -v h5repack"], capture_output=True).returncode == 0:
        ra, rb = os.path.join(tmp, "tokrepa.h5"), os.path.join(tmp, "tokrepb.h5")
        for x, y in ((a, ra), (b, rb)):
            subprocess.run(["h5repack", x, y], check=True)
        pairs.append(("h5repack", ra, rb))
    want = numpy_rows(a, b)
    for how, x, y in pairs:
        out = run(["diff", "-f", "json", x, y])
        check(out == run(["diff", "-f", "json", x, y], {"ULPPROF_HEADERS": "0"}),
              "tokens (%s): diff -f json differs with ULPPROF_HEADERS=0" % how)
        ls = run(["ls", "--json", x], want=(0,))
        check(ls == run(["ls", "--json", x], {"ULPPROF_HEADERS": "0"}, want=(0,)),
              "tokens (%s): ls --json differs with ULPPROF_HEADERS=0" % how)
        caps = json.loads(ls)[0]["captures"]
        check(len(caps) == n, "tokens (%s): %d captures" % (how, len(caps)))
        bad = [c for c in caps if c.get("row_rank") != 1 or c.get("positions") != list(
            range(c["occurrence"] * tokens, (c["occurrence"] + 1) * tokens)) or
            c.get("requests") != [0] * tokens or c["shape"] != [tokens, ELEMENTS // tokens]]
        check(not bad, "tokens (%s): %d captures with other tokens: %s" % (how, len(bad), bad[:1]))
        # a name's occurrences are one row, its positions in turn (its decode steps)
        rows = {r["name"]: r for r in json.loads(out)["rows"]}
        per_name = {}
        for (name, _), (nd, mx, _, _) in want.items():
            d, m, k = per_name.get(name, (0, 0, 0))
            per_name[name] = (d + nd, max(m, mx), k + 1)
        check(len(rows) == len(per_name), "tokens (%s): %d rows, %d names" % (
            how, len(rows), len(per_name)))
        for name, (nd, mx, occs) in per_name.items():
            r = rows.get(name, {})
            check((r.get("differing"), r.get("max_ulp"), r.get("positions_compared"),
                   r.get("shape")) == (nd, mx, occs * tokens, [occs * tokens, ELEMENTS // tokens]),
                  "tokens (%s): %s: %s, numpy %d differing, max %d ULP, %d positions" % (
                      how, name, {k: r.get(k) for k in ("differing", "max_ulp", "shape",
                                                         "positions_compared")},
                      nd, mx, occs * tokens))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        os.mkdir(src)
        subprocess.run([sys.executable, MAKE, src, str(N), str(ELEMENTS), str(NAMES),
                        str(DIFFER)], check=True, stdout=subprocess.DEVNULL)
        a, b = os.path.join(src, "a.h5"), os.path.join(src, "b.h5")
        before = snapshot_state(src)

        fast = rows_of(a, b)
        check(snapshot_state(src) == before, "reading wrote next to or into the files")
        check(len(fast) == N, "%d rows, not %d" % (len(fast), N))
        slow_out = run(["diff", "-f", "json", a, b], {"ULPPROF_HEADERS": "0"})
        check(run(["diff", "-f", "json", a, b]) == slow_out,
              "diff -f json differs with ULPPROF_HEADERS=0")
        check(run(["ls", "--json", a]) == run(["ls", "--json", a], {"ULPPROF_HEADERS": "0"}),
              "ls --json differs with ULPPROF_HEADERS=0")

        # numbers against numpy
        want = numpy_rows(a, b)
        differ = 0
        for key, (n, mx, mean, worst) in want.items():
            r = fast.get(key)
            check(r is not None, "no row for %s" % (key,))
            if r is None:
                continue
            differ += n > 0
            check(r["differing"] == n and r["max_ulp"] == mx, "%s: %s/%s, numpy %d/%d" % (
                key, r["differing"], r["max_ulp"], n, mx))
            check(abs(r["mean_ulp"] - mean) <= 1e-12, "%s: mean_ulp %s, numpy %s" % (
                key, r["mean_ulp"], mean))
            if n:
                check(r["worst_flat"] == worst, "%s: worst %s, numpy %d" % (
                    key, r["worst_flat"], worst))
            check(r["layer"] == int(key[0].split(".")[2]) and r["dtype"] == "bf16" and
                  r["shape"] == [ELEMENTS] and r["role"] == "activation", "%s: %s" % (key, r))
        check(differ == DIFFER, "%d captures differ, not %d" % (differ, DIFFER))

        # the repaired copies (read through their index) give the same rows
        rep = os.path.join(tmp, "rep")
        os.mkdir(rep)
        ra, rb = os.path.join(rep, "a.h5"), os.path.join(rep, "b.h5")
        run(["repair", a, ra], want=(0,))
        run(["repair", b, rb], want=(0,))
        check(rows_of(ra, rb) == fast, "the repaired pair's rows differ")

        # h5repack'd copies: as stored, and deflated (read through HDF5)
        if subprocess.run(["sh", "-c", "command -v h5repack"], capture_output=True).returncode:
            print("h5repack is missing (hdf5-tools): its copies are not checked")
        else:
            for how, flags in (("plain", []), ("gzip", ["-f", "GZIP=1"])):
                pa, pb = os.path.join(tmp, how + "a.h5"), os.path.join(tmp, how + "b.h5")
                for x, y in ((a, pa), (b, pb)):
                    subprocess.run(["h5repack"] + flags + [x, y], check=True)
                check(rows_of(pa, pb) == fast, "h5repack %s: rows differ" % how)

        token_pair(tmp)

        # attributes of every kind, both ways
        mix = os.path.join(tmp, "mix.h5")
        mixed_file(mix)
        out_fast = run(["ls", "--json", mix], want=(0,))
        check(out_fast == run(["ls", "--json", mix], {"ULPPROF_HEADERS": "0"}, want=(0,)),
              "mixed attributes: ls --json differs with ULPPROF_HEADERS=0")
        caps = {(c["name"], c["occurrence"]): c for c in json.loads(out_fast)[0]["captures"]}
        check(caps[("mix.2", 0)]["role"] == "logits", "fixed-length role: %s" % caps[("mix.2", 0)])
        check(caps[("mix.3", 0)]["layer"] == 7, "int8 layer: %s" % caps[("mix.3", 0)])
        check(len(caps) == 12, "%d captures in the mixed file" % len(caps))
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("foreign headers: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

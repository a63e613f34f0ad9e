#!/usr/bin/python3
"""`ulpprof ls` against h5py's own view of the same files.

Writes the corpus of tests/python/make_snapshots.py, runs `ulpprof ls` (text
and --json) on every file and checks: valid files exit 0 and every listed
number (seq, occurrence, layer, shape, elements, bytes, totals) and string
(name, role, dtype, label, writer, /run, /env) equals what h5py reads from
the file; malformed files exit 2 with exactly one stderr line naming the
file and the problem, and nothing from HDF5.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("ULPPROF_BUILD_DIR", "")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
# FORMAT.md's table of element sizes, written out here independently of the C code.
SIZES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1,
         "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def text(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (np.floating, float)):
        return repr(float(v))
    if isinstance(v, np.ndarray):
        return "[" + ", ".join(text(x) for x in v.tolist()) + "]"
    return str(v)


def escaped(s):
    out = []
    for ch in s:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\\":
            out.append("\\\\")
        elif ord(ch) < 0x20 or ord(ch) == 0x7f:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def human(n):
    if n < 1024:
        return "%d B" % n
    v, units = float(n), ["KiB", "MiB", "GiB", "TiB"]
    u = -1
    while v >= 1023.95:
        v /= 1024
        u += 1
    return "%.1f %s" % (v, units[u])


def h5py_view(path):
    """What the file holds, read by h5py alone."""
    with h5py.File(path, "r") as f:
        view = {"label": text(f.attrs.get("label", "")), "writer": text(f.attrs.get("writer", "")),
                "run": {}, "env": {}, "captures": []}
        for g in ("run", "env"):
            if g in f:
                view[g] = {k: text(v) for k, v in f[g].attrs.items()}
        caps = f.get("captures", {})
        for name in caps:
            for occ in caps[name]:
                d = caps[name][occ]
                dt = text(d.attrs["dtype"])
                elements = int(np.prod(d.shape, dtype=np.int64)) if d.shape else 1
                # The HDF5 type's size (h5py maps the bf16 float type to float32).
                stored = d.id.get_type().get_size()
                check(stored == SIZES[dt], "%s %s/%s: stored size %d for %s"
                      % (path, name, occ, stored, dt))
                view["captures"].append({
                    "seq": int(d.attrs["seq"]), "name": name, "occurrence": int(occ),
                    "layer": int(d.attrs["layer"]) if "layer" in d.attrs else None,
                    "role": text(d.attrs.get("role", "activation")), "dtype": dt,
                    "shape": list(d.shape), "elements": elements,
                    "bytes": elements * SIZES[dt]})
        view["captures"].sort(key=lambda c: c["seq"])
        view["kernels"] = len(f["trace/kernels"]) if "trace/kernels" in f else 0
    return view


ROW = re.compile(r"^  +(\d+)  (.*?) +(\d+) +(-|-?\d+)  (\S+) +(\S+) +(\[[\d,]*\]) +(\d+(?:\.\d)? \w+) \((\d+) B\)$")
TOTAL = re.compile(r"^  total: (\d+) captures?, (\d+) elements, (.+) \((\d+) B\)$")


def parse_ls(out):
    lines = out.split("\n")
    res = {"path": lines[0], "captures": [], "run": {}, "env": {}}
    section = None
    for ln in lines[1:]:
        m = re.match(r"^  (label|writer|format|created|trace): +(.*)$", ln)
        if m and section != "table":
            res[m.group(1)] = m.group(2)
            section = None
            continue
        if ln in ("  run:", "  env:"):
            section = ln.strip()[:-1]
            continue
        if re.match(r"^  (run|env): +\(none\)$", ln):
            section = None
            continue
        if section in ("run", "env") and ln.startswith("    "):
            k, v = ln[4:].split(" = ", 1)
            res[section][k.rstrip()] = v
            continue
        if ln.startswith("  seq  name"):
            section = "table"
            continue
        m = TOTAL.match(ln)
        if m:
            res["total"] = (int(m.group(1)), int(m.group(2)), m.group(3), int(m.group(4)))
            section = None
            continue
        m = ROW.match(ln)
        if section == "table" and m:
            res["captures"].append({
                "seq": int(m.group(1)), "name": m.group(2).rstrip(), "occurrence": int(m.group(3)),
                "layer": None if m.group(4) == "-" else int(m.group(4)), "role": m.group(5),
                "dtype": m.group(6), "shape": json.loads(m.group(7)), "human": m.group(8),
                "bytes": int(m.group(9))})
            continue
        check(ln == "", "unparsed line %r" % ln)
    return res


def run(args, cwd):
    return subprocess.run([ULPPROF] + args, cwd=cwd, capture_output=True, text=True)


def check_good(corpus, name):
    view = h5py_view(os.path.join(corpus, name))
    r = run(["ls", name], corpus)
    check(r.returncode == 0, "%s: exit %d (%s)" % (name, r.returncode, r.stderr))
    check(r.stderr == "", "%s: stderr %r" % (name, r.stderr))
    got = parse_ls(r.stdout)
    check(got["path"] == name, "%s: path line %r" % (name, got["path"]))
    check(got.get("label") == escaped(view["label"]), "%s: label %r" % (name, got.get("label")))
    check(got.get("writer", "") == escaped(view["writer"]), "%s: writer" % name)
    check(got.get("format") == "ulpprof-snapshot version 1", "%s: format line" % name)
    for g in ("run", "env"):
        want = {k: escaped(v) for k, v in view[g].items()}
        check(got[g] == want, "%s: /%s %r != %r" % (name, g, got[g], want))
    if view["kernels"]:
        check(got.get("trace") == "%d kernel launches" % view["kernels"], "%s: trace" % name)
    check(len(got["captures"]) == len(view["captures"]),
          "%s: %d rows, h5py sees %d" % (name, len(got["captures"]), len(view["captures"])))
    for a, b in zip(got["captures"], view["captures"]):
        for k in ("seq", "name", "occurrence", "layer", "role", "dtype", "shape", "bytes"):
            check(a[k] == b[k], "%s seq %d: %s %r != h5py %r" % (name, b["seq"], k, a[k], b[k]))
        check(a["human"] == human(b["bytes"]), "%s: human size %r for %d" % (name, a["human"], b["bytes"]))
    n = len(view["captures"])
    el = sum(c["elements"] for c in view["captures"])
    by = sum(c["bytes"] for c in view["captures"])
    check(got.get("total") == (n, el, human(by), by), "%s: total %r" % (name, got.get("total")))

    r = run(["ls", "--json", name], corpus)
    check(r.returncode == 0, "%s --json: exit %d" % (name, r.returncode))
    j = json.loads(r.stdout)
    check(len(j) == 1, "%s --json: one object" % name)
    j = j[0]
    check(j["label"] == view["label"] and j["writer"] == view["writer"], "%s --json: label" % name)
    check(j["run"] == view["run"] and j["env"] == view["env"], "%s --json: run/env" % name)
    check(j["kernels"] == view["kernels"], "%s --json: kernels" % name)
    check([{k: c[k] for k in ("seq", "name", "occurrence", "layer", "role", "dtype", "shape",
                              "elements", "bytes")} for c in j["captures"]] == view["captures"],
          "%s --json: captures differ from h5py" % name)
    check(j["total"] == {"captures": n, "elements": el, "bytes": by}, "%s --json: total" % name)


def check_bad(corpus, name, want):
    r = run(["ls", name], corpus)
    lines = r.stderr.splitlines()
    check(r.returncode == 2, "%s: exit %d, want 2" % (name, r.returncode))
    check(len(lines) == 1, "%s: %d stderr lines: %r" % (name, len(lines), r.stderr))
    check(r.stdout == "", "%s: stdout %r" % (name, r.stdout))
    if lines:
        ln = lines[0]
        check(ln.startswith("ulpprof: "), "%s: %r" % (name, ln))
        check("'%s'" % name in ln, "%s: message does not name the file: %r" % (name, ln))
        check(want["word"] in ln, "%s: message lacks %r: %r" % (name, want["word"], ln))
        check("HDF5-DIAG" not in r.stderr and "#000" not in r.stderr, "%s: HDF5 noise" % name)


def main():
    tmp = os.path.join(BUILD, "tests", "tmp") if BUILD else tempfile.gettempdir()
    os.makedirs(tmp, exist_ok=True)
    corpus = tempfile.mkdtemp(prefix="ls_corpus.", dir=tmp)
    subprocess.run([sys.executable, os.path.join(HERE, "make_snapshots.py"), corpus], check=True)
    with open(os.path.join(corpus, "manifest.json")) as fh:
        manifest = json.load(fh)
    for name in sorted(manifest["good"]):
        check_good(corpus, name)
    for name, want in sorted(manifest["bad"].items()):
        check_bad(corpus, name, want)
    check(len(manifest["bad"]) >= 30, "corpus has %d bad files" % len(manifest["bad"]))

    # Several files: the good ones are listed, the bad one gets its line, exit 2.
    r = run(["ls", "golden.h5", "dup_seq.h5", "empty.h5"], corpus)
    check(r.returncode == 2, "mixed: exit %d" % r.returncode)
    check(len(r.stderr.splitlines()) == 1 and "dup_seq.h5" in r.stderr, "mixed: stderr %r" % r.stderr)
    check(r.stdout.startswith("golden.h5\n") and "\n\nempty.h5\n" in r.stdout, "mixed: stdout")
    r = run(["ls", "golden.h5", "empty.h5"], corpus)
    check(r.returncode == 0 and r.stderr == "", "two good files: exit %d" % r.returncode)

    if failures:
        print("%d failures" % len(failures))
        return 1
    print("ok: %d good and %d bad files" % (len(manifest["good"]), len(manifest["bad"])))
    import shutil
    shutil.rmtree(corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# `ulpprof kernels A B`: alignment of two kernel traces.  Snapshot files are
# written here with h5py (as a third-party writer would); the expected
# common count is an independent dynamic-programming LCS, and the first
# divergence the first index where the (name, grid, block) keys differ.
set -u
: "${ULPPROF:?}" "${ULP_PYTHON:=/usr/bin/python3}"
T=$(mktemp -d "${TMPDIR:-/tmp}/ulpprof-kernels.XXXXXX")
trap 'rm -rf "$T"' EXIT

"$ULP_PYTHON" - "$ULPPROF" "$T" <<'PY'
import json, random, subprocess, sys
import h5py, numpy as np

ulpprof, tmp = sys.argv[1], sys.argv[2]
fails = []

def write(path, label, seq, captures=()):
    """seq: list of (name, grid, block); captures: (name, layer, first, last)."""
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "ulpprof-snapshot"
        f.attrs["format_version"] = np.int32(1)
        f.attrs["label"] = label
        f.attrs["writer"] = "test_kernels.sh"
        f.attrs["created_unix_ns"] = np.int64(0)
        f.create_group("run"); f.create_group("env")
        caps = f.create_group("captures")
        for i, (name, layer, first, last) in enumerate(captures):
            d = caps.create_group(name).create_dataset("0", data=np.zeros(2, dtype=np.float32))
            d.attrs["dtype"] = "f32"
            d.attrs["seq"] = np.int64(i)
            d.attrs["layer"] = np.int32(layer)
            d.attrs["kernels"] = np.array([first, last], dtype=np.int64)
        tr = f.create_group("trace")
        names = sorted({k[0] for k in seq}) or ["unused"]
        tr.create_dataset("names", data=names, dtype=h5py.string_dtype("utf-8"))
        dt = np.dtype([("seq", "<u8"), ("correlation_id", "<u4"), ("name_id", "<u4"),
                       ("grid", "<i4", (3,)), ("block", "<i4", (3,)),
                       ("shared_static", "<i4"), ("shared_dynamic", "<i4"),
                       ("registers", "<i4"), ("stream", "<u8"), ("device", "<u4"),
                       ("start_ns", "<u8"), ("end_ns", "<u8")])
        rows = np.zeros(len(seq), dtype=dt)
        for i, (name, grid, block) in enumerate(seq):
            rows[i]["seq"] = i
            rows[i]["correlation_id"] = i + 1
            rows[i]["name_id"] = names.index(name)
            rows[i]["grid"] = grid
            rows[i]["block"] = block
        tr.create_dataset("kernels", data=rows, maxshape=(None,))

def lcs(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]

def run(*args):
    p = subprocess.run([ulpprof, "kernels", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr

rng = random.Random(7)
alphabet = [("gemm_%d" % i, (i % 3 + 1, 2, 1), (128, 1, 1)) for i in range(6)]
alphabet += [("gemm_0", (1, 2, 1), (256, 1, 1)), ("gemm_0", (2, 2, 1), (128, 1, 1))]
for case in range(60):
    n = rng.randrange(0, 40)
    a = [rng.choice(alphabet) for _ in range(n)]
    b = list(a)
    for _ in range(rng.randrange(0, 6)):          # a few edits
        op = rng.randrange(3)
        if op == 0 and b:
            del b[rng.randrange(len(b))]
        elif op == 1:
            b.insert(rng.randrange(len(b) + 1), rng.choice(alphabet))
        elif b:
            b[rng.randrange(len(b))] = rng.choice(alphabet)
    pa, pb = "%s/a%d.h5" % (tmp, case), "%s/b%d.h5" % (tmp, case)
    write(pa, "miss", a)
    write(pb, "hit", b)
    rc, out, err = run("--json", pa, pb)
    want_same = a == b
    if not a and not b:  # no launch on either side: nothing to compare
        if rc != 2:
            fails.append("case %d: two empty traces: exit %d" % (case, rc))
        continue
    if rc != (0 if want_same else 1):
        fails.append("case %d: exit %d (%s)" % (case, rc, err.strip()))
        continue
    j = json.loads(out)
    first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    if j["identical"] != want_same:
        fails.append("case %d: identical %s" % (case, j["identical"]))
    if j["common"] != lcs(a, b):
        fails.append("case %d: common %d, LCS %d" % (case, j["common"], lcs(a, b)))
    if j["only_in_a"] != len(a) - j["common"] or j["only_in_b"] != len(b) - j["common"]:
        fails.append("case %d: only_in counts" % case)
    if not want_same:
        fd = j["first_divergence"]
        if fd["a_index"] != first or fd["b_index"] != first:
            fails.append("case %d: first divergence %s, expected %d" % (case, fd, first))
        # The edit script must transform a into b.
        dels = {e["index"] for e in j["edits"] if e["op"] == "only_a"}
        ins = {e["index"] for e in j["edits"] if e["op"] == "only_b"}
        if [x for i, x in enumerate(a) if i not in dels] != [x for i, x in enumerate(b) if i not in ins]:
            fails.append("case %d: edits do not align the sequences" % case)
    elif j["first_divergence"] is not None:
        fails.append("case %d: first_divergence not null" % case)

# Text output: the divergence, the capture it belongs to, the stretch.
g = lambda name, grid=(1, 1, 1): (name, grid, (128, 1, 1))
a = [g("embed"), g("gemm_small", (4, 1, 1)), g("norm"), g("gemm_small", (4, 1, 1)), g("logits")]
b = [g("embed"), g("gemm_big", (16, 1, 1)), g("splitKreduce"), g("norm"), g("gemm_small", (4, 1, 1)), g("logits")]
write(tmp + "/ta.h5", "miss", a, [("model.layers.0.out", 0, 0, 3), ("logits", -1, 3, 5)])
write(tmp + "/tb.h5", "hit", b, [("model.layers.0.out", 0, 0, 4), ("logits", -1, 4, 6)])
rc, out, err = run(tmp + "/ta.h5", tmp + "/tb.h5")
expect = [
    "common: 4 launches in both, in order; 1 only in A, 2 only in B",
    "first divergence: A #1, B #1 (after 1 common launches)",
    "- A #1  gemm_small  grid=(4,1,1) block=(128,1,1)",
    "+ B #1  gemm_big  grid=(16,1,1) block=(128,1,1)",
    "  A #1 belongs to capture model.layers.0.out/0 (layer 0)",
    "+ B #2  splitKreduce  grid=(1,1,1) block=(128,1,1)",
]
if rc != 1:
    fails.append("text: exit %d %s" % (rc, err))
for line in expect:
    if line not in out.splitlines():
        fails.append("text: missing line %r in:\n%s" % (line, out))
rc, out, err = run(tmp + "/ta.h5", tmp + "/ta.h5")
if rc != 0 or "identical: the same 5 launches" not in out:
    fails.append("identical: %d %s" % (rc, out))

# Errors: one stderr line, exit 2.
open(tmp + "/bad.h5", "w").write("not hdf5")
for args in ([tmp + "/ta.h5"], [tmp + "/ta.h5", tmp + "/bad.h5"], ["--max-hunks", "x", tmp + "/ta.h5", tmp + "/ta.h5"],
             [tmp + "/ta.h5", tmp + "/missing.h5"]):
    rc, out, err = run(*args)
    if rc != 2 or len(err.strip().splitlines()) != 1 or not err.startswith("ulpprof") or out:
        fails.append("error %s: rc %d, stderr %r, stdout %r" % (args, rc, err, out))
# No launch on either side, or no trace at all: an error naming the file,
# never "identical: 0 launches".
write(tmp + "/none.h5", "none", [], [])
rc, out, err = run(tmp + "/none.h5", tmp + "/none.h5")
if rc != 2 or len(err.strip().splitlines()) != 1 or "recorded a kernel launch" not in err or out:
    fails.append("no launch: rc %d, stderr %r, stdout %r" % (rc, err, out))
write(tmp + "/notrace.h5", "notrace", a, [])
with h5py.File(tmp + "/notrace.h5", "r+") as f:
    del f["trace"]
for args in ((tmp + "/ta.h5", tmp + "/notrace.h5"), (tmp + "/notrace.h5", tmp + "/ta.h5")):
    rc, out, err = run(*args)
    if rc != 2 or len(err.strip().splitlines()) != 1 or "notrace.h5' has no kernel trace" not in err:
        fails.append("no trace %s: rc %d, stderr %r" % (args, rc, err))
rc, out, err = run("--help")
if rc != 0 or not out.startswith("usage: ulpprof kernels") or err:
    fails.append("--help")

for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
rc=$?
[[ $rc == 0 ]] && echo "test_kernels: all passed"
exit $rc

#!/bin/bash
# `ulpprof diff`: golden output for every format on the hand-constructed pair
# of tests/cli/diff (numbers derived in tests/cli/diff/README.md), exit codes
# (0 identical, 1 different, 2 error), bad input, awkward but valid input.
set -u
ULPPROF=${ULPPROF:-${ULPPROF_BUILD_DIR:-build}/programs/ulpprof}
SRC=${ULPPROF_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
PY=${ULP_PYTHON:-/usr/bin/python3}
HERE=$SRC/tests/cli/diff
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ulpdiff-cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
fails=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# expect_rc WANT CMD...: runs CMD with stdout/stderr in $TMP/out, $TMP/err.
expect_rc() {
    local want=$1
    shift
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, want $want (stderr: $(head -c 300 "$TMP/err"))"
}

# An error: exit 2, exactly one stderr line starting "ulpprof" and naming $2.
expect_error() {
    local name=$1
    shift
    expect_rc 2 "$@"
    [ "$(wc -l <"$TMP/err")" -eq 1 ] || fail "'$*': stderr is not one line: $(cat "$TMP/err")"
    grep -q "^ulpprof" "$TMP/err" || fail "'$*': stderr does not start with ulpprof"
    grep -qF -- "$name" "$TMP/err" || fail "'$*': stderr does not name '$name': $(cat "$TMP/err")"
}

cd "$TMP" || exit 2
"$PY" "$HERE/make_pair.py" || { echo "cannot build the pair"; exit 2; }

# --- Golden output, one per format -------------------------------------------------
for fmt in table markdown csv; do
    expect_rc 1 "$ULPPROF" diff --format "$fmt" a.h5 b.h5
    diff -u "$HERE/golden.$fmt" "$TMP/out" >"$TMP/d" || fail "format $fmt differs from golden: $(head -40 "$TMP/d")"
done
expect_rc 1 "$ULPPROF" diff --format json a.h5 b.h5
"$PY" - "$HERE/golden.json" "$TMP/out" <<'EOF' || fail "json differs from golden"
import json, sys
want = json.load(open(sys.argv[1]))
got = json.load(open(sys.argv[2]))
def walk(w, g, path):
    if isinstance(w, dict):
        if not isinstance(g, dict) or set(w) != set(g):
            print("keys at %s: %s vs %s" % (path, sorted(w), sorted(g) if isinstance(g, dict) else g))
            return False
        return all(walk(w[k], g[k], path + "." + k) for k in w)
    if isinstance(w, list):
        if not isinstance(g, list) or len(w) != len(g):
            print("list at %s: %r vs %r" % (path, w, g))
            return False
        return all(walk(a, b, "%s[%d]" % (path, i)) for i, (a, b) in enumerate(zip(w, g)))
    if w != g or type(w) is not type(g) and not (isinstance(w, float) and isinstance(g, float)):
        print("value at %s: %r vs %r" % (path, w, g))
        return False
    return True
sys.exit(0 if walk(want, got, "$") else 1)
EOF
# The JSON key order of FORMAT.md comes first in each row.
expect_rc 1 "$ULPPROF" diff -f json a.h5 b.h5
"$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]), object_pairs_hook=lambda kv: kv)
top = [k for k, _ in d][:9]
assert top == ["format", "format_version", "a", "b", "identical", "first_divergence", "rows",
               "logits", "ladder"], top
rows = dict(d)["rows"]
keys = [k for k, _ in rows[1]][:12]
assert keys == ["name", "occurrence", "layer", "role", "dtype", "shape", "elements", "status",
                "differing", "max_ulp", "max_abs_diff", "nonfinite_mismatch"], keys
' "$TMP/out" || fail "json key order"

# --out writes the same bytes; --color=always colours the table, a pipe does not.
expect_rc 1 "$ULPPROF" diff --out report.md --format markdown a.h5 b.h5
cmp -s report.md "$HERE/golden.markdown" || fail "--out report differs from golden"
# "md" is markdown, for diff and ladder alike.
expect_rc 1 "$ULPPROF" diff -f md -o report2.md a.h5 b.h5
cmp -s report2.md "$HERE/golden.markdown" || fail "-f md differs from --format markdown"
[ -s "$TMP/out" ] && fail "--out still wrote to stdout"
expect_rc 1 "$ULPPROF" diff --color=always a.h5 b.h5
grep -q $'\033\[31mdiffers' "$TMP/out" || fail "--color=always has no colour"
expect_rc 1 "$ULPPROF" diff a.h5 b.h5
grep -q $'\033' "$TMP/out" && fail "colour on a pipe"
# Table lines stay within 100 columns (the A:/B: path lines aside).
awk 'length($0) > 100 && !/^[AB]: / { bad = 1 } END { exit bad }' "$TMP/out" || fail "table wider than 100 columns"

# --- Exit codes ---------------------------------------------------------------------
expect_rc 0 "$ULPPROF" diff a.h5 a.h5
grep -q "^identical: all 4 captures are bitwise identical" "$TMP/out" || fail "identical summary: $(cat "$TMP/out")"
grep -q "pair tests level 0 (repeat: same /run conditions): holds: bitwise identical" "$TMP/out" ||
    fail "ladder line for identical files"
expect_rc 0 "$ULPPROF" diff --format json a.h5 a.h5
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["identical"] is True and d["first_divergence"] is None and d["ladder"]["level"] == 0' "$TMP/out" ||
    fail "identical json"
expect_rc 0 "$ULPPROF" diff --help
grep -q "^usage: ulpprof diff" "$TMP/out" || fail "--help on stdout"
expect_rc 0 "$ULPPROF" diff --match 'embed' a.h5 b.h5
expect_rc 1 "$ULPPROF" diff --role logits a.h5 b.h5
[ "$(grep -c '^lm_head ' "$TMP/out")" -eq 1 ] || fail "--role logits shows lm_head"
grep -q "^model.layers" "$TMP/out" && fail "--role logits shows activations"
expect_rc 1 "$ULPPROF" diff -t 0.7 -t 1 a.h5 b.h5
grep -q "T=0.7: total variation" "$TMP/out" || fail "temperature lines"

# --- Bad input: one line naming the file, exit 2 -----------------------------------------
expect_error "missing.h5" "$ULPPROF" diff a.h5 missing.h5
echo "not hdf5" >junk.h5
expect_error "junk.h5" "$ULPPROF" diff junk.h5 b.h5
"$PY" -c 'import h5py; h5py.File("plain.h5", "w").create_dataset("x", data=[1])'
expect_error "plain.h5" "$ULPPROF" diff a.h5 plain.h5
head -c 3000 a.h5 >trunc.h5
expect_error "trunc.h5" "$ULPPROF" diff trunc.h5 b.h5
expect_rc 2 "$ULPPROF" diff a.h5
expect_rc 2 "$ULPPROF" diff a.h5 b.h5 c.h5
expect_rc 2 "$ULPPROF" diff --format yaml a.h5 b.h5
expect_rc 2 "$ULPPROF" diff --temperature -1 a.h5 b.h5
expect_rc 2 "$ULPPROF" diff --temperature abc a.h5 b.h5
expect_rc 2 "$ULPPROF" diff --threads 0 a.h5 b.h5
expect_rc 2 "$ULPPROF" diff --bogus a.h5 b.h5
expect_error "nodir/x.json" "$ULPPROF" diff --out nodir/x.json a.h5 b.h5
# A full standard output: one line that says why (not one from the report
# and another from the exit), streamed or not.
if [ -w /dev/full ]; then
    for stream in 1 0; do
        for fmt in table markdown csv json; do
            ULPPROF_DIFF_STREAM=$stream "$ULPPROF" diff -f $fmt a.h5 b.h5 >/dev/full 2>"$TMP/err"
            rc=$?
            [ "$rc" -eq 2 ] || fail "diff -f $fmt >/dev/full (stream $stream) exited $rc"
            [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "standard output.*No space left on device" "$TMP/err" ||
                fail "diff -f $fmt >/dev/full (stream $stream): $(cat "$TMP/err")"
        done
    done
fi

# --- Awkward but valid input ------------------------------------------------------------
"$PY" - <<EOF
import sys
sys.path.insert(0, "$SRC/tests/python")
import numpy as np, diffsnap as ds
ds.write_snapshot("other.h5", [dict(name="something.else", bits=np.zeros(3, np.uint16), dtype="bf16")],
                  label="other")
ds.write_snapshot("empty.h5", [], label="none")
ds.write_snapshot("mm_a.h5", [dict(name="x", bits=np.zeros((2, 3), np.uint16), dtype="bf16"),
                              dict(name="y", bits=np.zeros(4, np.uint16), dtype="bf16"),
                              dict(name="s", bits=np.array(np.uint16(0x7fc1)), dtype="bf16"),
                              dict(name="e", bits=np.zeros((0, 5), np.uint8), dtype="f8e4m3")])
ds.write_snapshot("mm_b.h5", [dict(name="x", bits=np.zeros((3, 2), np.uint16), dtype="bf16"),
                              dict(name="y", bits=np.zeros(4, np.uint16), dtype="f16"),
                              dict(name="s", bits=np.array(np.uint16(0x7fc1)), dtype="bf16"),
                              dict(name="e", bits=np.zeros((0, 5), np.uint8), dtype="f8e4m3")])
EOF
# Nothing to compare is an error, never "identical" nor a ladder verdict:
# no file, no capture in either, no capture name both share, no selected one.
for fmt in table json; do
    expect_error "share no capture name (4 only in A, 1 only in B): nothing to compare" \
        "$ULPPROF" diff -f "$fmt" a.h5 other.h5
    [ -s "$TMP/out" ] && fail "no shared capture ($fmt): a report on stdout"
done
expect_error "share no capture selected (1 only in A, 0 only in B)" \
    "$ULPPROF" diff --match embed a.h5 other.h5
expect_error "nothing to compare" "$ULPPROF" diff empty.h5 empty.h5
expect_error "selects no capture" "$ULPPROF" diff --match 'no.such.*' a.h5 b.h5
expect_error "selects no capture" "$ULPPROF" diff --role kv a.h5 b.h5
expect_error "unknown role 'bogus'" "$ULPPROF" diff --role bogus a.h5 b.h5
expect_rc 1 "$ULPPROF" diff -f json mm_a.h5 mm_b.h5
"$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
st = {r["name"]: r["status"] for r in d["rows"]}
assert st == {"x": "shape_mismatch", "y": "dtype_mismatch", "s": "identical", "e": "identical"}, st
assert d["first_divergence"]["name"] == "x"
s = [r for r in d["rows"] if r["name"] == "s"][0]
assert s["shape"] == [] and s["elements"] == 1 and s["differing"] == 0
e = [r for r in d["rows"] if r["name"] == "e"][0]
assert e["elements"] == 0 and e["ulp_hist"] == [0]
' "$TMP/out" || fail "mismatch rows: $(cat "$TMP/out" | head -50)"
expect_rc 1 "$ULPPROF" diff mm_a.h5 mm_b.h5
grep -q "first divergence: x: shape_mismatch, A bf16 \[2,3\] vs B bf16 \[3,2\]" "$TMP/out" ||
    fail "shape mismatch summary: $(cat "$TMP/out")"

# --plot DIR: the report as usual (same stdout, same exit status) plus the
# plots' data and scripts; PNG/SVG content is checked by tests/python/test_plots.py.
expect_rc 1 "$ULPPROF" diff a.h5 b.h5
cp "$TMP/out" "$TMP/plain"
if command -v gnuplot >/dev/null; then
    expect_rc 1 "$ULPPROF" diff a.h5 b.h5 --plot "$TMP/plots"
    cmp -s "$TMP/out" "$TMP/plain" || fail "--plot changed the report"
    for f in amplification.dat amplification.gp amplification.png amplification.svg \
             ulp_heatmap.png logits_margin.png; do
        [ -s "$TMP/plots/$f" ] || fail "--plot did not write $f"
    done
fi
expect_rc 2 "$ULPPROF" diff a.h5 b.h5 --plot
if [ "$fails" -ne 0 ]; then
    echo "$fails failures"
    exit 1
fi
echo "ok"

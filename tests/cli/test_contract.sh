#!/bin/bash
# `ulpprof contract`: usage, exit codes and the golden output of `check`.
# The runs are written with h5py (tests/python/test_ladder_numpy.write_run):
# miss and repeat hold the same bits, hit (cache=hit) differs from layer 1,
# all with block_size 16.  golden/contract_check.txt was written by hand
# from them: block_size declared 16 is kept in 3 of 3 runs, the tie rule is
# unobservable, the level-0 claim is kept by the one pair miss/repeat, the
# level-2 claim broken by 2 of 2 pairs (hit vs miss first, at layer 1, the
# first perturbed row 2 at position 102, 1 ULP: bits ^ 1), and the verdict
# is broken.  The digest line is SHA-256 of {"scheduler":{"block_size":16},
# "sampling":{"argmax_tie_rule":"lowest_index"}} in sorted compact JSON.
set -u
: "${ULPPROF:?path of the ulpprof binary}"
: "${ULPPROF_SOURCE_DIR:?source tree}"
PY=${ULP_PYTHON:-/usr/bin/python3}
GOLDEN=$ULPPROF_SOURCE_DIR/tests/cli/golden
TMP=$(mktemp -d "${ULPPROF_BUILD_DIR:-/tmp}/test_contract.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect() {
    local name=$1 want=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$name: exit $rc, want $want (stderr: $(head -c 300 "$TMP/err"))"
}

expect "contract --help" 0 "$ULPPROF" contract --help
grep -q '^usage: ulpprof contract emit' "$TMP/out" || fail "contract --help: no usage"
expect "contract" 2 "$ULPPROF" contract
expect "contract frob" 2 "$ULPPROF" contract frob
expect "check without runs" 2 "$ULPPROF" contract check x.json
expect "compare one" 2 "$ULPPROF" contract compare x.json
expect "compare --format xml" 2 "$ULPPROF" contract compare --format xml x.json y.json
grep -q 'table or json' "$TMP/err" || fail "compare --format xml: $(cat "$TMP/err")"
expect "compare three" 2 "$ULPPROF" contract compare x.json y.json z.json
expect "compare --bogus" 2 "$ULPPROF" contract compare --bogus x.json y.json
expect "emit --bogus" 2 "$ULPPROF" contract emit --bogus x.h5
grep -q -- "'--bogus'" "$TMP/err" || fail "emit --bogus not named: $(cat "$TMP/err")"

(cd "$ULPPROF_SOURCE_DIR/tests/python" && "$PY" -c "
import sys, test_ladder_numpy as tl
b = {'batch_size': '1', 'cache': 'miss', 'split': 'none', 'tp': '1', 'block_size': '16'}
tl.write_run('$TMP/miss.h5', b, 'miss')
tl.write_run('$TMP/repeat.h5', b, 'repeat')
tl.write_run('$TMP/hit.h5', dict(b, cache='hit'), 'hit', perturb=(1, 2))
") || { echo "FAIL: cannot write the runs"; exit 1; }
cat >"$TMP/c.json" <<'JSON'
{"ulpprof_contract": 1, "producer": "golden",
 "scheduler": {"block_size": 16}, "sampling": {"argmax_tie_rule": "lowest_index"},
 "claims": [{"level": 0, "name": "repeat"}, {"level": 2, "name": "cache"}]}
JSON
expect "check" 1 "$ULPPROF" contract check "$TMP/c.json" "$TMP/miss.h5" "$TMP/repeat.h5" "$TMP/hit.h5"
diff -u "$GOLDEN/contract_check.txt" "$TMP/out" || fail "check output differs from golden"
[ -s "$TMP/err" ] && fail "check: stderr not empty: $(cat "$TMP/err")"

expect "emit to an input" 2 "$ULPPROF" contract emit "$TMP/miss.h5" -o "$TMP/miss.h5"
expect "emit" 0 "$ULPPROF" contract emit "$TMP/miss.h5" -o "$TMP/e.json"
expect "check of the emitted over its run" 0 "$ULPPROF" contract check "$TMP/e.json" "$TMP/miss.h5"
expect "compare" 0 "$ULPPROF" contract compare "$TMP/e.json" "$TMP/e.json"
grep -q '^level: 7 ' "$TMP/out" || fail "compare of one contract with itself: $(cat "$TMP/out")"
expect "compare --format json" 0 "$ULPPROF" contract compare --format json "$TMP/e.json" "$TMP/e.json"
"$PY" -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j['format'] == 'ulpprof-contract-compare' and j['level'] == 7 and j['differences'] == []
assert j['a']['numerical_policy'] == j['b']['numerical_policy'] and j['same_policy'] is True
" "$TMP/out" || fail "compare --format json of one contract with itself: $(head -c 300 "$TMP/out")"

[ "$fails" -eq 0 ] && echo "ok" || { echo "$fails failures"; exit 1; }

#!/bin/bash
# `ulpprof` top level and `ulpprof ls`: exit codes, help, version, and golden
# output.  The golden files in golden/ were written by hand from what
# tests/python/make_snapshots.py puts in golden.h5 and empty.h5 (shapes,
# dtypes, attributes; sizes computed as elements x bytes per element), not
# captured from the tool.
set -u
: "${ULPPROF:?path of the ulpprof binary}"
: "${ULPPROF_SOURCE_DIR:?source tree}"
PY=${ULP_PYTHON:-/usr/bin/python3}
GOLDEN=$ULPPROF_SOURCE_DIR/tests/cli/golden
TMP=$(mktemp -d "${ULPPROF_BUILD_DIR:-/tmp}/test_ls.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
fails=0

fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect NAME WANT_RC CMD...: runs CMD, stdout to $TMP/out, stderr to $TMP/err.
expect() {
    local name=$1 want=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$name: exit $rc, want $want (stderr: $(head -c 300 "$TMP/err"))"
}
lines() { wc -l <"$1" | tr -d ' '; }

# --- top level ---------------------------------------------------------------
for h in --help -h help; do
    expect "ulpprof $h" 0 "$ULPPROF" $h
    grep -q '^usage: ulpprof <command>' "$TMP/out" || fail "ulpprof $h: no usage on stdout"
    grep -q '^  ls ' "$TMP/out" || fail "ulpprof $h: ls not listed"
    [ -s "$TMP/err" ] && fail "ulpprof $h: stderr not empty"
done
expect "--version" 0 "$ULPPROF" --version
[ "$(head -1 "$TMP/out")" = "ulpprof 0.2.0" ] || fail "--version printed '$(cat "$TMP/out")'"
# The second line names the comparison kernels' level (tests/python/test_diff_isa.py).
grep -qxE 'comparison kernels: (x86-64-v4|x86-64-v3|baseline)' "$TMP/out" ||
    fail "--version names no kernel level: '$(cat "$TMP/out")'"
expect "no command" 2 "$ULPPROF"
[ -s "$TMP/out" ] && fail "no command: stdout not empty"
grep -q usage "$TMP/err" || fail "no command: no usage on stderr"
expect "unknown command" 2 "$ULPPROF" frobnicate
[ "$(cat "$TMP/err")" = "ulpprof: 'frobnicate' is not a command; see 'ulpprof --help'" ] ||
    fail "unknown command: stderr '$(cat "$TMP/err")'"
expect "unknown option" 2 "$ULPPROF" --frobnicate
grep -q -- "--frobnicate" "$TMP/err" || fail "unknown option not named"
expect "help unknown" 2 "$ULPPROF" help frobnicate

# --- ls usage ----------------------------------------------------------------
expect "ls --help" 0 "$ULPPROF" ls --help
grep -q '^usage: ulpprof ls' "$TMP/out" || fail "ls --help: no usage"
cp "$TMP/out" "$TMP/help1"
expect "help ls" 0 "$ULPPROF" help ls
cmp -s "$TMP/out" "$TMP/help1" || fail "'help ls' differs from 'ls --help'"
expect "ls without files" 2 "$ULPPROF" ls
grep -q usage "$TMP/err" || fail "ls without files: no usage"
expect "ls --bogus" 2 "$ULPPROF" ls --bogus x.h5
grep -q -- "'--bogus'" "$TMP/err" || fail "ls --bogus: option not named: $(cat "$TMP/err")"
expect "ls -q" 2 "$ULPPROF" ls -q x.h5
grep -q -- "'-q'" "$TMP/err" || fail "ls -q: option not named: $(cat "$TMP/err")"
expect "ls missing file" 2 "$ULPPROF" ls "$TMP/nope.h5"
[ "$(cat "$TMP/err")" = "ulpprof: cannot open '$TMP/nope.h5': no such file" ] ||
    fail "missing file: stderr '$(cat "$TMP/err")'"
[ -s "$TMP/out" ] && fail "missing file: stdout not empty"

# --- golden output -----------------------------------------------------------
"$PY" "$ULPPROF_SOURCE_DIR/tests/python/make_snapshots.py" "$TMP/corpus" >/dev/null ||
    { echo "FAIL: corpus generator"; exit 1; }
cd "$TMP/corpus" || exit 2
for g in golden empty; do
    expect "ls $g.h5" 0 "$ULPPROF" ls "$g.h5"
    diff -u "$GOLDEN/ls_$g.txt" "$TMP/out" || fail "ls $g.h5: output differs from golden/ls_$g.txt"
    [ -s "$TMP/err" ] && fail "ls $g.h5: stderr not empty"
done
# Two files: each listed in order, separated by one blank line.
expect "ls two files" 0 "$ULPPROF" ls golden.h5 empty.h5
{ cat "$GOLDEN/ls_golden.txt"; echo; cat "$GOLDEN/ls_empty.txt"; } | diff -u - "$TMP/out" ||
    fail "ls golden.h5 empty.h5 differs"
# A bad file among good ones: listed good ones, one stderr line, exit 2.
expect "ls good+bad" 2 "$ULPPROF" ls golden.h5 version2.h5
cmp -s "$GOLDEN/ls_golden.txt" "$TMP/out" || fail "ls good+bad: good file not listed"
[ "$(lines "$TMP/err")" = 1 ] || fail "ls good+bad: $(lines "$TMP/err") stderr lines"
[ "$(cat "$TMP/err")" = "ulpprof: 'version2.h5': format version 2 is not supported (this build reads version 1)" ] ||
    fail "ls version2.h5: '$(cat "$TMP/err")'"

if [ "$fails" -ne 0 ]; then
    echo "$fails failures"
    exit 1
fi
echo "ok"

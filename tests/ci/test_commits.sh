#!/bin/bash
# .ci/commits: a subject over 72 characters after the base fails, one of 72
# passes (characters, not bytes), subjects before the base and exempt
# commits are not judged, and a history without the base (shallow clone,
# unrelated branch, no git repository) is reported as not checked, never
# failed.
set -u
: "${ULPPROF_SOURCE_DIR:?source tree}"
CHECK=$ULPPROF_SOURCE_DIR/.ci/commits
TMP=$(mktemp -d "${ULPPROF_BUILD_DIR:-/tmp}/test_commits.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t \
    GIT_COMMITTER_EMAIL=t@example.org GIT_CONFIG_NOSYSTEM=1 HOME=$TMP
# Repositories above $TMP (the build tree may sit in a checkout) stay out of sight.
export GIT_CEILING_DIRECTORIES=$TMP

# expect NAME WANT_RC REPO [BASE]: runs the check, output in $TMP/out, $TMP/err.
expect() {
    local name=$1 want=$2 repo=$3 base=${4:-}
    ULPPROF_COMMITS_BASE=$base ULPPROF_COMMITS_EXEMPT=${EXEMPT:-} \
        ULPPROF_COMMITS_NEW=${NEW:-0} bash "$CHECK" "$repo" \
        >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || fail "$name: exit $rc, want $want ($(cat "$TMP/out" "$TMP/err"))"
}
commit() { git -C "$R" commit -q --allow-empty -m "$1" -m "why"; }
subject() { printf "%${1}s" "" | tr ' ' "${2:-x}"; }

R=$TMP/repo
git init -q "$R"
commit "$(subject 90)" # before the rule: not judged
commit "the rule starts here"
base=$(git -C "$R" rev-parse --short HEAD)
commit "$(subject 72)"
expect "72 characters" 0 "$R" "$base"
grep -q "at most 72" "$TMP/out" || fail "72 characters: no verdict line"
# 72 two-byte characters are 144 bytes and still 72 characters.
commit "$(printf 'é%.0s' $(seq 72))"
expect "72 UTF-8 characters" 0 "$R" "$base"
commit "$(subject 73)"
bad=$(git -C "$R" rev-parse --short HEAD)
expect "73 characters" 1 "$R" "$base"
grep -q "$bad: subject of 73 characters" "$TMP/err" || fail "73 characters: commit not named"
[ "$(grep -c 'subject of' "$TMP/err")" -eq 1 ] || fail "73 characters: the commits before the base were judged"
# A commit named as exempt (landed before the rule was enforced) is excused, only it.
EXEMPT=$(git -C "$R" rev-parse HEAD) expect "exempt commit" 0 "$R" "$base"
commit "$(subject 74)"
EXEMPT=$(git -C "$R" rev-parse HEAD~1) expect "exempt and another" 1 "$R" "$base"
grep -q "subject of 74" "$TMP/err" || fail "exempt and another: the other not named"
grep -q "subject of 73" "$TMP/err" && fail "exempt and another: the exempt one named"

# NEW=1 (the landing step): only commits not on `main` are judged, so a
# slip already on main blocks no one, and a new one still fails.
R2=$TMP/landing
git init -q "$R2"
R=$R2 commit "base"
base2=$(git -C "$R2" rev-parse --short HEAD)
git -C "$R2" branch -q -M main
R=$R2 commit "$(subject 80)" # landed on main before anyone noticed
git -C "$R2" checkout -q -b feature
R=$R2 commit "$(subject 40)"
NEW=1 expect "landing, short" 0 "$R2" "$base2"
expect "whole history" 1 "$R2" "$base2"
R=$R2 commit "$(subject 75)"
NEW=1 expect "landing, long" 1 "$R2" "$base2"
[ "$(grep -c 'subject of' "$TMP/err")" -eq 1 ] || fail "landing, long: commits on main were judged"

# Histories the check cannot judge pass, and say so.
expect "unknown base" 0 "$R" "0123456789abcdef"
grep -q "not checked" "$TMP/out" || fail "unknown base: no note"
git clone -q --depth 1 "file://$R" "$TMP/shallow"
expect "shallow clone" 0 "$TMP/shallow" "$base"
grep -q "not checked" "$TMP/out" || fail "shallow clone: no note"
git -C "$R" checkout -q --orphan other
commit "$(subject 80)"
expect "base not an ancestor" 0 "$R" "$base"
grep -q "not an ancestor" "$TMP/out" || fail "base not an ancestor: no note"
mkdir "$TMP/plain"
expect "no repository" 0 "$TMP/plain" "$base"
grep -q "not a git work tree" "$TMP/out" || fail "no repository: no note"

[ "$fails" -eq 0 ] && echo "test_commits: all passed"
exit $((fails > 0))

#!/bin/bash
# .ci/includes: two modules that include each other fail, naming both; a
# module's own private header (x.c -> x_internal.h -> x.h) is no circle; a
# longer circle through three modules fails too; format/ including
# analyzer/, or programs/ including common/, crosses a layer and fails.
# Calls: two files of one folder that call each other fail, naming both
# and a function of each edge; a circle through three files, or through a
# macro of the folder's header, fails too; calls one way, a static function
# of the same name, and a struct member of that name are no circle; files
# in two folders calling each other are no circle of a folder.
set -u
: "${ULPPROF_SOURCE_DIR:?source tree}"
CHECK=$ULPPROF_SOURCE_DIR/.ci/includes
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
TMP=$(mktemp -d "${ULPPROF_BUILD_DIR:-/tmp}/test_includes.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT
export GIT_CEILING_DIRECTORIES=$TMP
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# expect NAME WANT_RC DIR
expect() {
    "$PY" "$CHECK" "$3" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    [ "$rc" -eq "$2" ] || fail "$1: exit $rc, want $2 ($(cat "$TMP/out" "$TMP/err"))"
}
# src DIR FILE INCLUDES...: writes FILE including each of INCLUDES.
src() {
    local dir=$1 file=$2
    shift 2
    mkdir -p "$dir/$(dirname "$file")"
    : >"$dir/$file"
    for i in "$@"; do echo "#include \"$i\"" >>"$dir/$file"; done
}

T=$TMP/ok
src "$T" lib/x.h
src "$T" lib/x_internal.h x.h
src "$T" lib/x.c x_internal.h other.h
src "$T" lib/other.h "../include/pub/api.h"
src "$T" lib/other.c other.h
src "$T" include/pub/api.h
expect "private header" 0 "$T"
grep -q "no circle" "$TMP/out" || fail "private header: no verdict line"

T=$TMP/two
src "$T" col/session.h
src "$T" col/session.c session.h writer.h
src "$T" col/writer.h
src "$T" col/writer.c writer.h col/session.h
expect "two modules" 1 "$T"
grep -q "col/session.*col/writer" "$TMP/err" || fail "two modules: circle not named"

T=$TMP/three
src "$T" a.c b.h
src "$T" b.c c.h
src "$T" c.c a.h
src "$T" a.h
src "$T" b.h
src "$T" c.h
expect "three modules" 1 "$T"

T=$TMP/layers
src "$T" common/error.h ulpprof/status.h
src "$T" include/ulpprof/status.h
src "$T" analyzer/snap.h
src "$T" format/writer.c common/error.h
src "$T" programs/cmd.c ulpprof/status.h
expect "layers kept" 0 "$T"
src "$T" format/writer.c common/error.h analyzer/snap.h
expect "format uses analyzer" 1 "$T"
grep -q 'format/writer.c includes "analyzer/snap.h": format/ may not use analyzer/' \
    "$TMP/err" || fail "format uses analyzer: crossing not named ($(cat "$TMP/err"))"
src "$T" format/writer.c common/error.h
src "$T" programs/cmd.c ulpprof/status.h common/error.h
expect "program uses common" 1 "$T"
grep -q "programs/ may not use common/" "$TMP/err" || fail "program uses common: crossing not named"

# code DIR FILE TEXT: writes FILE holding TEXT.
code() {
    mkdir -p "$1/$(dirname "$2")"
    printf '%s\n' "$3" >"$1/$2"
}

T=$TMP/calls
code "$T" analyzer/hub.h 'int hub_open(void); int part_read(void);'
code "$T" analyzer/hub.c '#include "hub.h"
int hub_open(void) { return part_read(); }'
code "$T" analyzer/part.c '#include "hub.h"
static int hub_help(void) { return 1; }
struct s { int (*hub_open)(void); };
int part_read(void) { struct s x = {0}; return hub_help() + (x.hub_open != 0); }'
expect "calls one way" 0 "$T"
grep -q "no circle of calls" "$TMP/out" || fail "calls one way: no verdict line"
code "$T" analyzer/part.c '#include "hub.h"
/* hub_open() in a comment is no call */
int part_read(void) { const char *s = "hub_open()"; return s != 0; }
int part_write(void) { return hub_open(); }'
expect "calls back" 1 "$T"
grep -q "calls: circle among 2 files of analyzer/: analyzer/hub.c -> analyzer/part.c (part_read); analyzer/part.c -> analyzer/hub.c (hub_open)" \
    "$TMP/err" || fail "calls back: circle not named ($(cat "$TMP/err"))"
code "$T" analyzer/part.c 'int part_read(void) { return 0; }'
code "$T" analyzer/hub.h '#define HUB_OPEN() hub_open()
int hub_open(void); int part_read(void);'
code "$T" analyzer/more.c '#include "hub.h"
int more_go(void) { return HUB_OPEN(); }'
code "$T" analyzer/part.c 'int more_go(void);
int part_read(void) { return more_go(); }'
expect "calls through a macro, three files" 1 "$T"
grep -q "circle among 3 files of analyzer/" "$TMP/err" || fail "three files: circle not named"

T=$TMP/folders
code "$T" analyzer/a.c 'int b_go(void); int a_go(void) { return b_go(); }'
code "$T" reports/b.c 'int a_go(void); int b_go(void) { return a_go(); }'
expect "calls across folders" 0 "$T"

[ "$fails" -eq 0 ] && echo "test_includes: all passed"
exit $((fails > 0))

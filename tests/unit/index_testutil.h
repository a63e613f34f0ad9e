/*
 * The index tests' re-read: whether the reader can use an opened
 * snapshot's index, decided again as ulp_snapshot_open() decides it.
 * Include after cmocka.h.
 */
#ifndef ULPPROF_TESTS_INDEX_TESTUTIL_H
#define ULPPROF_TESTS_INDEX_TESTUTIL_H

#include <stdlib.h>

#include "analyzer/snapshot_priv.h"
#include "common/index.h"
#include "common/journal.h"

/* 1 if the file's index is usable: read again into `s`, whose own arrays are kept. */
static inline int index_usable(ulp_snapshot *s)
{
    ulp__journal_state js;
    ulp__journal_find(s, &js);
    assert_true(!js.found || js.closed); /* a copy has no journal */
    ulp_capture_info *caps = s->caps;
    ulp__capture_src *srcs = s->srcs;
    ulp__lazy *lazy = s->lazy;
    size_t *by_name = s->by_name, n = s->ncaps;
    s->lazy = NULL;
    int rc = ulp__index_read(s, js.found ? js.first : ULP__INDEX_NO_JOURNAL);
    if (rc == 1) {
        ulp__lazy_free(s->lazy);
        free(s->caps);
        free(s->srcs);
        free(s->by_name);
    }
    s->lazy = lazy;
    s->caps = caps;
    s->srcs = srcs;
    s->by_name = by_name;
    s->ncaps = n;
    return rc;
}

#endif

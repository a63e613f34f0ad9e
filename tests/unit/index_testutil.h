/*
 * What the index tests share: the re-read (whether the reader can use an
 * opened snapshot's index, decided again as ulp_snapshot_open() decides
 * it), a capture added through the writer, where the records lie.
 * Include after cmocka.h.
 */
#ifndef ULPPROF_TESTS_INDEX_TESTUTIL_H
#define ULPPROF_TESTS_INDEX_TESTUTIL_H

#include <stdlib.h>

#include "analyzer/snapshot_priv.h"
#include "capture_testutil.h"
#include "collector/writer.h"
#include "common/index.h"
#include "common/journal.h"
#include "ulpprof/diff.h"

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

/* Adds capture `d` to `w`, its elements tu_fill()'s pattern. */
static inline void tu_writer_add(ulp__writer *w, ulp_capture_desc *d)
{
    size_t n = 1;
    for (int i = 0; i < d->ndim; i++)
        n *= (size_t)d->shape[i];
    size_t bytes = n * ulp_dtype_size(d->dtype);
    void *data = calloc(1, bytes ? bytes : 1);
    tu_fill(d->dtype, data, n);
    ulp_error err;
    ulp_status st = ulp__writer_add(w, d, data, bytes, NULL, &err);
    if (st != ULP_OK)
        fprintf(stderr, "%s\n", err.msg);
    assert_int_equal(st, ULP_OK);
    free(data);
}

/* A ulp_diff_stream() callback that takes every batch and keeps nothing. */
static inline ulp_status tu_diff_sink(void *ctx, const ulp_diff_row *rows, size_t first, size_t n,
                                      ulp_error *err)
{
    (void)ctx;
    (void)rows;
    (void)first;
    (void)n;
    (void)err;
    return ULP_OK;
}

/* File offset of the first byte of `path`'s /index/records. */
static inline uint64_t records_offset(const char *path)
{
    hid_t f = tu_open(path);
    hid_t d = H5Dopen2(f, ULP__INDEX_RECORDS, H5P_DEFAULT);
    haddr_t addr = H5Dget_offset(d);
    if (addr == HADDR_UNDEF) {
        hsize_t coord = 0, size = 0;
        unsigned mask = 0;
        assert_true(H5Dget_chunk_info_by_coord(d, &coord, &mask, &addr, &size) >= 0);
    }
    H5Dclose(d);
    H5Fclose(f);
    assert_true(addr != HADDR_UNDEF);
    return (uint64_t)addr;
}

#endif

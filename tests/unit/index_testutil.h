/*
 * What the index tests share: the re-read (whether the reader can use an
 * opened snapshot's index, decided again as ulp_snapshot_open() decides
 * it), a capture added through the writer, where the records lie, an
 * edit that keeps the file's size.
 * Include after cmocka.h.
 */
#ifndef ULPPROF_TESTS_INDEX_TESTUTIL_H
#define ULPPROF_TESTS_INDEX_TESTUTIL_H

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture_testutil.h"
#include "common/le.h"
#include "format/index.h"
#include "format/journal.h"
#include "format/open_map.h"
#include "format/snapshot_file.h"
#include "format/snapshot_priv.h"
#include "format/writer.h"
#include "ulpprof/diff.h"

/* 1 if the file's index is usable: read again into `s`, whose own arrays are kept. */
static inline int index_usable(ulp_snapshot *s)
{
    /* The HDF5 way's own reads, on a snapshot opened from its open map too. */
    assert_true(ulp__snap_file(s) >= 0);
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
static inline void tu_writer_add(ulp__writer *w, ulp__desc *d)
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

/*
 * An edit of `path` through HDF5 opened for writing, as `edit(ctx)` makes
 * it, that keeps the file's size: HDF5 cuts what lies past its end (the
 * open map, FORMAT.md) at close, and it is put back, so that only the
 * seal's hash can find the edit.
 */
static inline void tu_edit_keeping_size(const char *path, void (*edit)(void *), void *ctx)
{
    int fd = open(path, O_RDONLY);
    struct stat sb;
    unsigned char foot[ULP__MAP_FOOTER_BYTES];
    assert_true(fd >= 0 && fstat(fd, &sb) == 0 && (uint64_t)sb.st_size > sizeof foot);
    uint64_t size = (uint64_t)sb.st_size, keep = 0;
    assert_int_equal(ulp__journal_pread(fd, foot, sizeof foot, size - sizeof foot), 0);
    if (memcmp(foot, ULP__MAP_MAGIC, 8) == 0)
        keep = sizeof foot + ulp__le64_get(foot + 8);
    unsigned char *tail = malloc(keep ? keep : 1);
    assert_int_equal(ulp__journal_pread(fd, tail, keep, size - keep), 0);
    close(fd);
    edit(ctx);
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0 && fstat(fd, &sb) == 0);
    if (keep > 0 && (uint64_t)sb.st_size == size - keep)
        assert_int_equal(ulp__journal_pwrite(fd, tail, keep, size - keep), 0);
    assert_true(fstat(fd, &sb) == 0 && (uint64_t)sb.st_size == size);
    close(fd);
    free(tail);
}

#endif

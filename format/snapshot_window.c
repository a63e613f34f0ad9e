/*
 * Read-ahead windows for small views (snapshot_read_priv.h): one pread(2)
 * of up to ULP__WINDOW_BYTES serves every small capture that lies in it.
 * A file of 10,000 captures of 512 bytes was 20,000 preads for diff.
 */
#include <stdlib.h>
#include <string.h>

#include "journal.h"
#include "snapshot_priv.h"
#include "snapshot_read_priv.h"

/* Window starts are aligned so that an element aligned in the file is aligned in memory. */
#define WINDOW_ALIGN 64

uint64_t ulp__snapshot_offset(const ulp_snapshot *s, size_t i)
{
    const ulp__capture_src *src = NULL;
    if (s == NULL || ulp__snap_cap(s, i, &src) == NULL || src->offset == ULP__NO_OFFSET)
        return UINT64_MAX;
    return src->offset;
}

void ulp__window_free(ulp__window *w)
{
    free(w->buf);
    w->buf = NULL;
    w->len = 0;
}

ulp_status ulp__snapshot_view_small(const ulp_snapshot *s, ulp__window *w, size_t i, uint64_t first,
                                    uint64_t count, void *buf, const void **out, ulp_error *err)
{
    const ulp__capture_src *src = NULL;
    const ulp_capture_info *c = s != NULL ? ulp__snap_cap(s, i, &src) : NULL;
    if (c == NULL || src->offset == ULP__NO_OFFSET)
        return ulp_snapshot_view(s, i, first, count, buf, out, err);
    uint64_t esize = ulp_dtype_size(c->dtype);
    uint64_t off = src->offset + first * esize;
    if (esize == 0 || first > c->elements || count > c->elements - first ||
        count * esize > ULP__VIEW_COPY_BYTES)
        return ulp_snapshot_view(s, i, first, count, buf, out, err);
    uint64_t bytes = count * esize;
    if (w->buf == NULL || off < w->off || off + bytes > w->off + w->len) {
        if (w->buf == NULL && (w->buf = malloc(ULP__WINDOW_BYTES)) == NULL)
            return ulp_snapshot_view(s, i, first, count, buf, out, err);
        /* Open checked that the capture lies inside the file. */
        uint64_t start = off - off % WINDOW_ALIGN, left = s->file_size - start;
        size_t n = left < ULP__WINDOW_BYTES ? (size_t)left : ULP__WINDOW_BYTES;
        if (w->upto >= off + bytes && w->upto - start < n)
            n = (size_t)(w->upto - start);
        w->off = start;
        w->len = n;
        /* Short (the file shrank) or failed: ulp_snapshot_read says why. */
        if (ulp__journal_pread(s->fd, w->buf, n, start) != 0) {
            w->len = 0;
            return ulp_snapshot_view(s, i, first, count, buf, out, err);
        }
    }
    *out = w->buf + (off - w->off);
    /* A capture at an offset that is not a multiple of its element size (the
     * writer's files place them so past a few thousand captures) would be
     * misaligned loads: it is copied out of the window, not read again. */
    if (off % esize != 0) {
        memcpy(buf, *out, bytes);
        *out = buf;
    }
    return ULP_OK;
}

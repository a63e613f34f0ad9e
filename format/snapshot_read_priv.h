/*
 * What the comparison needs to know of snapshot_read.c's mapped views.
 * Not installed.
 */
#ifndef ULPPROF_FORMAT_SNAPSHOT_READ_PRIV_H
#define ULPPROF_FORMAT_SNAPSHOT_READ_PRIV_H

#include <stdint.h>

#include "ulpprof/snapshot.h"

/*
 * ulp_snapshot_view_release() drops whole spans of this many bytes (of the
 * mapping's addresses): the most one page fault maps, a page table's span.
 * Views that start and end on such boundaries share no page.
 */
#define ULP__VIEW_SPAN ((uintptr_t)2 << 20)

/* ulp_snapshot_view() copies views of at most this many bytes (pread(2)). */
#define ULP__VIEW_COPY_BYTES ((uint64_t)64 << 10)

/* The snapshot's capture indices in (name, occurrence) order. */
const size_t *ulp__snapshot_by_name(const ulp_snapshot *s);

/*
 * The address of element `first` of capture `i` in the file's mapping, or
 * NULL where ulp_snapshot_view() of it would be a copy.  Nothing is read.
 */
const void *ulp__snapshot_mapped(const ulp_snapshot *s, size_t i, uint64_t first);

/*
 * A read-ahead window of one snapshot, for one thread (snapshot_window.c).
 * Zero-initialize; ulp__window_free() when done.
 */
#define ULP__WINDOW_BYTES ((size_t)256 << 10)
typedef struct ulp__window {
    uint64_t off, len; /* the file bytes buf holds */
    unsigned char *buf;
    /* Not 0: a read need not pass this file offset (the bytes after it
     * are another thread's); the caller sets it before a view. */
    uint64_t upto;
} ulp__window;
void ulp__window_free(ulp__window *w);
/* The file offset of element 0 of a contiguous capture i (what a window
 * reads it from); UINT64_MAX when it has none. */
uint64_t ulp__snapshot_offset(const ulp_snapshot *s, size_t i);

/*
 * ulp_snapshot_view() for a view of at most ULP__VIEW_COPY_BYTES of a
 * contiguous capture: *out points into the window, which reads ahead when
 * the view is not in it, so that neighbouring small captures cost one
 * read.  Valid until the next call with the same window.  A view whose
 * elements are misaligned in the file is copied from the window into buf
 * (count elements).  Other views go to ulp_snapshot_view() (release them
 * as its views).
 */
ulp_status ulp__snapshot_view_small(const ulp_snapshot *s, ulp__window *w, size_t i, uint64_t first,
                                    uint64_t count, void *buf, const void **out, ulp_error *err);

#endif /* ULPPROF_FORMAT_SNAPSHOT_READ_PRIV_H */

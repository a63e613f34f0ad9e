/*
 * What the comparison needs to know of snapshot_read.c's mapped views.
 * Not installed.
 */
#ifndef ULPPROF_ANALYZER_SNAPSHOT_READ_PRIV_H
#define ULPPROF_ANALYZER_SNAPSHOT_READ_PRIV_H

#include <stdint.h>

#include "ulpprof/snapshot.h"

/*
 * ulp_snapshot_view_release() drops whole spans of this many bytes (of the
 * mapping's addresses): the most one page fault maps, a page table's span.
 * Views that start and end on such boundaries share no page.
 */
#define ULP__VIEW_SPAN ((uintptr_t)2 << 20)

/*
 * The address of element `first` of capture `i` in the file's mapping, or
 * NULL where ulp_snapshot_view() of it would be a copy.  Nothing is read.
 */
const void *ulp__snapshot_mapped(const ulp_snapshot *s, size_t i, uint64_t first);

#endif /* ULPPROF_ANALYZER_SNAPSHOT_READ_PRIV_H */

/*
 * What a comparison needs to know of a whole snapshot without walking its
 * captures: per distinct name, how many captures it has and whether their
 * occurrences and positions let them be paired as they stream by
 * (diff_lean.c).  Not installed.
 *
 * Why it exists: pairing 100,000 captures through per-capture tables (by
 * name, used flags) held about 1 KiB of memory per capture pair.  A
 * pairing that walks A and B in seq order needs only these per-name facts,
 * and a capture table that is made in pages and let go behind the walk
 * (ulp__snapshot_trim()) keeps the memory flat in the capture count.
 */
#ifndef ULPPROF_FORMAT_SNAPSHOT_SUMMARY_H
#define ULPPROF_FORMAT_SNAPSHOT_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "name_summary.h"
#include "ulpprof/snapshot.h"

/*
 * The summary of `s`: made once, on the first call (or by the open), and
 * kept until the close; NULL when out of memory.  Safe to call from any
 * thread.
 */
const ulp__snapshot_summary *ulp__snapshot_summary_get(const ulp_snapshot *s);

/*
 * The summary of a capture table made in pages (snapshot_pages.c), from
 * its open's pass; NULL when s's table was read whole (then walk it).
 */
const ulp__snapshot_summary *ulp__snapshot_summary_lazy(const ulp_snapshot *s);

/*
 * Lets captures [0, below) of s go: a capture table made in pages may free
 * those pages (ulp_snapshot_capture() makes them again when asked).  No
 * pointer into those captures may be held, and no other thread may use
 * them, during the call.  Does nothing to a table read whole.
 */
void ulp__snapshot_trim(const ulp_snapshot *s, size_t below);

/* Whether the caller let a diff trim s (ulp_snapshot_open_stream()): no
 * one else holds pointers into its captures or uses it meanwhile. */
int ulp__snapshot_trim_allowed(const ulp_snapshot *s);

#endif /* ULPPROF_FORMAT_SNAPSHOT_SUMMARY_H */

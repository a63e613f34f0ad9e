/*
 * The digest comparison (ulpprof/digest.h) with rows left out: those of a
 * request at or after a position, where two token streams parted and the
 * rows were fed other tokens (ladder_streams.h).
 */
#ifndef ULPPROF_ANALYZER_DIGEST_COMPARE_H
#define ULPPROF_ANALYZER_DIGEST_COMPARE_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/digest.h"

/* Per request (sorted ascending, distinct), the first position left out. */
typedef struct ulp__digest_cuts {
    size_t n;
    const int64_t *request, *position;
} ulp__digest_cuts;

/*
 * As ulp_digest_compare(), leaving out on both sides every row with
 * positions whose request has a cut at or before its position; *after
 * (when not NULL) gets how many of A's rows were left out.  cuts NULL:
 * none left out.
 */
ulp_status ulp__digest_compare_cut(const char *pa, const char *pb, const ulp__digest_cuts *cuts,
                                   uint64_t *after, ulp_digest_result **out, ulp_error *err);

#endif /* ULPPROF_ANALYZER_DIGEST_COMPARE_H */

/*
 * The digest comparison (ulpprof/digest.h) with rows left out: those of a
 * request at or after the position where the two token streams part
 * (digest_parts.h), the rows there having been fed other tokens.
 */
#ifndef ULPPROF_ANALYZER_DIGEST_COMPARE_H
#define ULPPROF_ANALYZER_DIGEST_COMPARE_H

#include <stdint.h>

#include "ulpprof/digest.h"
#include "ulpprof/snapshot.h"

/*
 * As ulp_digest_compare() (sa, sb: pa and pb open already, or NULL), leaving
 * out on both sides every row with positions at or after its request's part
 * (res->parts); *after (when not NULL) gets how many of A's rows were left out.
 */
ulp_status ulp__digest_compare_cut(const char *pa, const char *pb, const ulp_snapshot *sa,
                                   const ulp_snapshot *sb, uint64_t *after, ulp_digest_result **out,
                                   ulp_error *err);

#endif /* ULPPROF_ANALYZER_DIGEST_COMPARE_H */

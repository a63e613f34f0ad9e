/*
 * Where the token streams of two snapshots part (ladder.h's
 * ulp_ladder_streams_part): the fed token ids, compared per (name,
 * request) at the positions both sides hold, and the produced `tokens`
 * for the margins.  Requests are matched by number, as `ulpprof diff`
 * matches them.
 */
#ifndef ULPPROF_ANALYZER_LADDER_STREAMS_H
#define ULPPROF_ANALYZER_LADDER_STREAMS_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/ladder.h"
#include "ulpprof/snapshot.h"

typedef struct ulp__ladder_parts {
    size_t n;                      /* requests whose fed tokens differ                */
    int64_t *request;              /* [n] ascending                                   */
    int64_t *position;             /* [n] the first position fed otherwise (any name) */
    ulp_ladder_streams_part first; /* the lowest request's; source owned here      */
} ulp__ladder_parts;

/* Finds the parts of sa against sb; out->n = 0 when none (or no fed ids). */
ulp_status ulp__ladder_streams_find(const ulp_snapshot *sa, const ulp_snapshot *sb, int rank,
                                    ulp__ladder_parts *out, ulp_error *err);
void ulp__ladder_parts_free(ulp__ladder_parts *p);

#endif /* ULPPROF_ANALYZER_LADDER_STREAMS_H */

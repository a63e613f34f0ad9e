/* Internals of `ulpprof ladder` (ladder_pairs.c, ladder_verdict.c). */
#ifndef ULPPROF_LADDER_PRIV_H
#define ULPPROF_LADDER_PRIV_H

#include "ulpprof/ladder.h"

/*
 * Once every pair is compared: what each pair decides, the groups of
 * bitwise-identical runs and the verdict of each rung (ladder.h).
 */
ulp_status ulp__ladder_decide(ulp_ladder_result *r, ulp_error *err);

#endif /* ULPPROF_LADDER_PRIV_H */

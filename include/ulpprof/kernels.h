/*
 * ulpprof kernels: aligns the kernel traces (/trace/kernels) of two
 * snapshots and says where they part -- typically a GEMM whose tile,
 * split-K or grid changed with the batch or the cached prefix.
 *
 * Two launches match when their name, grid and block are equal.  The
 * alignment is a longest common subsequence, computed as a shortest edit
 * script (Myers' O((N+M)D) greedy algorithm) after trimming the common
 * prefix and suffix.
 */
#ifndef ULPPROF_KERNELS_H
#define ULPPROF_KERNELS_H

#include <stddef.h>

#include "ulpprof/export.h"
#include "ulpprof/snapshot.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Edit distance beyond which the full alignment is not attempted (memory
 * grows as D^2); the first divergence is still exact. */
#define ULP_KERNELS_MAX_EDITS 2000

typedef enum ulp_kernels_op {
    ULP_KERNELS_SAME = 0, /* a launch in both: a and b set                   */
    ULP_KERNELS_ONLY_A,   /* a launch only in A: a set                       */
    ULP_KERNELS_ONLY_B    /* a launch only in B: b set                       */
} ulp_kernels_op;

typedef struct ulp_kernels_step {
    ulp_kernels_op op;
    size_t a, b; /* trace row in A and in B (0 on the side it lacks)     */
} ulp_kernels_step;

typedef struct ulp_kernels_alignment {
    size_t launches_a, launches_b; /* rows of each trace                       */
    int identical;                 /* the same launches in the same order      */
    int aligned;                   /* the edit script was computed: identical,
                                      or at most ULP_KERNELS_MAX_EDITS apart   */
    size_t first_divergence;       /* rows in common before the first that
                                      differs, in both (launches_a when
                                      identical)                                */
    size_t common;                 /* launches in both, in order (when aligned;
                                      else the common prefix and suffix)       */
    size_t only_a, only_b;         /* launches only in A, only in B (aligned)  */
    size_t n_steps;                /* the whole script, in order: set when
                                      aligned and not identical, else 0        */
    ulp_kernels_step *steps;       /* owned by the alignment                   */
} ulp_kernels_alignment;

/*
 * Aligns the kernel traces of `a` and `b` (either may have none: zero
 * launches).  On success *out owns a new alignment (release with
 * ulp_kernels_alignment_free()); ULP_ENOMEM otherwise.
 */
ULP_API ulp_status ulp_kernels_align(const ulp_snapshot *a, const ulp_snapshot *b,
                                     ulp_kernels_alignment **out, ulp_error *err);

/* Frees an alignment.  NULL is accepted. */
ULP_API void ulp_kernels_alignment_free(ulp_kernels_alignment *al);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_KERNELS_H */

/*
 * Internals of `ulpprof diff` (diff.c, diff_pair.c, diff_jobs.c,
 * diff_metrics.c, logits.c, ladder.c).  Not installed.
 */
#ifndef ULPPROF_ANALYZER_DIFF_PRIV_H
#define ULPPROF_ANALYZER_DIFF_PRIV_H

#include <stdint.h>
#include <stdio.h>

#include "ulpprof/diff.h"

/*
 * Running element metrics of one tensor pair, over any subset of its
 * elements.  Indices are row-major flat indices into the whole tensor, so
 * accumulators of different chunks merge in any order.
 */
typedef struct ulp__acc {
    uint64_t elements;
    uint64_t differing;
    uint64_t nonfinite; /* nonfinite_mismatch                            */
    uint64_t sign_changes;
    unsigned __int128 sum_ulp; /* over differing finite pairs                   */
    uint64_t max_ulp;
    int64_t max_ulp_flat; /* first index with max_ulp > 0, or -1           */
    int64_t first_dfin;   /* first differing finite pair, or -1            */
    int64_t first_nf;     /* first nonfinite mismatch, or -1               */
    double max_abs_diff;
    int64_t max_abs_diff_flat;         /* -1 while no finite pair differs               */
    double max_abs;                    /* finite elements of both sides (f64, integers) */
    uint64_t max_mag_bits;             /* the same as magnitude bits (other floats)     */
    uint64_t hist[ULP_DIFF_HIST_BINS]; /* bins >= 1 only; bin 0 is derived       */
} ulp__acc;

void ulp__acc_init(ulp__acc *acc);

/*
 * Adds `n` elements of `dtype` that start at flat index `base` to `acc`.
 * `a` and `b` hold raw little-endian bits.
 */
void ulp__acc_add(ulp__acc *acc, ulp_dtype dtype, const void *a, const void *b, uint64_t n,
                  uint64_t base);

/* Merges `src` into `dst`; the result does not depend on the merge order. */
void ulp__acc_merge(ulp__acc *dst, const ulp__acc *src);

/*
 * Turns an accumulator into the public metrics (derives hist[0], the mean,
 * the ULP-at-max figure).  The worst element's bits are not filled here.
 */
void ulp__acc_finish(const ulp__acc *acc, ulp_dtype dtype, int ndim, const int64_t *shape,
                     ulp_diff_metrics *m);

/* The most worker threads ulp_diff_run() starts, whatever it is asked. */
#define ULP__DIFF_MAX_THREADS 64

/* diff_pair.c: a row whose two captures are compared element by element. */
typedef struct ulp__diff_pair {
    size_t row;    /* index into the result's rows                     */
    size_t ia, ib; /* capture indices in A and in B                    */
} ulp__diff_pair;

/*
 * diff_pair.c: fills r->rows and the row counts by pairing A and B under
 * `opts` (filters); the rows to compare go to a new array *pairs (the
 * caller frees it, whatever the status) of *npairs, in row order.
 */
ulp_status ulp__diff_pair_rows(const ulp_snapshot *a, const ulp_snapshot *b,
                               const ulp_diff_options *opts, ulp_diff_result *r,
                               ulp__diff_pair **pairs, size_t *npairs, ulp_error *err);

/*
 * diff_jobs.c: the element metrics of every pair on opts->threads threads
 * (options resolved: threads >= 1, chunk_elements > 0): each row's
 * metrics, status and worst element, and r->bytes_read.
 */
ulp_status ulp__diff_metrics(const ulp_snapshot *a, const ulp_snapshot *b,
                             const ulp_diff_options *opts, ulp_diff_result *r,
                             const ulp__diff_pair *pairs, size_t npairs, ulp_error *err);

/* logits.c: analyses one logits pair; `lg` gets the per-row data. */
ulp_status ulp__logits_run(const ulp_snapshot *a, size_t ia, const ulp_snapshot *b, size_t ib,
                           const ulp_diff_options *opts, ulp_diff_logits *lg, ulp_error *err);

/* logits.c: per-row core on doubles, exposed for the unit tests. */
typedef struct ulp__logits_row {
    int64_t argmax_a, argmax_b;
    double margin_a, margin_b;
    double max_perturbation;
} ulp__logits_row;
void ulp__logits_row_stats(const double *za, const double *zb, uint64_t vocab,
                           ulp__logits_row *out);
/* logits_row.c: the same from float32 rows, vectorized (vocab < 2^32). */
void ulp__logits_row_f32(const float *za, const float *zb, uint64_t vocab, ulp__logits_row *out);
/* Total variation and P(inverse-CDF picks differ) at temperature t.
 * `work` holds 2 * vocab doubles. */
void ulp__logits_sampling(const double *za, const double *zb, uint64_t vocab, double t,
                          double *work, double *tv, double *p_differ);
void ulp__logits_free(ulp_diff_logits *lg);

/* ladder.c */
ulp_status ulp__ladder_run(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_ladder *l,
                           ulp_error *err);
void ulp__ladder_free(ulp_diff_ladder *l);

#endif /* ULPPROF_ANALYZER_DIFF_PRIV_H */

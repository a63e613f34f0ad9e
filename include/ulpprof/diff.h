/*
 * ulpprof diff: compares two snapshots (FORMAT.md "Pairing and comparison
 * semantics") and describes where they diverge, how the divergence grows
 * and why a greedy token flipped.
 *
 * ulp_diff_run() pairs the captures of A and B by name and occurrence,
 * streams both tensors' raw bits in bounded chunks on a few threads, and
 * fills an ulp_diff_result: one row per capture (A's seq order, then the
 * captures only B has, in B's seq order), the first divergence, an
 * amplification summary, a logits analysis per logits capture, the
 * determinism-ladder rung the pair tests and, when the files carry a kernel
 * trace, the kernels that produced the first diverging capture.
 * ulpprof/report.h renders a result as a table, Markdown, CSV or JSON.
 *
 * The result is plain data meant to be read directly (plots, `ulpprof demo`):
 * its fields are documented here and only ever added to.
 */
#ifndef ULPPROF_DIFF_H
#define ULPPROF_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ulpprof/dtype.h"
#include "ulpprof/export.h"
#include "ulpprof/snapshot.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * ULP histogram bins: bin 0 holds distance 0, bin 1 distance 1, bin 2
 * distance 2, and bin k >= 3 distances (2^(k-2), 2^(k-1)] -- 3-4, 5-8,
 * 9-16, ...  Distances of f64 reach 2^64 - 2, hence 66 bins.
 */
#define ULP_DIFF_HIST_BINS        66
#define ULP_DIFF_MAX_TEMPERATURES 16
#define ULP_DIFF_MAX_TOPK         8

/* Lower and upper ends (inclusive) of histogram bin `k`. */
ULP_API uint64_t ulp_diff_hist_lo(int k);
ULP_API uint64_t ulp_diff_hist_hi(int k);
/* The bin that ULP distance `d` falls in. */
ULP_API int ulp_diff_hist_bin(uint64_t d);

/*
 * The instruction-set level the comparison kernels run at: "x86-64-v4"
 * (AVX-512), "x86-64-v3" (AVX2) or "baseline" (x86-64 SSE2, or any other
 * CPU).  The best the CPU has, chosen once per process, unless the
 * environment's ULPPROF_ISA names a lower one (the results are the same at
 * every level; only the speed differs).  When ULPPROF_ISA names a level
 * that is unknown, or one the CPU or this build lacks, *why (when `why` is
 * not NULL) is set to a static sentence saying so and the best level is
 * used; otherwise *why is NULL.  ulp_diff_isa_best(): the best level this
 * CPU and build have.
 */
ULP_API const char *ulp_diff_isa(const char **why);
ULP_API const char *ulp_diff_isa_best(void);

typedef enum ulp_diff_status {
    ULP_DIFF_IDENTICAL = 0,  /* every element's bits are equal                 */
    ULP_DIFF_DIFFERS,        /* same shape and dtype, some bits differ         */
    ULP_DIFF_SHAPE_MISMATCH, /* same dtype, different shapes: not compared     */
    ULP_DIFF_DTYPE_MISMATCH, /* different dtypes: not compared                 */
    ULP_DIFF_ONLY_IN_A,
    ULP_DIFF_ONLY_IN_B
} ulp_diff_status;

/* "identical", "differs", "shape_mismatch", ... (FORMAT.md JSON names). */
ULP_API const char *ulp_diff_status_name(ulp_diff_status status);

/*
 * Sized as the structs of ulpprof/capture.h are: struct_size is the
 * caller's sizeof, set by ulp_diff_options_init(); the library reads only
 * the fields it covers, the defaults for the rest; the first version ends
 * at `match`.
 */
typedef struct ulp_diff_options {
    size_t struct_size; /* sizeof(ulp_diff_options), set by _init()          */
    const char *match;  /* fnmatch(3) glob on capture names; NULL: all
                           (the first version ends here)                      */
    const char *role;   /* only captures of this role; NULL: all             */
    double temperatures[ULP_DIFF_MAX_TEMPERATURES]; /* > 0, for logits sampling    */
    int n_temperatures;
    int threads;             /* worker threads; 0: online CPUs, at most 8         */
    uint64_t chunk_elements; /* read size, in 2-byte elements (a buffer holds
                                2 * chunk_elements bytes; 4-byte types read half
                                as many elements); 0: 1 Mi.  Memory is 2 buffers
                                per thread whatever the tensor sizes            */
    int progress;            /* 1: progress on stderr                             */
    const char *rows;        /* "head:N", "tail:N" or "A:B": that slice of the
                                token axis (the next-to-last, or the only one)
                                of captures without positions; NULL: whole   */
    int by;                  /* ulp_diff_by: how captures pair                    */
    const char *site_map;    /* a site map file (ulpprof/sites.h) for ULP_DIFF_BY_AUTO
                                and _SITE, its rules before the built-in ones; NULL:
                                the built-in rules                                */
    /* Whole distributions at the logits (ulp_diff_dist): 1 to compute them.
     * topk: the k of the top-k overlaps, n_topk of them (0: 1, 5, 10). */
    int distributions;
    int topk[ULP_DIFF_MAX_TOPK];
    int n_topk;
} ulp_diff_options;

/*
 * How captures pair (docs/sites.md).  AUTO: by name the captures whose
 * name the other snapshot has, and by (site, layer) the others when one
 * of their sites (or its fused site) is on the other side too; else by
 * name alone.  SITE: by (site, layer) and occurrence; a capture no rule
 * knows pairs by its name.
 */
typedef enum ulp_diff_by { ULP_DIFF_BY_AUTO = 0, ULP_DIFF_BY_NAME, ULP_DIFF_BY_SITE } ulp_diff_by;

/*
 * Fills the caller's `opts` of `size` bytes (its sizeof) with the defaults
 * above; ULP_EINVAL below the first version's size.  The macro passes
 * sizeof *opts.
 */
ULP_API ulp_status ulp_diff_options_init_sized(ulp_diff_options *opts, size_t size);
#define ulp_diff_options_init(opts) ((void)ulp_diff_options_init_sized((opts), sizeof *(opts)))

/*
 * Element metrics of one row.  All counts are over element pairs (same
 * index in A and B).  "Finite pair": both elements finite.  For integer
 * dtypes every value is finite and the "ULP" distance is |a - b|.
 */
typedef struct ulp_diff_metrics {
    uint64_t differing;                /* bit patterns differ (+0/-0 do, NaN payloads do)   */
    uint64_t nonfinite_mismatch;       /* bits differ and a or b is NaN or inf              */
    uint64_t max_ulp;                  /* over finite pairs; ordered-integer distance       */
    double mean_ulp;                   /* sum of ULP over differing finite pairs, divided
                                          by their count (differing - nonfinite_mismatch);
                                          0 when there are none                             */
    uint64_t hist[ULP_DIFF_HIST_BINS]; /* every pair except the nonfinite_mismatch
                                     ones, by ULP distance; bitwise-identical pairs
                                     (NaN or inf included) count as 0 ULP, so
                                     sum(hist) + nonfinite_mismatch == elements        */
    uint64_t sign_changes;             /* finite pairs whose sign bits differ and whose
                                          ULP distance is not 0 (so +0/-0 is not one)        */
    double max_abs_diff;               /* max |a - b| over finite pairs, in double; 0 when
                                          no finite pair differs (f64 may overflow to inf;
                                          the JSON report then writes DBL_MAX)             */
    double max_abs;                    /* largest |value| over finite elements of A and B  */
    double max_abs_diff_ulps_at_max;   /* max_abs_diff / ulp_dtype_ulp_at(dtype, max_abs) */
    int64_t worst_flat;                /* row-major index of the first element with
                                          max_ulp among differing finite pairs; when there
                                          are none, of the first nonfinite mismatch; when
                                          identical, -1                                      */
    int64_t worst_index[ULP_SNAPSHOT_MAX_RANK]; /* worst_flat as a multi-index        */
    uint64_t worst_bits_a, worst_bits_b;        /* raw bits there                      */
    double worst_a, worst_b;   /* values there                                      */
    int64_t max_abs_diff_flat; /* first element with max_abs_diff; -1 when none     */
} ulp_diff_metrics;

typedef struct ulp_diff_kernel {
    const char *name; /* owned by the result                               */
    int32_t grid[3];
    int32_t block[3];
} ulp_diff_kernel;

/*
 * Where a difference at one (request, position) of an aligned row came from
 * (FORMAT.md, "Aligned diff"), judged from the `inputs` the capture lists:
 * each input is compared on the same request at positions up to this one
 * (the residual path and, through attention, the earlier positions).
 */
typedef enum ulp_diff_origin {
    ULP_DIFF_ORIGIN_NONE = 0,     /* the key does not differ                       */
    ULP_DIFF_ORIGIN_INTRODUCED,   /* every input captured and identical there      */
    ULP_DIFF_ORIGIN_CARRIED_IN,   /* an input differs there                        */
    ULP_DIFF_ORIGIN_NOT_CAPTURED, /* inputs identical where compared, but one side
                                     lacks an input's row (e.g. a cached prefix)   */
    ULP_DIFF_ORIGIN_UNKNOWN       /* the capture lists no inputs                   */
} ulp_diff_origin;

/* "introduced", "carried_in", "not_captured", "unknown"; NULL for NONE. */
ULP_API const char *ulp_diff_origin_name(ulp_diff_origin origin);

/* One (request, position) both sides of an aligned row captured. */
typedef struct ulp_diff_key {
    int64_t request, position;
    int64_t occurrence_a, occurrence_b; /* the captures that held the row       */
    int differs;                        /* some bits of the row differ          */
    ulp_diff_origin origin;
    int origin_input; /* index into the row's inputs of the input that carried the
                         difference in or lacks a row; -1 when none           */
} ulp_diff_key;

typedef struct ulp_diff_row {
    const char *name; /* owned by the result                               */
    int64_t occurrence;
    int64_t seq_a, seq_b;       /* -1 for the side that lacks the capture            */
    int32_t layer;              /* -1 when absent (from A, else B)                   */
    const char *role;           /* owned by the result                               */
    ulp_dtype dtype_a, dtype_b; /* ULP_DTYPE_INVALID on the side that lacks it       */
    int ndim_a, ndim_b;
    int64_t shape_a[ULP_SNAPSHOT_MAX_RANK];
    int64_t shape_b[ULP_SNAPSHOT_MAX_RANK];
    uint64_t elements; /* of A (of B for only_in_b)                         */
    ulp_diff_status status;
    ulp_diff_metrics m; /* zeros unless status is identical or differs       */
    /* Kernels attributed to the capture ([first,last) of /trace/kernels). */
    int has_kernels_a, has_kernels_b;
    size_t n_kernels_a, n_kernels_b;
    ulp_diff_kernel *kernels_a, *kernels_b; /* owned by the result                  */

    /*
     * Aligned rows: every capture of the name on both sides has positions;
     * the row stands for all its occurrences (`occurrence` is A's first) and
     * compares the rows of the (request, position) keys both sides have, in
     * key order.  shape_a/shape_b are then [positions_compared, row axes...]
     * and worst_index indexes that.
     */
    int aligned;
    uint64_t positions_compared, positions_only_in_a, positions_only_in_b;
    uint64_t positions_differing;
    uint64_t positions_parted;             /* keys both sides have, not compared: they follow
                                              token streams that parted (ulp_diff_part)   */
    int64_t first_request, first_position; /* first differing key; -1 when none      */
    int64_t worst_request, worst_position; /* key of the worst element; -1 when none */
    size_t n_keys;
    ulp_diff_key *keys;     /* [n_keys] compared keys; owned by the result   */
    size_t n_inputs;        /* the inputs A's captures list                  */
    const char **inputs;    /* owned by the result                           */
    ulp_diff_origin origin; /* of the first differing key                    */
    /* For origin not_captured: the input to capture next, on both sides, at
     * request capture_request, positions [capture_first, capture_last]. */
    const char *capture_next; /* points into inputs; NULL when none            */
    int64_t capture_request, capture_first, capture_last;
    const char *positions_in; /* "a" or "b" when only that side has positions
                                 (compared by occurrence); NULL otherwise     */
    /* `--rows`: the token axis compared, rows [first, first + count) of each side. */
    int sliced;
    int token_axis;
    int64_t slice_first_a, slice_first_b, slice_rows;
    const char *hint; /* for a shape mismatch: what would compare it; or NULL */
    /* GEMM calls attributed to the capture ([first,last) of /trace/gemms). */
    int has_gemms_a, has_gemms_b;
    size_t n_gemms_a, n_gemms_b;
    ulp_gemm_info *gemms_a, *gemms_b; /* owned by the result                        */
    /* Paired by site: the row's site ("q", "logits"; its layer is `layer`) and
     * B's name (`name` is A's; B's for only_in_b), both owned by the result;
     * NULL when paired by name, and the site NULL for a capture no rule knows. */
    const char *site;
    const char *name_b;
    /*
     * Two float dtypes where one holds every value of the other (f32 and
     * bf16, f16 and f8e4m3, ...; FORMAT.md "Different dtypes"): the finer
     * side is rounded to the coarser one (to nearest, ties to even) and `m`
     * describes the coarser format's bit patterns of both sides -- its ULPs,
     * worst bits and values.  The status is then differs, even where every
     * element rounds to the other side's: the runs stored different formats.
     */
    int rounded;                    /* 1 when compared so; 0: same dtypes, bits compared   */
    ulp_dtype compared_dtype;       /* the coarser dtype (when rounded)                    */
    int rounded_side;               /* 0: A's side was rounded, 1: B's                     */
    uint64_t rounded_equal;         /* elements whose rounded bits equal the other side's */
    double max_abs_diff_fine;       /* max |fine - coarse| over pairs where both are
                                       finite, the coarse value widened exactly, in double;
                                       0 when none differs                                */
    int64_t max_abs_diff_fine_flat; /* first element with it; -1 when none              */
    /* Paired by site across layouts (docs/sites.md "Layouts"): how the
     * site's tensor was made out of side `layout_side`'s captures ("q of qkv
     * q|k|v", "2 column shards concatenated"), owned by the result; NULL
     * when both sides hold the tensor itself.  shape_a and shape_b are then
     * the tensor's shape, and `name` (or name_b) the fused capture, or
     * shard 0. */
    const char *layout;
    int layout_side; /* 0: A's captures were split or joined, 1: B's */
} ulp_diff_row;

/*
 * A flipped logits row -- the token emitted (argmax, lowest index on ties)
 * differs -- and why it flipped.  A row where one run's top two are tied
 * is a flip like any other (tied_a / tied_b say which run was tied).
 */
typedef struct ulp_diff_flip {
    uint64_t row;
    int64_t argmax_a, argmax_b;
    double margin_a, margin_b;    /* top-1 minus top-2 of A's row and of B's row       */
    double gap_a;                 /* z_A[argmax_a] - z_A[argmax_b]  (>= 0)             */
    double gap_b;                 /* z_B[argmax_a] - z_B[argmax_b]  (<= 0)             */
    double gap_perturbation;      /* gap_b - gap_a                                     */
    double magnitude;             /* max |z| of the two candidates in A and B          */
    double gap_perturbation_ulps; /* |gap_perturbation| / ulp_at(dtype, magnitude)    */
    int tied_a, tied_b;           /* that run's top two are equal (margin 0): it emits
                                     the lower index of the tied tokens              */
    int64_t request, position;    /* the row's key (aligned logits: the compared key;
                                     else the row's positions when one capture with
                                     positions on both sides holds the row); -1 when
                                     unknown                                           */
} ulp_diff_flip;

typedef struct ulp_diff_sampling {
    double temperature;
    double *tv;       /* [rows] total-variation distance                   */
    double *p_differ; /* [rows] P(inverse-CDF sampling with one uniform
                         draw picks different tokens)                      */
    double tv_mean, tv_max;
    double p_differ_mean, p_differ_max;
} ulp_diff_sampling;

/* A per-row measure summarized over the rows (NaN rows left out). */
typedef struct ulp_diff_dist_stat {
    double max, mean;
    int64_t max_row; /* first row with the max; -1 when no row has a number */
} ulp_diff_dist_stat;

/*
 * Whole-distribution measures of a logits pair (FORMAT.md "Logits
 * distributions"), per row and over the rows.  Softmax at temperature 1 in
 * double, log-sum-exp stable; NaN logits have probability 0.
 */
typedef struct ulp_diff_dist {
    double *kl_ab, *kl_ba; /* [rows] KL(A||B), KL(B||A) in nats (inf where one side
                              gives 0 to a token the other does not)          */
    double *dlogp_top;     /* [rows] |log p_A - log p_B| at A's argmax           */
    double *mean_abs;      /* [rows] mean |z_A - z_B| over pairs both finite     */
    double *rel_diff;      /* [rows] 1 - 2 sum(xy) / sum(x^2 + y^2), finite pairs;
                              0 when the sum is 0.  Reads 0 (to double precision)
                              for differences well below 1e-8 of the values  */
    ulp_diff_dist_stat kl_ab_s, kl_ba_s, dlogp_top_s, mean_abs_s, rel_diff_s;
    int n_topk;
    int topk[ULP_DIFF_MAX_TOPK];
    double *topk_overlap[ULP_DIFF_MAX_TOPK]; /* [rows] |top-k(A) & top-k(B)| / k, k at
                                                most the vocabulary; ties to the lowest
                                                index, NaN never in a top k */
    double topk_mean[ULP_DIFF_MAX_TOPK], topk_min[ULP_DIFF_MAX_TOPK];
    int64_t topk_min_row[ULP_DIFF_MAX_TOPK];
    double same_top_fraction; /* rows whose argmax agrees, over rows (1 with none) */
} ulp_diff_dist;

typedef struct ulp_diff_logits {
    const char *name; /* owned by the result                               */
    int64_t occurrence;
    size_t row_index; /* index into ulp_diff_result.rows                   */
    ulp_dtype dtype;
    uint64_t rows;  /* product of all axes but the last                  */
    uint64_t vocab; /* last axis                                         */
    /* Per row, [rows] each.  NaN logits are never argmax candidates. */
    int64_t *argmax_a, *argmax_b; /* ties to the lowest index; -1 if the row has no
                                     non-NaN value                                     */
    double *margin_a, *margin_b;  /* inf when vocab == 1; NaN when undefined           */
    double *max_perturbation;     /* max |z_A - z_B| over finite pairs of the row      */
    uint8_t *flipped;             /* argmax_a != argmax_b: the emitted token differs,
                                     ties included                                     */
    uint8_t *tied;                /* flipped where one run's margin is 0: its argmax
                                     is the lowest of its tied tokens               */
    uint8_t *at_risk;             /* not flipped, min(margin_a, margin_b) <
                                     max_perturbation                                  */
    uint64_t argmax_flips;        /* flipped rows, the tied ones included             */
    uint64_t rows_at_risk;
    size_t n_flips;
    ulp_diff_flip *flips; /* [n_flips], in row order                           */
    int n_sampling;
    ulp_diff_sampling sampling[ULP_DIFF_MAX_TEMPERATURES];
    uint64_t argmax_ties; /* flipped rows where a run was tied (of argmax_flips) */
    int has_dist;         /* options.distributions: `dist` is filled               */
    ulp_diff_dist dist;
} ulp_diff_logits;

/* Rungs of the determinism ladder (FORMAT.md /run keys). */
#define ULP_DIFF_LADDER_NONE (-1)

typedef struct ulp_diff_run_key {
    const char *key;     /* owned by the result                               */
    const char *value_a; /* NULL when A lacks the key                         */
    const char *value_b;
    int level; /* rung of this key, ULP_DIFF_LADDER_NONE if none    */
} ulp_diff_run_key;

typedef struct ulp_diff_ladder {
    size_t n_keys;
    ulp_diff_run_key *keys; /* the /run keys whose values differ, sorted         */
    int level;              /* highest rung among them; 0 when no key differs
                               (a repeat); ULP_DIFF_LADDER_NONE when only keys
                               without a rung differ, or neither file has /run */
    const char *level_name; /* "repeat", "batch size", ... or NULL               */
} ulp_diff_ladder;

/* Name of a ladder rung ("repeat", "batch size", "cache", ...), or NULL. */
ULP_API const char *ulp_diff_ladder_name(int level);
/* Rung of a /run key, or ULP_DIFF_LADDER_NONE. */
ULP_API int ulp_diff_ladder_level(const char *key);

typedef struct ulp_diff_amplification {
    int valid;                    /* 1 when first and last below are set               */
    size_t first_row, last_row;   /* indices into rows: the first divergence and the
                                     last compared activation row at or after it       */
    double frac_first, frac_last; /* differing / elements                              */
    double abs_first, abs_last;   /* max_abs_diff                                      */
    double frac_factor;           /* frac_last / frac_first                            */
    double abs_factor;            /* abs_last / abs_first (inf when abs_first is 0)    */
} ulp_diff_amplification;

/*
 * Where the two runs' token streams part (FORMAT.md "Parted token
 * streams"): at `position` of `request` the runs fed different tokens, so
 * that key and every later one of the request follow another token's
 * stream and are not compared (each aligned row counts them in
 * positions_parted).
 */
typedef struct ulp_diff_part {
    int64_t request, position; /* the first position fed another token          */
    int64_t token_a, token_b;  /* the tokens fed there                           */
    int from_ids;              /* 1: from recorded token ids (`source`); 0: the
                                  argmax of `logits` at position - 1, where the
                                  stream's entry (`source`) differs             */
    const char *source;        /* owned by the result                            */
    int has_logits;            /* the logits at (request, position - 1) were compared */
    const char *logits;        /* their name (owned by the result); NULL when none */
    int64_t argmax_a, argmax_b;
    double margin_a, margin_b; /* top-1 minus top-2 there                        */
    int64_t step;              /* A's capture's `step` there; -1 when absent       */
    uint64_t positions_parted; /* positions of the request from `position` on that
                                  `source` holds on both sides                  */
} ulp_diff_part;

/*
 * A request of B compared under another number (FORMAT.md "Requests
 * paired by their tokens"): with recorded token ids, B's request `b` is
 * compared with A's request `a` whose tokens it has (paired 1), or, when
 * no request of A has its tokens and its own number is another pair's,
 * kept apart under the number `a` that no request of either run has
 * (paired 0: its keys are only in B).
 */
typedef struct ulp_diff_request_pair {
    int64_t b, a;
    int paired;
} ulp_diff_request_pair;

typedef struct ulp_diff_result {
    char *path_a, *path_b; /* owned by the result                               */
    char *label_a, *label_b;
    int identical; /* every row identical (vacuously true with no rows) */
    size_t n_rows;
    ulp_diff_row *rows;
    size_t n_shared; /* rows present in both files                        */
    size_t n_only_a, n_only_b;
    int has_first_divergence;
    size_t first_divergence; /* index into rows: first row in A's seq order whose
                                status is differs, shape_ or dtype_mismatch       */
    ulp_diff_amplification amp;
    size_t n_logits;
    ulp_diff_logits *logits;
    ulp_diff_ladder ladder;
    int n_temperatures;
    double temperatures[ULP_DIFF_MAX_TEMPERATURES];
    double seconds;      /* wall time of the comparison                       */
    uint64_t bytes_read; /* both files                                        */
    /*
     * 1 for a result of ulp_diff_stream(): the rows went to its callback,
     * and `rows` keeps only the n_kept rows the fields above point at (the
     * first divergence, the amplification's rows, the logits rows), rows[k]
     * being row kept_index[k] (ascending) of the n_rows; ulp_diff_result_row()
     * finds them.  0 for ulp_diff_run(): `rows` holds all n_rows.
     */
    int streamed;
    size_t n_kept;
    size_t *kept_index;
    /* Parted token streams, by request; a result with any is not identical. */
    size_t n_parts;
    ulp_diff_part *parts;
    /* Element pairs compared over the identical and differing rows: 0 when
     * every capture both files have is empty (or none is shared); a
     * comparison of nothing is no verdict on a ladder rung.             */
    uint64_t elements_compared;
    int by_site; /* 1: the captures were paired by (site, layer) (ulp_diff_by) */
    /* B's requests renumbered onto A's by their tokens, ascending by b;
     * none when every request pairs under its own number. */
    size_t n_request_pairs;
    ulp_diff_request_pair *request_pairs;
    /* The verdict (ulpprof/verdict.h) the reports show, set by the caller after
     * ulp_diff_verdict_compute() and owned by it; NULL: none shown. */
    const struct ulp_diff_verdict *verdict;
    /* Paired by site (by_site): the rows whose `site` is set, paired by
     * (site, layer); the others were paired by name (auto: a name both
     * snapshots have; or a capture no rule knows). */
    size_t n_paired_by_site;
    /* A side that was a tensor-parallel run directory joined into one
     * snapshot (ulp_tp_join(), ulpprof/sites.h): what the join did, set by
     * the caller before the report is written and owned by it; NULL: that
     * side is one snapshot.  The reports show it (docs/sites.md). */
    const struct ulp_tp_join_info *tp_join_a, *tp_join_b;
} ulp_diff_result;

/*
 * Compares two open snapshots.  On success *out owns a new result (release
 * with ulp_diff_result_free()); the result keeps no pointer into either
 * snapshot.
 * `opts` may be NULL for the defaults.  A shape or dtype mismatch is a row,
 * not an error; errors are read failures, ULP_ENOMEM and bad options.
 */
ULP_API ulp_status ulp_diff_run(const ulp_snapshot *a, const ulp_snapshot *b,
                                const ulp_diff_options *opts, ulp_diff_result **out,
                                ulp_error *err);

/*
 * Rows as they become final (ulp_diff_stream()): rows[0, n) are rows
 * [first, first + n) of the result, in order; they and what they point to
 * are valid during the call only, except the names and roles (until the
 * result is freed).  ULP_OK goes on; any other status stops the comparison,
 * which returns it (with *err as the callback set it).
 */
typedef ulp_status (*ulp_diff_rows_fn)(void *ctx, const ulp_diff_row *rows, size_t first, size_t n,
                                       ulp_error *err);

/*
 * ulp_diff_run() that hands the rows to `fn` in batches instead of keeping
 * them, so that its memory does not grow with the number of captures
 * (except where captures have positions: their rows are compared together,
 * in one batch).  The result is ulp_diff_run()'s, every field the same, but
 * for `rows`: see `streamed`.  fn is called before the result exists, and
 * may have been called when an error returns.
 * fn runs on the calling thread, one batch at a time, in order; while it
 * runs, the worker threads compare the next batch (the snapshots are read
 * meanwhile: fn may read them too, not close them).  Calls and the status
 * returned are those of one batch after the other: every batch before the
 * one that fails goes to fn, and fn's error comes before a later batch's.
 */
ULP_API ulp_status ulp_diff_stream(const ulp_snapshot *a, const ulp_snapshot *b,
                                   const ulp_diff_options *opts, ulp_diff_rows_fn fn, void *ctx,
                                   ulp_diff_result **out, ulp_error *err);

/* Row i of a result (of either kind), or NULL when it does not keep it. */
ULP_API const ulp_diff_row *ulp_diff_result_row(const ulp_diff_result *r, size_t i);

/* Frees a result.  NULL is accepted. */
ULP_API void ulp_diff_result_free(ulp_diff_result *r);

/*
 * Element metrics of two buffers of `n` raw elements of `dtype` (the core
 * of ulp_diff_run(), exposed for tests and other tools).  `shape`/`ndim`
 * only fill worst_index; pass ndim 0 for a flat view.
 */
ULP_API void ulp_diff_buffers(ulp_dtype dtype, const void *a, const void *b, uint64_t n, int ndim,
                              const int64_t *shape, ulp_diff_metrics *out);

/*
 * Row-major flat index -> multi-index (idx[ndim]), as worst_index is made
 * from worst_flat; for the other flat indices of a row (max_abs_diff_flat).
 */
ULP_API void ulp_diff_unflatten(uint64_t flat, int ndim, const int64_t *shape, int64_t *idx);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_DIFF_H */

/*
 * Internals of `ulpprof diff` (diff.c, diff_pair.c, diff_jobs.c,
 * diff_metrics.c, logits.c, ladder.c).  Not installed.
 */
#ifndef ULPPROF_ANALYZER_DIFF_PRIV_H
#define ULPPROF_ANALYZER_DIFF_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "common/strset.h"
#include "format/snapshot_read_priv.h"
#include "layouts.h"
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
    int64_t max_ulp_flat;    /* first index with max_ulp > 0, or -1           */
    uint64_t max_ulp_bits_a; /* raw bits of both sides at max_ulp_flat      */
    uint64_t max_ulp_bits_b;
    int64_t first_dfin; /* first differing finite pair, or -1            */
    int64_t first_nf;   /* first nonfinite mismatch, or -1               */
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

/* diff_result.c: a copy of s kept by the result (of ulp_diff_run) until it is
 * freed, one per distinct string; NULL when out of memory. */
/* A result as ulp_diff_run() allocates it (diff.c), with its interned
 * strings (diff_result.c). */
typedef struct ulp__result_priv {
    ulp_diff_result r; /* first: the public result points here */
    ulp__strset strs;
} ulp__result_priv;

const char *ulp__diff_str(ulp_diff_result *r, const char *s);

/* The most worker threads ulp_diff_run() starts, whatever it is asked. */
#define ULP__DIFF_MAX_THREADS 64

/*
 * diff_pair.c: a run of elements of a row compared element by element: `len`
 * elements from element off_a of capture ia of A and off_b of capture ib of
 * B, elements [base, base + len) of the row's compared view (the whole
 * tensor, a --rows slice, or an aligned row's keys).  A row's pairs are
 * consecutive and in base order.
 */
typedef struct ulp__diff_pair {
    size_t row;    /* index into the result's rows                     */
    size_t ia, ib; /* capture indices in A and in B                    */
    uint64_t off_a, off_b, len, base;
    uint64_t rowlen; /* aligned rows: elements per key; else 0         */
} ulp__diff_pair;

/*
 * diff_pair.c: the same in batches (ulp_diff_stream): each call of
 * ulp__pairing_next() fills r->rows[0, r->n_rows) -- r->rows holds max_rows
 * -- with the next rows, at most max_rows, and *pairs (valid until the next
 * call) with their pairs; *done once no row is left, after the checks of
 * the selection.  r's row counts (n_shared, ...) add up across batches.
 */
typedef struct ulp__pairing ulp__pairing;
ulp_status ulp__pairing_new(const ulp_snapshot *a, const ulp_snapshot *b,
                            const ulp_diff_options *opts, ulp_diff_result *r, ulp__pairing **out,
                            ulp_error *err);
ulp_status ulp__pairing_next(ulp__pairing *pc, size_t max_rows, const ulp__diff_pair **pairs,
                             size_t *npairs, int *done, ulp_error *err);
/* The lowest capture of A and of B that the rows of later batches may
 * use (0 and 0 when any may be), but for B's captures that only B has
 * (ulp__lean_low_b). */
void ulp__pairing_low(const ulp__pairing *pc, size_t *low_a, size_t *low_b);
void ulp__pairing_free(ulp__pairing *pc);

/*
 * diff_lean.c: the partners of A's captures in B found as both stream by in
 * seq order, in memory that does not grow with the capture count.
 * ulp__lean_new(): 1 with *out, 0 when these snapshots need the whole
 * tables (a shared name's occurrences are not numbered 0, 1, ... in seq
 * order, or it has positions on both sides), -1 out of memory.
 * ULPPROF_PAIRING=whole in the environment: 0 always; =lean: -2 instead
 * of 0 (for tests).
 */
typedef struct ulp__lean ulp__lean;
int ulp__lean_new(const ulp_snapshot *a, const ulp_snapshot *b, ulp__lean **out);
/*
 * Asked for every capture of A in seq order: *k its partner in B or -1,
 * *pa, *pb the positions states of its name in A and B (as
 * ulp__names_positions).  0; -1 out of memory; -2 when B is not what its
 * summary says.
 */
int ulp__lean_partner(ulp__lean *l, const ulp_capture_info *ca, ptrdiff_t *k, int *pa, int *pb);
/* After the last capture of A: the next capture only B has (in seq order),
 * or -1 when none is left. */
ptrdiff_t ulp__lean_next_only_b(ulp__lean *l);
/* The lowest capture of B that a later call may give -- but for the
 * captures only B has while A's are asked for: the calls after A's last
 * ask for those once, in rising order (a table made in pages makes their
 * pages again), and one at B's start would otherwise keep every page. */
size_t ulp__lean_low_b(const ulp__lean *l);
void ulp__lean_free(ulp__lean *l);

/* diff_result.c: frees what a row owns (not the row); diff_keep.c's disown()
 * forgets the same fields. */
void ulp__diff_row_release(ulp_diff_row *row);

/* diff_keep.c: the rows a result of ulp_diff_stream() keeps. */
typedef struct ulp__diff_keep {
    ulp_diff_row *rows;
    size_t *index;         /* [n] row index of rows[k], ascending          */
    unsigned char *logits; /* [n] a logits row: kept to the end            */
    size_t n, cap;
} ulp__diff_keep;
void ulp__diff_keep_init(ulp__diff_keep *k);
/*
 * After rows [base, base + r->n_rows) -- r->rows -- went to the caller:
 * keeps those refs[0..nrefs) name (SIZE_MAX: none) and those of
 * r->logits[lg0..], drops rows kept before that refs no longer name, and
 * releases the others (the batch's rows are zeroed).  -1 when out of
 * memory: nothing moved.
 */
int ulp__diff_keep_batch(ulp__diff_keep *k, ulp_diff_result *r, size_t base, size_t lg0,
                         const size_t *refs, size_t nrefs);
/* Releases what r->rows still holds and makes the kept rows r's: streamed,
 * n_rows = total. */
void ulp__diff_keep_finish(ulp__diff_keep *k, ulp_diff_result *r, size_t total);

/*
 * align.c: the aligned pairing.  A segment is a run of `len` elements at
 * element `off_a` of capture `ia` of A and `off_b` of capture `ib` of B,
 * compared as elements [base, base + len) of the row's compared view.
 */
typedef struct ulp__segment {
    size_t ia, ib;
    uint64_t off_a, off_b, len, base;
} ulp__segment;
typedef struct ulp__segs {
    ulp__segment *v;
    size_t n, cap;
} ulp__segs;
int ulp__segs_push(ulp__segs *s, const ulp__segment *seg);

/*
 * diff_sites.c: the pairing keys of pairing by site -- per capture of A
 * (side 0) and B (side 1): the key ("\1site@layer", or "=name" for a
 * capture no rule knows), its site (NULL when none) and layer.  *out NULL:
 * pair by name (ULP_DIFF_BY_NAME, or AUTO when a name is shared or no site
 * is).  Errors: the site map file.
 */
typedef struct ulp_site_map ulp_site_map;
typedef struct ulp__site_keys {
    ulp_site_map *map;
    char **key[2];
    const char **site[2];
    int32_t *layer[2];
    ulp__layout *layout[2]; /* how the capture holds its site (layouts.h); a column
                               shard's key is "\1site@layer#rank" */
    size_t n[2];
} ulp__site_keys;
ulp_status ulp__site_keys_new(const ulp_snapshot *a, const ulp_snapshot *b,
                              const ulp_diff_options *o, ulp__site_keys **out, ulp_error *err);
void ulp__site_keys_free(ulp__site_keys *sk);

/* Capture indices of a snapshot grouped by name, in seq order. */
typedef struct ulp__names ulp__names;
ulp_status ulp__names_build(const ulp_snapshot *s, ulp__names **out);
/* The same grouped by keys[i] (kept, not copied) instead of capture i's name. */
ulp_status ulp__names_build_keys(const ulp_snapshot *s, const char *const *keys, ulp__names **out);
void ulp__names_free(ulp__names *n);
const size_t *ulp__names_find(const ulp__names *n, const char *name, size_t *count);
/* Of the captures ulp__names_find gave (idx[0..count) of n): 1 every one has
 * positions (count > 0), all in one row form (ulp__row_form); -2 every one
 * has, in several forms (paired by occurrence); 0 none has; -1 some have. */
int ulp__names_positions(const ulp__names *n, const size_t *idx, size_t count);

/*
 * Pairs all captures of one name (ia[0..na) of A, ib[0..nb) of B, all with
 * positions) on their (request, position) keys: fills the row's aligned
 * fields, keys, inputs, compared shape, status (identical until compared,
 * or a dtype / row-shape mismatch) and appends the segments to `segs`
 * (none for a mismatch: the caller passes an empty `segs`), leaving out
 * the keys of r's parted streams.  *rowlen: elements per key.  ULP_EBADATTR when a side has one key
 * in two occurrences.
 */
ulp_status ulp__align_row(const ulp_snapshot *a, const size_t *ia, size_t na, const ulp_snapshot *b,
                          const size_t *ib, size_t nb, const ulp_diff_result *r, ulp_diff_row *row,
                          ulp__segs *segs, uint64_t *rowlen, ulp_error *err);

/*
 * streams.c: the parted token streams of A and B (r->parts), found before
 * the pairing; the keys they exclude leave the aligned rows.
 */
ulp_status ulp__streams_find(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_result *r,
                             ulp_error *err);
/*
 * requests.c: B's requests renumbered onto A's by their recorded token ids
 * (the captures ia[0..na) of A and ib[0..nb) of B of the ids' name) into
 * r->request_pairs, before any key is gathered.
 */
ulp_status ulp__requests_pair(const ulp_snapshot *a, const size_t *ia, size_t na,
                              const ulp_snapshot *b, const size_t *ib, size_t nb,
                              ulp_diff_result *r, ulp_error *err);
/* As ulp__requests_pair, into *out[0..*nout) (NULL, 0 when nothing is renumbered). */
ulp_status ulp__requests_pairs(const ulp_snapshot *a, const size_t *ia, size_t na,
                               const ulp_snapshot *b, const size_t *ib, size_t nb,
                               ulp_diff_request_pair **out, size_t *nout, ulp_error *err);
/* The number B's `request` is compared under (itself unless renumbered). */
int64_t ulp__requests_b(const ulp_diff_result *r, int64_t request);
/* The same, through the pairs v[0..n) (sorted by b). */
int64_t ulp__requests_map(const ulp_diff_request_pair *v, size_t n, int64_t request);
/* The first position of `request` that follows a parted stream, or -1. */
int64_t ulp__streams_parted_at(const ulp_diff_result *r, int64_t request);

/* rows_slice.c: `--rows` and the shape hint. */
typedef struct ulp__rows_spec {
    int mode; /* 0 none, 1 head:N, 2 tail:N, 3 A:B */
    int64_t n, first;
} ulp__rows_spec;
ulp_status ulp__rows_parse(const char *spec, ulp__rows_spec *out, ulp_error *err);
/* The token axis of a capture: the next-to-last axis, axis 0 of a vector; -1 for a scalar. */
int ulp__token_axis(int ndim);
/*
 * Slices a same-dtype pair on its token axis: 1 and segments appended (the
 * row's shapes become the slice's), 0 when the capture has no token axis,
 * -1 when the slice does not fit (row->status shape_mismatch, hint set),
 * -2 out of memory.
 */
int ulp__rows_slice(const ulp__rows_spec *spec, const ulp_capture_info *ca, size_t ia,
                    const ulp_capture_info *cb, size_t ib, ulp_diff_row *row, ulp__segs *segs);
/* A malloc'd sentence on what would compare two shapes, or NULL. */
char *ulp__rows_hint(const ulp_capture_info *ca, const ulp_capture_info *cb);

/*
 * diff_cross.c: pairs of different float dtypes.  ulp__cross_coarser():
 * 1 when one of a, b holds every value of the other, with the coarser one
 * in *coarse and the side to round (0: A, 1: B); 0 otherwise.
 * ulp__cross_round(): bits of `from` rounded to `to` (nearest, ties to
 * even).  ulp__diff_cross(): the element metrics of the rounded rows' pairs
 * (rows with `rounded` set), on the calling thread.
 */
int ulp__cross_coarser(ulp_dtype a, ulp_dtype b, ulp_dtype *coarse, int *rounded_side);
uint64_t ulp__cross_round(ulp_dtype from, ulp_dtype to, uint64_t bits);
ulp_status ulp__diff_cross(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_result *r,
                           const ulp__diff_pair *pairs, size_t npairs, ulp_error *err);
/* diff_jobs.c: an aligned row's differing keys counted, the first one and
 * the worst element's key found, from its keys' `differs`. */
void ulp__diff_finish_keys(ulp_diff_row *row, uint64_t rowlen);

/* origin.c: introduced / carried in / not captured, for every differing aligned key. */
void ulp__origin_run(ulp_diff_result *r);

/*
 * diff_read.c: a worker thread's reads of chunk pairs, in place from the
 * files' mappings (when `map`) or copied into its buffers:
 *     ulp__reader_begin(&r, &req);
 *     while ((k = ulp__reader_next(&r, &pa, &pb, &first, &n, err)) > 0)
 *         ...elements [first, first + n) of the chunk at pa, pb...
 *     ulp__reader_end(&r);          (also after an error: k < 0)
 * A mapped chunk comes whole; a copied one in pieces of piece_bytes.
 */
typedef struct ulp__read_req {
    const ulp_snapshot *a, *b;
    size_t ia, ib;
    uint64_t off_a, off_b; /* first element of each side */
    uint64_t n;            /* elements                   */
    ulp_dtype dtype;
    uint64_t whole; /* elements of the run the chunk is part of */
} ulp__read_req;
typedef struct ulp__reader {
    unsigned char *ba, *bb; /* buffers of a whole chunk each           */
    size_t piece_bytes;     /* a copied read's most bytes a side       */
    int map;                /* mapped reads where the files allow them */
    ulp__read_req q;        /* the chunk in flight                     */
    uint64_t done, bytes;
    const void *va, *vb;
    int mapped;
    /* Set after init: a chunk of at most ULP__VIEW_COPY_BYTES is read from
     * these windows, whole, ahead of it (ulp__reader_release frees them). */
    int windows;
    ulp__window wa, wb;
} ulp__reader;
/* 1 when mapped reads cost both files clearly less than copies (measured). */
int ulp__read_probe(const ulp_snapshot *a, const ulp_snapshot *b);
/* 1 when a reader asked for mapped reads would read q in place (the run is
 * large enough and mapped on both sides); runs under it are copied. */
int ulp__read_mappable(const ulp__read_req *q);
void ulp__reader_init(ulp__reader *r, unsigned char *ba, unsigned char *bb, size_t piece_bytes,
                      int map);
void ulp__reader_begin(ulp__reader *r, const ulp__read_req *q);
int ulp__reader_next(ulp__reader *r, const void **pa, const void **pb, uint64_t *first, uint64_t *n,
                     ulp_error *err);
void ulp__reader_end(ulp__reader *r);
void ulp__reader_release(ulp__reader *r);

typedef struct ulp__logits_fuse ulp__logits_fuse;

/*
 * diff_jobs.c: mapped or copied reads (ulp__read_probe()), decided once for
 * a whole diff -- every batch of a streamed one -- on the thread that
 * meets the first run that could be mapped.
 */
typedef struct ulp__read_mode {
    const ulp_snapshot *a, *b;
    atomic_int map;       /* 1 mapped, 0 copied, -1 not probed yet */
    pthread_mutex_t lock; /* one probe at a time                   */
} ulp__read_mode;
/* 0, or -1 when its lock cannot be made. */
int ulp__read_mode_init(ulp__read_mode *rm, const ulp_snapshot *a, const ulp_snapshot *b);
void ulp__read_mode_destroy(ulp__read_mode *rm);

/*
 * diff_pool.c: the comparison's worker threads, started once per diff:
 * threads - 1 helpers and the caller.  A job is posted to `helpers` of
 * them (fn runs once on each), the caller may do other work meanwhile,
 * then ulp__diff_pool_join() runs fn on the caller's thread too (`work`)
 * and waits for the helpers.  One job at a time.  Each thread keeps its
 * worker -- buffers, read-ahead windows -- from job to job.
 */
typedef struct ulp__diff_worker {
    unsigned char *ba, *bb; /* chunk buffers, allocated at first use */
    ulp__reader rd;         /* its windows stay from job to job      */
} ulp__diff_worker;
typedef void (*ulp__diff_work_fn)(void *job, ulp__diff_worker *w);
typedef struct ulp__diff_pool ulp__diff_pool;
/* The arrays of the caller's jobs (diff_jobs.c: job rows, tasks), kept from
 * job to job and never zeroed: each batch of a stream had allocated and
 * cleared 0.8 MiB again.  Grown by the caller, freed with the pool. */
typedef struct ulp__diff_scratch {
    void *jrows, *tasks;
    size_t cap_jrows, cap_tasks;
} ulp__diff_scratch;
ulp__diff_scratch *ulp__diff_pool_scratch(ulp__diff_pool *p);
/* Helpers start at the first job that asks for them (fewer when threads
 * cannot be created); errors: the lock. */
ulp_status ulp__diff_pool_new(int threads, ulp__diff_pool **out, ulp_error *err);
/* The most helpers a job can have. */
int ulp__diff_pool_helpers(const ulp__diff_pool *p);
void ulp__diff_pool_post(ulp__diff_pool *p, ulp__diff_work_fn fn, void *job, int helpers);
void ulp__diff_pool_join(ulp__diff_pool *p, int work);
void ulp__diff_pool_free(ulp__diff_pool *p);

/*
 * What a stream runs on the caller's thread while the helpers compare a
 * batch (diff.c: the callback of the batch before, the pairing of the
 * batch after): ulp__diff_metrics()
 * runs it once, after posting its first job; `ran`, its status and error
 * tell what happened.
 */
typedef struct ulp__diff_overlap {
    ulp_status (*fn)(void *ctx, ulp_error *err);
    void *ctx;
    int ran;
    ulp_status st;
    ulp_error err;
} ulp__diff_overlap;
/* Runs ov once (nothing when fn is NULL or it ran). */
void ulp__diff_overlap_run(ulp__diff_overlap *ov);

/*
 * diff_jobs.c: the element metrics of every pair on opts->threads threads
 * (options resolved: threads >= 1, chunk_elements > 0): each row's
 * metrics, status and worst element, and r->bytes_read; the logits rows
 * of fuse[0..nfuse) (sorted by row) into them; reads mapped or copied
 * as `rm` says; on the pool's threads, running `ov` (may be NULL) on the
 * caller's while the helpers start.
 */
ulp_status ulp__diff_metrics(const ulp_snapshot *a, const ulp_snapshot *b,
                             const ulp_diff_options *opts, ulp__read_mode *rm, ulp__diff_pool *pool,
                             ulp_diff_result *r, const ulp__diff_pair *pairs, size_t npairs,
                             ulp__logits_fuse *fuse, size_t nfuse, ulp__diff_overlap *ov,
                             ulp_error *err);

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
/*
 * logits_row.c: the statistics of one logits row (ulp__logits_row_f32)
 * over any runs of its elements, taken in any order: each side's top two
 * (keys that order floats as unsigned integers; 0 is NaN) and the largest
 * |z_A - z_B|.  Parts of a row merge into the same result whatever the
 * order and wherever the runs start.
 */
typedef struct ulp__lside {
    uint32_t top, second; /* keys; 0 until seen                        */
    uint64_t count;       /* elements equal to top                     */
    uint64_t first;       /* row index of the first of them            */
    uint64_t nonnan;
} ulp__lside;
typedef struct ulp__lpart {
    ulp__lside a, b;
    double pert;
} ulp__lpart;
void ulp__lpart_init(ulp__lpart *p);
/* Adds elements [first, first + n) of the row (float32 values). */
void ulp__lpart_add(ulp__lpart *p, const float *za, const float *zb, uint64_t n, uint64_t first);
void ulp__lpart_merge(ulp__lpart *dst, const ulp__lpart *src);
void ulp__lpart_finish(const ulp__lpart *p, ulp__logits_row *out);
/* logits_row.c: n raw elements of a float format float32 holds (f32, bf16,
 * f16, fp8) as float32, exactly; for the row pass and the fused one. */
void ulp__logits_widen(ulp_dtype dt, const void *raw, uint64_t n, float *out);

/*
 * logits_fuse.c: one logits pair's row statistics, folded into the element
 * pass (diff_jobs.c) while a worker holds a chunk: the logits are read
 * once.  For the formats float32 holds and no temperatures; other logits
 * are analysed by a pass of their own (ulp__logits_run_view).
 */
struct ulp__logits_fuse {
    size_t row; /* index into the result's rows                 */
    ulp_dtype dtype;
    uint64_t vocab, rows;
    ulp__lpart *part;     /* [rows]                                 */
    pthread_mutex_t lock; /* guards part                            */
};
/* 1 when a compared view of `shape` (ndim axes) and `dtype` can be fused under `opts`. */
int ulp__logits_fusable(ulp_dtype dtype, int ndim, const int64_t *shape,
                        const ulp_diff_options *opts);
ulp_status ulp__logits_fuse_init(ulp__logits_fuse *f, size_t row, ulp_dtype dtype, int ndim,
                                 const int64_t *shape);
void ulp__logits_fuse_release(ulp__logits_fuse *f);
/* Adds elements [v, v + n) of the compared view, raw bits of both sides. */
void ulp__logits_fuse_add(ulp__logits_fuse *f, const void *a, const void *b, uint64_t n,
                          uint64_t v);

/* logits.c: the logits analysis of a compared view (whole pair, aligned or
 * sliced rows) of `shape`; `lg` gets the per-row data.  With `fused`, the
 * rows' statistics come from it (the element pass read them); only
 * flipped rows' candidates are read. */
ulp_status ulp__logits_run_view(const ulp_snapshot *a, const ulp_snapshot *b,
                                const ulp__segment *segs, size_t nsegs, int ndim,
                                const int64_t *shape, const ulp_diff_options *opts,
                                const ulp__logits_fuse *fused, ulp_diff_logits *lg, ulp_error *err);

/* Total variation and P(inverse-CDF picks differ) at temperature t.
 * `work` holds 2 * vocab doubles. */
void ulp__logits_sampling(const double *za, const double *zb, uint64_t vocab, double t,
                          double *work, double *tv, double *p_differ);
void ulp__logits_free(ulp_diff_logits *lg);
/* logits_softmax.c: softmax(z / t) into p; NaN logits get probability 0. */
void ulp__logits_softmax(const double *z, uint64_t n, double t, double *p);

/*
 * logits_dist.c: whole-distribution measures (ulp_diff_dist).  alloc: the
 * per-row arrays for lg->rows rows and opts' top-k sizes; row: one row's
 * values at `row` (argmax_a: A's argmax there; work: 2 * vocab doubles,
 * kwork: 2 * the largest k int64s); summarize: over the rows.
 */
ulp_status ulp__logits_dist_alloc(ulp_diff_logits *lg, const ulp_diff_options *opts);
void ulp__logits_dist_row(ulp_diff_logits *lg, const double *za, const double *zb, int64_t argmax_a,
                          double *work, int64_t *kwork, uint64_t row);
void ulp__logits_dist_summarize(ulp_diff_logits *lg);
void ulp__logits_dist_free(ulp_diff_dist *d);
/* The largest k of opts' top-k sizes (0 without distributions). */
int ulp__logits_dist_kmax(const ulp_diff_options *opts);

/*
 * diff.c: the caller's `in` read by its struct_size into `out`, the
 * defaults of ulp_diff_options_init() for the rest (common/sized.h);
 * ULP_EINVAL, one stderr line and `err`, for a bad size.
 */
ulp_status ulp__diff_options_read(ulp_diff_options *out, const ulp_diff_options *in,
                                  ulp_error *err);

/* ladder.c */
ulp_status ulp__ladder_run(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_ladder *l,
                           ulp_error *err);
void ulp__ladder_free(ulp_diff_ladder *l);

#endif /* ULPPROF_ANALYZER_DIFF_PRIV_H */

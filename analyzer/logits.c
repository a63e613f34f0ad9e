/*
 * Logits analysis (FORMAT.md: role = logits, the last axis is the
 * vocabulary, every other index is one row).
 *
 * Per row: argmax in A and B (ties to the lowest index; NaN is never a
 * candidate), top-1 minus top-2 margin, the largest |z_A - z_B|, whether
 * the argmax flipped and, for flipped rows, why: the gap between the two
 * candidate tokens in A and in B, its perturbation, and that perturbation
 * in ULPs of the logits' format.  With temperatures: the total-variation
 * distance between the two softmax distributions and the probability that
 * inverse-CDF sampling driven by the same uniform draw picks different
 * tokens (exactly: the measure of u in [0, 1) whose tokens differ).
 *
 * Logits of a format float32 holds, without temperatures, are taken by the
 * element pass as it reads them (logits_fuse.c: the logits are read once);
 * here only their flipped rows' candidate tokens are read.  Other logits
 * get a pass of their own: the rows are shared out to the diff's worker
 * threads about 1 MiB (at least one row) at a time and copied into
 * per-thread buffers; each row goes through float32 kernels that gcc
 * vectorizes (logits_row.c) when its format fits in float32, through
 * doubles otherwise, and through doubles for the sampling figures.
 * Memory: about 1 MiB of rows a side (or one row, if larger) per thread,
 * and a few bytes per row (72 more for a fused row's partial statistics).
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"

/* Bytes a side of the rows one task analyses. */
#define LOGITS_TASK_BYTES ((uint64_t)1 << 20)

static void top2(const double *z, uint64_t n, int64_t *arg, double *margin)
{
    int64_t best = -1;
    double bv = 0, sv = 0;
    int has2 = 0;
    for (uint64_t i = 0; i < n; i++) {
        double v = z[i];
        if (isnan(v))
            continue;
        if (best < 0) {
            best = (int64_t)i;
            bv = v;
        } else if (v > bv) {
            sv = bv;
            has2 = 1;
            best = (int64_t)i;
            bv = v;
        } else if (!has2 || v > sv) {
            sv = v;
            has2 = 1;
        }
    }
    *arg = best;
    if (best < 0)
        *margin = (double)NAN;
    else if (!has2)
        *margin = HUGE_VAL;
    else
        *margin = bv == sv ? 0.0 : bv - sv; /* inf - inf is a tie, not NaN */
}

void ulp__logits_row_stats(const double *za, const double *zb, uint64_t vocab, ulp__logits_row *out)
{
    top2(za, vocab, &out->argmax_a, &out->margin_a);
    top2(zb, vocab, &out->argmax_b, &out->margin_b);
    double m = 0;
    for (uint64_t i = 0; i < vocab; i++) {
        if (!isfinite(za[i]) || !isfinite(zb[i]))
            continue;
        double d = fabs(za[i] - zb[i]);
        m = d > m ? d : m;
    }
    out->max_perturbation = m;
}

void ulp__logits_sampling(const double *za, const double *zb, uint64_t vocab, double t,
                          double *work, double *tv, double *p_differ)
{
    double *pa = work, *pb = work + vocab;
    if (vocab == 0) {
        *tv = 0;
        *p_differ = 0;
        return;
    }
    ulp__logits_softmax(za, vocab, t, pa);
    ulp__logits_softmax(zb, vocab, t, pb);
    double d = 0;
    for (uint64_t i = 0; i < vocab; i++)
        d += fabs(pa[i] - pb[i]);
    *tv = 0.5 * d;
    /*
     * Token i is drawn for u in [F(i-1), F(i)).  The draws agree on the
     * overlap of A's and B's intervals for the same token; the last
     * boundary is 1 on both sides whatever the rounding of the sums.
     */
    double fa = 0, fb = 0, same = 0;
    for (uint64_t i = 0; i < vocab; i++) {
        double fa1 = i + 1 == vocab ? 1.0 : fa + pa[i];
        double fb1 = i + 1 == vocab ? 1.0 : fb + pb[i];
        double lo = fa > fb ? fa : fb, hi = fa1 < fb1 ? fa1 : fb1;
        if (hi > lo)
            same += hi - lo;
        fa = fa1;
        fb = fb1;
    }
    double p = 1.0 - same;
    *p_differ = p > 0 ? p : 0.0;
}

void ulp__logits_free(ulp_diff_logits *lg)
{
    free(lg->argmax_a);
    free(lg->argmax_b);
    free(lg->margin_a);
    free(lg->margin_b);
    free(lg->max_perturbation);
    free(lg->flipped);
    free(lg->at_risk);
    free(lg->tied);
    free(lg->flips);
    for (int k = 0; k < lg->n_sampling; k++) {
        free(lg->sampling[k].tv);
        free(lg->sampling[k].p_differ);
    }
    ulp__logits_dist_free(&lg->dist);
    memset(lg, 0, sizeof *lg);
}

/* Why row `row` flipped; z4: z_A[argmax_a], z_A[argmax_b], z_B[argmax_a], z_B[argmax_b]. */
static void explain(const ulp_diff_logits *lg, const double *z4, uint64_t row, ulp_diff_flip *f)
{
    f->row = row;
    f->request = f->position = -1; /* the caller knows the keys */
    f->tied_a = lg->margin_a[row] == 0;
    f->tied_b = lg->margin_b[row] == 0;
    f->argmax_a = lg->argmax_a[row];
    f->argmax_b = lg->argmax_b[row];
    f->margin_a = lg->margin_a[row];
    f->margin_b = lg->margin_b[row];
    if (f->argmax_a < 0 || f->argmax_b < 0) {
        f->gap_a = f->gap_b = f->gap_perturbation = f->magnitude = (double)NAN;
        f->gap_perturbation_ulps = (double)NAN;
        return;
    }
    double a1 = z4[0], a2 = z4[1];
    double b1 = z4[2], b2 = z4[3];
    f->gap_a = a1 - a2;
    f->gap_b = b1 - b2;
    f->gap_perturbation = f->gap_b - f->gap_a;
    double mag = fabs(a1);
    mag = fabs(a2) > mag ? fabs(a2) : mag;
    mag = fabs(b1) > mag ? fabs(b1) : mag;
    mag = fabs(b2) > mag ? fabs(b2) : mag;
    f->magnitude = mag;
    f->gap_perturbation_ulps = fabs(f->gap_perturbation) / ulp_dtype_ulp_at(lg->dtype, mag);
}

/* The rows of one logits pair, shared by the threads that analyse them. */
typedef struct lg_job {
    const ulp_snapshot *a, *b;
    const ulp__segment *segs; /* the compared view: whole pair, slice or aligned keys */
    size_t nsegs;
    const ulp_diff_options *opts;
    ulp_diff_logits *lg;
    ulp_diff_flip *slot; /* [rows]: the explanation of a flipped row, in place */
    uint64_t per;        /* rows per task                                       */
    atomic_uint_fast64_t next;
    atomic_int stop;
    pthread_mutex_t lock; /* guards err                                         */
    ulp_error err;
} lg_job;

static void to_double(ulp_dtype dt, const unsigned char *raw, uint64_t n, double *out)
{
    size_t sz = ulp_dtype_size(dt);
    for (uint64_t i = 0; i < n; i++)
        out[i] = ulp_dtype_to_double(dt, ulp_dtype_load_bits(dt, raw + i * sz));
}

/* Per-thread scratch: float rows for formats other than f32, double rows for f64 and sampling. */
typedef struct lg_scratch {
    unsigned char *ba, *bb; /* per * vocab elements each, when a view needs a copy */
    float *fa, *fb;         /* vocab each                                       */
    double *za, *zb, *work; /* vocab, vocab, 2 * vocab                          */
    int64_t *kwork;         /* 2 * the largest top-k size (distributions)       */
} lg_scratch;

static void scratch_free(lg_scratch *s)
{
    free(s->ba);
    free(s->bb);
    free(s->fa);
    free(s->fb);
    free(s->za);
    free(s->zb);
    free(s->work);
    free(s->kwork);
}

static int scratch_init(lg_scratch *s, const lg_job *j)
{
    ulp_dtype dt = j->lg->dtype;
    uint64_t V = j->lg->vocab;
    size_t bytes = (size_t)(j->per * V * ulp_dtype_size(dt)) + 1;
    int wide = !(dt == ULP_DTYPE_F32 || dt == ULP_DTYPE_BF16 || dt == ULP_DTYPE_F16 ||
                 dt == ULP_DTYPE_F8E4M3 || dt == ULP_DTYPE_F8E5M2);
    memset(s, 0, sizeof *s);
    s->ba = malloc(bytes);
    s->bb = malloc(bytes);
    if (!s->ba || !s->bb)
        return -1;
    if (!wide && dt != ULP_DTYPE_F32) {
        s->fa = malloc((V + 1) * sizeof *s->fa);
        s->fb = malloc((V + 1) * sizeof *s->fb);
        if (!s->fa || !s->fb)
            return -1;
    }
    if (j->opts->distributions &&
        (s->kwork = malloc((2 * (size_t)ulp__logits_dist_kmax(j->opts) + 1) * sizeof *s->kwork)) ==
            NULL)
        return -1;
    if (wide || j->opts->n_temperatures > 0 || j->opts->distributions) {
        s->za = malloc((V + 1) * sizeof *s->za);
        s->zb = malloc((V + 1) * sizeof *s->zb);
        s->work = malloc((2 * V + 1) * sizeof *s->work);
        if (!s->za || !s->zb || !s->work)
            return -1;
    }
    return 0;
}

/* The emitted token (argmax, lowest index on ties) differs: a flip, also
 * where a run's top two tie -- greedy decode emits the lower index and the
 * text changes there. */
static int is_flip(const ulp__logits_row *rs)
{
    return rs->argmax_a != rs->argmax_b;
}

/* A flip where one run's top two are equal (margin 0). */
static int is_tie(const ulp__logits_row *rs)
{
    return is_flip(rs) && (rs->margin_a == 0 || rs->margin_b == 0);
}

/* A row's flags and, for a flipped row, why it flipped (z4 as explain() takes it). */
static void store_row(ulp_diff_logits *lg, ulp_diff_flip *slot, const ulp__logits_row *rs,
                      const double *z4, uint64_t row)
{
    lg->argmax_a[row] = rs->argmax_a;
    lg->argmax_b[row] = rs->argmax_b;
    lg->margin_a[row] = rs->margin_a;
    lg->margin_b[row] = rs->margin_b;
    lg->max_perturbation[row] = rs->max_perturbation;
    lg->tied[row] = is_tie(rs);
    lg->flipped[row] = is_flip(rs);
    double mm = rs->margin_a < rs->margin_b ? rs->margin_a : rs->margin_b;
    lg->at_risk[row] = !lg->flipped[row] && mm < rs->max_perturbation;
    if (lg->flipped[row])
        explain(lg, z4, row, &slot[row]);
}

/* z_A[argmax_a], z_A[argmax_b], z_B[argmax_a], z_B[argmax_b] from a row's raw bits. */
static void candidates(ulp_dtype dt, const ulp__logits_row *rs, const unsigned char *ra,
                       const unsigned char *rb, double *z4)
{
    int64_t at[4] = {rs->argmax_a, rs->argmax_b, rs->argmax_a, rs->argmax_b};
    for (int k = 0; k < 4; k++) {
        z4[k] = 0;
        if (at[k] < 0)
            continue;
        const unsigned char *r = k < 2 ? ra : rb;
        z4[k] = ulp_dtype_to_double(
            dt, ulp_dtype_load_bits(dt, r + (size_t)at[k] * ulp_dtype_size(dt)));
    }
}

/* One row: the statistics, the flip's explanation, the sampling figures. */
static void one_row(lg_job *j, lg_scratch *s, const unsigned char *ra, const unsigned char *rb,
                    uint64_t row)
{
    ulp_diff_logits *lg = j->lg;
    ulp_dtype dt = lg->dtype;
    uint64_t V = lg->vocab;
    ulp__logits_row rs;
    const float *fa = NULL, *fb = NULL;
    if (s->za != NULL) {
        to_double(dt, ra, V, s->za);
        to_double(dt, rb, V, s->zb);
    }
    if (dt == ULP_DTYPE_F32) {
        fa = (const float *)(const void *)ra;
        fb = (const float *)(const void *)rb;
    } else if (s->fa != NULL) {
        ulp__logits_widen(dt, ra, V, s->fa);
        ulp__logits_widen(dt, rb, V, s->fb);
        fa = s->fa;
        fb = s->fb;
    }
    if (fa != NULL && V <= UINT32_MAX)
        ulp__logits_row_f32(fa, fb, V, &rs);
    else
        ulp__logits_row_stats(s->za, s->zb, V, &rs);
    double z4[4] = {0, 0, 0, 0};
    if (is_flip(&rs))
        candidates(dt, &rs, ra, rb, z4);
    store_row(lg, j->slot, &rs, z4, row);
    for (int k = 0; k < lg->n_sampling; k++) {
        ulp_diff_sampling *sp = &lg->sampling[k];
        ulp__logits_sampling(s->za, s->zb, V, sp->temperature, s->work, &sp->tv[row],
                             &sp->p_differ[row]);
    }
    if (lg->has_dist)
        ulp__logits_dist_row(lg, s->za, s->zb, rs.argmax_a, s->work, s->kwork, row);
}

static void lg_fail(lg_job *j, const ulp_error *e)
{
    pthread_mutex_lock(&j->lock);
    if (j->err.status == ULP_OK)
        j->err = *e;
    pthread_mutex_unlock(&j->lock);
    atomic_store(&j->stop, 1);
}

/*
 * Elements [first, first + n) of the compared view on both sides into ba /
 * bb, segment by segment (one for a whole pair, several for aligned or
 * sliced views).  Copied, never mapped: a task's rows straddle the
 * mapping's 2 MiB spans, and mapped rows kept up to two spans a side
 * resident per thread (peak RSS 28-32 MiB for the 1-4 GiB realistic pairs,
 * against 24 MiB for the element metrics); copying the logits' few bytes
 * costs little.
 */
static ulp_status copy_rows(const lg_job *j, uint64_t first, uint64_t n, unsigned char *ba,
                            unsigned char *bb, ulp_error *e)
{
    size_t sz = ulp_dtype_size(j->lg->dtype);
    size_t q = 0;
    for (uint64_t done = 0; done < n;) {
        uint64_t v = first + done;
        while (q < j->nsegs && v >= j->segs[q].base + j->segs[q].len)
            q++;
        if (q == j->nsegs || v < j->segs[q].base)
            return ulp__error(e, ULP_ERANGE, "logits: element %llu of the view has no source",
                              (unsigned long long)v);
        const ulp__segment *g = &j->segs[q];
        uint64_t m = g->base + g->len - v < n - done ? g->base + g->len - v : n - done;
        ulp_status st =
            ulp_snapshot_read(j->a, g->ia, g->off_a + (v - g->base), m, ba + done * sz, e);
        if (st == ULP_OK)
            st = ulp_snapshot_read(j->b, g->ib, g->off_b + (v - g->base), m, bb + done * sz, e);
        if (st != ULP_OK)
            return st;
        done += m;
    }
    return ULP_OK;
}

/* Takes `per` rows at a time until none is left. */
static void *lg_worker(void *arg)
{
    lg_job *j = arg;
    ulp_diff_logits *lg = j->lg;
    uint64_t R = lg->rows, V = lg->vocab;
    size_t sz = ulp_dtype_size(lg->dtype);
    lg_scratch s;
    ulp_error e;
    ulp_error_clear(&e);
    if (scratch_init(&s, j) != 0) {
        ulp__error(&e, ULP_ENOMEM, "out of memory for logits rows");
        lg_fail(j, &e);
        goto cleanup;
    }
    for (;;) {
        if (atomic_load(&j->stop))
            break;
        uint64_t r0 = atomic_fetch_add(&j->next, 1) * j->per;
        if (r0 >= R)
            break;
        uint64_t nr = R - r0 < j->per ? R - r0 : j->per;
        if (copy_rows(j, r0 * V, nr * V, s.ba, s.bb, &e) != ULP_OK) {
            lg_fail(j, &e);
            break;
        }
        for (uint64_t q = 0; q < nr; q++)
            one_row(j, &s, s.ba + q * V * sz, s.bb + q * V * sz, r0 + q);
    }
cleanup:
    scratch_free(&s);
    return NULL;
}

static ulp_status alloc_rows(ulp_diff_logits *lg, const ulp_diff_options *opts)
{
    uint64_t R = lg->rows;
    lg->argmax_a = calloc(R + 1, sizeof *lg->argmax_a);
    lg->argmax_b = calloc(R + 1, sizeof *lg->argmax_b);
    lg->margin_a = calloc(R + 1, sizeof *lg->margin_a);
    lg->margin_b = calloc(R + 1, sizeof *lg->margin_b);
    lg->max_perturbation = calloc(R + 1, sizeof *lg->max_perturbation);
    lg->flipped = calloc(R + 1, 1);
    lg->at_risk = calloc(R + 1, 1);
    lg->tied = calloc(R + 1, 1);
    if (!lg->tied || !lg->argmax_a || !lg->argmax_b || !lg->margin_a || !lg->margin_b ||
        !lg->max_perturbation || !lg->flipped || !lg->at_risk)
        return ULP_ENOMEM;
    lg->n_sampling = opts->n_temperatures;
    for (int k = 0; k < lg->n_sampling; k++) {
        lg->sampling[k].temperature = opts->temperatures[k];
        lg->sampling[k].tv = calloc(R + 1, sizeof(double));
        lg->sampling[k].p_differ = calloc(R + 1, sizeof(double));
        if (!lg->sampling[k].tv || !lg->sampling[k].p_differ)
            return ULP_ENOMEM;
    }
    if (opts->distributions && ulp__logits_dist_alloc(lg, opts) != ULP_OK)
        return ULP_ENOMEM;
    return ULP_OK;
}

/* Counts, the flips in row order, the sampling summaries. */
static ulp_status summarize(ulp_diff_logits *lg, const ulp_diff_flip *slot)
{
    uint64_t R = lg->rows;
    for (uint64_t row = 0; row < R; row++) {
        lg->argmax_flips += lg->flipped[row];
        lg->argmax_ties += lg->tied[row];
        lg->rows_at_risk += lg->at_risk[row];
    }
    if (lg->argmax_flips > 0) {
        lg->flips = calloc((size_t)lg->argmax_flips, sizeof *lg->flips);
        if (lg->flips == NULL)
            return ULP_ENOMEM;
        for (uint64_t row = 0; row < R; row++)
            if (lg->flipped[row])
                lg->flips[lg->n_flips++] = slot[row];
    }
    for (int k = 0; k < lg->n_sampling; k++) {
        ulp_diff_sampling *s = &lg->sampling[k];
        double st_tv = 0, st_p = 0;
        for (uint64_t row = 0; row < R; row++) {
            st_tv += s->tv[row];
            st_p += s->p_differ[row];
            s->tv_max = s->tv[row] > s->tv_max ? s->tv[row] : s->tv_max;
            s->p_differ_max =
                s->p_differ[row] > s->p_differ_max ? s->p_differ[row] : s->p_differ_max;
        }
        s->tv_mean = R ? st_tv / (double)R : 0.0;
        s->p_differ_mean = R ? st_p / (double)R : 0.0;
    }
    if (lg->has_dist)
        ulp__logits_dist_summarize(lg);
    return ULP_OK;
}

/* The rows the element pass took (logits_fuse.c): only a flipped row's
 * candidate tokens are read, one element a side at a time. */
static ulp_status fused_rows(lg_job *j, const ulp__logits_fuse *f, ulp_error *e)
{
    ulp_diff_logits *lg = j->lg;
    uint64_t V = lg->vocab;
    for (uint64_t row = 0; row < lg->rows; row++) {
        ulp__logits_row rs;
        double z4[4] = {0, 0, 0, 0};
        ulp__lpart_finish(&f->part[row], &rs);
        /* z_A[argmax_a], z_A[argmax_b], z_B[argmax_a], z_B[argmax_b], as candidates(). */
        int64_t cols[2] = {rs.argmax_a, rs.argmax_b};
        for (int k = 0; k < 2 && is_flip(&rs); k++) {
            unsigned char xa[8], xb[8];
            if (cols[k] < 0)
                continue;
            ulp_status st = copy_rows(j, row * V + (uint64_t)cols[k], 1, xa, xb, e);
            if (st != ULP_OK)
                return st;
            to_double(lg->dtype, xa, 1, &z4[k]);
            to_double(lg->dtype, xb, 1, &z4[2 + k]);
        }
        store_row(lg, j->slot, &rs, z4, row);
    }
    return ULP_OK;
}

ulp_status ulp__logits_run_view(const ulp_snapshot *a, const ulp_snapshot *b,
                                const ulp__segment *segs, size_t nsegs, int ndim,
                                const int64_t *shape, const ulp_diff_options *opts,
                                const ulp__logits_fuse *fused, ulp_diff_logits *lg, ulp_error *err)
{
    const ulp_capture_info *c = ulp_snapshot_capture(a, segs[0].ia);
    lg_job j;
    memset(&j, 0, sizeof j);
    lg->dtype = c->dtype;
    lg->vocab = ndim ? (uint64_t)shape[ndim - 1] : 1;
    lg->rows = 1;
    for (int k = 0; k + 1 < ndim; k++)
        lg->rows *= (uint64_t)shape[k];
    uint64_t R = lg->rows, V = lg->vocab;
    j.slot = calloc(R + 1, sizeof *j.slot);
    if (j.slot == NULL || alloc_rows(lg, opts) != ULP_OK) {
        free(j.slot);
        return ulp__error(err, ULP_ENOMEM, "out of memory for the logits of '%s'", c->name);
    }
    if (R == 0 || V == 0) {
        /* Empty rows: nothing to read; argmax -1, margins NaN, as for all-NaN rows. */
        for (uint64_t row = 0; row < R; row++) {
            lg->argmax_a[row] = lg->argmax_b[row] = -1;
            lg->margin_a[row] = lg->margin_b[row] = (double)NAN;
        }
        ulp_status st = summarize(lg, j.slot);
        free(j.slot);
        return st == ULP_OK ? ULP_OK : ulp__error(err, st, "out of memory");
    }
    j.a = a;
    j.b = b;
    j.segs = segs;
    j.nsegs = nsegs;
    j.opts = opts;
    j.lg = lg;
    /* Rows per task: about 1 MiB a side, at least one row (the buffers
     * stay in the core's cache; the resident set holds them). */
    uint64_t row_bytes = V * ulp_dtype_size(lg->dtype);
    j.per = row_bytes < LOGITS_TASK_BYTES ? LOGITS_TASK_BYTES / row_bytes : 1;
    ulp_error_clear(&j.err);
    if (fused != NULL) {
        ulp_status st = fused_rows(&j, fused, err);
        if (st == ULP_OK && summarize(lg, j.slot) != ULP_OK)
            st = ulp__error(err, ULP_ENOMEM, "out of memory for the logits of '%s'", c->name);
        free(j.slot);
        return st;
    }
    atomic_init(&j.next, 0);
    atomic_init(&j.stop, 0);
    pthread_mutex_init(&j.lock, NULL);
    uint64_t tasks = (R + j.per - 1) / j.per;
    int nthreads = opts->threads < 1 ? 1 : opts->threads;
    if ((uint64_t)nthreads > tasks)
        nthreads = (int)tasks;
    pthread_t tids[64];
    int started = 0;
    for (int i = 1; i < nthreads && i < 64; i++) {
        if (pthread_create(&tids[started], NULL, lg_worker, &j) != 0)
            break; /* fewer threads still finish the work */
        started++;
    }
    lg_worker(&j);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    pthread_mutex_destroy(&j.lock);
    ulp_status st = j.err.status;
    if (st != ULP_OK) {
        if (err)
            *err = j.err;
    } else if (summarize(lg, j.slot) != ULP_OK) {
        st = ulp__error(err, ULP_ENOMEM, "out of memory for the logits of '%s'", c->name);
    }
    free(j.slot);
    return st;
}

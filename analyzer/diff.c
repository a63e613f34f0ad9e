/*
 * ulp_diff_run(): pairs the captures of two snapshots and compares them.
 *
 * Pairing follows FORMAT.md: same name and occurrence; rows in A's seq
 * order, then the captures only B has in B's seq order.  The element work
 * is split into chunks of at most `chunk_bytes` per side, handed out to
 * the worker threads from one atomic counter in row order, and each chunk's
 * metrics are merged into its row under a lock (ulp__acc_merge() does not
 * depend on the order).  Memory is two chunk buffers per thread whatever
 * the tensor sizes.
 */
#include <fnmatch.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "diff_priv.h"

#define DEFAULT_CHUNK_ELEMENTS ((uint64_t)1 << 20)
#define DEFAULT_THREADS        8 /* most worker threads by default: past that, reads bound the speed */
#define MAX_THREADS            64

static const char *const status_names[] = {
    [ULP_DIFF_IDENTICAL] = "identical",           [ULP_DIFF_DIFFERS] = "differs",
    [ULP_DIFF_SHAPE_MISMATCH] = "shape_mismatch", [ULP_DIFF_DTYPE_MISMATCH] = "dtype_mismatch",
    [ULP_DIFF_ONLY_IN_A] = "only_in_a",           [ULP_DIFF_ONLY_IN_B] = "only_in_b",
};

const char *ulp_diff_status_name(ulp_diff_status status)
{
    if ((int)status < 0 || (size_t)status >= sizeof status_names / sizeof status_names[0])
        return "invalid";
    return status_names[status];
}

void ulp_diff_options_init(ulp_diff_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->threads = 0; /* the online CPUs, at most DEFAULT_THREADS */
    opts->chunk_elements = DEFAULT_CHUNK_ELEMENTS;
}

/* One compared pair and its share of the work. */
typedef struct job_row {
    size_t row; /* index into result rows                      */
    size_t ia, ib;
    ulp_dtype dtype;
    uint64_t elements;
    uint64_t chunk;      /* elements per chunk                          */
    uint64_t first_task; /* tasks [first_task, first_task + nchunks)    */
    uint64_t nchunks;
    ulp__acc acc;
} job_row;

typedef struct job {
    const ulp_snapshot *a, *b;
    job_row *jrows;
    size_t njrows;
    uint64_t ntasks;
    size_t buf_bytes;
    atomic_uint_fast64_t next;
    atomic_int stop;
    atomic_uint_fast64_t bytes_done;
    uint64_t bytes_total;
    int progress;
    pthread_mutex_t lock; /* guards the accumulators and the error       */
    ulp_error err;
} job;

static job_row *find_jrow(job *j, uint64_t t)
{
    size_t lo = 0, hi = j->njrows;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (j->jrows[mid].first_task <= t)
            lo = mid;
        else
            hi = mid;
    }
    return &j->jrows[lo];
}

static void job_fail(job *j, const ulp_error *e)
{
    pthread_mutex_lock(&j->lock);
    if (j->err.status == ULP_OK)
        j->err = *e;
    pthread_mutex_unlock(&j->lock);
    atomic_store(&j->stop, 1);
}

static void show_progress(job *j, int done)
{
    uint64_t d = atomic_load(&j->bytes_done);
    if (done) {
        fputs("\r\033[K", stderr);
        return;
    }
    fprintf(stderr, "\rulpprof diff: %3d%% of %.1f MiB",
            (int)(100.0 * (double)d / (double)(j->bytes_total ? j->bytes_total : 1)),
            (double)j->bytes_total / 1048576.0);
    fflush(stderr);
}

static void *worker(void *arg)
{
    job *j = arg;
    unsigned char *ba = malloc(j->buf_bytes ? j->buf_bytes : 1);
    unsigned char *bb = malloc(j->buf_bytes ? j->buf_bytes : 1);
    ulp_error e;
    ulp_error_clear(&e);
    if (ba == NULL || bb == NULL) {
        ulp__error(&e, ULP_ENOMEM, "out of memory for the comparison buffers");
        job_fail(j, &e);
        goto cleanup;
    }
    for (;;) {
        if (atomic_load(&j->stop))
            break;
        uint64_t t = atomic_fetch_add(&j->next, 1);
        if (t >= j->ntasks)
            break;
        job_row *jr = find_jrow(j, t);
        uint64_t first = (t - jr->first_task) * jr->chunk;
        uint64_t n = jr->elements - first < jr->chunk ? jr->elements - first : jr->chunk;
        const void *va, *vb;
        if (ulp_snapshot_view(j->a, jr->ia, first, n, ba, &va, &e) != ULP_OK ||
            ulp_snapshot_view(j->b, jr->ib, first, n, bb, &vb, &e) != ULP_OK) {
            job_fail(j, &e);
            break;
        }
        ulp__acc acc;
        ulp__acc_init(&acc);
        ulp__acc_add(&acc, jr->dtype, va, vb, n, first);
        ulp_snapshot_view_release(j->a, va, n * ulp_dtype_size(jr->dtype));
        ulp_snapshot_view_release(j->b, vb, n * ulp_dtype_size(jr->dtype));
        pthread_mutex_lock(&j->lock);
        ulp__acc_merge(&jr->acc, &acc);
        pthread_mutex_unlock(&j->lock);
        uint64_t bytes = 2 * n * ulp_dtype_size(jr->dtype);
        uint64_t before = atomic_fetch_add(&j->bytes_done, bytes);
        /* Progress from whichever thread crosses a 64 MiB mark. */
        if (j->progress && (before >> 26) != ((before + bytes) >> 26))
            show_progress(j, 0);
    }
cleanup:
    free(ba);
    free(bb);
    return NULL;
}

static ulp_status run_jobs(job *j, int nthreads)
{
    pthread_t tids[MAX_THREADS];
    int started = 0;
    if ((uint64_t)nthreads > j->ntasks)
        nthreads = j->ntasks > 0 ? (int)j->ntasks : 1;
    for (int i = 1; i < nthreads; i++) {
        if (pthread_create(&tids[started], NULL, worker, j) != 0)
            break; /* fewer threads still finish the work */
        started++;
    }
    worker(j);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    if (j->progress)
        show_progress(j, 1);
    return j->err.status;
}

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
}

static int same_shape(const ulp_capture_info *x, const ulp_capture_info *y)
{
    if (x->ndim != y->ndim)
        return 0;
    for (int k = 0; k < x->ndim; k++)
        if (x->shape[k] != y->shape[k])
            return 0;
    return 1;
}

static int selected(const ulp_diff_options *o, const ulp_capture_info *c)
{
    if (o->match && fnmatch(o->match, c->name, 0) != 0)
        return 0;
    if (o->role && strcmp(o->role, c->role ? c->role : "activation") != 0)
        return 0;
    return 1;
}

static ulp_status copy_kernels(const ulp_snapshot *s, const ulp_capture_info *c, int *has,
                               size_t *n, ulp_diff_kernel **out)
{
    *has = 0;
    *n = 0;
    *out = NULL;
    if (!c->has_kernels)
        return ULP_OK;
    size_t total = ulp_snapshot_kernel_count(s);
    int64_t first = c->kernels[0] < 0 ? 0 : c->kernels[0];
    int64_t last = c->kernels[1] > (int64_t)total ? (int64_t)total : c->kernels[1];
    *has = 1;
    if (last <= first)
        return ULP_OK;
    *out = calloc((size_t)(last - first), sizeof **out);
    if (*out == NULL)
        return ULP_ENOMEM;
    for (int64_t k = first; k < last; k++) {
        const ulp_kernel_info *ki = ulp_snapshot_kernel(s, (size_t)k);
        ulp_diff_kernel *dk = &(*out)[*n];
        dk->name = xstrdup(ki->name);
        if (dk->name == NULL)
            return ULP_ENOMEM;
        memcpy(dk->grid, ki->grid, sizeof dk->grid);
        memcpy(dk->block, ki->block, sizeof dk->block);
        (*n)++;
    }
    return ULP_OK;
}

static void fill_side(ulp_diff_row *row, const ulp_capture_info *c, int side_b)
{
    if (side_b) {
        row->seq_b = c->seq;
        row->dtype_b = c->dtype;
        row->ndim_b = c->ndim;
        memcpy(row->shape_b, c->shape, sizeof row->shape_b);
    } else {
        row->seq_a = c->seq;
        row->dtype_a = c->dtype;
        row->ndim_a = c->ndim;
        memcpy(row->shape_a, c->shape, sizeof row->shape_a);
    }
}

static ulp_status new_row(ulp_diff_result *r, const ulp_capture_info *c, ulp_diff_row **out)
{
    ulp_diff_row *row = &r->rows[r->n_rows++];
    memset(row, 0, sizeof *row);
    row->name = xstrdup(c->name);
    row->role = xstrdup(c->role ? c->role : "activation");
    if (row->name == NULL || row->role == NULL)
        return ULP_ENOMEM;
    row->occurrence = c->occurrence;
    row->layer = c->layer;
    row->seq_a = row->seq_b = -1;
    row->dtype_a = row->dtype_b = ULP_DTYPE_INVALID;
    row->elements = c->elements;
    row->m.worst_flat = -1;
    row->m.max_abs_diff_flat = -1;
    *out = row;
    return ULP_OK;
}

/* Reads the worst element's bits on both sides. */
static ulp_status fill_worst(const ulp_snapshot *a, size_t ia, const ulp_snapshot *b, size_t ib,
                             ulp_diff_row *row, ulp_error *err)
{
    unsigned char xa[8] = {0}, xb[8] = {0};
    ulp_status st;
    if (row->m.worst_flat < 0)
        return ULP_OK;
    st = ulp_snapshot_read(a, ia, (uint64_t)row->m.worst_flat, 1, xa, err);
    if (st == ULP_OK)
        st = ulp_snapshot_read(b, ib, (uint64_t)row->m.worst_flat, 1, xb, err);
    if (st != ULP_OK)
        return st;
    row->m.worst_bits_a = ulp_dtype_load_bits(row->dtype_a, xa);
    row->m.worst_bits_b = ulp_dtype_load_bits(row->dtype_a, xb);
    row->m.worst_a = ulp_dtype_to_double(row->dtype_a, row->m.worst_bits_a);
    row->m.worst_b = ulp_dtype_to_double(row->dtype_a, row->m.worst_bits_b);
    return ULP_OK;
}

static void amplification(ulp_diff_result *r)
{
    ulp_diff_amplification *amp = &r->amp;
    memset(amp, 0, sizeof *amp);
    size_t first = r->n_rows;
    for (size_t i = 0; i < r->n_rows; i++) {
        if (r->rows[i].status == ULP_DIFF_DIFFERS) {
            first = i;
            break;
        }
    }
    if (first == r->n_rows)
        return;
    size_t last = r->n_rows;
    for (size_t i = first; i < r->n_rows; i++) {
        const ulp_diff_row *row = &r->rows[i];
        if ((row->status == ULP_DIFF_DIFFERS || row->status == ULP_DIFF_IDENTICAL) &&
            strcmp(row->role, "activation") == 0)
            last = i;
    }
    if (last == r->n_rows)
        last = first;
    const ulp_diff_row *f = &r->rows[first], *l = &r->rows[last];
    amp->valid = 1;
    amp->first_row = first;
    amp->last_row = last;
    amp->frac_first = f->elements ? (double)f->m.differing / (double)f->elements : 0.0;
    amp->frac_last = l->elements ? (double)l->m.differing / (double)l->elements : 0.0;
    amp->abs_first = f->m.max_abs_diff;
    amp->abs_last = l->m.max_abs_diff;
    amp->frac_factor = amp->frac_last / amp->frac_first;
    amp->abs_factor =
        amp->abs_first > 0 ? amp->abs_last / amp->abs_first : (amp->abs_last > 0 ? HUGE_VAL : 1.0);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ulp_status ulp_diff_run(const ulp_snapshot *a, const ulp_snapshot *b,
                        const ulp_diff_options *opts_in, ulp_diff_result **out, ulp_error *err)
{
    ulp_diff_options opts;
    ulp_diff_result *r = NULL;
    job j;
    ulp_status st = ULP_OK;
    size_t na = ulp_snapshot_capture_count(a), nb = ulp_snapshot_capture_count(b);
    unsigned char *b_used = NULL;
    double t0 = now_seconds();
    int lock_init = 0;

    memset(&j, 0, sizeof j);
    *out = NULL;
    if (opts_in)
        opts = *opts_in;
    else
        ulp_diff_options_init(&opts);
    if (opts.threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        opts.threads = cpus < 1 ? 1 : cpus > DEFAULT_THREADS ? DEFAULT_THREADS : (int)cpus;
    }
    if (opts.threads > MAX_THREADS)
        opts.threads = MAX_THREADS;
    if (opts.chunk_elements == 0)
        opts.chunk_elements = DEFAULT_CHUNK_ELEMENTS;
    if (opts.n_temperatures < 0 || opts.n_temperatures > ULP_DIFF_MAX_TEMPERATURES)
        return ulp__error(err, ULP_EINVAL, "at most %d temperatures", ULP_DIFF_MAX_TEMPERATURES);
    for (int i = 0; i < opts.n_temperatures; i++)
        if (!(opts.temperatures[i] > 0) || isinf(opts.temperatures[i]))
            return ulp__error(err, ULP_EINVAL, "temperature must be a positive number");

    r = calloc(1, sizeof *r);
    if (r == NULL)
        goto oom;
    r->rows = calloc(na + nb + 1, sizeof *r->rows);
    b_used = calloc(nb + 1, 1);
    j.jrows = calloc(na + 1, sizeof *j.jrows);
    r->path_a = xstrdup(ulp_snapshot_path(a));
    r->path_b = xstrdup(ulp_snapshot_path(b));
    r->label_a = xstrdup(ulp_snapshot_label(a));
    r->label_b = xstrdup(ulp_snapshot_label(b));
    if (!r->rows || !b_used || !j.jrows || !r->path_a || !r->path_b || !r->label_a || !r->label_b)
        goto oom;
    r->n_temperatures = opts.n_temperatures;
    memcpy(r->temperatures, opts.temperatures, sizeof r->temperatures);

    /* Pairing. */
    uint64_t chunk_bytes = opts.chunk_elements * 2; /* a 2-byte element's share */
    for (size_t i = 0; i < na; i++) {
        const ulp_capture_info *ca = ulp_snapshot_capture(a, i);
        ptrdiff_t k = ulp_snapshot_find(b, ca->name, ca->occurrence);
        if (k >= 0)
            b_used[k] = 1; /* even when filtered out: it is not "only in B" */
        if (!selected(&opts, ca))
            continue;
        ulp_diff_row *row;
        if (new_row(r, ca, &row) != ULP_OK)
            goto oom;
        fill_side(row, ca, 0);
        if (k < 0) {
            row->status = ULP_DIFF_ONLY_IN_A;
            r->n_only_a++;
            continue;
        }
        const ulp_capture_info *cb = ulp_snapshot_capture(b, (size_t)k);
        fill_side(row, cb, 1);
        r->n_shared++;
        if (copy_kernels(a, ca, &row->has_kernels_a, &row->n_kernels_a, &row->kernels_a) ||
            copy_kernels(b, cb, &row->has_kernels_b, &row->n_kernels_b, &row->kernels_b))
            goto oom;
        if (ca->dtype != cb->dtype) {
            row->status = ULP_DIFF_DTYPE_MISMATCH;
            continue;
        }
        if (!same_shape(ca, cb)) {
            row->status = ULP_DIFF_SHAPE_MISMATCH;
            continue;
        }
        row->status = ULP_DIFF_IDENTICAL; /* until a chunk differs */
        job_row *jr = &j.jrows[j.njrows++];
        jr->row = r->n_rows - 1;
        jr->ia = i;
        jr->ib = (size_t)k;
        jr->dtype = ca->dtype;
        jr->elements = ca->elements;
        size_t sz = ulp_dtype_size(ca->dtype);
        jr->chunk = chunk_bytes / sz ? chunk_bytes / sz : 1;
        jr->nchunks = (jr->elements + jr->chunk - 1) / jr->chunk;
        jr->first_task = j.ntasks;
        j.ntasks += jr->nchunks;
        j.bytes_total += 2 * jr->elements * sz;
        ulp__acc_init(&jr->acc);
    }
    for (size_t k = 0; k < nb; k++) {
        const ulp_capture_info *cb = ulp_snapshot_capture(b, k);
        if (b_used[k] || !selected(&opts, cb))
            continue;
        ulp_diff_row *row;
        if (new_row(r, cb, &row) != ULP_OK)
            goto oom;
        fill_side(row, cb, 1);
        row->status = ULP_DIFF_ONLY_IN_B;
        r->n_only_b++;
    }

    /* Element metrics. */
    j.a = a;
    j.b = b;
    j.buf_bytes = (size_t)(chunk_bytes > 8 ? chunk_bytes : 8);
    j.progress = opts.progress;
    ulp_error_clear(&j.err);
    atomic_init(&j.next, 0);
    atomic_init(&j.stop, 0);
    atomic_init(&j.bytes_done, 0);
    if (pthread_mutex_init(&j.lock, NULL) != 0) {
        st = ulp__error(err, ULP_ETHREAD, "cannot create a mutex");
        goto fail;
    }
    lock_init = 1;
    if (j.ntasks > 0 && run_jobs(&j, opts.threads) != ULP_OK) {
        st = j.err.status;
        if (err)
            *err = j.err;
        goto fail;
    }
    for (size_t q = 0; q < j.njrows; q++) {
        job_row *jr = &j.jrows[q];
        ulp_diff_row *row = &r->rows[jr->row];
        jr->acc.elements = jr->elements; /* empty tensors have no chunks */
        ulp__acc_finish(&jr->acc, jr->dtype, row->ndim_a, row->shape_a, &row->m);
        row->status = row->m.differing ? ULP_DIFF_DIFFERS : ULP_DIFF_IDENTICAL;
        st = fill_worst(a, jr->ia, b, jr->ib, row, err);
        if (st != ULP_OK)
            goto fail;
        r->bytes_read += 2 * jr->elements * ulp_dtype_size(jr->dtype);
    }

    /* Verdict, first divergence, amplification. */
    r->identical = 1;
    for (size_t i = 0; i < r->n_rows; i++) {
        ulp_diff_status s = r->rows[i].status;
        if (s != ULP_DIFF_IDENTICAL)
            r->identical = 0;
        if (!r->has_first_divergence && (s == ULP_DIFF_DIFFERS || s == ULP_DIFF_SHAPE_MISMATCH ||
                                         s == ULP_DIFF_DTYPE_MISMATCH)) {
            r->has_first_divergence = 1;
            r->first_divergence = i;
        }
    }
    amplification(r);

    /* Logits. */
    size_t nlog = 0;
    for (size_t q = 0; q < j.njrows; q++)
        if (strcmp(r->rows[j.jrows[q].row].role, "logits") == 0)
            nlog++;
    if (nlog) {
        r->logits = calloc(nlog, sizeof *r->logits);
        if (r->logits == NULL)
            goto oom;
        for (size_t q = 0; q < j.njrows; q++) {
            job_row *jr = &j.jrows[q];
            ulp_diff_row *row = &r->rows[jr->row];
            if (strcmp(row->role, "logits") != 0)
                continue;
            ulp_diff_logits *lg = &r->logits[r->n_logits++];
            lg->name = row->name;
            lg->occurrence = row->occurrence;
            lg->row_index = jr->row;
            st = ulp__logits_run(a, jr->ia, b, jr->ib, &opts, lg, err);
            if (st != ULP_OK)
                goto fail;
        }
    }

    st = ulp__ladder_run(a, b, &r->ladder, err);
    if (st != ULP_OK)
        goto fail;

    r->seconds = now_seconds() - t0;
    *out = r;
    r = NULL;
    goto cleanup;

oom:
    st = ulp__error(err, ULP_ENOMEM, "out of memory");
fail:
    ulp_diff_result_free(r);
cleanup:
    if (lock_init)
        pthread_mutex_destroy(&j.lock);
    free(j.jrows);
    free(b_used);
    return st;
}

static void free_kernels(ulp_diff_kernel *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free((char *)(uintptr_t)k[i].name);
    free(k);
}

void ulp_diff_result_free(ulp_diff_result *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_rows; i++) {
        ulp_diff_row *row = &r->rows[i];
        free((char *)(uintptr_t)row->name);
        free((char *)(uintptr_t)row->role);
        free_kernels(row->kernels_a, row->n_kernels_a);
        free_kernels(row->kernels_b, row->n_kernels_b);
    }
    for (size_t i = 0; i < r->n_logits; i++)
        ulp__logits_free(&r->logits[i]);
    free(r->logits);
    ulp__ladder_free(&r->ladder);
    free(r->rows);
    free(r->path_a);
    free(r->path_b);
    free(r->label_a);
    free(r->label_b);
    free(r);
}

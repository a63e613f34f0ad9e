/*
 * The element metrics of ulp_diff_run(): every compared pair's elements are
 * split into chunks of at most `chunk_bytes` per side (small pairs whose
 * bytes lie within one read-ahead window are grouped instead), handed out
 * to the worker threads from one atomic counter in pair order, and each chunk's
 * metrics are merged into its row under a lock (ulp__acc_merge() does not
 * depend on the order).  Chunks are read in place from the files' mappings
 * and released when done, or copied into two buffers per thread, whichever
 * costs the thread less (diff_read.c): memory is a few chunks per thread
 * whatever the tensor sizes.  Which of the two is measured (ulp__read_probe)
 * by the first thread that meets a run it could map, while the others go
 * on: the probe no longer delays the start of every thread, and a diff
 * that maps nothing never runs it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "diff_priv.h"
#include "format/snapshot_read_priv.h"

/* One compared pair (a run of a row's elements) and its share of the work. */
typedef struct job_row {
    size_t row; /* index into result rows                      */
    size_t ia, ib;
    ulp_dtype dtype;
    size_t sz;             /* its bytes per element                     */
    uint64_t off_a, off_b; /* first element in each capture             */
    uint64_t base;         /* view index of off_a                       */
    uint64_t rowlen;       /* aligned: elements per key; else 0         */
    ulp_diff_key *keys;    /* aligned: the row's keys, `differs` set here */
    ulp__logits_fuse *lgf; /* logits rows taken with the elements, or NULL */
    uint64_t elements;
    uint64_t head;       /* elements of the first chunk (<= chunk)      */
    uint64_t chunk;      /* elements per chunk                          */
    uint64_t first_task; /* tasks [first_task, first_task + nchunks)    */
    uint64_t nchunks;
    int alone;    /* the row's one pair, of one chunk: its thread finishes the row */
    ulp__acc acc; /* not alone: the chunks' metrics, merged        */
} job_row;

/*
 * A task: chunk `t - first_task` of job row `jrow`, or, for small pairs
 * (one chunk each, read through windows), job rows [jrow, jrow + njrows)
 * whose bytes lie within one window on each side: a thread then reads
 * each window once, where handing out pairs one by one had every thread
 * read every window.
 */
typedef struct job_task {
    size_t jrow, njrows;
    uint64_t end_a, end_b; /* a group: where its bytes end in each file */
} job_task;

int ulp__read_mode_init(ulp__read_mode *rm, const ulp_snapshot *a, const ulp_snapshot *b)
{
    rm->a = a;
    rm->b = b;
    atomic_init(&rm->map, -1);
    return pthread_mutex_init(&rm->lock, NULL) == 0 ? 0 : -1;
}

void ulp__read_mode_destroy(ulp__read_mode *rm)
{
    pthread_mutex_destroy(&rm->lock);
}

/* 1 when runs like q are read in place; probes the files the first time. */
static int mapped_reads(ulp__read_mode *rm, const ulp__read_req *q)
{
    int map = atomic_load(&rm->map);
    if (map >= 0 || !ulp__read_mappable(q))
        return map > 0;
    pthread_mutex_lock(&rm->lock);
    if ((map = atomic_load(&rm->map)) < 0) {
        map = ulp__read_probe(rm->a, rm->b);
        atomic_store(&rm->map, map);
    }
    pthread_mutex_unlock(&rm->lock);
    return map;
}

typedef struct job {
    const ulp_snapshot *a, *b;
    job_row *jrows;
    size_t njrows;
    job_task *tasks; /* [ntasks]                                   */
    uint64_t ntasks;
    size_t buf_bytes;
    atomic_uint_fast64_t next;
    atomic_int stop;
    atomic_uint_fast64_t bytes_done;
    uint64_t bytes_total;
    int progress;
    ulp__read_mode *rm;
    ulp_diff_row *rows;   /* the batch's rows (of the result)            */
    pthread_mutex_t lock; /* guards the accumulators and the error       */
    ulp_error err;
} job;

static ulp_status finish_row(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_row *row,
                             ulp__acc *acc, const job_row *jrs, size_t n, ulp_error *err);

/* A copied read's most bytes a side: the pieces stay in the core's L2 cache. */
#define COPY_PIECE ((size_t)512 << 10)
/* A window starts up to this many bytes before the view it is read for (snapshot_window.c). */
#define WINDOW_SLACK 64

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

/* Marks the keys of an aligned row whose bytes differ in view elements [v, v + n). */
static void mark_keys(job_row *jr, uint64_t v, const void *a, const void *b, uint64_t n)
{
    size_t sz = ulp_dtype_size(jr->dtype);
    uint64_t done = 0;
    while (done < n) {
        uint64_t key = (v + done) / jr->rowlen;
        uint64_t end = (key + 1) * jr->rowlen - v; /* end of this key's row, in the chunk */
        uint64_t m = (end < n ? end : n) - done;
        if (memcmp((const char *)a + done * sz, (const char *)b + done * sz, m * sz) != 0)
            __atomic_store_n(&jr->keys[key].differs, 1, __ATOMIC_RELAXED);
        done += m;
    }
}

/* Chunk k of job row jr, into its accumulator: the bytes of a side, or -1 after an error. */
static int64_t run_chunk(job *j, job_row *jr, uint64_t k, ulp__reader *rd, ulp_error *e)
{
    uint64_t first = k == 0 ? 0 : jr->head + (k - 1) * jr->chunk;
    uint64_t size = k == 0 ? jr->head : jr->chunk;
    uint64_t n = jr->elements - first < size ? jr->elements - first : size;
    ulp__read_req q = {j->a, j->b,      jr->ia,      jr->ib, jr->off_a + first, jr->off_b + first,
                       n,    jr->dtype, jr->elements};
    /* A pair of one chunk is this thread's alone: its accumulator takes
     * the elements directly, with no merge and no lock (10,000 small
     * pairs spent as long on those as on comparing); the row's only pair
     * is finished here too, off the caller's thread. */
    ulp__acc local, *acc = jr->nchunks == 1 && !jr->alone ? &jr->acc : &local;
    if (acc == &local)
        ulp__acc_init(&local);
    const void *va, *vb;
    uint64_t at, m;
    int got;
    rd->map = mapped_reads(j->rm, &q);
    ulp__reader_begin(rd, &q);
    while ((got = ulp__reader_next(rd, &va, &vb, &at, &m, e)) > 0) {
        ulp__acc_add(acc, jr->dtype, va, vb, m, jr->base + first + at);
        if (jr->lgf != NULL)
            ulp__logits_fuse_add(jr->lgf, va, vb, m, jr->base + first + at);
        if (jr->keys != NULL)
            mark_keys(jr, jr->base + first + at, va, vb, m);
    }
    ulp__reader_end(rd);
    if (got < 0)
        return -1;
    if (jr->alone) {
        if (finish_row(j->a, j->b, &j->rows[jr->row], &local, jr, 1, e) != ULP_OK)
            return -1;
    } else if (acc == &local) {
        pthread_mutex_lock(&j->lock);
        ulp__acc_merge(&jr->acc, &local);
        pthread_mutex_unlock(&j->lock);
    }
    return (int64_t)(n * jr->sz);
}

/* A thread's share of the job: tasks from the shared counter until none is left. */
static void worker(void *arg, ulp__diff_worker *w)
{
    job *j = arg;
    ulp__reader *rd = &w->rd;
    ulp_error e;
    ulp_error_clear(&e);
    if (w->ba == NULL || w->bb == NULL) {
        /* The first job of this thread: the buffers (the same size for every
         * job of a diff) and the reader stay for the next ones. */
        if ((w->ba == NULL && (w->ba = malloc(j->buf_bytes)) == NULL) ||
            (w->bb == NULL && (w->bb = malloc(j->buf_bytes)) == NULL)) {
            ulp__error(&e, ULP_ENOMEM, "out of memory for the comparison buffers");
            job_fail(j, &e);
            return;
        }
        /* Copied pieces of at most 512 KiB a side stay in L2. */
        ulp__reader_init(rd, w->ba, w->bb, j->buf_bytes < COPY_PIECE ? j->buf_bytes : COPY_PIECE,
                         0);
        rd->windows = 1; /* many small captures: one read for a window of them */
    }
    for (;;) {
        if (atomic_load(&j->stop))
            break;
        uint64_t t = atomic_fetch_add(&j->next, 1);
        if (t >= j->ntasks)
            break;
        const job_task *task = &j->tasks[t];
        uint64_t bytes = 0;
        /* A window read for a group stops at its end: the next group is
         * likely another thread's, which had read it again. */
        rd->wa.upto = task->end_a;
        rd->wb.upto = task->end_b;
        for (size_t q = 0; q < task->njrows; q++) {
            job_row *jr = &j->jrows[task->jrow + q];
            int64_t got = run_chunk(j, jr, q == 0 ? t - jr->first_task : 0, rd, &e);
            if (got < 0) {
                job_fail(j, &e);
                return;
            }
            bytes += (uint64_t)got;
        }
        uint64_t before = atomic_fetch_add(&j->bytes_done, 2 * bytes);
        /* Progress from whichever thread crosses a 64 MiB mark. */
        if (j->progress && (before >> 26) != ((before + 2 * bytes) >> 26))
            show_progress(j, 0);
    }
}

void ulp__diff_overlap_run(ulp__diff_overlap *ov)
{
    if (ov == NULL || ov->fn == NULL || ov->ran)
        return;
    ov->ran = 1;
    ulp_error_clear(&ov->err);
    ov->st = ov->fn(ov->ctx, &ov->err);
}

/*
 * The job on the pool: the helpers start, the caller runs `ov` meanwhile
 * (then all of them may be needed: the caller joins late), then takes its
 * share.  When ov fails the job stops, and its status is returned.
 */
static ulp_status run_jobs(job *j, ulp__diff_pool *pool, ulp__diff_overlap *ov)
{
    int late = ov != NULL && ov->fn != NULL && !ov->ran;
    uint64_t want = late ? j->ntasks : j->ntasks - 1;
    int helpers = ulp__diff_pool_helpers(pool);
    ulp__diff_pool_post(pool, worker, j, (uint64_t)helpers > want ? (int)want : helpers);
    if (late) {
        ulp__diff_overlap_run(ov);
        if (ov->st != ULP_OK)
            atomic_store(&j->stop, 1);
    }
    ulp__diff_pool_join(pool, !late || ov->st == ULP_OK);
    if (j->progress)
        show_progress(j, 1);
    if (late && ov->st != ULP_OK)
        return ov->st;
    return j->err.status;
}

/* Reads the worst element's bits on both sides, through the job row that
 * holds it (when it is not the largest ULP distance's element, which the
 * pass keeps: only ±0 or nonfinite differences). */
static ulp_status fill_worst(const ulp_snapshot *a, const ulp_snapshot *b, const job_row *jrs,
                             size_t n, ulp_diff_row *row, ulp_error *err)
{
    unsigned char xa[8] = {0}, xb[8] = {0};
    ulp_status st;
    if (row->m.worst_flat < 0)
        return ULP_OK;
    uint64_t v = (uint64_t)row->m.worst_flat;
    const job_row *jr = NULL;
    for (size_t q = 0; q < n && jr == NULL; q++)
        if (v >= jrs[q].base && v - jrs[q].base < jrs[q].elements)
            jr = &jrs[q];
    if (jr == NULL)
        return ULP_OK;
    st = ulp_snapshot_read(a, jr->ia, jr->off_a + (v - jr->base), 1, xa, err);
    if (st == ULP_OK)
        st = ulp_snapshot_read(b, jr->ib, jr->off_b + (v - jr->base), 1, xb, err);
    if (st != ULP_OK)
        return st;
    row->m.worst_bits_a = ulp_dtype_load_bits(row->dtype_a, xa);
    row->m.worst_bits_b = ulp_dtype_load_bits(row->dtype_a, xb);
    row->m.worst_a = ulp_dtype_to_double(row->dtype_a, row->m.worst_bits_a);
    row->m.worst_b = ulp_dtype_to_double(row->dtype_a, row->m.worst_bits_b);
    return ULP_OK;
}

/* Aligned rows: how many keys differ, the first one, the worst element's key. */
void ulp__diff_finish_keys(ulp_diff_row *row, uint64_t rowlen)
{
    if (!row->aligned || rowlen == 0)
        return;
    for (size_t k = 0; k < row->n_keys; k++) {
        if (!row->keys[k].differs)
            continue;
        row->positions_differing++;
        if (row->first_position < 0) {
            row->first_request = row->keys[k].request;
            row->first_position = row->keys[k].position;
        }
    }
    if (row->m.worst_flat >= 0) {
        const ulp_diff_key *w = &row->keys[(uint64_t)row->m.worst_flat / rowlen];
        row->worst_request = w->request;
        row->worst_position = w->position;
    }
}

/* A row's metrics, status, worst element from its merged accumulator; its
 * job rows jrs[0..n). */
static ulp_status finish_row(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_row *row,
                             ulp__acc *acc, const job_row *jrs, size_t n, ulp_error *err)
{
    acc->elements = row->elements; /* empty tensors have no chunks */
    ulp__acc_finish(acc, jrs[0].dtype, row->ndim_a, row->shape_a, &row->m);
    row->status = row->m.differing ? ULP_DIFF_DIFFERS : ULP_DIFF_IDENTICAL;
    if (acc->max_ulp > 0 && row->m.worst_flat == acc->max_ulp_flat) {
        /* The pass kept the worst element (the common case): no read. */
        row->m.worst_bits_a = acc->max_ulp_bits_a;
        row->m.worst_bits_b = acc->max_ulp_bits_b;
        row->m.worst_a = ulp_dtype_to_double(row->dtype_a, acc->max_ulp_bits_a);
        row->m.worst_b = ulp_dtype_to_double(row->dtype_a, acc->max_ulp_bits_b);
    } else {
        ulp_status st = fill_worst(a, b, jrs, n, row, err);
        if (st != ULP_OK)
            return st;
    }
    ulp__diff_finish_keys(row, jrs[0].rowlen);
    return ULP_OK;
}

/*
 * Elements in the first chunk of a pair whose A side starts at `p` in the
 * file's mapping: up to the next span boundary when whole chunks are
 * spans, so that every other chunk starts on one and a chunk's release
 * (ulp_snapshot_view_release) drops no page another chunk is reading.
 */
static uint64_t head_elements(const void *p, size_t sz, uint64_t chunk_bytes, uint64_t chunk)
{
    if (p == NULL || chunk_bytes % ULP__VIEW_SPAN != 0)
        return chunk;
    uintptr_t to = (ULP__VIEW_SPAN - (uintptr_t)p % ULP__VIEW_SPAN) % ULP__VIEW_SPAN;
    return to == 0 || to % sz != 0 ? chunk : to / sz;
}

/* A group's bytes on one side of the file: [lo, hi), within one window. */
typedef struct group_span {
    uint64_t lo, hi;
} group_span;

/* Widens *g to [off, off + bytes): 1 when the group still fits `most` bytes. */
static int span_take(group_span *g, uint64_t off, uint64_t bytes, uint64_t most)
{
    uint64_t lo = off < g->lo ? off : g->lo, hi = off + bytes > g->hi ? off + bytes : g->hi;
    if (hi - lo > most)
        return 0;
    g->lo = lo;
    g->hi = hi;
    return 1;
}

/* Splits every pair into chunks, and groups small pairs: job rows in pair
 * order, tasks numbered across them.  -1 when out of memory. */
static int plan(job *j, const ulp_snapshot *a, const ulp_snapshot *b, const ulp_diff_result *r,
                const ulp__diff_pair *pairs, size_t npairs, ulp__logits_fuse *fuse, size_t nfuse,
                uint64_t chunk_bytes, uint64_t group_bytes, size_t *cap_tasks)
{
    size_t f = 0;
    int open = 0; /* the last task is a group that may take the next pair */
    group_span ga = {0, 0}, gb = {0, 0};
    for (size_t q = 0; q < npairs; q++) {
        ulp_diff_row *row = &r->rows[pairs[q].row];
        while (f < nfuse && fuse[f].row < pairs[q].row)
            f++;
        job_row *jr = &j->jrows[j->njrows++];
        jr->row = pairs[q].row;
        jr->ia = pairs[q].ia;
        jr->ib = pairs[q].ib;
        jr->dtype = row->dtype_a;
        jr->off_a = pairs[q].off_a;
        jr->off_b = pairs[q].off_b;
        jr->base = pairs[q].base;
        jr->rowlen = pairs[q].rowlen;
        jr->keys = row->aligned && pairs[q].rowlen > 0 ? row->keys : NULL;
        jr->lgf = f < nfuse && fuse[f].row == pairs[q].row ? &fuse[f] : NULL;
        jr->elements = pairs[q].len;
        size_t sz = jr->sz = ulp_dtype_size(jr->dtype);
        jr->chunk = chunk_bytes / sz ? chunk_bytes / sz : 1;
        jr->head =
            head_elements(ulp__snapshot_mapped(a, jr->ia, jr->off_a), sz, chunk_bytes, jr->chunk);
        if (jr->elements == 0)
            jr->nchunks = 0;
        else if (jr->elements <= jr->head)
            jr->nchunks = 1;
        else
            jr->nchunks = 1 + (jr->elements - jr->head + jr->chunk - 1) / jr->chunk;
        j->bytes_total += 2 * jr->elements * sz;
        jr->alone = jr->nchunks == 1 && (q == 0 || pairs[q - 1].row != pairs[q].row) &&
                    (q + 1 == npairs || pairs[q + 1].row != pairs[q].row);
        if (!jr->alone)
            ulp__acc_init(&jr->acc);
        uint64_t bytes = jr->elements * sz;
        uint64_t oa = ulp__snapshot_offset(a, jr->ia), ob = ulp__snapshot_offset(b, jr->ib);
        int small = jr->nchunks == 1 && bytes <= ULP__VIEW_COPY_BYTES && oa != UINT64_MAX &&
                    ob != UINT64_MAX;
        oa += jr->off_a * sz;
        ob += jr->off_b * sz;
        group_span na = ga, nb = gb;
        if (small && open && span_take(&na, oa, bytes, group_bytes) &&
            span_take(&nb, ob, bytes, group_bytes)) {
            ga = na;
            gb = nb;
            jr->first_task = j->ntasks - 1;
            j->tasks[j->ntasks - 1].njrows++;
            j->tasks[j->ntasks - 1].end_a = ga.hi;
            j->tasks[j->ntasks - 1].end_b = gb.hi;
            continue;
        }
        jr->first_task = j->ntasks;
        if (ULP__GROW(j->tasks, *cap_tasks, j->ntasks + jr->nchunks) != 0)
            return -1;
        for (uint64_t k = 0; k < jr->nchunks; k++)
            j->tasks[j->ntasks++] = (job_task){j->njrows - 1, 1, 0, 0};
        open = small;
        ga = (group_span){oa, oa + bytes};
        gb = (group_span){ob, ob + bytes};
        if (small) {
            j->tasks[j->ntasks - 1].end_a = ga.hi;
            j->tasks[j->ntasks - 1].end_b = gb.hi;
        }
    }
    return 0;
}

/* Small pairs per task, a side: at least four tasks a thread where a batch
 * is a few windows (a stream batch of 1,024 captures of 512 bytes was two
 * windows, two tasks: one thread did the work), whole windows where it is
 * many. */
#define GROUP_MIN_BYTES ((uint64_t)16 << 10)
static uint64_t group_bytes(const ulp_diff_result *r, const ulp__diff_pair *pairs, size_t npairs,
                            int threads)
{
    uint64_t most = ULP__WINDOW_BYTES - WINDOW_SLACK, side = 0;
    for (size_t q = 0; q < npairs; q++)
        side += pairs[q].len * ulp_dtype_size(r->rows[pairs[q].row].dtype_a);
    uint64_t share = side / (4 * (uint64_t)threads);
    return share < GROUP_MIN_BYTES ? GROUP_MIN_BYTES : share > most ? most : share;
}

/*
 * The pairs [0, npairs) -- whole rows -- as one job; `done`, `total`: the
 * bytes of the batches before and of all, for the progress line.
 */
static ulp_status metrics_batch(const ulp_snapshot *a, const ulp_snapshot *b,
                                const ulp_diff_options *opts, ulp__read_mode *rm,
                                ulp__diff_pool *pool, ulp_diff_result *r,
                                const ulp__diff_pair *pairs, size_t npairs, ulp__logits_fuse *fuse,
                                size_t nfuse, uint64_t *done, uint64_t total, ulp__diff_overlap *ov,
                                ulp_error *err)
{
    job j;
    ulp_status st = ULP_OK;
    memset(&j, 0, sizeof j);
    ulp__diff_scratch *sc = ulp__diff_pool_scratch(pool);
    if (ulp__grow(&sc->jrows, &sc->cap_jrows, npairs + 1, sizeof *j.jrows) != 0)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    j.jrows = sc->jrows; /* every field is set by plan() */
    j.tasks = sc->tasks;
    uint64_t chunk_bytes = opts->chunk_elements * 2; /* a 2-byte element's share */
    int rc = plan(&j, a, b, r, pairs, npairs, fuse, nfuse, chunk_bytes,
                  group_bytes(r, pairs, npairs, ulp__diff_pool_helpers(pool) + 1), &sc->cap_tasks);
    sc->tasks = j.tasks; /* grown or not */
    if (rc != 0)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    uint64_t batch_bytes = j.bytes_total;
    j.bytes_total = total;
    j.a = a;
    j.b = b;
    j.buf_bytes = (size_t)(chunk_bytes > 8 ? chunk_bytes : 8);
    j.progress = opts->progress;
    j.rm = rm;
    j.rows = r->rows;
    ulp_error_clear(&j.err);
    atomic_init(&j.next, 0);
    atomic_init(&j.stop, 0);
    atomic_init(&j.bytes_done, *done);
    *done += batch_bytes;
    if (pthread_mutex_init(&j.lock, NULL) != 0)
        return ulp__error(err, ULP_ETHREAD, "cannot create a mutex");
    if (j.ntasks > 0 && (st = run_jobs(&j, pool, ov)) != ULP_OK) {
        if (err && j.err.status != ULP_OK)
            *err = j.err; /* else the overlap's: the caller has it */
        goto cleanup;
    }
    for (size_t q = 0; q < j.njrows;) {
        /* A row's job rows are consecutive: merge them. */
        size_t q0 = q;
        ulp_diff_row *row = &r->rows[j.jrows[q].row];
        ulp__acc merged, *acc = &j.jrows[q0].acc;
        for (; q < j.njrows && j.jrows[q].row == j.jrows[q0].row; q++)
            r->bytes_read += 2 * j.jrows[q].elements * j.jrows[q].sz;
        if (j.jrows[q0].alone)
            continue; /* its thread finished it */
        if (q - q0 > 1) {
            acc = &merged;
            ulp__acc_init(&merged);
            for (size_t k = q0; k < q; k++)
                ulp__acc_merge(&merged, &j.jrows[k].acc);
        }
        if ((st = finish_row(a, b, row, acc, j.jrows + q0, q - q0, err)) != ULP_OK)
            goto cleanup;
    }
cleanup:
    pthread_mutex_destroy(&j.lock);
    return st;
}

/* Pairs compared per job: the job rows (each with its accumulator, 0.7 KiB)
 * of 100,000 captures would have taken 73 MiB at once. */
#define BATCH_PAIRS 2048

ulp_status ulp__diff_metrics(const ulp_snapshot *a, const ulp_snapshot *b,
                             const ulp_diff_options *opts, ulp__read_mode *rm, ulp__diff_pool *pool,
                             ulp_diff_result *r, const ulp__diff_pair *pairs, size_t npairs,
                             ulp__logits_fuse *fuse, size_t nfuse, ulp__diff_overlap *ov,
                             ulp_error *err)
{
    uint64_t total = 0, done = 0;
    for (size_t q = 0; opts->progress && q < npairs; q++) /* for the progress line only */
        total += 2 * pairs[q].len * ulp_dtype_size(r->rows[pairs[q].row].dtype_a);
    ulp_status st = ULP_OK;
    for (size_t lo = 0, hi; lo < npairs && st == ULP_OK; lo = hi) {
        /* Whole rows: a row's pairs are consecutive. */
        hi = npairs - lo > BATCH_PAIRS ? lo + BATCH_PAIRS : npairs;
        while (hi < npairs && pairs[hi].row == pairs[hi - 1].row)
            hi++;
        st = metrics_batch(a, b, opts, rm, pool, r, pairs + lo, hi - lo, fuse, nfuse, &done, total,
                           ov, err);
    }
    ulp__diff_overlap_run(ov); /* no job ran it */
    return st;
}

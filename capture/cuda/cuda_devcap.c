/* Device-memory capture through the ops table (cuda_devcap.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_devcap.h"

#include "format/capture_rows.h"

/* Staging buffers are sized in powers of two from 64 KiB, so a model's
 * repeated shapes reuse them. */
#define BUF_MIN ((size_t)64 << 10)

typedef struct staging {
    struct staging *next;
    void *p;
    size_t cap;
} staging;

typedef struct job {
    struct job *next;
    ulp__desc d;
    char *name;
    int64_t shape[ULP_MAX_RANK];
    staging *buf; /* NULL when nbytes == 0 */
    size_t nbytes;
    void *rows; /* the copy of d's positions, requests, inputs, or NULL */
    CUcontext ctx;
    CUevent ev;     /* NULL: the copy was synchronous */
    int any_stream; /* attribute the kernels of every stream */
    int has_stream_id;
    uint32_t stream_id;
    uint32_t corr; /* 0: no attribution */
    int done;      /* the copy has finished */
    int bad;       /* the wait failed: drop */
    /* A graph replay to harvest: one staging buffer per tap (NULL for an
     * empty tensor or one larger than the pool), taken at launch. */
    ulp__graph_replay *replay;
    staging **replay_bufs;
    size_t nreplay;
} job;

typedef struct event_slot {
    struct event_slot *next;
    CUevent ev;
} event_slot;

struct ulp__devcap {
    ulp__devcap_config cfg;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* queue, pool and flush changes */
    job *head, *tail;
    uint64_t in_flight; /* queued or being handed over */
    int thread_started, stopping, closed;
    pthread_t thread;
    staging *free_bufs;
    size_t pool_used;  /* bytes allocated, free or out */
    uint64_t bufs_out; /* buffers held by jobs or the sink */
    event_slot *free_events;
    ulp__devcap_stats stats;
    ulp__graphcap *graphs; /* NULL: marks during stream capture are skipped */
};

ulp_status ulp__devcap_create(const ulp__devcap_config *cfg, ulp__devcap **out)
{
    *out = NULL;
    if (cfg->ops == NULL || cfg->sink.capture == NULL)
        return ULP_EINVAL;
    ulp__devcap *dc = calloc(1, sizeof(*dc));
    if (dc == NULL)
        return ULP_ENOMEM;
    dc->cfg = *cfg;
    if (dc->cfg.pool_bytes < BUF_MIN)
        dc->cfg.pool_bytes = BUF_MIN;
    if (dc->cfg.graph_bytes > dc->cfg.pool_bytes / 2)
        dc->cfg.graph_bytes = dc->cfg.pool_bytes / 2;
    if (dc->cfg.graph_bytes > 0 && ulp__graphcap_supported(cfg->ops) &&
        ulp__graphcap_create(cfg->ops, dc->cfg.graph_bytes, &dc->graphs) != ULP_OK) {
        free(dc);
        return ULP_ENOMEM;
    }
    if (pthread_mutex_init(&dc->lock, NULL) != 0) {
        free(dc);
        return ULP_ETHREAD;
    }
    if (pthread_cond_init(&dc->cond, NULL) != 0) {
        pthread_mutex_destroy(&dc->lock);
        free(dc);
        return ULP_ETHREAD;
    }
    *out = dc;
    return ULP_OK;
}

static size_t round_cap(size_t n)
{
    size_t c = BUF_MIN;
    while (c < n && c <= SIZE_MAX / 2)
        c *= 2;
    return c < n ? n : c;
}

/* Takes a staging buffer of at least n bytes; the lock is held.  Waits for
 * the sink to return buffers when the pool is full.  NULL on failure, with
 * *status saying why. */
static staging *pool_get_locked(ulp__devcap *dc, size_t n, ulp_status *status)
{
    size_t want = round_cap(n);
    if (want > dc->cfg.pool_bytes) {
        /* A tensor larger than the pool may still fit exactly. */
        if (n > dc->cfg.pool_bytes) {
            *status = ULP_ERANGE;
            return NULL;
        }
        want = n;
    }
    for (;;) {
        staging **best = NULL;
        for (staging **pp = &dc->free_bufs; *pp; pp = &(*pp)->next)
            if ((*pp)->cap >= n && (best == NULL || (*pp)->cap < (*best)->cap))
                best = pp;
        if (best != NULL) {
            staging *b = *best;
            *best = b->next;
            dc->bufs_out++;
            return b;
        }
        /* Make room by freeing idle buffers that are too small. */
        while (dc->pool_used + want > dc->cfg.pool_bytes && dc->free_bufs != NULL) {
            staging *b = dc->free_bufs;
            dc->free_bufs = b->next;
            dc->cfg.ops->mem_free_host(b->p);
            dc->pool_used -= b->cap;
            free(b);
        }
        if (dc->pool_used + want <= dc->cfg.pool_bytes) {
            staging *b = calloc(1, sizeof(*b));
            if (b == NULL) {
                *status = ULP_ENOMEM;
                return NULL;
            }
            /* Portable: the writer thread reads it without a context.
             * Relaxed: another thread's graph capture in GLOBAL mode would
             * otherwise be invalidated by this "unsafe" call. */
            int ok;
            CUstreamCaptureMode m = ulp__cuda_mode_relax(dc->cfg.ops, &ok);
            CUresult r = dc->cfg.ops->mem_host_alloc(&b->p, want, CU_MEMHOSTALLOC_PORTABLE);
            ulp__cuda_mode_restore(dc->cfg.ops, m, ok);
            if (r != CUDA_SUCCESS) {
                free(b);
                *status = ULP_EIO;
                return NULL;
            }
            b->cap = want;
            dc->pool_used += want;
            dc->bufs_out++;
            return b;
        }
        if (dc->closed) {
            *status = ULP_ECLOSED;
            return NULL;
        }
        pthread_cond_wait(&dc->cond, &dc->lock);
    }
}

static void pool_put_locked(ulp__devcap *dc, staging *b)
{
    if (b == NULL)
        return;
    b->next = dc->free_bufs;
    dc->free_bufs = b;
    dc->bufs_out--;
    pthread_cond_broadcast(&dc->cond);
}

/* release() given to the sink: `rctx` is the staging slot. */
typedef struct release_ctx {
    ulp__devcap *dc;
    staging *buf;
} release_ctx;

static void release_buf(void *rctx, void *buf)
{
    (void)buf;
    release_ctx *r = rctx;
    pthread_mutex_lock(&r->dc->lock);
    pool_put_locked(r->dc, r->buf);
    pthread_mutex_unlock(&r->dc->lock);
    free(r);
}

static CUevent event_get_locked(ulp__devcap *dc)
{
    if (dc->free_events != NULL) {
        event_slot *e = dc->free_events;
        dc->free_events = e->next;
        CUevent ev = e->ev;
        free(e);
        return ev;
    }
    CUevent ev = NULL;
    if (dc->cfg.ops->event_create(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return NULL;
    return ev;
}

static void event_put_locked(ulp__devcap *dc, CUevent ev)
{
    if (ev == NULL)
        return;
    event_slot *e = malloc(sizeof(*e));
    if (e == NULL) {
        dc->cfg.ops->event_destroy(ev);
        return;
    }
    e->ev = ev;
    e->next = dc->free_events;
    dc->free_events = e;
}

static void job_free(job *j)
{
    if (j == NULL)
        return;
    free(j->replay_bufs);
    free(j->rows);
    free(j->name);
    free(j);
}

/* Drops a job whose bytes never arrived; the lock is held.  A replay's
 * gate opens: the next launch may rewrite its slots. */
static void job_drop_locked(ulp__devcap *dc, job *j)
{
    pool_put_locked(dc, j->buf);
    for (size_t i = 0; i < j->nreplay; i++)
        pool_put_locked(dc, j->replay_bufs[i]);
    event_put_locked(dc, j->ev);
    if (j->replay != NULL)
        ulp__graphcap_replay_done(dc->graphs, j->replay);
    job_free(j);
}

static void *devcap_thread(void *arg);

static int start_thread_locked(ulp__devcap *dc)
{
    if (dc->thread_started)
        return 0;
    if (pthread_create(&dc->thread, NULL, devcap_thread, dc) != 0)
        return -1;
    dc->thread_started = 1;
    return 0;
}

/* Whether a copy on `stream` (or, unknown, a context sync) is unsafe now
 * because a CUDA graph is being captured: 1, or 2 when `stream` itself is
 * capturing (a tap can be made). */
static int graph_capture_in_progress(ulp__devcap *dc, int has_stream, CUstream stream)
{
    const ulp__cuda_ops *ops = dc->cfg.ops;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (has_stream) {
        CUresult r = ops->stream_is_capturing(stream, &cs);
        /* CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and friends: the legacy stream
         * while another captures.  Any error means "do not touch". */
        if (r == CUDA_SUCCESS && cs == CU_STREAM_CAPTURE_STATUS_ACTIVE)
            return 2;
        return r != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE;
    }
    if (dc->cfg.hooks.capture_active != NULL && dc->cfg.hooks.capture_active(dc->cfg.hooks.ctx))
        return 1;
    /* Without CUPTI, the legacy stream is the best witness we have. */
    CUresult r = ops->stream_is_capturing(NULL, &cs);
    return r != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

static job *job_new(const ulp__desc *d, uint64_t ptr, int has_stream, CUstream stream)
{
    job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return NULL;
    j->d = *d;
    j->name = strdup(d->name ? d->name : "");
    if (j->name == NULL) {
        free(j);
        return NULL;
    }
    j->d.name = j->name;
    j->d.data = NULL;
    if (d->ndim > 0 && d->ndim <= ULP_MAX_RANK && d->shape != NULL)
        memcpy(j->shape, d->shape, (size_t)d->ndim * sizeof(int64_t));
    j->d.shape = j->shape;
    if (j->d.device_ptr == 0)
        j->d.device_ptr = ptr;
    if (j->d.stream == 0 && has_stream)
        j->d.stream = (uint64_t)(uintptr_t)stream;
    j->d.has_kernels = 0;
    /* The token metadata points into the caller's memory and the job is
     * delivered later: it keeps a copy (a bad one is refused here). */
    char why[400];
    size_t rb = 0;
    if (ulp__capture_rows_check(&j->d, why, sizeof why) != ULP_OK ||
        ((rb = ulp__capture_rows_size(&j->d)) > 0 && (j->rows = malloc(rb)) == NULL)) {
        free(j->name);
        free(j);
        return NULL;
    }
    if (rb > 0)
        ulp__capture_rows_copy(&j->d, d, j->rows);
    return j;
}

/* A mark on a stream that captures a graph: a copy node into a slot. */
static ulp_status graph_tap(ulp__devcap *dc, const ulp__desc *d, uint64_t ptr, size_t nbytes,
                            CUstream stream)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    cuuint64_t id = 0;
    ulp_status st = ULP_EUNSUPPORTED;
    if (dc->cfg.ops->stream_get_capture_info(stream, &cs, &id, NULL, NULL, NULL, NULL) ==
            CUDA_SUCCESS &&
        cs == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        int64_t gemms[2];
        int has_gemms =
            dc->cfg.sink.gemms != NULL && dc->cfg.sink.gemms(dc->cfg.sink.ctx, 0, stream, gemms);
        ulp__desc dd = *d;
        if (dd.device_ptr == 0)
            dd.device_ptr = ptr;
        if (dd.stream == 0)
            dd.stream = (uint64_t)(uintptr_t)stream;
        st = ulp__graphcap_tap(dc->graphs, &dd, ptr, nbytes, stream, id, has_gemms ? gemms : NULL);
    }
    pthread_mutex_lock(&dc->lock);
    if (st == ULP_OK)
        dc->stats.graph_taps++;
    else if (st == ULP_ERANGE)
        dc->stats.graph_bound++;
    else if (st == ULP_EUNSUPPORTED)
        dc->stats.skipped_graph++;
    else
        dc->stats.failed++;
    pthread_mutex_unlock(&dc->lock);
    return st;
}

ulp_status ulp__devcap_capture(ulp__devcap *dc, const ulp__desc *d, uint64_t ptr, size_t nbytes,
                               int has_stream, CUstream stream)
{
    const ulp__cuda_ops *ops = dc->cfg.ops;
    const ulp__cuda_hooks *hk = &dc->cfg.hooks;
    ulp_status st = ULP_OK;

    pthread_mutex_lock(&dc->lock);
    int closed = dc->closed;
    pthread_mutex_unlock(&dc->lock);
    if (closed)
        return ULP_ECLOSED;

    CUcontext ctx = NULL;
    if (ops->ctx_get_current(&ctx) != CUDA_SUCCESS || ctx == NULL) {
        st = ULP_EIO; /* no context on this thread: the pointer means nothing */
        goto count;
    }
    int in_graph = graph_capture_in_progress(dc, has_stream, stream);
    if (in_graph == 2 && dc->graphs != NULL)
        return graph_tap(dc, d, ptr, nbytes, stream);
    if (in_graph) {
        st = ULP_EUNSUPPORTED;
        goto count;
    }
    job *j = job_new(d, ptr, has_stream, stream);
    if (j == NULL) {
        st = ULP_ENOMEM;
        goto count;
    }
    if (dc->cfg.sink.gemms != NULL &&
        dc->cfg.sink.gemms(dc->cfg.sink.ctx, !has_stream, stream, j->d.gemms))
        j->d.has_gemms = 1;
    j->ctx = ctx;
    j->nbytes = nbytes;
    j->any_stream = !has_stream;
    if (has_stream && hk->stream_id != NULL &&
        hk->stream_id(hk->ctx, ctx, stream, &j->stream_id) == 0)
        j->has_stream_id = 1;

    pthread_mutex_lock(&dc->lock);
    if (nbytes > 0) {
        j->buf = pool_get_locked(dc, nbytes, &st);
        if (j->buf == NULL) {
            pthread_mutex_unlock(&dc->lock);
            job_free(j);
            goto count;
        }
    }
    if (has_stream && nbytes > 0) {
        j->ev = event_get_locked(dc);
        if (j->ev == NULL) {
            job_drop_locked(dc, j);
            pthread_mutex_unlock(&dc->lock);
            st = ULP_EIO;
            goto count;
        }
    }
    pthread_mutex_unlock(&dc->lock);

    if (nbytes > 0) {
        CUresult r;
        if (hk->copy_begin)
            hk->copy_begin(hk->ctx);
        if (has_stream) {
            r = ops->memcpy_dtoh_async(j->buf->p, (CUdeviceptr)ptr, nbytes, stream);
        } else {
            r = ops->ctx_synchronize();
            if (r == CUDA_SUCCESS)
                r = ops->memcpy_dtoh(j->buf->p, (CUdeviceptr)ptr, nbytes);
        }
        uint32_t corr = hk->copy_end ? hk->copy_end(hk->ctx) : 0;
        if (r == CUDA_SUCCESS && has_stream && ops->event_record(j->ev, stream) != CUDA_SUCCESS) {
            /* The copy is in flight into our buffer: wait it out before the
             * buffer can go back to the pool. */
            ops->stream_synchronize(stream);
            r = CUDA_ERROR_UNKNOWN;
        }
        if (r != CUDA_SUCCESS) {
            pthread_mutex_lock(&dc->lock);
            job_drop_locked(dc, j);
            pthread_mutex_unlock(&dc->lock);
            st = ULP_EIO;
            goto count;
        }
        j->corr = dc->cfg.trace != NULL && (j->has_stream_id || j->any_stream) ? corr : 0;
    }
    if (j->ev == NULL)
        j->done = 1;

    pthread_mutex_lock(&dc->lock);
    if (start_thread_locked(dc) != 0) {
        job_drop_locked(dc, j);
        pthread_mutex_unlock(&dc->lock);
        st = ULP_ETHREAD;
        goto count;
    }
    if (!has_stream)
        dc->stats.synced++;
    if (dc->tail)
        dc->tail->next = j;
    else
        dc->head = j;
    dc->tail = j;
    dc->in_flight++;
    pthread_cond_broadcast(&dc->cond);
    pthread_mutex_unlock(&dc->lock);
    return ULP_OK;

count:
    pthread_mutex_lock(&dc->lock);
    if (st == ULP_EUNSUPPORTED)
        dc->stats.skipped_graph++;
    else if (st == ULP_ERANGE)
        dc->stats.too_large++;
    else if (st != ULP_ECLOSED)
        dc->stats.failed++;
    pthread_mutex_unlock(&dc->lock);
    return st;
}

/* Hands the captures of one finished graph replay to the sink, in capture
 * order; called without the lock. */
static void deliver_replay(ulp__devcap *dc, job *j)
{
    ulp__graph_replay *rp = j->replay;
    if (j->corr != 0 && dc->cfg.trace != NULL) {
        /* The replay's kernels are not the next eager capture's. */
        int64_t range[2];
        ulp__cuda_trace_attribute(dc->cfg.trace, 0, j->stream_id, j->corr, range);
    }
    size_t i = 0;
    for (const ulp__graph_tap *t = rp->taps; t != NULL; t = t->next, i++) {
        staging *b = j->replay_bufs[i];
        j->replay_bufs[i] = NULL;
        ulp__desc d = t->d;
        d.step = j->d.step;
        d.time_ns = j->d.time_ns;
        d.has_graph_replay = 1;
        d.graph_replay[0] = (int64_t)rp->graph_id;
        d.graph_replay[1] = (int64_t)rp->index;
        release_ctx *r = NULL;
        if (b != NULL) {
            memcpy(b->p, t->slot, t->nbytes);
            r = malloc(sizeof(*r));
            if (r == NULL) {
                pthread_mutex_lock(&dc->lock);
                pool_put_locked(dc, b);
                dc->stats.failed++;
                pthread_mutex_unlock(&dc->lock);
                continue;
            }
            r->dc = dc;
            r->buf = b;
        } else if (t->nbytes > 0) {
            continue; /* larger than the pool: counted at launch */
        }
        ulp_status st = dc->cfg.sink.capture(dc->cfg.sink.ctx, &d, b ? b->p : NULL, t->nbytes,
                                             r ? release_buf : NULL, r);
        pthread_mutex_lock(&dc->lock);
        if (st == ULP_OK) {
            dc->stats.captured++;
            dc->stats.graph_harvested++;
        } else {
            dc->stats.failed++;
        }
        pthread_mutex_unlock(&dc->lock);
    }
    pthread_mutex_lock(&dc->lock);
    j->nreplay = 0;
    job_drop_locked(dc, j); /* the gate opens */
    pthread_mutex_unlock(&dc->lock);
}

/* Hands one finished job to the sink; called without the lock. */
static void deliver(ulp__devcap *dc, job *j)
{
    if (j->replay != NULL) {
        deliver_replay(dc, j);
        return;
    }
    if (j->corr != 0 && dc->cfg.trace != NULL) {
        int64_t range[2];
        if (ulp__cuda_trace_attribute(dc->cfg.trace, j->any_stream, j->stream_id, j->corr, range)) {
            j->d.has_kernels = 1;
            j->d.kernels[0] = range[0];
            j->d.kernels[1] = range[1];
        }
    }
    release_ctx *r = NULL;
    if (j->buf != NULL) {
        r = malloc(sizeof(*r));
        if (r == NULL) {
            pthread_mutex_lock(&dc->lock);
            dc->stats.failed++;
            job_drop_locked(dc, j);
            pthread_mutex_unlock(&dc->lock);
            return;
        }
        r->dc = dc;
        r->buf = j->buf;
    }
    ulp_status st = dc->cfg.sink.capture(dc->cfg.sink.ctx, &j->d, j->buf ? j->buf->p : NULL,
                                         j->nbytes, r ? release_buf : NULL, r);
    pthread_mutex_lock(&dc->lock);
    if (st == ULP_OK)
        dc->stats.captured++;
    else
        dc->stats.failed++;
    event_put_locked(dc, j->ev);
    pthread_mutex_unlock(&dc->lock);
    job_free(j);
}

static void *devcap_thread(void *arg)
{
    ulp__devcap *dc = arg;
    const ulp__cuda_ops *ops = dc->cfg.ops;
    /* Waiting on events is "potentially unsafe" while another thread
     * captures a graph in GLOBAL mode: this thread never captures, so it
     * runs relaxed for good. */
    int relaxed;
    ulp__cuda_mode_relax(ops, &relaxed);
    pthread_mutex_lock(&dc->lock);
    for (;;) {
        while (dc->head == NULL && !dc->stopping)
            pthread_cond_wait(&dc->cond, &dc->lock);
        if (dc->head == NULL)
            break;
        /* Wait for the oldest copy, then take every copy that has finished
         * too, so that one CUPTI flush serves the whole batch. */
        job *first = dc->head;
        pthread_mutex_unlock(&dc->lock);
        if (!first->done) {
            ops->ctx_set_current(first->ctx);
            first->bad = ops->event_synchronize(first->ev) != CUDA_SUCCESS;
            first->done = 1;
        }
        pthread_mutex_lock(&dc->lock);
        job *batch = dc->head, *last = dc->head;
        while (last->next != NULL) {
            job *n = last->next;
            if (!n->done && ops->event_query(n->ev) == CUDA_SUCCESS)
                n->done = 1;
            if (!n->done)
                break;
            last = n;
        }
        dc->head = last->next;
        if (dc->head == NULL)
            dc->tail = NULL;
        last->next = NULL;
        pthread_mutex_unlock(&dc->lock);

        int need_flush = 0;
        for (job *j = batch; j; j = j->next)
            need_flush |= j->corr != 0 && !j->bad;
        if (need_flush && dc->cfg.hooks.flush != NULL)
            dc->cfg.hooks.flush(dc->cfg.hooks.ctx);

        uint64_t n = 0;
        while (batch != NULL) {
            job *j = batch;
            batch = j->next;
            j->next = NULL;
            if (j->bad) {
                pthread_mutex_lock(&dc->lock);
                dc->stats.failed++;
                job_drop_locked(dc, j);
                pthread_mutex_unlock(&dc->lock);
            } else {
                deliver(dc, j);
            }
            n++;
        }
        pthread_mutex_lock(&dc->lock);
        dc->in_flight -= n;
        pthread_cond_broadcast(&dc->cond);
    }
    pthread_mutex_unlock(&dc->lock);
    return NULL;
}

ulp__graphcap *ulp__devcap_graphcap(ulp__devcap *dc)
{
    return dc->graphs;
}

const ulp__cuda_ops *ulp__devcap_ops(ulp__devcap *dc)
{
    return dc->cfg.ops;
}

void ulp__devcap_graph_launching(ulp__devcap *dc, CUgraphExec exec)
{
    if (dc->graphs != NULL)
        ulp__graphcap_launch_wait(dc->graphs, exec);
}

/* Takes one staging buffer per tap of a replay, in queue order as an eager
 * capture does; the lock is held.  0 on success. */
static int replay_buffers_locked(ulp__devcap *dc, job *j)
{
    size_t n = 0;
    for (const ulp__graph_tap *t = j->replay->taps; t; t = t->next)
        n++;
    j->replay_bufs = calloc(n ? n : 1, sizeof(*j->replay_bufs));
    if (j->replay_bufs == NULL)
        return -1;
    j->nreplay = n;
    size_t i = 0;
    for (const ulp__graph_tap *t = j->replay->taps; t; t = t->next, i++) {
        if (t->nbytes == 0)
            continue;
        ulp_status st = ULP_OK;
        j->replay_bufs[i] = pool_get_locked(dc, t->nbytes, &st);
        if (j->replay_bufs[i] == NULL) {
            if (st != ULP_ERANGE)
                return -1;
            dc->stats.too_large++;
        }
    }
    return 0;
}

void ulp__devcap_graph_launched(ulp__devcap *dc, CUgraphExec exec, CUstream stream, uint32_t corr)
{
    const ulp__cuda_ops *ops = dc->cfg.ops;
    const ulp__cuda_hooks *hk = &dc->cfg.hooks;
    if (dc->graphs == NULL)
        return;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (ops->stream_is_capturing(stream, &cs) != CUDA_SUCCESS ||
        cs != CU_STREAM_CAPTURE_STATUS_NONE) {
        /* A graph launched into another capture is a child graph: nothing
         * ran now. */
        ulp__graphcap_count_nested(dc->graphs);
        return;
    }
    ulp__graph_replay *rp = ulp__graphcap_launched(dc->graphs, exec);
    if (rp == NULL)
        return;
    job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        ulp__graphcap_replay_done(dc->graphs, rp);
        pthread_mutex_lock(&dc->lock);
        dc->stats.failed++;
        pthread_mutex_unlock(&dc->lock);
        return;
    }
    j->replay = rp;
    ulp__desc_init(&j->d);
    j->d.step = dc->cfg.sink.step_now ? dc->cfg.sink.step_now(dc->cfg.sink.ctx) : ULP_STEP_NONE;
    ops->ctx_get_current(&j->ctx);
    if (hk->stream_id != NULL && hk->stream_id(hk->ctx, j->ctx, stream, &j->stream_id) == 0)
        j->has_stream_id = 1;
    j->corr = dc->cfg.trace != NULL && j->has_stream_id && corr != 0 ? corr + 1 : 0;

    pthread_mutex_lock(&dc->lock);
    int bad = dc->closed || replay_buffers_locked(dc, j) != 0;
    if (!bad) {
        j->ev = event_get_locked(dc);
        bad = j->ev == NULL || ops->event_record(j->ev, stream) != CUDA_SUCCESS ||
              start_thread_locked(dc) != 0;
    }
    if (bad) {
        if (!dc->closed)
            dc->stats.failed++;
        job_drop_locked(dc, j);
        pthread_mutex_unlock(&dc->lock);
        return;
    }
    if (dc->tail)
        dc->tail->next = j;
    else
        dc->head = j;
    dc->tail = j;
    dc->in_flight++;
    pthread_cond_broadcast(&dc->cond);
    pthread_mutex_unlock(&dc->lock);
}

ulp_status ulp__devcap_flush(ulp__devcap *dc)
{
    pthread_mutex_lock(&dc->lock);
    while (dc->in_flight > 0 && dc->thread_started)
        pthread_cond_wait(&dc->cond, &dc->lock);
    pthread_mutex_unlock(&dc->lock);
    return ULP_OK;
}

void ulp__devcap_shutdown(ulp__devcap *dc)
{
    pthread_mutex_lock(&dc->lock);
    dc->closed = 1;
    dc->stopping = 1;
    int started = dc->thread_started;
    dc->thread_started = 0;
    pthread_cond_broadcast(&dc->cond);
    pthread_mutex_unlock(&dc->lock);
    if (started)
        pthread_join(dc->thread, NULL);
}

void ulp__devcap_forget(ulp__devcap *dc)
{
    /* The child has one thread; the parent's lock may have been held at
     * fork, so reinitialize rather than lock it. */
    pthread_mutex_init(&dc->lock, NULL);
    pthread_cond_init(&dc->cond, NULL);
    dc->head = dc->tail = NULL;
    dc->in_flight = 0;
    dc->thread_started = 0;
    dc->closed = 1;
    dc->stopping = 1;
    dc->free_bufs = NULL; /* the parent's pinned memory is not ours to free */
    dc->free_events = NULL;
}

void ulp__devcap_free(ulp__devcap *dc)
{
    if (dc == NULL)
        return;
    ulp__devcap_shutdown(dc);
    pthread_mutex_lock(&dc->lock);
    while (dc->free_bufs != NULL) {
        staging *b = dc->free_bufs;
        dc->free_bufs = b->next;
        dc->cfg.ops->mem_free_host(b->p);
        free(b);
    }
    while (dc->free_events != NULL) {
        event_slot *e = dc->free_events;
        dc->free_events = e->next;
        dc->cfg.ops->event_destroy(e->ev);
        free(e);
    }
    uint64_t out = dc->bufs_out;
    pthread_mutex_unlock(&dc->lock);
    if (out != 0)
        return; /* the sink still holds buffers that point back here: leak */
    ulp__graphcap_free(dc->graphs);
    pthread_cond_destroy(&dc->cond);
    pthread_mutex_destroy(&dc->lock);
    free(dc);
}

void ulp__devcap_get_stats(ulp__devcap *dc, ulp__devcap_stats *out)
{
    pthread_mutex_lock(&dc->lock);
    *out = dc->stats;
    pthread_mutex_unlock(&dc->lock);
}

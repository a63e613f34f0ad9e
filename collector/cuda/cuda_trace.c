/* Kernel rows and their attribution to captures (cuda_trace.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "cuda_trace.h"

/* Unattributed kernels kept per stream before the oldest are dropped: a
 * stream nobody captures from must not grow memory without bound. */
#define PENDING_MAX ((size_t)1 << 20)

typedef struct pending {
    uint32_t corr;
    uint64_t row;
} pending;

typedef struct stream_pending {
    uint32_t stream_id;
    pending *v;
    size_t n, cap;
} stream_pending;

struct ulp__cuda_trace {
    pthread_mutex_t lock;
    ulp__cuda_trace_sink sink;
    int stopped;
    uint64_t rows;
    stream_pending *streams;
    size_t nstreams, capstreams;
};

ulp_status ulp__cuda_trace_create(const ulp__cuda_trace_sink *sink, ulp__cuda_trace **out)
{
    *out = NULL;
    ulp__cuda_trace *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return ULP_ENOMEM;
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return ULP_ETHREAD;
    }
    t->sink = *sink;
    *out = t;
    return ULP_OK;
}

void ulp__cuda_trace_free(ulp__cuda_trace *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->nstreams; i++)
        free(t->streams[i].v);
    free(t->streams);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static stream_pending *stream_get(ulp__cuda_trace *t, uint32_t id)
{
    for (size_t i = 0; i < t->nstreams; i++)
        if (t->streams[i].stream_id == id)
            return &t->streams[i];
    if (ULP__GROW(t->streams, t->capstreams, t->nstreams + 1) != 0)
        return NULL;
    stream_pending *s = &t->streams[t->nstreams++];
    memset(s, 0, sizeof(*s));
    s->stream_id = id;
    return s;
}

static int pending_push(ulp__cuda_trace *t, stream_pending *s, uint32_t corr, uint64_t row)
{
    if (s->n == PENDING_MAX) {
        size_t half = PENDING_MAX / 2;
        memmove(s->v, s->v + half, (s->n - half) * sizeof(*s->v));
        s->n -= half;
    }
    if (ULP__GROW(s->v, s->cap, s->n + 1) != 0)
        return -1;
    s->v[s->n].corr = corr;
    s->v[s->n].row = row;
    s->n++;
    return 0;
}

static int by_corr(const void *a, const void *b)
{
    const ulp__cuda_kernel *x = a, *y = b;
    if (x->correlation_id != y->correlation_id)
        return x->correlation_id < y->correlation_id ? -1 : 1;
    /* One graph launch gives many kernels with the same id: start order. */
    return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

ulp_status ulp__cuda_trace_add(ulp__cuda_trace *t, ulp__cuda_kernel *k, size_t n)
{
    if (n == 0)
        return ULP_OK;
    qsort(k, n, sizeof(*k), by_corr);
    pthread_mutex_lock(&t->lock);
    ulp_status st = ULP_OK;
    if (t->stopped) {
        st = ULP_ECLOSED;
        goto cleanup;
    }
    st = t->sink.kernels(t->sink.ctx, k, n, t->rows);
    if (st != ULP_OK) {
        t->stopped = 1;
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        stream_pending *s = stream_get(t, k[i].stream_id);
        if (s == NULL || pending_push(t, s, k[i].correlation_id, t->rows + i) != 0) {
            /* Without the bookkeeping, attribution would be wrong: stop it
             * (the rows themselves are in the file). */
            t->stopped = 1;
            st = ULP_ENOMEM;
            break;
        }
    }
    t->rows += n;
cleanup:
    pthread_mutex_unlock(&t->lock);
    return st;
}

/* Moves the entries of `s` below `corr` into [lo, hi]; keeps the rest. */
static void take_below(stream_pending *s, uint32_t corr, uint64_t *lo, uint64_t *hi, int *any)
{
    size_t keep = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].corr < corr) {
            if (!*any || s->v[i].row < *lo)
                *lo = s->v[i].row;
            if (!*any || s->v[i].row > *hi)
                *hi = s->v[i].row;
            *any = 1;
        } else {
            s->v[keep++] = s->v[i];
        }
    }
    s->n = keep;
}

int ulp__cuda_trace_attribute(ulp__cuda_trace *t, int any_stream, uint32_t stream_id, uint32_t corr,
                              int64_t range[2])
{
    pthread_mutex_lock(&t->lock);
    int ok = !t->stopped;
    if (ok) {
        uint64_t lo = 0, hi = 0;
        int any = 0;
        for (size_t i = 0; i < t->nstreams; i++)
            if (any_stream || t->streams[i].stream_id == stream_id)
                take_below(&t->streams[i], corr, &lo, &hi, &any);
        range[0] = any ? (int64_t)lo : (int64_t)t->rows;
        range[1] = any ? (int64_t)hi + 1 : (int64_t)t->rows;
    }
    pthread_mutex_unlock(&t->lock);
    return ok;
}

uint64_t ulp__cuda_trace_rows(ulp__cuda_trace *t)
{
    pthread_mutex_lock(&t->lock);
    uint64_t r = t->rows;
    pthread_mutex_unlock(&t->lock);
    return r;
}

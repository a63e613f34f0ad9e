/* Captures inside CUDA graphs (cuda_graphcap.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_graphcap.h"

/* The taps of one stream capture, shared by the graph it made, its clones
 * and every executable instantiated from them. */
typedef struct tapset {
    struct tapset *next;
    uint64_t capture_id;
    int ended;            /* the capture ended with a graph */
    int refs;             /* graphs + executables + replays in flight */
    ulp__graph_tap *head; /* in capture order */
    ulp__graph_tap *tail;
} tapset;

typedef struct graph_entry {
    struct graph_entry *next;
    CUgraph graph;
    tapset *set;
} graph_entry;

typedef struct exec_entry {
    struct exec_entry *next;
    CUgraphExec exec;
    tapset *set;
    uint64_t launches;  /* launches harvested or in flight */
    uint64_t harvested; /* replays whose slots were read */
    int destroyed;      /* freed once harvested == launches */
} exec_entry;

struct ulp__graphcap {
    const ulp__cuda_ops *ops;
    size_t bound;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* a replay was harvested */
    tapset *capturing;   /* sets whose capture has not ended */
    graph_entry *graphs;
    exec_entry *execs;
    ulp__graphcap_stats stats;
};

int ulp__graphcap_supported(const ulp__cuda_ops *ops)
{
    return ops->stream_get_capture_info != NULL && ops->thread_exchange_capture_mode != NULL;
}

ulp_status ulp__graphcap_create(const ulp__cuda_ops *ops, size_t bound_bytes, ulp__graphcap **out)
{
    *out = NULL;
    if (!ulp__graphcap_supported(ops))
        return ULP_EUNSUPPORTED;
    ulp__graphcap *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return ULP_ENOMEM;
    g->ops = ops;
    g->bound = bound_bytes;
    if (pthread_mutex_init(&g->lock, NULL) != 0) {
        free(g);
        return ULP_ETHREAD;
    }
    if (pthread_cond_init(&g->cond, NULL) != 0) {
        pthread_mutex_destroy(&g->lock);
        free(g);
        return ULP_ETHREAD;
    }
    *out = g;
    return ULP_OK;
}

/* Runs the "potentially unsafe" driver calls of a tap in RELAXED mode, so
 * that a capture in GLOBAL or THREAD_LOCAL mode is not invalidated. */
CUstreamCaptureMode ulp__cuda_mode_relax(const ulp__cuda_ops *ops, int *ok)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    *ok = ops->thread_exchange_capture_mode != NULL &&
          ops->thread_exchange_capture_mode(&m) == CUDA_SUCCESS;
    return m;
}

void ulp__cuda_mode_restore(const ulp__cuda_ops *ops, CUstreamCaptureMode m, int ok)
{
    if (ok)
        ops->thread_exchange_capture_mode(&m);
}

static void tap_free(const ulp__cuda_ops *ops, ulp__graph_tap *t)
{
    if (t->slot != NULL)
        ops->mem_free_host(t->slot);
    free(t->name);
    free(t);
}

/* Drops one reference; frees the set and its slots at zero.  Locked. */
static void set_unref_locked(ulp__graphcap *g, tapset *s)
{
    if (--s->refs > 0)
        return;
    int ok;
    CUstreamCaptureMode m = ulp__cuda_mode_relax(g->ops, &ok);
    while (s->head != NULL) {
        ulp__graph_tap *t = s->head;
        s->head = t->next;
        g->stats.slot_bytes -= t->nbytes;
        tap_free(g->ops, t);
    }
    ulp__cuda_mode_restore(g->ops, m, ok);
    free(s);
}

static tapset *capturing_find_locked(ulp__graphcap *g, uint64_t id, int unlink)
{
    for (tapset **pp = &g->capturing; *pp; pp = &(*pp)->next) {
        if ((*pp)->capture_id == id) {
            tapset *s = *pp;
            if (unlink) {
                *pp = s->next;
                s->next = NULL;
            }
            return s;
        }
    }
    return NULL;
}

static ulp__graph_tap *tap_new(const ulp__desc *d, size_t nbytes, const int64_t *gemms)
{
    ulp__graph_tap *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->d = *d;
    t->name = strdup(d->name ? d->name : "");
    if (t->name == NULL) {
        free(t);
        return NULL;
    }
    t->d.name = t->name;
    t->d.data = NULL;
    if (d->ndim > 0 && d->ndim <= ULP_MAX_RANK && d->shape != NULL)
        memcpy(t->shape, d->shape, (size_t)d->ndim * sizeof(int64_t));
    t->d.shape = t->shape;
    t->d.has_kernels = 0;
    /* Token metadata points into the caller's memory: not kept. */
    t->d.positions = t->d.requests = NULL;
    t->d.inputs = NULL;
    t->d.n_inputs = 0;
    t->d.has_gemms = gemms != NULL;
    if (gemms != NULL) {
        t->d.gemms[0] = gemms[0];
        t->d.gemms[1] = gemms[1];
    }
    t->nbytes = nbytes;
    return t;
}

ulp_status ulp__graphcap_tap(ulp__graphcap *g, const ulp__desc *d, uint64_t ptr, size_t nbytes,
                             CUstream stream, uint64_t capture_id, const int64_t *gemms)
{
    const ulp__cuda_ops *ops = g->ops;
    pthread_mutex_lock(&g->lock);
    if (g->stats.slot_bytes + nbytes > g->bound || nbytes > g->bound) {
        g->stats.over_bound++;
        pthread_mutex_unlock(&g->lock);
        return ULP_ERANGE;
    }
    /* Reserve the bytes now, so that concurrent taps respect the bound. */
    g->stats.slot_bytes += nbytes;
    pthread_mutex_unlock(&g->lock);

    ulp_status st = ULP_ENOMEM;
    ulp__graph_tap *t = tap_new(d, nbytes, gemms);
    if (t != NULL && nbytes > 0) {
        int ok;
        CUstreamCaptureMode m = ulp__cuda_mode_relax(ops, &ok);
        CUresult r = ok ? ops->mem_host_alloc(&t->slot, nbytes, CU_MEMHOSTALLOC_PORTABLE)
                        : CUDA_ERROR_NOT_SUPPORTED;
        ulp__cuda_mode_restore(ops, m, ok);
        if (r != CUDA_SUCCESS) {
            t->slot = NULL;
            st = ULP_EIO;
        } else {
            /* Captured, not run: this becomes the tap's copy node. */
            st = ops->memcpy_dtoh_async(t->slot, (CUdeviceptr)ptr, nbytes, stream) == CUDA_SUCCESS
                     ? ULP_OK
                     : ULP_EIO;
        }
    } else if (t != NULL) {
        st = ULP_OK;
    }

    pthread_mutex_lock(&g->lock);
    tapset *s = st == ULP_OK ? capturing_find_locked(g, capture_id, 0) : NULL;
    if (st == ULP_OK && s == NULL) {
        s = calloc(1, sizeof(*s));
        if (s == NULL) {
            st = ULP_ENOMEM;
        } else {
            s->capture_id = capture_id;
            s->refs = 1; /* the capture's own, moved to its graph at the end */
            s->next = g->capturing;
            g->capturing = s;
        }
    }
    if (st != ULP_OK) {
        g->stats.slot_bytes -= nbytes;
        g->stats.tap_failed++;
        pthread_mutex_unlock(&g->lock);
        if (t != NULL) {
            int ok;
            CUstreamCaptureMode m = ulp__cuda_mode_relax(ops, &ok);
            tap_free(ops, t);
            ulp__cuda_mode_restore(ops, m, ok);
        }
        return st == ULP_ENOMEM ? ULP_ENOMEM : ULP_EIO;
    }
    if (s->tail)
        s->tail->next = t;
    else
        s->head = t;
    s->tail = t;
    g->stats.taps++;
    pthread_mutex_unlock(&g->lock);
    return ULP_OK;
}

void ulp__graphcap_capture_ended(ulp__graphcap *g, uint64_t capture_id, CUgraph graph)
{
    pthread_mutex_lock(&g->lock);
    tapset *s = capturing_find_locked(g, capture_id, 1);
    if (s != NULL) {
        graph_entry *e = graph != NULL ? calloc(1, sizeof(*e)) : NULL;
        if (e == NULL) {
            /* Failed capture (or no memory to follow its graph): the copy
             * nodes went with it. */
            for (ulp__graph_tap *t = s->head; t; t = t->next)
                g->stats.discarded++;
            set_unref_locked(g, s);
        } else {
            s->ended = 1;
            e->graph = graph;
            e->set = s; /* takes the capture's reference */
            e->next = g->graphs;
            g->graphs = e;
        }
    }
    pthread_mutex_unlock(&g->lock);
}

static graph_entry *graph_find_locked(ulp__graphcap *g, CUgraph graph)
{
    for (graph_entry *e = g->graphs; e; e = e->next)
        if (e->graph == graph)
            return e;
    return NULL;
}

void ulp__graphcap_graph_cloned(ulp__graphcap *g, CUgraph original, CUgraph clone)
{
    pthread_mutex_lock(&g->lock);
    graph_entry *o = graph_find_locked(g, original);
    graph_entry *e = o != NULL ? calloc(1, sizeof(*e)) : NULL;
    if (e != NULL) {
        e->graph = clone;
        e->set = o->set;
        e->set->refs++;
        e->next = g->graphs;
        g->graphs = e;
    }
    pthread_mutex_unlock(&g->lock);
}

void ulp__graphcap_graph_destroyed(ulp__graphcap *g, CUgraph graph)
{
    pthread_mutex_lock(&g->lock);
    for (graph_entry **pp = &g->graphs; *pp; pp = &(*pp)->next) {
        if ((*pp)->graph == graph) {
            graph_entry *e = *pp;
            *pp = e->next;
            set_unref_locked(g, e->set);
            free(e);
            break;
        }
    }
    pthread_mutex_unlock(&g->lock);
}

void ulp__graphcap_exec_created(ulp__graphcap *g, CUgraph graph, CUgraphExec exec)
{
    pthread_mutex_lock(&g->lock);
    graph_entry *ge = graph_find_locked(g, graph);
    exec_entry *e = ge != NULL ? calloc(1, sizeof(*e)) : NULL;
    if (e != NULL) {
        e->exec = exec;
        e->set = ge->set;
        e->set->refs++;
        e->next = g->execs;
        g->execs = e;
    }
    pthread_mutex_unlock(&g->lock);
}

static exec_entry *exec_find_locked(ulp__graphcap *g, CUgraphExec exec)
{
    for (exec_entry *e = g->execs; e; e = e->next)
        if (e->exec == exec && !e->destroyed)
            return e;
    return NULL;
}

/* Unlinks and frees a destroyed executable once no replay is in flight. */
static void exec_reap_locked(ulp__graphcap *g, exec_entry *x)
{
    if (!x->destroyed || x->harvested != x->launches)
        return;
    for (exec_entry **pp = &g->execs; *pp; pp = &(*pp)->next) {
        if (*pp == x) {
            *pp = x->next;
            break;
        }
    }
    set_unref_locked(g, x->set);
    free(x);
}

void ulp__graphcap_exec_destroyed(ulp__graphcap *g, CUgraphExec exec)
{
    pthread_mutex_lock(&g->lock);
    exec_entry *x = exec_find_locked(g, exec);
    if (x != NULL) {
        x->destroyed = 1;
        exec_reap_locked(g, x);
    }
    pthread_mutex_unlock(&g->lock);
}

void ulp__graphcap_launch_wait(ulp__graphcap *g, CUgraphExec exec)
{
    pthread_mutex_lock(&g->lock);
    exec_entry *x = exec_find_locked(g, exec);
    while (x != NULL && x->harvested < x->launches)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

ulp__graph_replay *ulp__graphcap_launched(ulp__graphcap *g, CUgraphExec exec)
{
    ulp__graph_replay *r = calloc(1, sizeof(*r));
    pthread_mutex_lock(&g->lock);
    exec_entry *x = exec_find_locked(g, exec);
    if (x == NULL || x->set->head == NULL || r == NULL) {
        pthread_mutex_unlock(&g->lock);
        free(r);
        return NULL;
    }
    r->taps = x->set->head;
    r->graph_id = x->set->capture_id;
    r->index = x->launches++;
    r->exec_entry = x;
    g->stats.replays++;
    pthread_mutex_unlock(&g->lock);
    return r;
}

void ulp__graphcap_replay_done(ulp__graphcap *g, ulp__graph_replay *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    exec_entry *x = r->exec_entry;
    x->harvested++;
    exec_reap_locked(g, x);
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
    free(r);
}

void ulp__graphcap_count_nested(ulp__graphcap *g)
{
    pthread_mutex_lock(&g->lock);
    g->stats.nested++;
    pthread_mutex_unlock(&g->lock);
}

void ulp__graphcap_get_stats(ulp__graphcap *g, ulp__graphcap_stats *out)
{
    pthread_mutex_lock(&g->lock);
    *out = g->stats;
    pthread_mutex_unlock(&g->lock);
}

void ulp__graphcap_free(ulp__graphcap *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->lock);
    while (g->execs != NULL) {
        exec_entry *x = g->execs;
        g->execs = x->next;
        set_unref_locked(g, x->set);
        free(x);
    }
    while (g->graphs != NULL) {
        graph_entry *e = g->graphs;
        g->graphs = e->next;
        set_unref_locked(g, e->set);
        free(e);
    }
    while (g->capturing != NULL) {
        tapset *s = g->capturing;
        g->capturing = s->next;
        set_unref_locked(g, s);
    }
    pthread_mutex_unlock(&g->lock);
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

/*
 * The comparison's worker threads (diff_priv.h), started once per diff and
 * woken for each job of it: a streamed diff of 10,000 small captures is
 * ten batches or more, and had created and joined its threads, allocated
 * their buffers and read its windows again for every one.  Each thread
 * keeps its buffers and its read-ahead windows (ulp__diff_worker) from job
 * to job; the caller's own share runs on its thread (ulp__diff_pool_join),
 * after whatever it does while the helpers start (the stream's callback).
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/thread_cpu.h"
#include "diff_priv.h"

typedef struct helper_arg {
    ulp__diff_pool *pool;
    int slot;      /* 1.. : its worker is pool->w[slot] */
    uint64_t seen; /* the jobs posted before it started   */
} helper_arg;

struct ulp__diff_pool {
    pthread_mutex_t lock;
    pthread_cond_t go, idle;
    ulp__diff_work_fn fn; /* the job in flight, for helpers 1..want */
    void *job;
    uint64_t gen; /* jobs posted                            */
    int want, busy, quit;
    int poster_cpu;     /* the caller's CPU when it posted the job */
    int nhelpers, most; /* started; at most (threads - 1) */
    pthread_t tids[ULP__DIFF_MAX_THREADS];
    helper_arg args[ULP__DIFF_MAX_THREADS];
    ulp__diff_worker w[ULP__DIFF_MAX_THREADS]; /* [0]: the caller's */
    ulp__diff_scratch scratch;
};

static void *helper(void *arg)
{
    helper_arg *h = arg;
    ulp__diff_pool *p = h->pool;
    uint64_t seen = h->seen;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->quit && p->gen == seen)
            pthread_cond_wait(&p->go, &p->lock);
        if (p->quit)
            break;
        seen = p->gen;
        if (h->slot > p->want)
            continue; /* not asked for this job */
        ulp__diff_work_fn fn = p->fn;
        void *job = p->job;
        int poster = p->poster_cpu;
        pthread_mutex_unlock(&p->lock);
        /* The caller works on its CPU meanwhile (common/thread_cpu.h). */
        ulp__thread_leave_cpu(poster);
        fn(job, &p->w[h->slot]);
        pthread_mutex_lock(&p->lock);
        if (--p->busy == 0)
            pthread_cond_signal(&p->idle);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

ulp_status ulp__diff_pool_new(int threads, ulp__diff_pool **out, ulp_error *err)
{
    *out = NULL;
    ulp__diff_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(p);
        return ulp__error(err, ULP_ETHREAD, "cannot create a mutex");
    }
    if (pthread_cond_init(&p->go, NULL) != 0) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return ulp__error(err, ULP_ETHREAD, "cannot create a condition variable");
    }
    if (pthread_cond_init(&p->idle, NULL) != 0) {
        pthread_cond_destroy(&p->go);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return ulp__error(err, ULP_ETHREAD, "cannot create a condition variable");
    }
    if (threads > ULP__DIFF_MAX_THREADS)
        threads = ULP__DIFF_MAX_THREADS;
    p->most = threads > 1 ? threads - 1 : 0; /* started as jobs need them */
    *out = p;
    return ULP_OK;
}

ulp__diff_scratch *ulp__diff_pool_scratch(ulp__diff_pool *p)
{
    return &p->scratch;
}

int ulp__diff_pool_helpers(const ulp__diff_pool *p)
{
    return p->most;
}

void ulp__diff_pool_post(ulp__diff_pool *p, ulp__diff_work_fn fn, void *job, int helpers)
{
    /* Helpers start when a job first needs them: a diff of a few small
     * captures starts none.  Only this thread changes p->gen. */
    while (p->nhelpers < helpers && p->nhelpers < p->most) {
        helper_arg *h = &p->args[p->nhelpers + 1];
        *h = (helper_arg){p, p->nhelpers + 1, p->gen};
        if (pthread_create(&p->tids[p->nhelpers], NULL, helper, h) != 0) {
            p->most = p->nhelpers; /* fewer threads still finish the work */
            break;
        }
        p->nhelpers++;
    }
    pthread_mutex_lock(&p->lock);
    p->fn = fn;
    p->job = job;
    p->want = helpers < p->nhelpers ? helpers : p->nhelpers;
    p->busy = p->want;
    p->gen++;
    p->poster_cpu = p->want > 0 ? ulp__thread_cpu() : -1;
    if (p->want > 0)
        pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->lock);
}

void ulp__diff_pool_join(ulp__diff_pool *p, int work)
{
    if (work)
        p->fn(p->job, &p->w[0]);
    pthread_mutex_lock(&p->lock);
    while (p->busy > 0)
        pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

void ulp__diff_pool_free(ulp__diff_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nhelpers; i++)
        pthread_join(p->tids[i], NULL);
    for (int i = 0; i <= p->nhelpers; i++) {
        ulp__reader_release(&p->w[i].rd);
        free(p->w[i].ba);
        free(p->w[i].bb);
    }
    free(p->scratch.jrows);
    free(p->scratch.tasks);
    pthread_cond_destroy(&p->idle);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

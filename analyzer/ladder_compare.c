/*
 * ulp_ladder_compare(): every pair of N runs compared (ladder.h), in parallel.
 *
 * Each run's files are opened once, in run order: a run's label and /run
 * are kept, its files hashed and the run put into its class of bitwise-
 * identical runs, compared through one member (ladder_classes.c), which
 * alone stays open; a bad file stops the whole ladder (and names itself).
 * Worker threads then take the compares from one counter; each is done
 * rank by rank with ulp_diff_run() -- single-threaded, the parallelism is
 * across pairs -- and only a summary is kept: memory is the classes' open
 * snapshots, one diff's chunk buffers per worker, a run's path, label and
 * /run, and a few hundred bytes per compare (one per run and one per pair
 * of classes), whatever the tensor sizes and however many pairs of runs: a
 * pair is read from its classes' compare (ladder_view.c).  Groups and verdicts are
 * decided afterwards (ladder_verdict.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/sized.h"
#include "diff_priv.h"
#include "ladder_priv.h"
#include "ulpprof/digest.h"

#define MAX_JOBS 16

#define OPTIONS_MIN ULP__SIZE_THROUGH(ulp_ladder_options, diff) /* the first version */

static void options_defaults(ulp_ladder_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
}

ulp_status ulp_ladder_options_init_sized(ulp_ladder_options *opts, size_t size)
{
    ulp_ladder_options def;
    options_defaults(&def);
    return ulp__sized_init(opts, size, &def, sizeof def, OPTIONS_MIN, "ulp_ladder_options");
}

typedef struct work {
    ulp__ladder_ctx c;
    ulp__ladder_plan plan;
    atomic_size_t next, done;
    pthread_mutex_t lock;
    int failed;
    ulp_status st;
    ulp_error err;
} work;

static void *worker(void *arg)
{
    work *w = arg;
    for (;;) {
        size_t j = atomic_fetch_add(&w->next, 1);
        if (j >= w->plan.n_tasks)
            break;
        pthread_mutex_lock(&w->lock);
        int stop = w->failed;
        pthread_mutex_unlock(&w->lock);
        if (stop)
            break;
        ulp_error e;
        ulp_error_clear(&e);
        ulp_status st = ulp__ladder_compare_pair(&w->c, &w->plan.tasks[j], &e);
        size_t done = atomic_fetch_add(&w->done, 1) + 1;
        if (w->c.opts->progress)
            fprintf(stderr, "\rulpprof ladder: %zu of %zu compares", done, w->plan.n_tasks);
        if (st != ULP_OK) {
            pthread_mutex_lock(&w->lock);
            if (!w->failed) {
                w->failed = 1;
                w->st = st;
                w->err = e;
            }
            pthread_mutex_unlock(&w->lock);
        }
    }
    return NULL;
}

/*
 * Each run's files are opened once: its label and /run kept, which files
 * hold digests only asked, and the run put into its class
 * (ulp__ladder_plan_add(), which closes it unless it is its class's first).
 * A run that cannot be opened fails the ladder, or with opts->left_out is
 * told to it and skipped: the runs kept are renumbered in order.
 */
static ulp_status open_runs(ulp_ladder_result *r, const char *const *paths, size_t n_given,
                            work *wk, ulp_error *err)
{
    const ulp__ladder_ctx *w = &wk->c;
    const ulp_ladder_options *opts = w->opts;
    const ulp__ladder_opener o = {opts->open, opts->user};
    size_t i = 0;
    for (size_t g = 0; g < n_given; g++) {
        ulp_ladder_run *run = &r->runs[i];
        ulp_error e;
        ulp_error_clear(&e);
        ulp_status st =
            ulp__ladder_run_open(paths[g], &o, &run->files, &w->snaps[i], &run->n_files, &e);
        if (st != ULP_OK && (opts->left_out == NULL || st == ULP_ENOMEM)) {
            if (err)
                *err = e;
            return st;
        }
        if (st != ULP_OK) {
            opts->left_out(opts->user, paths[g], &e);
            continue;
        }
        if ((run->path = strdup(paths[g])) == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        const ulp_snapshot *s = w->snaps[i][0];
        run->label = strdup(ulp_snapshot_label(s));
        run->n_run = ulp_snapshot_run_count(s);
        run->run = calloc(run->n_run + 1, sizeof *run->run);
        if (run->label == NULL || run->run == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        for (size_t k = 0; k < run->n_run; k++) {
            const ulp_kv *kv = ulp_snapshot_run(s, k);
            run->run[k].key = strdup(kv->key);
            run->run[k].value = strdup(kv->value);
            if (!run->run[k].key || !run->run[k].value)
                return ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        if ((w->digest[i] = malloc(run->n_files + 1)) == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        for (size_t f = 0; f < run->n_files; f++)
            w->digest[i][f] = (unsigned char)(ulp_digest_only(run->files[f].path) != 0);
        if ((st = ulp__ladder_plan_add(w, &wk->plan, i, err)) != ULP_OK)
            return st;
        i++;
    }
    r->n_runs = wk->plan.n_runs = i;
    r->n_pairs = i * (i - 1) / 2;
    if (i < 2)
        return ulp__error(err, ULP_EINVAL,
                          "%zu of %zu runs can be read, and a ladder needs at least 2", i, n_given);
    return ULP_OK;
}

static int online_cpus(void)
{
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : c > MAX_JOBS ? MAX_JOBS : (int)c;
}

static ulp_status run_pairs(work *w, int jobs)
{
    pthread_t tids[MAX_JOBS];
    int started = 0;
    if ((size_t)jobs > w->plan.n_tasks)
        jobs = w->plan.n_tasks > 0 ? (int)w->plan.n_tasks : 1;
    for (int i = 1; i < jobs; i++) {
        if (pthread_create(&tids[started], NULL, worker, w) != 0)
            break; /* fewer workers still finish the work */
        started++;
    }
    worker(w);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    if (w->c.opts->progress && w->plan.n_tasks > 0)
        fputc('\n', stderr);
    return w->failed ? w->st : ULP_OK;
}

ulp_status ulp_ladder_compare(const char *const *paths, size_t n, const ulp_ladder_options *opts_in,
                              ulp_ladder_result **out, ulp_error *err)
{
    *out = NULL;
    ulp_ladder_options opts, def;
    options_defaults(&def);
    if (opts_in == NULL)
        opts = def;
    else if (ulp__sized_read(&opts, &def, sizeof def, OPTIONS_MIN, opts_in, "ulp_ladder_options",
                             err) != ULP_OK)
        return ULP_EINVAL;
    ulp_diff_options diff;
    if (opts.diff == NULL) {
        ulp_diff_options_init(&diff);
        diff.threads = 1;
    } else if (ulp__diff_options_read(&diff, opts.diff, err) != ULP_OK) {
        return ULP_EINVAL;
    }
    if (n < 2)
        return ulp__error(err, ULP_EINVAL, "a ladder needs at least 2 runs, got %zu", n);
    if (opts.n_ignore < 0 || opts.n_ignore > ULP_LADDER_MAX_IGNORE)
        return ulp__error(err, ULP_EINVAL, "too many ignored keys");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    ulp_ladder_result *r = calloc(1, sizeof *r);
    static const work w0;
    work w = w0;
    w.c.r = r;
    w.c.opts = &opts;
    w.c.diff = &diff;
    if (r == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    r->n_runs = n;
    r->n_pairs = n * (n - 1) / 2;
    r->runs = calloc(n, sizeof *r->runs);
    w.c.snaps = calloc(n, sizeof *w.c.snaps);
    w.c.digest = calloc(n, sizeof *w.c.digest);
    ulp_status st = ULP_OK;
    if (!r->runs || !w.c.snaps || !w.c.digest || pthread_mutex_init(&w.lock, NULL) != 0) {
        free(w.c.snaps);
        free(w.c.digest);
        ulp_ladder_result_free(r);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    for (int i = 0; i < opts.n_ignore; i++)
        if ((r->ignore[r->n_ignore++] = strdup(opts.ignore[i])) == NULL)
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
    if (st == ULP_OK)
        st = ulp__ladder_plan_init(&w.plan, n, err);
    if (st == ULP_OK)
        st = open_runs(r, paths, n, &w, err);
    if (st == ULP_OK)
        st = ulp__ladder_plan_build(&w.c, &w.plan, err);
    if (st == ULP_OK) {
        st = run_pairs(&w, opts.jobs > 0 ? (opts.jobs > MAX_JOBS ? MAX_JOBS : opts.jobs)
                                         : online_cpus());
        if (st != ULP_OK && err)
            *err = w.err;
    }
    /* The result keeps the compares; its pairs are read from them (ladder_view.c). */
    if (st == ULP_OK && (r->store = malloc(sizeof *r->store)) == NULL)
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
    if (st == ULP_OK) {
        *r->store = w.plan;
        memset(&w.plan, 0, sizeof w.plan);
        st = ulp__ladder_decide(r, err);
    }
    ulp__ladder_plan_release(&w.plan);

    for (size_t i = 0; i < n; i++) {
        ulp__ladder_close_run(&w.c, i);
        free(w.c.digest[i]);
    }
    free(w.c.snaps);
    free(w.c.digest);
    pthread_mutex_destroy(&w.lock);
    if (st != ULP_OK) {
        ulp_ladder_result_free(r);
        return st;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    *out = r;
    return ULP_OK;
}

void ulp_ladder_result_free(ulp_ladder_result *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; r->runs && i < r->n_runs; i++) {
        ulp_ladder_run *run = &r->runs[i];
        free(run->path);
        free(run->label);
        ulp_ladder_files_free(run->files, run->n_files);
        for (size_t k = 0; run->run && k < run->n_run; k++) {
            free((char *)(uintptr_t)run->run[k].key);
            free((char *)(uintptr_t)run->run[k].value);
        }
        free(run->run);
    }
    for (size_t j = 0; r->pairs && j < r->n_pairs; j++)
        ulp__ladder_pair_release(&r->pairs[j]);
    if (r->store) {
        ulp__ladder_plan_release(r->store);
        free(r->store);
    }
    for (int g = 0; g < ULP_LADDER_RUNGS; g++) {
        for (size_t k = 0; k < r->rungs[g].n_keys; k++)
            free(r->rungs[g].keys[k]);
        free(r->rungs[g].keys);
    }
    for (int i = 0; i < r->n_ignore; i++)
        free(r->ignore[i]);
    free(r->runs);
    free(r->pairs);
    free(r);
}

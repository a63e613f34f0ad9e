/*
 * `ulpprof demo --ladder`: the reference workload climbs the determinism
 * ladder.  One prompt, the same weights, eight runs that each change one
 * condition of the miss:
 *
 *   rung 0  repeat        the miss again
 *   rung 1  batch size    the prompt alone vs in a batch of 4
 *   rung 2  cache         a prefix-cache hit, and the split fix
 *   rung 3  chunking      the miss prefilled in chunks of 64 tokens
 *   rung 4  parallelism   the reduction order of 2 and 4 tensor-parallel
 *                         ranks (EMULATED in the row-parallel GEMMs)
 *   rung 7  vendor        the miss's GEMMs on OpenBLAS and on a second
 *                         CBLAS library (ULPPROF_BLAS, else Debian's
 *                         reference BLAS): two real implementations
 *
 * then `ulpprof ladder` over them: the table, the JSON and Markdown, the
 * plots.  The runs go on all cores (each run is single-threaded).  The
 * workload loads one BLAS library per process (refmodel_gemm.c), so the
 * second library's run is a forked child, started before any thread or
 * library is; the OpenBLAS run follows the others in this thread.  Where
 * either library cannot be loaded, the pair is left out, and said so.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ulpprof/ladder.h"
#include "ulpprof/plot.h"
#include "ulpprof/report.h"

/* Which BLAS a step's GEMMs run on: the demo's GEMM, OpenBLAS, or the second library. */
enum { STEP_GEMM, STEP_OPENBLAS, STEP_OTHER_BLAS };

/* The second CBLAS library of the rung-7 pair when ULPPROF_BLAS names none. */
#define DEMO_REFERENCE_BLAS "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3"

typedef struct ladder_step {
    const char *label;
    ulp_refmodel_mode mode;
    int batch, tp, chunk;
    const char *what;
    int blas;
} ladder_step;

static const ladder_step steps[] = {
    {"miss", ULP_REFMODEL_MISS, 1, 1, 0, "the base run: all tokens in one pass", STEP_GEMM},
    {"repeat", ULP_REFMODEL_MISS, 1, 1, 0, "rung 0: the same run again", STEP_GEMM},
    {"batch4", ULP_REFMODEL_BATCH, 4, 1, 0, "rung 1: the prompt in a batch of 4", STEP_GEMM},
    {"hit", ULP_REFMODEL_HIT, 1, 1, 0, "rung 2: a prefix-cache hit", STEP_GEMM},
    {"split", ULP_REFMODEL_SPLIT, 1, 1, 0, "rung 2: the split fix (miss cut at the prefix)",
     STEP_GEMM},
    {"chunk64", ULP_REFMODEL_MISS, 1, 1, 64, "rung 3: chunked prefill, 64 tokens a step",
     STEP_GEMM},
    {"tp2", ULP_REFMODEL_MISS, 1, 2, 0, "rung 4: the reduction order of 2 TP ranks", STEP_GEMM},
    {"tp4", ULP_REFMODEL_MISS, 1, 4, 0, "rung 4: the reduction order of 4 TP ranks", STEP_GEMM},
    {"openblas", ULP_REFMODEL_MISS, 1, 1, 0, "rung 7: the GEMMs on OpenBLAS", STEP_OPENBLAS},
    {"refblas", ULP_REFMODEL_MISS, 1, 1, 0, "rung 7: the GEMMs on another BLAS library",
     STEP_OTHER_BLAS},
};
#define NSTEPS (sizeof steps / sizeof steps[0])

typedef struct ladder_work {
    const ulp_refmodel_options *base;
    const char *dir;
    char paths[NSTEPS][1100];
    atomic_size_t next;
    ulp_status st[NSTEPS];
    ulp_error err[NSTEPS];
} ladder_work;

static ulp_refmodel_options step_options(const ladder_work *w, size_t i)
{
    ulp_refmodel_options o = *w->base;
    o.mode = steps[i].mode;
    o.batch = steps[i].batch;
    o.tp = steps[i].tp;
    o.prefill_chunk = steps[i].chunk;
    o.label = steps[i].label;
    o.out = w->paths[i];
    if (steps[i].blas != STEP_GEMM)
        o.gemm = ULP_REFMODEL_GEMM_BLAS;
    /* The ladder pairs captures by occurrence: the suffix rows, one pass each. */
    o.suffix_only = 1;
    return o;
}

static void *run_steps(void *arg)
{
    ladder_work *w = arg;
    for (size_t i; (i = atomic_fetch_add(&w->next, 1)) < NSTEPS;) {
        if (steps[i].blas != STEP_GEMM)
            continue; /* run apart: one BLAS library per process */
        ulp_refmodel_options o = step_options(w, i);
        ulp_error_clear(&w->err[i]);
        w->st[i] = ulp_refmodel_run(&o, &w->err[i]);
    }
    return NULL;
}

typedef struct blas_child {
    pid_t pid;
    int fd; /* reads the child's error message */
} blas_child;

/* Starts step i in a child whose BLAS is `lib`; before any thread, before any BLAS is loaded. */
static blas_child start_other_blas(const ladder_work *w, size_t i, const char *lib)
{
    blas_child c = {-1, -1};
    int fds[2];
    if (pipe(fds) != 0)
        return c;
    fflush(stdout);
    fflush(stderr);
    c.pid = fork();
    if (c.pid == 0) {
        close(fds[0]);
        ulp_refmodel_options o = step_options(w, i);
        ulp_error e;
        ulp_error_clear(&e);
        setenv("ULPPROF_BLAS", lib, 1);
        ulp_status st = ulp_refmodel_run(&o, &e);
        if (st != ULP_OK && write(fds[1], e.msg, strlen(e.msg)) < 0)
            st = ULP_EIO;
        _exit(st == ULP_OK ? 0 : st == ULP_EUNSUPPORTED ? 3 : 2);
    }
    close(fds[1]);
    if (c.pid < 0)
        close(fds[0]);
    else
        c.fd = fds[0];
    return c;
}

/* The child's status into w->st[i] (ULP_EUNSUPPORTED: its library cannot be loaded). */
static void finish_other_blas(ladder_work *w, size_t i, blas_child c)
{
    ulp_error_clear(&w->err[i]);
    if (c.pid < 0) {
        w->st[i] = ULP_EIO;
        snprintf(w->err[i].msg, sizeof w->err[i].msg, "cannot start a process: %s",
                 strerror(errno));
        return;
    }
    size_t n = 0;
    for (ssize_t k; n + 1 < sizeof w->err[i].msg &&
                    (k = read(c.fd, w->err[i].msg + n, sizeof w->err[i].msg - 1 - n)) > 0;)
        n += (size_t)k;
    w->err[i].msg[n] = '\0';
    close(c.fd);
    int status = 0;
    while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR)
        ;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    w->st[i] = code == 0 ? ULP_OK : code == 3 ? ULP_EUNSUPPORTED : ULP_EIO;
    if (code != 0 && n == 0)
        snprintf(w->err[i].msg, sizeof w->err[i].msg, "the process ended with status %d", status);
}

static int run_all(ladder_work *w)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int n = cpus < 1 ? 1 : cpus > (long)NSTEPS ? (int)NSTEPS : (int)cpus, started = 0;
    pthread_t tids[NSTEPS];
    for (int i = 1; i < n; i++)
        if (pthread_create(&tids[started], NULL, run_steps, w) == 0)
            started++;
    run_steps(w);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    for (size_t i = 0; i < NSTEPS; i++)
        if (w->st[i] != ULP_OK) {
            cli_error("demo: %s run failed: %s", steps[i].label, w->err[i].msg);
            return -1;
        }
    return 0;
}

static int write_file(const ulp_ladder_result *r, ulp_report_format fmt, const char *path)
{
    FILE *f = fopen(path, "w");
    ulp_error err;
    if (!f) {
        cli_error("cannot open '%s' for writing: %s", path, strerror(errno));
        return -1;
    }
    ulp_status st = ulp_ladder_report_write(r, fmt, f, 0, &err);
    if (fclose(f) != 0 || st != ULP_OK) {
        cli_error("cannot write '%s'", path);
        return -1;
    }
    return 0;
}

static size_t run_index(const ulp_ladder_result *r, const char *label)
{
    for (size_t i = 0; i < r->n_runs; i++)
        if (strcmp(r->runs[i].label, label) == 0)
            return i;
    return 0;
}

/* What the ladder says, in sentences, from the result itself. */
static void explain(const ulp_ladder_result *r)
{
    printf("\nWhat the ladder says\n");
    for (int level = 0; level < ULP_LADDER_RUNGS; level++) {
        const ulp_ladder_rung *g = &r->rungs[level];
        if (!g->varied)
            continue;
        printf("  rung %d (%s): %s", level, g->name, ulp_ladder_verdict_name(g->verdict));
        if (g->has_first_break) {
            const ulp_ladder_pair *p = ulp_ladder_result_pair(r, g->first_break);
            printf(", %zu of %zu pairs differ; earliest: %s vs %s at %s", g->n_breaking,
                   g->n_deciding, r->runs[p->a].label, r->runs[p->b].label,
                   p->has_first ? p->first.capture : "?");
            if (p->has_first && p->first.position >= 0)
                printf(" token position %lld", (long long)p->first.position);
        }
        printf("\n");
    }
    size_t hit = run_index(r, "hit"), split = run_index(r, "split");
    if (r->runs[hit].group == r->runs[split].group)
        printf("  The split fix: split and hit are bitwise identical (group %zu): cutting the\n"
               "  miss at the cached prefix gives the suffix the GEMMs of a hit.\n",
               r->runs[hit].group);
    int all_layer0 = 1, any = 0;
    for (int level = 0; level < ULP_LADDER_RUNGS; level++) {
        const ulp_ladder_rung *g = &r->rungs[level];
        if (!g->has_first_break)
            continue;
        const ulp_ladder_pair *p = ulp_ladder_result_pair(r, g->first_break);
        any = 1;
        all_layer0 &= p->has_first && p->first.layer == 0;
    }
    if (any && all_layer0)
        printf("  Every rung that breaks does so in layer 0, in the first GEMM that sums its K\n"
               "  products in another order: an M-dependent split-K (batch, cache, chunking),\n"
               "  the per-rank partial sums of a row-parallel all-reduce (tp), or another\n"
               "  BLAS library's kernels (vendor).\n");
}

int demo_ladder(const ulp_refmodel_options *base, const char *dir, const char *gnuplot, int plots)
{
    struct timespec t0, t1, t2;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    static ladder_work w;
    memset(&w, 0, sizeof w);
    w.base = base;
    w.dir = dir;
    /* Named in step order ("0-miss.h5"): `ulpprof ladder DIR` lists a directory's runs
     * by name, so it takes them in the order the demo does and prints the same ladder. */
    _Static_assert(NSTEPS <= 10, "one digit orders the steps");
    for (size_t i = 0; i < NSTEPS; i++)
        snprintf(w.paths[i], sizeof w.paths[i], "%s/%zu-%s.h5", dir, i, steps[i].label);
    printf("ulpprof demo --ladder: the %s preset, seed %llu, one %d-token prompt, %zu runs, each\n"
           "one condition away from the miss or, for refblas, from openblas (gemm %s%s):\n",
           base->dims.name, (unsigned long long)base->seed, base->prompt_len, NSTEPS,
           ulp_refmodel_gemm_name(base->gemm),
           base->gemm == ULP_REFMODEL_GEMM_TILED ? ", an EMULATED M-dependent split-K" : "");
    /* The rung-7 pair's second library; this process keeps the default (OpenBLAS). */
    const char *env = getenv("ULPPROF_BLAS");
    char other[1024];
    snprintf(other, sizeof other, "%s", env && env[0] ? env : DEMO_REFERENCE_BLAS);
    unsetenv("ULPPROF_BLAS");
    for (size_t i = 0; i < NSTEPS; i++)
        printf("  %-8s %s%s%s\n", steps[i].label, steps[i].what,
               steps[i].blas == STEP_OTHER_BLAS ? ": " : "",
               steps[i].blas == STEP_OTHER_BLAS ? other : "");
    fflush(stdout);
    size_t i_open = 0, i_other = 0;
    for (size_t i = 0; i < NSTEPS; i++) {
        i_open = steps[i].blas == STEP_OPENBLAS ? i : i_open;
        i_other = steps[i].blas == STEP_OTHER_BLAS ? i : i_other;
    }
    blas_child child = start_other_blas(&w, i_other, other);
    int ok = run_all(&w) == 0;
    ulp_refmodel_options oo = step_options(&w, i_open);
    ulp_error_clear(&w.err[i_open]);
    w.st[i_open] = ok ? ulp_refmodel_run(&oo, &w.err[i_open]) : ULP_OK;
    finish_other_blas(&w, i_other, child);
    if (!ok)
        return CLI_EXIT_ERROR;
    int blas_pair = 1;
    for (size_t k = 0; k < 2; k++) {
        size_t i = k == 0 ? i_open : i_other;
        if (w.st[i] == ULP_EUNSUPPORTED && blas_pair) {
            printf("  (rung 7 not run: %s)\n", w.err[i].msg);
            blas_pair = 0;
        } else if (w.st[i] != ULP_OK && w.st[i] != ULP_EUNSUPPORTED) {
            cli_error("demo: %s run failed: %s", steps[i].label, w.err[i].msg);
            return CLI_EXIT_ERROR;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);

    /* Without the pair, neither of its files stays: `ulpprof ladder DIR` reads them all. */
    const char *paths[NSTEPS];
    size_t n_paths = 0;
    for (size_t i = 0; i < NSTEPS; i++) {
        if (!blas_pair && steps[i].blas != STEP_GEMM)
            unlink(w.paths[i]);
        else
            paths[n_paths++] = w.paths[i];
    }
    /* Exactly what a plain `ulpprof ladder DIR` does: the workload puts what it
     * observed of its GEMMs in /observed, which is no condition. */
    ulp_ladder_options lo;
    ulp_ladder_options_init(&lo);
    ulp_ladder_result *r = NULL;
    ulp_error err;
    if (ulp_ladder_compare(paths, n_paths, &lo, &r, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        return CLI_EXIT_ERROR;
    }
    int rc = CLI_EXIT_ERROR;
    printf("\n=== ulpprof ladder %s\n\n", dir);
    fflush(stdout);
    if (ulp_ladder_report_write(r, ULP_REPORT_TABLE, stdout, 0, &err) != ULP_OK) {
        cli_error("cannot write the ladder: %s", err.msg);
        goto cleanup;
    }
    explain(r);
    char path[1200];
    snprintf(path, sizeof path, "%s/ladder.json", dir);
    if (write_file(r, ULP_REPORT_JSON, path) != 0)
        goto cleanup;
    snprintf(path, sizeof path, "%s/ladder.md", dir);
    if (write_file(r, ULP_REPORT_MARKDOWN, path) != 0)
        goto cleanup;
    int drew = 0;
    if (plots) {
        ulp_plot_options po;
        ulp_plot_options_init(&po);
        snprintf(path, sizeof path, "%s/plots", dir);
        po.dir = path;
        po.gnuplot = gnuplot;
        ulp_plot_files pf;
        ulp_error_clear(&err);
        ulp_status ps = ulp_plot_ladder_write(r, &po, &pf, &err);
        if (ps == ULP_EUNSUPPORTED)
            fprintf(stderr, "ulpprof: %s\n", err.msg);
        else if (ps != ULP_OK) {
            cli_error("%s", err.msg);
            goto cleanup;
        }
        drew = ps == ULP_OK;
    }
    clock_gettime(CLOCK_MONOTONIC, &t2);
    printf("\nFiles (%.1f s for the %zu runs, %.1f s for the %zu pairs):\n",
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), n_paths,
           r->seconds, r->n_pairs);
    printf("  %s/*.h5                the snapshots (`ulpprof ladder %s` prints the above)\n", dir,
           dir);
    printf("  %s/ladder.{json,md}    the ladder, for scripts and bug reports\n", dir);
    if (plots)
        printf("  %s/plots/ladder%s.png  the ladder and the pairwise matrix%s\n", dir, "{,_matrix}",
               drew ? "" : " (no images: gnuplot missing)");
    rc = CLI_EXIT_OK;
cleanup:
    ulp_ladder_result_free(r);
    return rc;
}

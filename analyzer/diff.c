/*
 * ulp_diff_run(): pairs the captures of two snapshots (diff_pair.c),
 * compares the pairs' elements on worker threads (diff_jobs.c), then finds
 * the verdict, the first divergence and the amplification, analyses the
 * logits (logits.c) and the determinism ladder (ladder.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/strset.h"
#include "diff_priv.h"
#include "ulpprof/format.h"

/*
 * A result as ulp_diff_run() allocates it: the rows' names and roles are
 * kept once per distinct string (10,000 rows of 100 names had made 20,000
 * copies), and freed with the result.
 */
typedef struct result_priv {
    ulp_diff_result r; /* first: the public result points here */
    ulp__strset strs;
} result_priv;

const char *ulp__diff_str(ulp_diff_result *r, const char *s)
{
    return ulp__strset_add(&((result_priv *)(void *)r)->strs, s, NULL);
}

/* 2 MiB a side: whole spans of the mapping (diff_jobs.c), few calls per byte. */
#define DEFAULT_CHUNK_ELEMENTS ((uint64_t)1 << 20)
#define DEFAULT_THREADS        8 /* most worker threads by default: past that, reads bound the speed */

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

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
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
            strcmp(row->role, ulp_role_name(ULP_ROLE_ACTIVATION)) == 0)
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

/* Copies the caller's options with the defaults filled in; refuses bad ones. */
static ulp_status resolve_options(const ulp_diff_options *in, ulp_diff_options *opts,
                                  ulp_error *err)
{
    if (in)
        *opts = *in;
    else
        ulp_diff_options_init(opts);
    if (opts->threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        opts->threads = cpus < 1 ? 1 : cpus > DEFAULT_THREADS ? DEFAULT_THREADS : (int)cpus;
    }
    if (opts->threads > ULP__DIFF_MAX_THREADS)
        opts->threads = ULP__DIFF_MAX_THREADS;
    if (opts->chunk_elements == 0)
        opts->chunk_elements = DEFAULT_CHUNK_ELEMENTS;
    if (opts->n_temperatures < 0 || opts->n_temperatures > ULP_DIFF_MAX_TEMPERATURES)
        return ulp__error(err, ULP_EINVAL, "at most %d temperatures", ULP_DIFF_MAX_TEMPERATURES);
    for (int i = 0; i < opts->n_temperatures; i++)
        if (!(opts->temperatures[i] > 0) || isinf(opts->temperatures[i]))
            return ulp__error(err, ULP_EINVAL, "temperature must be a positive number");
    return ULP_OK;
}

/* The verdict, the first divergence and the amplification. */
static void verdict(ulp_diff_result *r)
{
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
    ulp__origin_run(r);
}

/*
 * The logits pairs the element pass can analyse as it reads them
 * (logits_fuse.c): a new array *fuse of *nfuse, in row order (the caller
 * releases them, whatever the status).
 */
static ulp_status fuse_plan(const ulp_diff_options *opts, const ulp_diff_result *r,
                            const ulp__diff_pair *pairs, size_t npairs, ulp__logits_fuse **fuse,
                            size_t *nfuse, ulp_error *err)
{
    const char *logits_role = ulp_role_name(ULP_ROLE_LOGITS);
    size_t n = 0;
    *fuse = NULL;
    *nfuse = 0;
    for (size_t q = 0; q < npairs; q++)
        if ((q == 0 || pairs[q].row != pairs[q - 1].row) &&
            strcmp(r->rows[pairs[q].row].role, logits_role) == 0)
            n++;
    if (n == 0)
        return ULP_OK;
    if ((*fuse = calloc(n, sizeof **fuse)) == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t q = 0; q < npairs; q++) {
        const ulp_diff_row *row = &r->rows[pairs[q].row];
        if ((q > 0 && pairs[q].row == pairs[q - 1].row) || strcmp(row->role, logits_role) != 0 ||
            !ulp__logits_fusable(row->dtype_a, row->ndim_a, row->shape_a, opts))
            continue;
        ulp_status st = ulp__logits_fuse_init(&(*fuse)[*nfuse], pairs[q].row, row->dtype_a,
                                              row->ndim_a, row->shape_a);
        if (st != ULP_OK)
            return ulp__error(err, st, "cannot set up the logits of '%s'", row->name);
        (*nfuse)++;
    }
    return ULP_OK;
}

static void fuse_release(ulp__logits_fuse *fuse, size_t nfuse)
{
    for (size_t k = 0; k < nfuse; k++)
        ulp__logits_fuse_release(&fuse[k]);
    free(fuse);
}

/* The logits analysis of every compared pair whose role is logits (those of
 * fuse[0..nfuse) from what the element pass gathered). */
static ulp_status logits(const ulp_snapshot *a, const ulp_snapshot *b, const ulp_diff_options *opts,
                         ulp_diff_result *r, const ulp__diff_pair *pairs, size_t npairs,
                         const ulp__logits_fuse *fuse, size_t nfuse, ulp_error *err)
{
    const char *logits_role = ulp_role_name(ULP_ROLE_LOGITS);
    size_t nlog = 0, f = 0;
    for (size_t q = 0; q < npairs; q++)
        if (strcmp(r->rows[pairs[q].row].role, logits_role) == 0)
            nlog++;
    if (nlog == 0)
        return ULP_OK;
    r->logits = calloc(nlog, sizeof *r->logits);
    if (r->logits == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    ulp__segs segs = {0};
    ulp_status st = ULP_OK;
    for (size_t q = 0; q < npairs && st == ULP_OK; q++) {
        const ulp_diff_row *row = &r->rows[pairs[q].row];
        if (strcmp(row->role, logits_role) != 0)
            continue;
        ulp_diff_logits *lg = &r->logits[r->n_logits++];
        lg->name = row->name;
        lg->occurrence = row->occurrence;
        lg->row_index = pairs[q].row;
        /* The row's pairs, consecutive, are its compared view. */
        segs.n = 0;
        for (; q < npairs && pairs[q].row == lg->row_index; q++) {
            ulp__segment seg = {pairs[q].ia,    pairs[q].ib,  pairs[q].off_a,
                                pairs[q].off_b, pairs[q].len, pairs[q].base};
            if (ulp__segs_push(&segs, &seg) < 0)
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        q--;
        while (f < nfuse && fuse[f].row < lg->row_index)
            f++;
        const ulp__logits_fuse *fu = f < nfuse && fuse[f].row == lg->row_index ? &fuse[f] : NULL;
        if (st == ULP_OK)
            st = ulp__logits_run_view(a, b, segs.v, segs.n, row->ndim_a, row->shape_a, opts, fu, lg,
                                      err);
    }
    free(segs.v);
    return st;
}

ulp_status ulp_diff_run(const ulp_snapshot *a, const ulp_snapshot *b,
                        const ulp_diff_options *opts_in, ulp_diff_result **out, ulp_error *err)
{
    ulp_diff_options opts;
    ulp__diff_pair *pairs = NULL;
    ulp__logits_fuse *fuse = NULL;
    size_t npairs = 0, nfuse = 0;
    double t0 = now_seconds();
    *out = NULL;
    ulp_status st = resolve_options(opts_in, &opts, err);
    if (st != ULP_OK)
        return st;

    result_priv *priv = calloc(1, sizeof *priv);
    if (priv == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    ulp__strset_init(&priv->strs);
    ulp_diff_result *r = &priv->r;
    r->path_a = xstrdup(ulp_snapshot_path(a));
    r->path_b = xstrdup(ulp_snapshot_path(b));
    r->label_a = xstrdup(ulp_snapshot_label(a));
    r->label_b = xstrdup(ulp_snapshot_label(b));
    if (!r->path_a || !r->path_b || !r->label_a || !r->label_b) {
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
        goto cleanup;
    }
    r->n_temperatures = opts.n_temperatures;
    memcpy(r->temperatures, opts.temperatures, sizeof r->temperatures);

    if ((st = ulp__diff_pair_rows(a, b, &opts, r, &pairs, &npairs, err)) != ULP_OK)
        goto cleanup;
    if ((st = fuse_plan(&opts, r, pairs, npairs, &fuse, &nfuse, err)) != ULP_OK ||
        (st = ulp__diff_metrics(a, b, &opts, r, pairs, npairs, fuse, nfuse, err)) != ULP_OK)
        goto cleanup;
    verdict(r);
    if ((st = logits(a, b, &opts, r, pairs, npairs, fuse, nfuse, err)) != ULP_OK ||
        (st = ulp__ladder_run(a, b, &r->ladder, err)) != ULP_OK)
        goto cleanup;
    r->seconds = now_seconds() - t0;
    *out = r;
    r = NULL;
cleanup:
    ulp_diff_result_free(r);
    fuse_release(fuse, nfuse);
    free(pairs);
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
        free_kernels(row->kernels_a, row->n_kernels_a);
        free_kernels(row->kernels_b, row->n_kernels_b);
        free(row->keys);
        for (size_t k = 0; k < row->n_inputs; k++)
            free((char *)(uintptr_t)row->inputs[k]);
        free(row->inputs);
        free((char *)(uintptr_t)row->hint);
        free(row->gemms_a);
        free(row->gemms_b);
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
    result_priv *p = (result_priv *)(void *)r;
    ulp__strset_release(&p->strs, 1);
    free(p);
}

/*
 * ulp_diff_run() and ulp_diff_stream(): pair the captures of two snapshots
 * (diff_pair.c) a batch of rows at a time -- one batch for ulp_diff_run() --
 * compare the pairs' elements on worker threads (diff_jobs.c), analyse
 * the logits (logits.c), find the verdict, the first divergence and the
 * amplification as the rows come, and the determinism ladder (ladder.c).
 * A streamed batch goes to the caller and only the rows the result points
 * at stay (diff_keep.c).  The workers (diff_pool.c) live for the whole
 * diff: while they compare batch k, this thread hands batch k - 1 to the
 * caller and pairs batch k + 1.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/bigalloc.h"
#include "common/error.h"
#include "common/grow.h"
#include "common/sized.h"
#include "common/strset.h"
#include "diff_priv.h"
#include "format/snapshot_summary.h"
#include "ulpprof/format.h"

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

#define OPTIONS_MIN ULP__SIZE_THROUGH(ulp_diff_options, match) /* the first version */

static void options_defaults(ulp_diff_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->threads = 0; /* the online CPUs, at most DEFAULT_THREADS */
    opts->chunk_elements = DEFAULT_CHUNK_ELEMENTS;
}

ulp_status ulp_diff_options_init_sized(ulp_diff_options *opts, size_t size)
{
    ulp_diff_options def;
    options_defaults(&def);
    return ulp__sized_init(opts, size, &def, sizeof def, OPTIONS_MIN, "ulp_diff_options");
}

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
}

/* Element pairs a row's metrics cover: sum(hist) + nonfinite_mismatch (diff.h). */
static uint64_t compared_elements(const ulp_diff_metrics *m)
{
    uint64_t n = m->nonfinite_mismatch;
    for (int k = 0; k < ULP_DIFF_HIST_BINS; k++)
        n += m->hist[k];
    return n;
}

/* The verdict as the rows come, batch by batch (rows [base, base + n)). */
typedef struct verdict_run {
    int amp_first_found, amp_last_found, tokens_found;
    size_t amp_first, amp_last; /* the amplification's rows so far */
    size_t tokens_first;        /* the first produced-tokens row that parts */
} verdict_run;

/* The produced tokens (FORMAT.md "Produced tokens"): emitted by the logits at the same key, after
 * every layer, so never where two runs part while another capture differs. */
static int produced_tokens(const ulp_diff_row *row)
{
    return row->name != NULL && strcmp(row->name, "tokens") == 0;
}

static void verdict_rows(ulp_diff_result *r, verdict_run *v, const ulp_diff_row *rows, size_t base,
                         size_t n)
{
    const char *activation = ulp_role_name(ULP_ROLE_ACTIVATION);
    for (size_t i = 0; i < n; i++) {
        ulp_diff_status s = rows[i].status;
        if (s != ULP_DIFF_IDENTICAL)
            r->identical = 0;
        if (s == ULP_DIFF_IDENTICAL || s == ULP_DIFF_DIFFERS)
            r->elements_compared += compared_elements(&rows[i].m);
        /* A rounded row whose every element rounds to the other side's is
         * not where the runs part (its dtypes still differ: not identical). */
        int parts = !(rows[i].rounded && rows[i].m.differing == 0);
        int tokens = produced_tokens(&rows[i]);
        if (!r->has_first_divergence && parts &&
            (s == ULP_DIFF_DIFFERS || s == ULP_DIFF_SHAPE_MISMATCH ||
             s == ULP_DIFF_DTYPE_MISMATCH)) {
            if (!tokens) {
                r->has_first_divergence = 1;
                r->first_divergence = base + i;
            } else if (!v->tokens_found) { /* the first divergence only if nothing else is */
                v->tokens_found = 1;
                v->tokens_first = base + i;
            }
        }
        if (tokens)
            continue; /* no amplification from or to them either */
        /* Amplification: from the first row that differs to the last
         * compared activation row at or after it. */
        if (!v->amp_first_found && s == ULP_DIFF_DIFFERS && parts) {
            v->amp_first_found = 1;
            v->amp_first = base + i;
        }
        if (v->amp_first_found && (s == ULP_DIFF_DIFFERS || s == ULP_DIFF_IDENTICAL) &&
            strcmp(rows[i].role, activation) == 0) {
            v->amp_last_found = 1;
            v->amp_last = base + i;
        }
    }
}

static void amplification(ulp_diff_result *r, const verdict_run *v)
{
    ulp_diff_amplification *amp = &r->amp;
    memset(amp, 0, sizeof *amp);
    if (!v->amp_first_found)
        return;
    size_t first = v->amp_first, last = v->amp_last_found ? v->amp_last : first;
    const ulp_diff_row *f = ulp_diff_result_row(r, first), *l = ulp_diff_result_row(r, last);
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
ulp_status ulp__diff_options_read(ulp_diff_options *out, const ulp_diff_options *in, ulp_error *err)
{
    ulp_diff_options def;
    options_defaults(&def);
    return ulp__sized_read(out, &def, sizeof def, OPTIONS_MIN, in, "ulp_diff_options", err);
}

static ulp_status resolve_options(const ulp_diff_options *in, ulp_diff_options *opts,
                                  ulp_error *err)
{
    if (in == NULL)
        options_defaults(opts);
    else if (ulp__diff_options_read(opts, in, err) != ULP_OK)
        return ULP_EINVAL;
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
    if (opts->n_topk < 0 || opts->n_topk > ULP_DIFF_MAX_TOPK)
        return ulp__error(err, ULP_EINVAL, "at most %d top-k sizes", ULP_DIFF_MAX_TOPK);
    for (int i = 0; i < opts->n_topk; i++)
        if (opts->topk[i] < 1)
            return ulp__error(err, ULP_EINVAL, "top-k sizes must be positive");
    if (opts->distributions && opts->n_topk == 0) {
        static const int dflt[] = {1, 5, 10};
        memcpy(opts->topk, dflt, sizeof dflt);
        opts->n_topk = 3;
    }
    return ULP_OK;
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

/*
 * The (request, position) of each flipped row: an aligned row's compared
 * key; else, for a whole pair whose capture in A (`ia`) has positions over
 * every axis but the vocabulary, the row's there; else unknown (-1).
 */
static void flip_keys(const ulp_snapshot *a, const ulp_diff_row *row, size_t ia,
                      ulp_diff_logits *lg)
{
    const ulp_capture_info *c = ulp_snapshot_capture(a, ia);
    int by_capture = !row->aligned && !row->sliced && c != NULL && c->positions != NULL &&
                     c->row_rank == c->ndim - 1 && c->rows == lg->rows;
    for (size_t k = 0; k < lg->n_flips; k++) {
        ulp_diff_flip *f = &lg->flips[k];
        if (row->aligned && f->row < row->n_keys) {
            f->request = row->keys[f->row].request;
            f->position = row->keys[f->row].position;
        } else if (by_capture) {
            f->request = c->requests != NULL ? c->requests[f->row] : 0;
            f->position = c->positions[f->row];
        }
    }
}

/* The logits analysis of every compared pair whose role is logits (those of
 * fuse[0..nfuse) from what the element pass gathered), appended to
 * r->logits; the pairs' rows are rows [base, ...) of the result. */
static ulp_status logits(const ulp_snapshot *a, const ulp_snapshot *b, const ulp_diff_options *opts,
                         ulp_diff_result *r, const ulp__diff_pair *pairs, size_t npairs,
                         const ulp__logits_fuse *fuse, size_t nfuse, size_t base, ulp_error *err)
{
    const char *logits_role = ulp_role_name(ULP_ROLE_LOGITS);
    size_t nlog = 0, f = 0;
    for (size_t q = 0; q < npairs; q++)
        if (strcmp(r->rows[pairs[q].row].role, logits_role) == 0)
            nlog++;
    if (nlog == 0)
        return ULP_OK;
    ulp_diff_logits *grown = realloc(r->logits, (r->n_logits + nlog) * sizeof *r->logits);
    if (grown == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    r->logits = grown;
    memset(r->logits + r->n_logits, 0, nlog * sizeof *r->logits);
    ulp__segs segs = {0};
    ulp_status st = ULP_OK;
    for (size_t q = 0; q < npairs && st == ULP_OK; q++) {
        const ulp_diff_row *row = &r->rows[pairs[q].row];
        if (strcmp(row->role, logits_role) != 0)
            continue;
        ulp_diff_logits *lg = &r->logits[r->n_logits++];
        lg->name = row->name;
        lg->occurrence = row->occurrence;
        lg->row_index = base + pairs[q].row;
        /* The row's pairs, consecutive, are its compared view. */
        segs.n = 0;
        size_t at = pairs[q].row; /* in the batch */
        for (; q < npairs && pairs[q].row == at; q++) {
            ulp__segment seg = {pairs[q].ia,    pairs[q].ib,  pairs[q].off_a,
                                pairs[q].off_b, pairs[q].len, pairs[q].base};
            if (ulp__segs_push(&segs, &seg) < 0)
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        q--;
        while (f < nfuse && fuse[f].row < at)
            f++;
        const ulp__logits_fuse *fu = f < nfuse && fuse[f].row == at ? &fuse[f] : NULL;
        if (st == ULP_OK)
            st = ulp__logits_run_view(a, b, segs.v, segs.n, row->ndim_a, row->shape_a, opts, fu, lg,
                                      err);
        if (st == ULP_OK)
            flip_keys(a, row, segs.v[0].ia, lg);
    }
    free(segs.v);
    return st;
}

/* The element metrics and the logits analysis of a batch's pairs, whose
 * rows are rows [base, ...) of the result. */
static ulp_status compare(const ulp_snapshot *a, const ulp_snapshot *b,
                          const ulp_diff_options *opts, ulp__read_mode *rm, ulp__diff_pool *pool,
                          ulp_diff_result *r, const ulp__diff_pair *pairs, size_t npairs,
                          size_t base, ulp__diff_overlap *ov, ulp_error *err)
{
    ulp__logits_fuse *fuse = NULL;
    size_t nfuse = 0, nsame = 0, ncross = 0;
    /* Rows of two dtypes go to their own pass (diff_cross.c), after the others. */
    ulp__diff_pair *split = NULL;
    for (size_t q = 0; q < npairs; q++)
        ncross += r->rows[pairs[q].row].rounded != 0;
    if (ncross > 0) {
        if ((split = malloc(npairs * sizeof *split)) == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        for (size_t q = 0, c = npairs - ncross; q < npairs; q++)
            split[r->rows[pairs[q].row].rounded ? c++ : nsame++] = pairs[q];
        pairs = split;
    } else {
        nsame = npairs;
    }
    ulp_status st = fuse_plan(opts, r, pairs, nsame, &fuse, &nfuse, err);
    if (st == ULP_OK)
        st = ulp__diff_metrics(a, b, opts, rm, pool, r, pairs, nsame, fuse, nfuse, ov, err);
    if (st == ULP_OK)
        st = ulp__diff_cross(a, b, r, pairs + nsame, ncross, err);
    if (st == ULP_OK)
        st = logits(a, b, opts, r, pairs, nsame, fuse, nfuse, base, err);
    for (size_t i = 0; st == ULP_OK && i < r->n_rows; i++)
        if (r->rows[i].rounded && r->rows[i].status == ULP_DIFF_IDENTICAL)
            r->rows[i].status = ULP_DIFF_DIFFERS; /* no pairs: still two formats */
    fuse_release(fuse, nfuse);
    free(split);
    return st;
}

/* Rows per batch of ulp_diff_stream() (1.2 KiB each, three buffers in
 * flight); ULPPROF_DIFF_BATCH=N sets it (the tests run many batches on
 * small files).  512 took less CPU than 1,024 or 2,048 on 10,000 captures
 * of 512 bytes (the batch's rows and job rows stay in the cores' caches,
 * fewer pages to fault in): 16.8 against 17.7 ms, the whole `ulpprof diff`. */
#define STREAM_BATCH_ROWS 512

/* Rows per batch: all at once without a callback, or where a capture has
 * positions (aligned rows and their origins see every row). */
static size_t batch_rows(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_rows_fn fn)
{
    size_t na = ulp_snapshot_capture_count(a), nb = ulp_snapshot_capture_count(b);
    size_t all = na + nb + 1, batch = STREAM_BATCH_ROWS;
    if (fn == NULL)
        return all;
    /* No table walk (a table made in pages would make every page). */
    const ulp__snapshot_summary *sa = ulp__snapshot_summary_get(a);
    const ulp__snapshot_summary *sb = ulp__snapshot_summary_get(b);
    if (sa == NULL || sb == NULL || sa->any_rows || sb->any_rows)
        return all;
    const char *env = getenv("ULPPROF_DIFF_BATCH");
    if (env != NULL && atol(env) > 0)
        batch = (size_t)atol(env);
    return batch < all ? batch : all;
}

/* A new result with the snapshots' names and the options; NULL when out of memory. */
static ulp_diff_result *result_new(const ulp_snapshot *a, const ulp_snapshot *b,
                                   const ulp_diff_options *opts)
{
    ulp__result_priv *priv = calloc(1, sizeof *priv);
    if (priv == NULL)
        return NULL;
    ulp__strset_init(&priv->strs);
    ulp_diff_result *r = &priv->r;
    r->path_a = xstrdup(ulp_snapshot_path(a));
    r->path_b = xstrdup(ulp_snapshot_path(b));
    r->label_a = xstrdup(ulp_snapshot_label(a));
    r->label_b = xstrdup(ulp_snapshot_label(b));
    r->n_temperatures = opts->n_temperatures;
    memcpy(r->temperatures, opts->temperatures, sizeof r->temperatures);
    r->identical = 1; /* until a row is not */
    if (!r->path_a || !r->path_b || !r->label_a || !r->label_b) {
        ulp_diff_result_free(r);
        return NULL;
    }
    return r;
}

/*
 * A streamed batch that went through verdict and origins but not yet to
 * the caller: its rows are rows [base, base + n) of the result, in `rows`
 * (one of the two row buffers), its logits r->logits[lg0..].
 */
typedef struct pending {
    ulp_diff_result *r;
    const verdict_run *v;
    ulp__diff_keep *keep;
    ulp_diff_rows_fn fn;
    void *ctx;
    ulp_diff_row *rows;
    size_t base, n, lg0;
} pending;

/* The batch to the caller, then what the result keeps of it (diff_keep.c):
 * r->rows is the batch's meanwhile.  Runs on the caller's thread while the
 * workers compare the next batch (ulp__diff_overlap). */
static ulp_status hand_over(void *arg, ulp_error *err)
{
    pending *p = arg;
    ulp_diff_result *r = p->r;
    ulp_diff_row *rows = r->rows;
    size_t n_rows = r->n_rows;
    ulp_status st = p->fn(p->ctx, p->rows, p->base, p->n, err);
    if (st != ULP_OK)
        return st;
    const verdict_run *v = p->v;
    size_t refs[4] = {r->has_first_divergence ? r->first_divergence : SIZE_MAX,
                      v->amp_first_found ? v->amp_first : SIZE_MAX,
                      v->amp_last_found ? v->amp_last : SIZE_MAX,
                      v->tokens_found && !r->has_first_divergence ? v->tokens_first : SIZE_MAX};
    r->rows = p->rows;
    r->n_rows = p->n;
    int rc = ulp__diff_keep_batch(p->keep, r, p->base, p->lg0, refs, 4);
    r->rows = rows;
    r->n_rows = n_rows;
    return rc != 0 ? ulp__error(err, ULP_ENOMEM, "out of memory") : ULP_OK;
}

/* A batch as the pairing made it: paired ahead, while the batch before it
 * is compared; its status is reported where the pairing would have come. */
typedef struct paired {
    ulp_status st;
    ulp_error err;
    ulp_diff_row *rows; /* its row buffer, n of them   */
    size_t n;
    ulp__diff_pair *pairs; /* a copy: the pairing reuses its array */
    size_t npairs, cap;
    int done;
    size_t low_a, low_b; /* its rows use no capture below these */
} paired;

/* A run's batches in flight: up to three row buffers -- one handed over,
 * one compared, one paired. */
typedef struct flight {
    ulp_diff_result *r;
    ulp__pairing *pc;
    size_t batch;
    ulp_diff_row *bufs[3];
    paired cur, next;
    pending pend;
    int has_pending, want_next;
    ulp_diff_row *next_rows; /* where the next batch is paired */
} flight;

/* Pairs the next batch into `rows`, into *out; r->rows and r->n_rows are as they were after. */
static void pair_next(flight *p, ulp_diff_row *rows, paired *out)
{
    ulp_diff_result *r = p->r;
    ulp_diff_row *was = r->rows;
    size_t n_was = r->n_rows; /* the batch before: the pairing counts it */
    const ulp__diff_pair *pairs = NULL;
    size_t npairs = 0;
    ulp_error_clear(&out->err);
    r->rows = rows;
    ulp__pairing_low(p->pc, &out->low_a, &out->low_b);
    out->st = ulp__pairing_next(p->pc, p->batch, &pairs, &npairs, &out->done, &out->err);
    out->rows = rows;
    out->n = r->n_rows;
    out->npairs = 0;
    if (out->st == ULP_OK && npairs > 0) {
        if (ULP__GROW(out->pairs, out->cap, npairs) != 0)
            out->st = ulp__error(&out->err, ULP_ENOMEM, "out of memory");
        else
            memcpy(out->pairs, pairs, npairs * sizeof *pairs);
        out->npairs = out->st == ULP_OK ? npairs : 0;
    }
    r->rows = was;
    r->n_rows = n_was;
}

/* What the caller's thread does while the workers compare a batch: the
 * batch before goes to the caller, the batch after is paired. */
static ulp_status meanwhile(void *arg, ulp_error *err)
{
    flight *p = arg;
    if (p->has_pending) {
        p->has_pending = 0;
        ulp_status st = hand_over(&p->pend, err);
        if (st != ULP_OK)
            return st;
    }
    if (p->want_next)
        pair_next(p, p->next_rows, &p->next);
    return ULP_OK;
}

/* The last batch to the caller, if one waits. */
static ulp_status hand_over_last(flight *p, ulp_error *err)
{
    if (!p->has_pending)
        return ULP_OK;
    p->has_pending = 0;
    return hand_over(&p->pend, err);
}

/* Frees what the flight holds; a stream's buffers with their rows (handed
 * over -- what they held is disowned -- or never). */
static void flight_release(flight *p, int stream)
{
    for (int i = 0; stream && i < 3; i++)
        for (size_t k = 0; p->bufs[i] != NULL && k < p->batch; k++)
            ulp__diff_row_release(&p->bufs[i][k]);
    if (stream)
        free(p->bufs[0]); /* the three, in one allocation */
    free(p->cur.pairs);
    free(p->next.pairs);
}

/*
 * Batch after batch: compared on the workers while this thread hands the
 * batch before to `fn` and pairs the batch after (meanwhile()); then its
 * verdict and origins.  What is returned, called and kept is as if one
 * batch were done after the other: batch k - 1's callback runs whatever
 * happens to batch k, and its error comes first; a pairing's error comes
 * after the callback of the batch before.
 */
static ulp_status batches(const ulp_snapshot *a, const ulp_snapshot *b,
                          const ulp_diff_options *opts, ulp__read_mode *rm, ulp__diff_pool *pool,
                          flight *p, verdict_run *v, size_t *base, ulp_error *err)
{
    ulp_diff_result *r = p->r;
    int stream = p->pend.fn != NULL;
    pair_next(p, r->rows, &p->next);
    for (size_t k = 0;; k++) {
        paired t = p->cur;
        p->cur = p->next;
        p->next = t;
        if (p->cur.st != ULP_OK) {
            r->rows = p->cur.rows; /* what it paired: freed with the result */
            r->n_rows = p->cur.n;
            ulp_status st = hand_over_last(p, err);
            if (st == ULP_OK && err)
                *err = p->cur.err;
            return st != ULP_OK ? st : p->cur.st;
        }
        r->rows = p->cur.rows;
        r->n_rows = p->cur.n;
        p->want_next = stream && !p->cur.done;
        /* run() allocated the three buffers of a stream of several batches;
         * a single batch has one and no next. */
        if (p->want_next && (p->next_rows = p->bufs[(k + 1) % 3]) == NULL) {
            p->want_next = 0; /* reported where the pairing comes */
            p->next.st = ulp__error(&p->next.err, ULP_ENOMEM, "out of memory");
        }
        size_t lg0 = r->n_logits;
        ulp__diff_overlap ov = {meanwhile, p, 0, ULP_OK, {0}};
        ulp_status st =
            compare(a, b, opts, rm, pool, r, p->cur.pairs, p->cur.npairs, *base, &ov, err);
        ulp__diff_overlap_run(&ov); /* whatever happened to this batch */
        if (ov.st != ULP_OK) {
            st = ov.st;
            if (err)
                *err = ov.err;
        }
        if (st != ULP_OK)
            return st;
        /* The workers are done with this batch: the captures only it used
         * go, where the caller allows it (ulp_snapshot_open_stream). */
        if (p->want_next && p->next.st == ULP_OK) {
            if (ulp__snapshot_trim_allowed(a))
                ulp__snapshot_trim(a, p->next.low_a);
            if (ulp__snapshot_trim_allowed(b))
                ulp__snapshot_trim(b, p->next.low_b);
        }
        verdict_rows(r, v, r->rows, *base, r->n_rows);
        ulp__origin_run(r);
        if (stream) {
            p->pend.rows = r->rows;
            p->pend.base = *base;
            p->pend.n = r->n_rows;
            p->pend.lg0 = lg0;
            p->has_pending = 1;
        }
        *base += r->n_rows;
        if (p->cur.done)
            return hand_over_last(p, err);
    }
}

/*
 * Pairs, compares and judges the rows batch by batch (batches()); with
 * `fn`, hands each batch to it and keeps only the rows the result points
 * at (diff_keep.c).
 */
static ulp_status run(const ulp_snapshot *a, const ulp_snapshot *b, const ulp_diff_options *opts,
                      ulp_diff_rows_fn fn, void *ctx, ulp_diff_result *r, ulp_error *err)
{
    ulp__diff_pool *pool = NULL;
    ulp__diff_keep keep;
    verdict_run v = {0};
    ulp__read_mode rm; /* one probe for every batch */
    size_t base = 0;
    flight p;
    memset(&p, 0, sizeof p);
    p.r = r;
    p.batch = batch_rows(a, b, fn);
    p.pend = (pending){r, &v, &keep, fn, ctx, NULL, 0, 0, 0};
    ulp__diff_keep_init(&keep);
    ulp_status st = ulp__streams_find(a, b, r, err);
    if (st != ULP_OK)
        return st;
    if (r->n_parts > 0)
        r->identical = 0; /* the runs fed different tokens */
    st = ulp__pairing_new(a, b, opts, r, &p.pc, err);
    if (st != ULP_OK)
        return st;
    /* A stream of several batches has its three buffers in one block, in
     * one huge page where it fits (10,000 captures: 1.9 MB that faulted in
     * 460 4 KiB pages); else the result's rows, or the one batch's. */
    size_t all = ulp_snapshot_capture_count(a) + ulp_snapshot_capture_count(b) + 1;
    if (fn == NULL || p.batch >= all) /* one batch: one buffer */
        p.bufs[0] = calloc(p.batch, sizeof *r->rows);
    else if (p.batch <= SIZE_MAX / 3 / sizeof *r->rows &&
             (p.bufs[0] = ulp__big_alloc(3 * p.batch * sizeof *r->rows, 1)) != NULL)
        for (int i = 1; i < 3; i++)
            p.bufs[i] = p.bufs[0] + (size_t)i * p.batch;
    if ((r->rows = p.bufs[0]) == NULL) {
        ulp__pairing_free(p.pc);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    if (ulp__read_mode_init(&rm, a, b) != 0) {
        ulp__pairing_free(p.pc);
        return ulp__error(err, ULP_ETHREAD, "cannot create a mutex");
    }
    if ((st = ulp__diff_pool_new(opts->threads, &pool, err)) == ULP_OK)
        st = batches(a, b, opts, &rm, pool, &p, &v, &base, err);
    ulp__diff_pool_free(pool);
    ulp__pairing_free(p.pc);
    ulp__read_mode_destroy(&rm);
    flight_release(&p, fn != NULL);
    if (fn != NULL) {
        r->rows = NULL; /* released with the buffers */
        r->n_rows = 0;
        ulp__diff_keep_finish(&keep, r, base); /* r->rows: the kept rows */
    }
    if (st == ULP_OK && !r->has_first_divergence && v.tokens_found) {
        r->has_first_divergence = 1;
        r->first_divergence = v.tokens_first;
    }
    if (st == ULP_OK)
        amplification(r, &v);
    return st;
}

ulp_status ulp_diff_stream(const ulp_snapshot *a, const ulp_snapshot *b,
                           const ulp_diff_options *opts_in, ulp_diff_rows_fn fn, void *ctx,
                           ulp_diff_result **out, ulp_error *err)
{
    ulp_diff_options opts;
    double t0 = now_seconds();
    *out = NULL;
    ulp_status st = resolve_options(opts_in, &opts, err);
    if (st != ULP_OK)
        return st;
    ulp_diff_result *r = result_new(a, b, &opts);
    if (r == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    if ((st = run(a, b, &opts, fn, ctx, r, err)) != ULP_OK ||
        (st = ulp__ladder_run(a, b, &r->ladder, err)) != ULP_OK) {
        ulp_diff_result_free(r);
        return st;
    }
    r->seconds = now_seconds() - t0;
    *out = r;
    return ULP_OK;
}

ulp_status ulp_diff_run(const ulp_snapshot *a, const ulp_snapshot *b,
                        const ulp_diff_options *opts_in, ulp_diff_result **out, ulp_error *err)
{
    return ulp_diff_stream(a, b, opts_in, NULL, NULL, out, err);
}

const ulp_diff_row *ulp_diff_result_row(const ulp_diff_result *r, size_t i)
{
    if (r == NULL || i >= r->n_rows)
        return NULL;
    if (!r->streamed)
        return &r->rows[i];
    size_t lo = 0, hi = r->n_kept;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->kept_index[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->n_kept && r->kept_index[lo] == i ? &r->rows[lo] : NULL;
}

void ulp_diff_result_free(ulp_diff_result *r)
{
    if (r == NULL)
        return;
    size_t nrows = r->streamed ? r->n_kept : r->n_rows;
    for (size_t i = 0; r->rows != NULL && i < nrows; i++)
        ulp__diff_row_release(&r->rows[i]);
    for (size_t i = 0; i < r->n_logits; i++)
        ulp__logits_free(&r->logits[i]);
    free(r->logits);
    ulp__ladder_free(&r->ladder);
    free(r->rows);
    free(r->kept_index);
    free(r->parts);
    free(r->request_pairs);
    free(r->path_a);
    free(r->path_b);
    free(r->label_a);
    free(r->label_b);
    ulp__result_priv *p = (ulp__result_priv *)(void *)r;
    ulp__strset_release(&p->strs, 1);
    free(p);
}

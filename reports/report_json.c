/*
 * The JSON report (FORMAT.md "JSON report"): the document around the rows
 * and the rows (report_json_row.c), written as they go with the one JSON
 * writer of report_json_out.h, never a tree.
 *
 * The keys FORMAT.md lists keep their names and meanings; a key added here
 * is added to FORMAT.md too.  Conventions: a value
 * that does not exist is null (layer absent, a row that was not compared,
 * a non-finite double, which JSON cannot spell); counts are integers.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "report_json_out.h"
#include "report_priv.h"
#include "ulpprof/sites.h"

static void jdoubles(ulp__jw *w, const char *key, const double *v, uint64_t n)
{
    ulp__jw_key(w, key);
    ulp__jw_open(w, '[');
    for (uint64_t i = 0; i < n; i++) {
        ulp__jw_item(w);
        ulp__jw_num(w, v[i]);
    }
    ulp__jw_close(w, ']');
}

/* Parted token streams: where, the tokens fed, the logits at the step before. */
static void jparts(ulp__jw *w, const ulp_diff_result *r)
{
    ulp__jw_key(w, "streams_part");
    ulp__jw_open(w, '[');
    for (size_t k = 0; k < r->n_parts; k++) {
        const ulp_diff_part *p = &r->parts[k];
        int lg = p->has_logits;
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_kint(w, "request", p->request);
        ulp__jw_kint(w, "position", p->position);
        ulp__jw_kint(w, "token_a", p->token_a);
        ulp__jw_kint(w, "token_b", p->token_b);
        ulp__jw_kstr(w, "from", p->from_ids ? "ids" : "argmax");
        ulp__jw_kstr(w, "source", p->source);
        ulp__jw_kstr(w, "logits", lg ? p->logits : NULL);
        ulp__jw_kint_or_null(w, "logits_position", lg, p->position - 1);
        ulp__jw_kint_or_null(w, "step", lg && p->step >= 0, p->step);
        ulp__jw_kint_or_null(w, "argmax_a", lg, p->argmax_a);
        ulp__jw_kint_or_null(w, "argmax_b", lg, p->argmax_b);
        ulp__jw_knum(w, "margin_a", lg ? p->margin_a : (double)NAN);
        ulp__jw_knum(w, "margin_b", lg ? p->margin_b : (double)NAN);
        ulp__jw_ku64(w, "positions_parted", p->positions_parted);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
}

/* B's requests renumbered onto A's by their tokens: paired, and kept apart. */
static void jrequests(ulp__jw *w, const char *key, const ulp_diff_result *r, int paired)
{
    ulp__jw_key(w, key);
    ulp__jw_open(w, '[');
    for (size_t k = 0; k < r->n_request_pairs; k++) {
        const ulp_diff_request_pair *p = &r->request_pairs[k];
        if (!p->paired != !paired)
            continue;
        ulp__jw_item(w);
        if (!paired) {
            ulp__jw_int(w, p->b);
            continue;
        }
        ulp__jw_open(w, '{');
        ulp__jw_kint(w, "b", p->b);
        ulp__jw_kint(w, "a", p->a);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
}

/* One statistic of a distribution measure over the rows: null without rows. */
static void jstat(ulp__jw *w, const char *key, const ulp_diff_dist_stat *s)
{
    int has = s->max_row >= 0;
    ulp__jw_key(w, key);
    ulp__jw_open(w, '{');
    if (has) {
        ulp__jw_knum(w, "max", s->max);
        ulp__jw_knum(w, "mean", s->mean);
    } else {
        ulp__jw_kstr(w, "max", NULL);
        ulp__jw_kstr(w, "mean", NULL);
    }
    ulp__jw_kint_or_null(w, "max_row", has, s->max_row);
    ulp__jw_close(w, '}');
}

/* The whole-distribution measures (--dist), FORMAT.md "Logits distributions". */
static void jdist(ulp__jw *w, const ulp_diff_logits *lg)
{
    const ulp_diff_dist *d = &lg->dist;
    ulp__jw_key(w, "distributions");
    ulp__jw_open(w, '{');
    ulp__jw_kstr(w, "softmax", "float64, temperature 1");
    jstat(w, "kl_ab", &d->kl_ab_s);
    jstat(w, "kl_ba", &d->kl_ba_s);
    jstat(w, "dlogp_top", &d->dlogp_top_s);
    jstat(w, "mean_abs_diff", &d->mean_abs_s);
    jstat(w, "rel_diff", &d->rel_diff_s);
    ulp__jw_knum(w, "same_top_fraction", d->same_top_fraction);
    ulp__jw_key(w, "topk");
    ulp__jw_open(w, '[');
    for (int q = 0; q < d->n_topk; q++) {
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_kint(w, "k", d->topk[q]);
        ulp__jw_knum(w, "mean", d->topk_mean[q]);
        ulp__jw_knum(w, "min", d->topk_min[q]);
        ulp__jw_kint_or_null(w, "min_row", d->topk_min_row[q] >= 0, d->topk_min_row[q]);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
    ulp__jw_key(w, "per_row");
    ulp__jw_open(w, '{');
    for (int q = 0; q < d->n_topk; q++) {
        char key[40];
        snprintf(key, sizeof key, "topk_overlap_%d", d->topk[q]);
        jdoubles(w, key, d->topk_overlap[q], lg->rows);
    }
    jdoubles(w, "kl_ab", d->kl_ab, lg->rows);
    jdoubles(w, "kl_ba", d->kl_ba, lg->rows);
    jdoubles(w, "dlogp_top", d->dlogp_top, lg->rows);
    jdoubles(w, "mean_abs_diff", d->mean_abs, lg->rows);
    jdoubles(w, "rel_diff", d->rel_diff, lg->rows);
    ulp__jw_close(w, '}');
    ulp__jw_close(w, '}');
}

static void jflip(ulp__jw *w, const ulp_diff_flip *f)
{
    ulp__jw_item(w);
    ulp__jw_open(w, '{');
    ulp__jw_ku64(w, "row", f->row);
    ulp__jw_kint(w, "argmax_a", f->argmax_a);
    ulp__jw_kint(w, "argmax_b", f->argmax_b);
    ulp__jw_knum(w, "margin_a", f->margin_a);
    ulp__jw_knum(w, "margin_b", f->margin_b);
    ulp__jw_knum(w, "gap_a", f->gap_a);
    ulp__jw_knum(w, "gap_b", f->gap_b);
    ulp__jw_knum(w, "gap_perturbation", f->gap_perturbation);
    ulp__jw_knum(w, "magnitude", f->magnitude);
    ulp__jw_knum(w, "gap_perturbation_ulps", f->gap_perturbation_ulps);
    ulp__jw_kint_or_null(w, "request", f->position >= 0, f->request);
    ulp__jw_kint_or_null(w, "position", f->position >= 0, f->position);
    ulp__jw_kstr(w, "tied",
                 f->tied_a && f->tied_b ? "both"
                 : f->tied_a            ? "a"
                 : f->tied_b            ? "b"
                                        : NULL);
    ulp__jw_close(w, '}');
}

/* The flipped rows where one run's top two tie (margin 0); also in `flipped`. */
static void jties(ulp__jw *w, const ulp_diff_logits *lg)
{
    ulp__jw_key(w, "tied");
    ulp__jw_open(w, '[');
    for (uint64_t r = 0; lg->tied != NULL && r < lg->rows; r++) {
        if (!lg->tied[r])
            continue;
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_ku64(w, "row", r);
        ulp__jw_kint(w, "argmax_a", lg->argmax_a[r]);
        ulp__jw_kint(w, "argmax_b", lg->argmax_b[r]);
        ulp__jw_knum(w, "margin_a", lg->margin_a[r]);
        ulp__jw_knum(w, "margin_b", lg->margin_b[r]);
        /* In row order: few ties.  The last flip of the row gives the key
         * its value, where the first set it. */
        size_t hit = lg->n_flips;
        for (size_t k = 0; k < lg->n_flips; k++)
            if (lg->flips[k].row == r && lg->flips[k].position >= 0)
                hit = k;
        if (hit < lg->n_flips) {
            ulp__jw_kint(w, "request", lg->flips[hit].request);
            ulp__jw_kint(w, "position", lg->flips[hit].position);
        }
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
}

static void jints(ulp__jw *w, const char *key, const int64_t *v, uint64_t n)
{
    ulp__jw_key(w, key);
    ulp__jw_open(w, '[');
    for (uint64_t i = 0; i < n; i++) {
        ulp__jw_item(w);
        ulp__jw_int(w, v[i]);
    }
    ulp__jw_close(w, ']');
}

static void jlogits(ulp__jw *w, const ulp_diff_logits *lg)
{
    ulp__jw_item(w);
    ulp__jw_open(w, '{');
    ulp__jw_kstr(w, "name", lg->name);
    ulp__jw_kint(w, "occurrence", lg->occurrence);
    ulp__jw_ku64(w, "rows", lg->rows);
    ulp__jw_ku64(w, "argmax_flips", lg->argmax_flips);
    ulp__jw_key(w, "flipped");
    ulp__jw_open(w, '[');
    for (size_t k = 0; k < lg->n_flips; k++)
        jflip(w, &lg->flips[k]);
    ulp__jw_close(w, ']');
    ulp__jw_ku64(w, "argmax_ties", lg->argmax_ties);
    jties(w, lg);
    ulp__jw_kstr(w, "dtype", ulp_dtype_name(lg->dtype));
    ulp__jw_ku64(w, "vocab", lg->vocab);
    ulp__jw_ku64(w, "rows_at_risk", lg->rows_at_risk);
    ulp__jw_key(w, "at_risk");
    ulp__jw_open(w, '[');
    for (uint64_t r = 0; r < lg->rows; r++)
        if (lg->at_risk[r]) {
            ulp__jw_item(w);
            ulp__jw_u64(w, r);
        }
    ulp__jw_close(w, ']');
    ulp__jw_key(w, "per_row");
    ulp__jw_open(w, '{');
    jints(w, "argmax_a", lg->argmax_a, lg->rows);
    jints(w, "argmax_b", lg->argmax_b, lg->rows);
    jdoubles(w, "margin_a", lg->margin_a, lg->rows);
    jdoubles(w, "margin_b", lg->margin_b, lg->rows);
    jdoubles(w, "max_perturbation", lg->max_perturbation, lg->rows);
    ulp__jw_close(w, '}');
    ulp__jw_key(w, "sampling");
    ulp__jw_open(w, '[');
    for (int k = 0; k < lg->n_sampling; k++) {
        const ulp_diff_sampling *s = &lg->sampling[k];
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_knum(w, "temperature", s->temperature);
        ulp__jw_knum(w, "tv_mean", s->tv_mean);
        ulp__jw_knum(w, "tv_max", s->tv_max);
        ulp__jw_knum(w, "p_differ_mean", s->p_differ_mean);
        ulp__jw_knum(w, "p_differ_max", s->p_differ_max);
        jdoubles(w, "tv", s->tv, lg->rows);
        jdoubles(w, "p_differ", s->p_differ, lg->rows);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
    if (lg->has_dist)
        jdist(w, lg);
    ulp__jw_close(w, '}');
}

static void jside(ulp__jw *w, const char *key, const char *path, const char *label,
                  const ulp_tp_join_info *tp)
{
    ulp__jw_key(w, key);
    ulp__jw_open(w, '{');
    ulp__jw_kstr(w, "path", path);
    ulp__jw_kstr(w, "label", label);
    ulp__report_tp_join_json(w, tp);
    ulp__jw_close(w, '}');
}

static void jfirst(ulp__jw *w, const ulp_diff_result *r)
{
    if (!ulp__jw_kobject_or_null(w, "first_divergence", r->has_first_divergence))
        return;
    const ulp_diff_row *row = ulp_diff_result_row(r, r->first_divergence);
    ulp__jw_kstr(w, "name", row->name);
    if (r->by_site) {
        ulp__jw_kstr(w, "name_b", row->name_b);
        ulp__jw_kstr(w, "site", row->site);
    }
    ulp__jw_kint(w, "occurrence", row->occurrence);
    ulp__jw_kint_or_null(w, "layer", row->layer >= 0, row->layer);
    ulp__jw_kint(w, "row", (int64_t)r->first_divergence);
    ulp__jw_kstr(w, "status", ulp_diff_status_name(row->status));
    int key = row->aligned && row->first_position >= 0;
    ulp__jw_kint_or_null(w, "request", key, row->first_request);
    ulp__jw_kint_or_null(w, "position", key, row->first_position);
    ulp__jw_kstr(w, "origin", ulp_diff_origin_name(row->origin));
    char text[2048];
    ulp__first_divergence_text(r, text, sizeof text, "");
    ulp__jw_kstr(w, "text", text);
    ulp__json_kernels(w, row);
    ulp__jw_close(w, '}');
}

static void jladder(ulp__jw *w, const ulp_diff_result *r)
{
    ulp__jw_key(w, "ladder");
    ulp__jw_open(w, '{');
    ulp__jw_key(w, "differing_keys");
    ulp__jw_open(w, '[');
    for (size_t i = 0; i < r->ladder.n_keys; i++) {
        ulp__jw_item(w);
        ulp__jw_str(w, r->ladder.keys[i].key);
    }
    ulp__jw_close(w, ']');
    ulp__jw_kint_or_null(w, "level", r->ladder.level != ULP_DIFF_LADDER_NONE, r->ladder.level);
    ulp__jw_kstr(w, "level_name", r->ladder.level_name);
    ulp__jw_key(w, "keys");
    ulp__jw_open(w, '[');
    for (size_t i = 0; i < r->ladder.n_keys; i++) {
        const ulp_diff_run_key *k = &r->ladder.keys[i];
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_kstr(w, "key", k->key);
        ulp__jw_kstr(w, "a", k->value_a);
        ulp__jw_kstr(w, "b", k->value_b);
        ulp__jw_kint_or_null(w, "level", k->level != ULP_DIFF_LADDER_NONE, k->level);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
    /* No rung verdict on nothing: every capture compared empty. */
    ulp__jw_kstr(w, "verdict",
                 r->identical && r->elements_compared == 0 ? NULL
                 : r->identical                            ? "holds"
                                                           : "breaks");
    ulp__jw_close(w, '}');
}

static void jsummary(ulp__jw *w, const ulp_diff_result *r, size_t not_identical)
{
    ulp__jw_key(w, "summary");
    ulp__jw_open(w, '{');
    ulp__jw_kint(w, "rows", (int64_t)r->n_rows);
    ulp__jw_kint(w, "shared", (int64_t)r->n_shared);
    ulp__jw_kint(w, "only_in_a", (int64_t)r->n_only_a);
    ulp__jw_kint(w, "only_in_b", (int64_t)r->n_only_b);
    ulp__jw_kint(w, "not_identical", (int64_t)not_identical);
    ulp__jw_kint(w, "elements_compared", (int64_t)r->elements_compared);
    /* Absent when paired by name: older reports stay as they were.  "site"
     * when every row paired by (site, layer), "mixed" when some paired by
     * name (each row's own `paired_by` says which). */
    if (r->by_site)
        ulp__jw_kstr(w, "paired_by", r->n_paired_by_site == r->n_rows ? "site" : "mixed");
    ulp__jw_kbool(w, "no_shared_captures", r->n_shared == 0 && r->n_rows > 0);
    ulp__jw_close(w, '}');
}

static void jamp(ulp__jw *w, const ulp_diff_result *r)
{
    if (!ulp__jw_kobject_or_null(w, "amplification", r->amp.valid))
        return;
    const ulp_diff_amplification *a = &r->amp;
    const ulp_diff_row *f = ulp_diff_result_row(r, a->first_row);
    const ulp_diff_row *l = ulp_diff_result_row(r, a->last_row);
    ulp__jw_kstr(w, "first", f->name);
    ulp__jw_kint(w, "first_occurrence", f->occurrence);
    ulp__jw_kstr(w, "last", l->name);
    ulp__jw_kint(w, "last_occurrence", l->occurrence);
    ulp__jw_knum(w, "differing_fraction_first", a->frac_first);
    ulp__jw_knum(w, "differing_fraction_last", a->frac_last);
    ulp__jw_knum(w, "differing_fraction_factor", a->frac_factor);
    ulp__jw_knum(w, "max_abs_diff_first", a->abs_first);
    ulp__jw_knum(w, "max_abs_diff_last", a->abs_last);
    ulp__jw_knum(w, "max_abs_diff_factor", a->abs_factor);
    ulp__jw_close(w, '}');
}

void ulp__json_head(ulp__jw *w, const ulp_diff_result *r)
{
    ulp__jw_open(w, '{');
    ulp__jw_kstr(w, "format", "ulpprof-diff");
    ulp__jw_kint(w, "format_version", 1);
    jside(w, "a", r->path_a, r->label_a, r->tp_join_a);
    jside(w, "b", r->path_b, r->label_b, r->tp_join_b);
    ulp__jw_kbool(w, "identical", r->identical);
    jfirst(w, r);
    ulp__jw_key(w, "rows");
    ulp__jw_flush(w);
}

void ulp__json_tail(ulp__jw *w, const ulp_diff_result *r, size_t not_identical)
{
    ulp__jw_key(w, "logits");
    ulp__jw_open(w, '[');
    for (size_t i = 0; i < r->n_logits; i++)
        jlogits(w, &r->logits[i]);
    ulp__jw_close(w, ']');
    jladder(w, r);
    jparts(w, r);
    jrequests(w, "requests_paired", r, 1);
    jrequests(w, "requests_apart_b", r, 0);
    jsummary(w, r, not_identical);
    jamp(w, r);
    jdoubles(w, "temperatures", r->temperatures,
             (uint64_t)(r->n_temperatures > 0 ? r->n_temperatures : 0));
    if (r->verdict) {
        ulp__jw_key(w, "verdict");
        ulp__report_verdict_json(w, r->verdict);
    }
    ulp__jw_close(w, '}');
    ulp__jw_raw(w, "\n", 1);
    ulp__jw_flush(w);
}

int ulp__json_rows(const ulp_diff_row *rows, size_t n, size_t first, FILE *f)
{
    ulp__jw *w = malloc(sizeof *w);
    if (w == NULL)
        return -1;
    ulp__jw_init(w, f, 2);
    for (size_t i = 0; i < n; i++) {
        if (first + i == 0)
            ulp__jw_raw(w, "[\n    ", 6);
        else
            ulp__jw_raw(w, ",\n    ", 6);
        ulp__json_row(w, &rows[i]);
    }
    ulp__jw_flush(w);
    free(w);
    return 0;
}

void ulp__json_rows_end(size_t total, FILE *f)
{
    fputs(total == 0 ? "[]" : "\n  ]", f);
}

ulp_status ulp__report_json(const ulp_diff_result *r, FILE *f, ulp_error *err)
{
    size_t not_identical = 0;
    for (size_t i = 0; i < r->n_rows; i++)
        not_identical += r->rows[i].status != ULP_DIFF_IDENTICAL;
    ulp__jw *w = malloc(sizeof *w);
    if (w == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the JSON report");
    /*
     * The document around the rows, and the rows one at a time in between,
     * indented as an array two levels down: a report of 10,000 rows is
     * never a tree, nor a string, in memory.
     */
    ulp__jw_init(w, f, 0);
    ulp__json_head(w, r);
    int rc = ulp__json_rows(r->rows, r->n_rows, 0, f);
    ulp__json_rows_end(r->n_rows, f);
    ulp__json_tail(w, r, not_identical);
    free(w);
    if (rc != 0)
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the JSON report");
    if (ferror(f))
        return ulp__report_write_error(err, ULP_EIO);
    return ULP_OK;
}

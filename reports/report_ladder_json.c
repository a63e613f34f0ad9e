/*
 * `ulpprof ladder --format json` (FORMAT.md "ulpprof ladder").  Absent
 * values are null; counts are integers.
 *
 * Written as it goes with report_json_out.h's writer, byte for byte what
 * the jansson tree it replaced dumped (JSON_INDENT(2) | JSON_PRESERVE_ORDER
 * | JSON_REAL_PRECISION(17)): with 19,900 pairs the tree cost as much as
 * the comparisons.  What jansson did is kept: a string that is not UTF-8
 * (json_string() gives NULL) leaves its key out of its object, or its
 * value out of its array; counts are json_int_t (int64_t); "seconds" is
 * left out when not finite.  tests/unit/test_report_ladder_json.c holds
 * the output against the tree.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/utf8.h"
#include "report_json_out.h"
#include "report_priv.h"
#include "ulpprof/verdict.h"

/* Whether jansson's json_string(s) is a string: s is not NULL and is UTF-8. */
static int is_text(const char *s)
{
    if (s == NULL)
        return 0;
    const unsigned char *p = (const unsigned char *)s;
    while (*p != '\0') {
        if (*p < 0x80) {
            p++;
            continue;
        }
        size_t k = ulp__utf8_len(p);
        if (k == 0)
            return 0;
        p += k;
    }
    return 1;
}

/* json_object_set_new(o, key, json_string(s)). */
static void key_str(ulp__jw *w, const char *key, const char *s)
{
    if (!is_text(s))
        return;
    ulp__jw_key(w, key);
    ulp__jw_str(w, s);
}

/* The same with s ? json_string(s) : json_null(). */
static void key_str_or_null(ulp__jw *w, const char *key, const char *s)
{
    if (s == NULL) {
        ulp__jw_key(w, key);
        ulp__jw_null(w);
        return;
    }
    key_str(w, key, s);
}

/* json_array_append_new(a, json_string(s)). */
static void item_str(ulp__jw *w, const char *s)
{
    if (!is_text(s))
        return;
    ulp__jw_item(w);
    ulp__jw_str(w, s);
}

/* Counts of elements and rows stay far below 2^63: json_integer((json_int_t)v). */
static void key_count(ulp__jw *w, const char *key, uint64_t v)
{
    ulp__jw_kint(w, key, (int64_t)v);
}

static void run_json(ulp__jw *w, const ulp_ladder_run *run, size_t i)
{
    ulp__jw_open(w, '{');
    ulp__jw_kint(w, "index", (int64_t)i);
    key_str(w, "path", run->path);
    key_str(w, "label", run->label);
    ulp__jw_kint(w, "group", (int64_t)run->group);
    ulp__jw_key(w, "run");
    ulp__jw_open(w, '{');
    /* /run's keys are attribute names: distinct. */
    for (size_t k = 0; k < run->n_run; k++) {
        if (!is_text(run->run[k].key) || !is_text(run->run[k].value))
            continue;
        ulp__jw_key_str(w, run->run[k].key);
        ulp__jw_str(w, run->run[k].value);
    }
    ulp__jw_close(w, '}');
    ulp__jw_key(w, "files");
    ulp__jw_open(w, '[');
    for (size_t f = 0; f < run->n_files; f++) {
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        ulp__jw_kint(w, "rank", run->files[f].rank);
        key_str(w, "path", run->files[f].path);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
    ulp__jw_close(w, '}');
}

static void first_json(ulp__jw *w, const ulp_ladder_pair *p)
{
    if (!p->has_first) {
        ulp__jw_null(w);
        return;
    }
    const ulp_ladder_divergence *d = &p->first;
    int compared = d->status == ULP_DIFF_DIFFERS, digests = d->occurrence < 0;
    ulp__jw_open(w, '{');
    key_str(w, "capture", d->capture);
    ulp__jw_kint_or_null(w, "occurrence", !digests, d->occurrence);
    ulp__jw_kint_or_null(w, "layer", d->layer >= 0, d->layer);
    ulp__jw_kint(w, "rank", d->rank);
    key_str(w, "status", ulp_diff_status_name(d->status));
    ulp__jw_kint_or_null(w, "row", d->row >= 0, d->row);
    ulp__jw_kint_or_null(w, "request", d->request >= 0, d->request);
    ulp__jw_kint_or_null(w, "position", d->position >= 0, d->position);
    ulp__jw_kint_or_null(w, "differing", compared, (int64_t)d->differing);
    key_count(w, "elements", d->elements);
    ulp__jw_kint_or_null(w, "max_ulp", compared && !digests, (int64_t)d->max_ulp);
    ulp__jw_close(w, '}');
}

/* Where the pair's token streams part (ladder.h), or null. */
static void part_json(ulp__jw *w, const ulp_ladder_pair *p)
{
    if (!p->streams_part) {
        ulp__jw_null(w);
        return;
    }
    const ulp_digest_part *s = &p->part;
    ulp__jw_open(w, '{');
    key_str_or_null(w, "source", s->source);
    ulp__jw_kint(w, "rank", p->part_rank);
    ulp__jw_kint(w, "request", s->request);
    ulp__jw_kint(w, "position", s->position);
    ulp__jw_kint(w, "token_a", s->token_a);
    ulp__jw_kint(w, "token_b", s->token_b);
    ulp__jw_kint_or_null(w, "step_a", s->step_a >= 0, s->step_a);
    ulp__jw_kint_or_null(w, "step_b", s->step_b >= 0, s->step_b);
    ulp__jw_kint_or_null(w, "produced_step", s->produced_step >= 0, s->produced_step);
    ulp__jw_key(w, "margin_a");
    ulp__jw_num(w, s->margin_a);
    ulp__jw_key(w, "margin_b");
    ulp__jw_num(w, s->margin_b);
    ulp__jw_close(w, '}');
}

static void pair_keys(ulp__jw *w, const ulp_ladder_result *r, const ulp_ladder_pair *p)
{
    ulp__jw_key(w, "keys");
    ulp__jw_open(w, '[');
    for (size_t k = 0; k < p->n_keys; k++) {
        const ulp_diff_run_key *key = &p->keys[k];
        int ign = 0;
        for (int i = 0; i < r->n_ignore; i++)
            ign |= strcmp(r->ignore[i], key->key) == 0;
        ulp__jw_item(w);
        ulp__jw_open(w, '{');
        key_str(w, "key", key->key);
        key_str_or_null(w, "a", key->value_a);
        key_str_or_null(w, "b", key->value_b);
        ulp__jw_kint_or_null(w, "level", key->level >= 0, key->level);
        ulp__jw_kbool(w, "ignored", ign);
        ulp__jw_close(w, '}');
    }
    ulp__jw_close(w, ']');
}

static void pair_json(ulp__jw *w, const ulp_ladder_result *r, const ulp_ladder_pair *p)
{
    ulp__jw_open(w, '{');
    ulp__jw_kint(w, "a", (int64_t)p->a);
    ulp__jw_kint(w, "b", (int64_t)p->b);
    ulp__jw_kbool(w, "identical", p->identical);
    ulp__jw_key(w, "differing_keys");
    ulp__jw_open(w, '[');
    for (size_t k = 0; k < p->n_keys; k++)
        item_str(w, p->keys[k].key);
    ulp__jw_close(w, ']');
    ulp__jw_key(w, "first_divergence");
    first_json(w, p);
    key_count(w, "argmax_flips", p->argmax_flips);
    pair_keys(w, r, p);
    ulp__jw_kint_or_null(w, "rung", p->rung >= 0, p->rung);
    ulp__jw_key(w, "rungs");
    ulp__jw_open(w, '[');
    for (int g = 0; g < ULP_LADDER_RUNGS; g++)
        if ((p->rungs >> g) & 1u) {
            ulp__jw_item(w);
            ulp__jw_int(w, g);
        }
    ulp__jw_close(w, ']');
    ulp__jw_kbool(w, "uncontrolled", p->uncontrolled);
    ulp__jw_kint(w, "ranks", (int64_t)p->n_ranks);
    ulp__jw_kint(w, "ranks_only_a", (int64_t)p->ranks_only_a);
    ulp__jw_kint(w, "ranks_only_b", (int64_t)p->ranks_only_b);
    key_count(w, "rows", p->rows);
    key_count(w, "differing_rows", p->differing_rows);
    key_count(w, "logits_rows", p->logits_rows);
    key_count(w, "elements_compared", p->elements_compared);
    key_str(w, "verdict", ulp_verdict_kind_name((ulp_verdict_kind)p->verdict));
    key_str(w, "cache_witness", ulp_cache_witness_name((ulp_cache_witness)p->cache_witness));
    if (p->contract_word) {
        key_str(w, "contract", p->contract_word);
        key_str(w, "contract_text", p->contract_text);
    }
    ulp__jw_key(w, "streams_part");
    part_json(w, p);
    ulp__jw_kint(w, "parted_requests", (int64_t)p->parted_requests);
    key_count(w, "rows_after_part", p->rows_after_part);
    ulp__jw_close(w, '}');
}

static void rung_json(ulp__jw *w, const ulp_ladder_result *r, const ulp_ladder_rung *g)
{
    ulp__jw_open(w, '{');
    ulp__jw_kint(w, "level", g->level);
    key_str(w, "name", g->name);
    ulp__jw_key(w, "keys");
    ulp__jw_open(w, '[');
    for (size_t k = 0; k < g->n_keys; k++)
        item_str(w, g->keys[k]);
    ulp__jw_close(w, ']');
    key_str(w, "verdict", ulp_ladder_verdict_name(g->verdict));
    ulp__jw_key(w, "first_break");
    if (g->has_first_break) {
        const ulp_ladder_pair *p = ulp_ladder_result_pair(r, g->first_break);
        ulp__jw_open(w, '{');
        ulp__jw_kint(w, "pair", (int64_t)g->first_break);
        ulp__jw_kint(w, "a", (int64_t)p->a);
        ulp__jw_kint(w, "b", (int64_t)p->b);
        ulp__jw_key(w, "first_divergence");
        first_json(w, p);
        key_count(w, "argmax_flips", p->argmax_flips);
        key_str(w, "found_by", p->streams_part ? "tokens" : "activations");
        ulp__jw_key(w, "streams_part");
        part_json(w, p);
        ulp__jw_close(w, '}');
    } else {
        ulp__jw_null(w);
    }
    ulp__jw_kbool(w, "varied", g->varied);
    ulp__jw_kint(w, "deciding_pairs", (int64_t)g->n_deciding);
    ulp__jw_kint(w, "breaking_pairs", (int64_t)g->n_breaking);
    ulp__jw_kint(w, "mixed_pairs", (int64_t)g->n_mixed);
    ulp__jw_kint(w, "empty_pairs", (int64_t)g->n_empty);
    ulp__jw_kint(w, "unwitnessed_pairs", (int64_t)g->n_unwitnessed);
    ulp__jw_kint(w, "parted_pairs", (int64_t)r->rung_parted[g->level]);
    ulp__jw_close(w, '}');
}

/* The document's arrays of runs, pairs and rungs. */
static void body(ulp__jw *w, const ulp_ladder_result *r)
{
    ulp__jw_key(w, "runs");
    ulp__jw_open(w, '[');
    for (size_t i = 0; i < r->n_runs; i++) {
        ulp__jw_item(w);
        run_json(w, &r->runs[i], i);
    }
    ulp__jw_close(w, ']');
    ulp__jw_key(w, "pairs");
    ulp__jw_open(w, '[');
    for (size_t j = 0; j < r->n_pairs; j++) {
        ulp__jw_item(w);
        pair_json(w, r, ulp_ladder_result_pair(r, j));
    }
    ulp__jw_close(w, ']');
    ulp__jw_key(w, "rungs");
    ulp__jw_open(w, '[');
    for (int g = 0; g < ULP_LADDER_RUNGS; g++) {
        ulp__jw_item(w);
        rung_json(w, r, &r->rungs[g]);
    }
    ulp__jw_close(w, ']');
}

ulp_status ulp__ladder_report_json(const ulp_ladder_result *r, FILE *f, ulp_error *err)
{
    ulp__jw *w = malloc(sizeof *w);
    if (w == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory writing the JSON report");
    ulp__jw_init(w, f, 0);
    ulp__jw_open(w, '{');
    key_str(w, "format", "ulpprof-ladder");
    ulp__jw_kint(w, "format_version", 1);
    body(w, r);
    ulp__jw_key(w, "groups");
    ulp__jw_open(w, '[');
    for (size_t g = 0; g < r->n_groups; g++) {
        ulp__jw_item(w);
        ulp__jw_open(w, '[');
        for (size_t i = 0; i < r->n_runs; i++)
            if (r->runs[i].group == g) {
                ulp__jw_item(w);
                ulp__jw_int(w, (int64_t)i);
            }
        ulp__jw_close(w, ']');
    }
    ulp__jw_close(w, ']');
    ulp__jw_key(w, "ignored_keys");
    ulp__jw_open(w, '[');
    for (int i = 0; i < r->n_ignore; i++)
        item_str(w, r->ignore[i]);
    ulp__jw_close(w, ']');
    if (isfinite(r->seconds)) {
        ulp__jw_key(w, "seconds");
        ulp__jw_real(w, r->seconds);
    }
    ulp__jw_close(w, '}');
    ulp__jw_raw(w, "\n", 1);
    ulp__jw_flush(w);
    free(w);
    if (ferror(f))
        return ulp__error(err, ULP_EIO, "cannot write the JSON report");
    return ULP_OK;
}

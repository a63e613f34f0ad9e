/*
 * reports/report_ladder_json.c writes `ulpprof ladder -f json` without a
 * jansson tree; its bytes are the tree's.  The reference below is the tree
 * builder as it was (up to 9356064), dumped with the report's flags; it is
 * held against ulp__ladder_report_json() over random results: strings with
 * quotes, backslashes, control characters, UTF-8 valid and not (jansson
 * then leaves the key or item out), NULL values, empty containers, counts
 * past INT64_MAX, seconds NaN, inf and -0.0.
 */
#define _GNU_SOURCE
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reports/report_priv.h"
#define TEST_RNG_SEED 0xD1B54A32D192ED03ULL
#include "test_rng.h"

/* ---- The reference: report_ladder_json.c's tree, as it was. ---- */

static json_t *ref_jcount(uint64_t v)
{
    /* Counts of elements and rows stay far below 2^63. */
    return json_integer((json_int_t)v);
}

static json_t *ref_run_json(const ulp_ladder_run *run, size_t i)
{
    json_t *o = json_object(), *cond = json_object(), *files = json_array();
    json_object_set_new(o, "index", json_integer((json_int_t)i));
    json_object_set_new(o, "path", json_string(run->path));
    json_object_set_new(o, "label", json_string(run->label));
    json_object_set_new(o, "group", json_integer((json_int_t)run->group));
    for (size_t k = 0; k < run->n_run; k++)
        json_object_set_new(cond, run->run[k].key, json_string(run->run[k].value));
    json_object_set_new(o, "run", cond);
    for (size_t f = 0; f < run->n_files; f++) {
        json_t *x = json_object();
        json_object_set_new(x, "rank", json_integer(run->files[f].rank));
        json_object_set_new(x, "path", json_string(run->files[f].path));
        json_array_append_new(files, x);
    }
    json_object_set_new(o, "files", files);
    return o;
}

static json_t *ref_first_json(const ulp_ladder_pair *p)
{
    if (!p->has_first)
        return json_null();
    const ulp_ladder_divergence *d = &p->first;
    json_t *o = json_object();
    json_object_set_new(o, "capture", json_string(d->capture));
    /* A negative occurrence: found by row digests, no occurrence and no ULP number. */
    json_object_set_new(o, "occurrence",
                        d->occurrence >= 0 ? json_integer(d->occurrence) : json_null());
    json_object_set_new(o, "layer", d->layer >= 0 ? json_integer(d->layer) : json_null());
    json_object_set_new(o, "rank", json_integer(d->rank));
    json_object_set_new(o, "status", json_string(ulp_diff_status_name(d->status)));
    json_object_set_new(o, "row", d->row >= 0 ? json_integer(d->row) : json_null());
    json_object_set_new(o, "request", d->request >= 0 ? json_integer(d->request) : json_null());
    json_object_set_new(o, "position", d->position >= 0 ? json_integer(d->position) : json_null());
    int compared = d->status == ULP_DIFF_DIFFERS;
    json_object_set_new(o, "differing", compared ? ref_jcount(d->differing) : json_null());
    json_object_set_new(o, "elements", ref_jcount(d->elements));
    json_object_set_new(o, "max_ulp",
                        compared && d->occurrence >= 0 ? ref_jcount(d->max_ulp) : json_null());
    return o;
}

static json_t *ref_real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static json_t *ref_part_json(const ulp_ladder_pair *p)
{
    if (!p->streams_part)
        return json_null();
    const ulp_digest_part *s = &p->part;
    json_t *o = json_object();
    json_object_set_new(o, "source", s->source ? json_string(s->source) : json_null());
    json_object_set_new(o, "rank", json_integer(p->part_rank));
    json_object_set_new(o, "request", json_integer(s->request));
    json_object_set_new(o, "position", json_integer(s->position));
    json_object_set_new(o, "token_a", json_integer(s->token_a));
    json_object_set_new(o, "token_b", json_integer(s->token_b));
    json_object_set_new(o, "step_a", s->step_a >= 0 ? json_integer(s->step_a) : json_null());
    json_object_set_new(o, "step_b", s->step_b >= 0 ? json_integer(s->step_b) : json_null());
    json_object_set_new(o, "produced_step",
                        s->produced_step >= 0 ? json_integer(s->produced_step) : json_null());
    json_object_set_new(o, "margin_a", ref_real_or_null(s->margin_a));
    json_object_set_new(o, "margin_b", ref_real_or_null(s->margin_b));
    return o;
}

static json_t *ref_pair_json(const ulp_ladder_result *r, const ulp_ladder_pair *p)
{
    json_t *o = json_object(), *names = json_array(), *keys = json_array();
    json_object_set_new(o, "a", json_integer((json_int_t)p->a));
    json_object_set_new(o, "b", json_integer((json_int_t)p->b));
    json_object_set_new(o, "identical", json_boolean(p->identical));
    for (size_t k = 0; k < p->n_keys; k++) {
        const ulp_diff_run_key *key = &p->keys[k];
        json_t *x = json_object();
        int ign = 0;
        for (int i = 0; i < r->n_ignore; i++)
            ign |= strcmp(r->ignore[i], key->key) == 0;
        json_array_append_new(names, json_string(key->key));
        json_object_set_new(x, "key", json_string(key->key));
        json_object_set_new(x, "a", key->value_a ? json_string(key->value_a) : json_null());
        json_object_set_new(x, "b", key->value_b ? json_string(key->value_b) : json_null());
        json_object_set_new(x, "level", key->level >= 0 ? json_integer(key->level) : json_null());
        json_object_set_new(x, "ignored", json_boolean(ign));
        json_array_append_new(keys, x);
    }
    json_object_set_new(o, "differing_keys", names);
    json_object_set_new(o, "first_divergence", ref_first_json(p));
    json_object_set_new(o, "argmax_flips", ref_jcount(p->argmax_flips));
    json_object_set_new(o, "keys", keys);
    json_object_set_new(o, "rung", p->rung >= 0 ? json_integer(p->rung) : json_null());
    json_t *rungs = json_array();
    for (int g = 0; g < ULP_LADDER_RUNGS; g++)
        if ((p->rungs >> g) & 1u)
            json_array_append_new(rungs, json_integer(g));
    json_object_set_new(o, "rungs", rungs);
    json_object_set_new(o, "uncontrolled", json_boolean(p->uncontrolled));
    json_object_set_new(o, "ranks", json_integer((json_int_t)p->n_ranks));
    json_object_set_new(o, "ranks_only_a", json_integer((json_int_t)p->ranks_only_a));
    json_object_set_new(o, "ranks_only_b", json_integer((json_int_t)p->ranks_only_b));
    json_object_set_new(o, "rows", ref_jcount(p->rows));
    json_object_set_new(o, "differing_rows", ref_jcount(p->differing_rows));
    json_object_set_new(o, "logits_rows", ref_jcount(p->logits_rows));
    json_object_set_new(o, "elements_compared", ref_jcount(p->elements_compared));
    static const char *const verdicts[] = {"identical", "rounding", "defect", "unknown"};
    static const char *const witnesses[] = {"not_cache", "taken", "none", "unknown"};
    json_object_set_new(o, "verdict", json_string(verdicts[p->verdict]));
    json_object_set_new(o, "cache_witness", json_string(witnesses[p->cache_witness]));
    json_object_set_new(o, "streams_part", ref_part_json(p));
    json_object_set_new(o, "parted_requests", json_integer((json_int_t)p->parted_requests));
    json_object_set_new(o, "rows_after_part", ref_jcount(p->rows_after_part));
    return o;
}

static json_t *ref_rung_json(const ulp_ladder_result *r, const ulp_ladder_rung *g)
{
    json_t *o = json_object(), *keys = json_array();
    json_object_set_new(o, "level", json_integer(g->level));
    json_object_set_new(o, "name", json_string(g->name));
    for (size_t k = 0; k < g->n_keys; k++)
        json_array_append_new(keys, json_string(g->keys[k]));
    json_object_set_new(o, "keys", keys);
    json_object_set_new(o, "verdict", json_string(ulp_ladder_verdict_name(g->verdict)));
    json_t *fb = json_null();
    if (g->has_first_break) {
        const ulp_ladder_pair *p = &r->pairs[g->first_break];
        fb = json_object();
        json_object_set_new(fb, "pair", json_integer((json_int_t)g->first_break));
        json_object_set_new(fb, "a", json_integer((json_int_t)p->a));
        json_object_set_new(fb, "b", json_integer((json_int_t)p->b));
        json_object_set_new(fb, "first_divergence", ref_first_json(p));
        json_object_set_new(fb, "argmax_flips", ref_jcount(p->argmax_flips));
        json_object_set_new(fb, "found_by",
                            json_string(p->streams_part ? "tokens" : "activations"));
        json_object_set_new(fb, "streams_part", ref_part_json(p));
    }
    json_object_set_new(o, "first_break", fb);
    json_object_set_new(o, "varied", json_boolean(g->varied));
    json_object_set_new(o, "deciding_pairs", json_integer((json_int_t)g->n_deciding));
    json_object_set_new(o, "breaking_pairs", json_integer((json_int_t)g->n_breaking));
    json_object_set_new(o, "mixed_pairs", json_integer((json_int_t)g->n_mixed));
    json_object_set_new(o, "empty_pairs", json_integer((json_int_t)g->n_empty));
    json_object_set_new(o, "unwitnessed_pairs", json_integer((json_int_t)g->n_unwitnessed));
    json_object_set_new(o, "parted_pairs", json_integer((json_int_t)r->rung_parted[g->level]));
    return o;
}

static json_t *ref_build(const ulp_ladder_result *r)
{
    json_t *doc = json_object(), *runs = json_array(), *pairs = json_array(), *rungs = json_array(),
           *groups = json_array(), *ign = json_array();
    json_object_set_new(doc, "format", json_string("ulpprof-ladder"));
    json_object_set_new(doc, "format_version", json_integer(1));
    for (size_t i = 0; i < r->n_runs; i++)
        json_array_append_new(runs, ref_run_json(&r->runs[i], i));
    json_object_set_new(doc, "runs", runs);
    for (size_t j = 0; j < r->n_pairs; j++)
        json_array_append_new(pairs, ref_pair_json(r, &r->pairs[j]));
    json_object_set_new(doc, "pairs", pairs);
    for (int g = 0; g < ULP_LADDER_RUNGS; g++)
        json_array_append_new(rungs, ref_rung_json(r, &r->rungs[g]));
    json_object_set_new(doc, "rungs", rungs);
    for (size_t g = 0; g < r->n_groups; g++) {
        json_t *members = json_array();
        for (size_t i = 0; i < r->n_runs; i++)
            if (r->runs[i].group == g)
                json_array_append_new(members, json_integer((json_int_t)i));
        json_array_append_new(groups, members);
    }
    json_object_set_new(doc, "groups", groups);
    for (int i = 0; i < r->n_ignore; i++)
        json_array_append_new(ign, json_string(r->ignore[i]));
    json_object_set_new(doc, "ignored_keys", ign);
    json_object_set_new(doc, "seconds", json_real(r->seconds));
    return doc;
}

static char *ref_text(const ulp_ladder_result *r, size_t *len)
{
    json_t *doc = ref_build(r);
    assert_non_null(doc);
    char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(doc);
    assert_non_null(s);
    size_t n = strlen(s);
    char *t = malloc(n + 2);
    assert_non_null(t);
    memcpy(t, s, n);
    memcpy(t + n, "\n", 2);
    free(s);
    *len = n + 1;
    return t;
}

static char *new_text(const ulp_ladder_result *r, size_t *len)
{
    char *b = NULL;
    FILE *f = open_memstream(&b, len);
    assert_non_null(f);
    ulp_error err;
    assert_int_equal(ulp__ladder_report_json(r, f, &err), ULP_OK);
    assert_int_equal(fclose(f), 0);
    return b;
}

/* ---- Random results. ---- */

static const char *const pieces[] = {"a",
                                     "batch_size",
                                     "\"",
                                     "\\",
                                     "/",
                                     "\n",
                                     "\t",
                                     "\001",
                                     "\037",
                                     "\177",
                                     " ",
                                     "\xc3\xa9",
                                     "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80",
                                     "\x80",
                                     "\xc0\xaf",
                                     "\xed\xa0\x80",
                                     "\xf4\x90\x80\x80",
                                     "\xe2\x82",
                                     "\xff",
                                     "\\udc80",
                                     "%s"};

/* Strings live in one arena per result, freed with it. */
typedef struct arena {
    char *s[4096];
    size_t n;
} arena;

/* A string of up to 6 pieces, mostly plain; NULL one time in `nulls` (0: never). */
static char *any_str(arena *a, size_t nulls)
{
    if (nulls && pick(nulls) == 0)
        return NULL;
    char buf[64];
    size_t n = pick(7), k = 0;
    int plain = pick(3) != 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = plain ? pieces[pick(2)] : pieces[pick(sizeof pieces / sizeof pieces[0])];
        size_t len = strlen(s);
        memcpy(buf + k, s, len);
        k += len;
    }
    buf[k] = '\0';
    assert_true(a->n < sizeof a->s / sizeof a->s[0]);
    a->s[a->n] = strdup(buf);
    assert_non_null(a->s[a->n]);
    return a->s[a->n++];
}

static uint64_t any_u64(void)
{
    return pick(4) == 0 ? next() : pick(1000);
}

static int64_t any_i64(void)
{
    return pick(4) == 0 ? (int64_t)next() : (int64_t)pick(100) - 5;
}

static void any_first(ulp_ladder_divergence *d, arena *a)
{
    d->capture = any_str(a, 0);
    d->occurrence = any_i64();
    d->layer = (int32_t)any_i64();
    d->rank = (int)pick(8);
    d->status = (ulp_diff_status)pick(6);
    d->differing = any_u64();
    d->elements = any_u64();
    d->max_ulp = any_u64();
    d->row = any_i64();
    d->request = any_i64();
    d->position = any_i64();
}

static void any_pair(ulp_ladder_pair *p, size_t n_runs, arena *a, ulp_diff_run_key *keys,
                     size_t max_keys)
{
    memset(p, 0, sizeof *p);
    p->a = pick(n_runs);
    p->b = pick(n_runs);
    p->identical = (int)pick(2);
    p->n_keys = pick(max_keys + 1);
    p->keys = keys;
    for (size_t k = 0; k < p->n_keys; k++) {
        keys[k].key = any_str(a, 0);
        keys[k].value_a = any_str(a, 4);
        keys[k].value_b = any_str(a, 4);
        keys[k].level = (int)pick(8) - 1;
    }
    p->rungs = (unsigned)next();
    p->uncontrolled = (int)pick(2);
    p->rung = (int)pick(8) - 1;
    p->n_ranks = pick(5);
    p->ranks_only_a = pick(3);
    p->ranks_only_b = pick(3);
    p->rows = any_u64();
    p->differing_rows = any_u64();
    p->has_first = (int)pick(2);
    any_first(&p->first, a);
    p->argmax_flips = any_u64();
    p->logits_rows = any_u64();
    p->elements_compared = any_u64();
    p->verdict = (int)pick(4);
    p->cache_witness = (int)pick(4);
    p->streams_part = (int)pick(2);
    p->parted_requests = pick(4);
    p->rows_after_part = any_u64();
    p->part_rank = (int)pick(8);
    p->part = (ulp_digest_part){any_str(a, 3),
                                any_i64(),
                                any_i64(),
                                any_i64(),
                                any_i64(),
                                any_i64(),
                                any_i64(),
                                any_i64(),
                                pick(3) ? (double)any_i64() / 7.0 : (double)NAN,
                                pick(3) ? (double)any_i64() / 3.0 : (double)NAN};
}

enum { RUNS = 6, PAIRS = 12, KEYS = 4, FILES = 3 };

typedef struct any_result {
    ulp_ladder_result r;
    ulp_ladder_run runs[RUNS];
    ulp_ladder_file files[RUNS][FILES];
    ulp_kv kv[RUNS][KEYS];
    ulp_ladder_pair pairs[PAIRS];
    ulp_diff_run_key keys[PAIRS][KEYS];
    char *rung_keys[ULP_LADDER_RUNGS][KEYS];
    arena a;
} any_result;

static void any_result_fill(any_result *x)
{
    static const double seconds[] = {0.25, 1.0, 0.1, 1e300, 5e-324, -0.0, 0.0, NAN, INFINITY};
    memset(x, 0, sizeof *x);
    ulp_ladder_result *r = &x->r;
    arena *a = &x->a;
    r->n_runs = pick(RUNS + 1);
    r->runs = x->runs;
    for (size_t i = 0; i < r->n_runs; i++) {
        ulp_ladder_run *run = &x->runs[i];
        run->path = any_str(a, 0);
        run->label = any_str(a, 0);
        run->n_files = pick(FILES + 1);
        run->files = x->files[i];
        for (size_t f = 0; f < run->n_files; f++) {
            run->files[f].path = any_str(a, 0);
            run->files[f].rank = (int)pick(8);
        }
        run->n_run = pick(KEYS + 1);
        run->run = x->kv[i];
        for (size_t k = 0; k < run->n_run; k++) {
            char b[24];
            snprintf(b, sizeof b, "%zu", k);
            const char *s = any_str(a, 0);
            size_t n = strlen(s);
            char *key = malloc(n + sizeof b);
            assert_non_null(key);
            memcpy(key, s, n);
            memcpy(key + n, b, strlen(b) + 1); /* distinct, as attribute names are */
            a->s[a->n++] = key;
            run->run[k].key = key;
            run->run[k].value = any_str(a, 0);
        }
        run->group = pick(3);
    }
    r->n_groups = pick(4);
    r->n_pairs = r->n_runs ? pick(PAIRS + 1) : 0;
    r->pairs = x->pairs;
    for (size_t j = 0; j < r->n_pairs; j++)
        any_pair(&x->pairs[j], r->n_runs, a, x->keys[j], KEYS);
    for (int g = 0; g < ULP_LADDER_RUNGS; g++) {
        ulp_ladder_rung *rg = &r->rungs[g];
        rg->level = g;
        rg->name = any_str(a, 0);
        rg->n_keys = pick(KEYS + 1);
        rg->keys = x->rung_keys[g];
        for (size_t k = 0; k < rg->n_keys; k++)
            rg->keys[k] = any_str(a, 0);
        rg->varied = (int)pick(2);
        rg->verdict = (ulp_ladder_verdict)pick(3);
        rg->n_deciding = pick(100);
        rg->n_breaking = pick(100);
        rg->n_mixed = pick(100);
        rg->n_empty = pick(100);
        rg->n_unwitnessed = pick(100);
        r->rung_parted[g] = pick(100);
        rg->has_first_break = r->n_pairs && pick(2);
        rg->first_break = r->n_pairs ? pick(r->n_pairs) : 0;
    }
    r->n_ignore = (int)pick(ULP_LADDER_MAX_IGNORE + 1);
    for (int i = 0; i < r->n_ignore; i++)
        r->ignore[i] = any_str(a, 0);
    r->seconds = pick(3) ? (double)pick(100000) / 997 : seconds[pick(9)];
}

static void any_result_free(any_result *x)
{
    for (size_t i = 0; i < x->a.n; i++)
        free(x->a.s[i]);
}

/* ---- The tests. ---- */

static void test_report_ladder_json__random(void **state)
{
    (void)state;
    any_result *x = malloc(sizeof *x);
    assert_non_null(x);
    for (int round = 0; round < 2000; round++) {
        any_result_fill(x);
        size_t ng, nw;
        char *got = new_text(&x->r, &ng);
        char *want = ref_text(&x->r, &nw);
        size_t i = 0;
        while (i < ng && i < nw && got[i] == want[i])
            i++;
        if (i != ng || i != nw)
            fail_msg("round %d: first difference at byte %zu of %zu/%zu\nwriter: %.200s\njansson: "
                     "%.200s",
                     round, i, ng, nw, got + (i > 80 ? i - 80 : 0), want + (i > 80 ? i - 80 : 0));
        free(got);
        free(want);
        any_result_free(x);
    }
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report_ladder_json__random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

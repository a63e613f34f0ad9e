/*
 * `ulpprof ladder --format json` (FORMAT.md "ulpprof ladder"), with jansson.
 * Absent values are null; counts are integers.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "report_priv.h"

static json_t *jcount(uint64_t v)
{
    /* Counts of elements and rows stay far below 2^63. */
    return json_integer((json_int_t)v);
}

static json_t *run_json(const ulp_ladder_run *run, size_t i)
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

static json_t *first_json(const ulp_ladder_pair *p)
{
    if (!p->has_first)
        return json_null();
    const ulp_ladder_divergence *d = &p->first;
    json_t *o = json_object();
    json_object_set_new(o, "capture", json_string(d->capture));
    json_object_set_new(o, "occurrence", json_integer(d->occurrence));
    json_object_set_new(o, "layer", d->layer >= 0 ? json_integer(d->layer) : json_null());
    json_object_set_new(o, "rank", json_integer(d->rank));
    json_object_set_new(o, "status", json_string(ulp_diff_status_name(d->status)));
    json_object_set_new(o, "row", d->row >= 0 ? json_integer(d->row) : json_null());
    json_object_set_new(o, "request", d->request >= 0 ? json_integer(d->request) : json_null());
    json_object_set_new(o, "position", d->position >= 0 ? json_integer(d->position) : json_null());
    int compared = d->status == ULP_DIFF_DIFFERS;
    json_object_set_new(o, "differing", compared ? jcount(d->differing) : json_null());
    json_object_set_new(o, "elements", jcount(d->elements));
    json_object_set_new(o, "max_ulp", compared ? jcount(d->max_ulp) : json_null());
    return o;
}

static json_t *pair_json(const ulp_ladder_result *r, const ulp_ladder_pair *p)
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
    json_object_set_new(o, "first_divergence", first_json(p));
    json_object_set_new(o, "argmax_flips", jcount(p->argmax_flips));
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
    json_object_set_new(o, "rows", jcount(p->rows));
    json_object_set_new(o, "differing_rows", jcount(p->differing_rows));
    json_object_set_new(o, "logits_rows", jcount(p->logits_rows));
    return o;
}

static json_t *rung_json(const ulp_ladder_result *r, const ulp_ladder_rung *g)
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
        json_object_set_new(fb, "first_divergence", first_json(p));
        json_object_set_new(fb, "argmax_flips", jcount(p->argmax_flips));
    }
    json_object_set_new(o, "first_break", fb);
    json_object_set_new(o, "varied", json_boolean(g->varied));
    json_object_set_new(o, "deciding_pairs", json_integer((json_int_t)g->n_deciding));
    json_object_set_new(o, "breaking_pairs", json_integer((json_int_t)g->n_breaking));
    json_object_set_new(o, "mixed_pairs", json_integer((json_int_t)g->n_mixed));
    return o;
}

static json_t *build(const ulp_ladder_result *r)
{
    json_t *doc = json_object(), *runs = json_array(), *pairs = json_array(), *rungs = json_array(),
           *groups = json_array(), *ign = json_array();
    json_object_set_new(doc, "format", json_string("ulpprof-ladder"));
    json_object_set_new(doc, "format_version", json_integer(1));
    for (size_t i = 0; i < r->n_runs; i++)
        json_array_append_new(runs, run_json(&r->runs[i], i));
    json_object_set_new(doc, "runs", runs);
    for (size_t j = 0; j < r->n_pairs; j++)
        json_array_append_new(pairs, pair_json(r, &r->pairs[j]));
    json_object_set_new(doc, "pairs", pairs);
    for (int g = 0; g < ULP_LADDER_RUNGS; g++)
        json_array_append_new(rungs, rung_json(r, &r->rungs[g]));
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

ulp_status ulp__ladder_report_json(const ulp_ladder_result *r, FILE *f, ulp_error *err)
{
    json_t *doc = build(r);
    if (doc == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory building the JSON report");
    int rc = json_dumpf(doc, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(doc);
    if (rc != 0 || fputc('\n', f) == EOF || ferror(f))
        return ulp__error(err, ULP_EIO, "cannot write the JSON report");
    return ULP_OK;
}

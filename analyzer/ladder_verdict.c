/*
 * What the compared pairs say (ladder.h): the rung each pair decides, the
 * groups of bitwise-identical runs and each rung's verdict.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "ladder_priv.h"
#include "ulpprof/verdict.h"

static const char *const verdict_names[] = {
    [ULP_LADDER_UNTESTED] = "untested",
    [ULP_LADDER_HOLDS] = "holds",
    [ULP_LADDER_BREAKS] = "breaks",
};

const char *ulp_ladder_verdict_name(ulp_ladder_verdict v)
{
    return (unsigned)v < sizeof verdict_names / sizeof verdict_names[0] ? verdict_names[v] : "?";
}

static int ignored(const ulp_ladder_result *r, const char *key)
{
    for (int i = 0; i < r->n_ignore; i++)
        if (strcmp(r->ignore[i], key) == 0)
            return 1;
    return 0;
}

/*
 * The rung a pair decides.  Several keys of one rung that differ together
 * (cache=hit against cache=miss with split=at prefix_len) may change the
 * result in ways that cancel: such a pair shows that the rung breaks when
 * the runs differ, but an identical pair says nothing of either key, so it
 * decides only when it breaks.  A rung holds only from pairs that vary one
 * key alone.
 */
static void classify(const ulp_ladder_result *r, ulp_ladder_pair *p)
{
    p->rungs = 0;
    p->uncontrolled = 0;
    size_t n_rung_keys = 0;
    for (size_t k = 0; k < p->n_keys; k++) {
        const ulp_diff_run_key *key = &p->keys[k];
        if (ignored(r, key->key))
            continue;
        if (key->level >= 0 && key->level < ULP_LADDER_RUNGS) {
            p->rungs |= 1u << key->level;
            n_rung_keys++;
        } else {
            p->uncontrolled = 1;
        }
    }
    p->rung = ULP_DIFF_LADDER_NONE;
    /* Runs that record no conditions say nothing about any rung. */
    if (p->uncontrolled || (r->runs[p->a].n_run == 0 && r->runs[p->b].n_run == 0))
        return;
    if (p->rungs == 0)
        p->rung = 0; /* nothing differs: a repeat */
    else if ((p->rungs & (p->rungs - 1)) == 0 && (n_rung_keys == 1 || !p->identical))
        p->rung = __builtin_ctz(p->rungs);
}

/* Identical, but on no element (every capture empty): no verdict on any rung. */
static int compared_nothing(const ulp_ladder_pair *p)
{
    return p->identical && p->elements_compared == 0;
}

/* On the cache rung, but neither side took a position from its cache: the
 * pair cannot show what a cache hit does (ulpprof/verdict.h). */
static int unwitnessed(const ulp_ladder_pair *p, int level)
{
    return level == 2 && p->cache_witness == ULP_WITNESS_NONE;
}

static size_t find(size_t *parent, size_t x)
{
    while (parent[x] != x)
        x = parent[x] = parent[parent[x]];
    return x;
}

static ulp_status add_key(ulp_ladder_rung *g, const char *key, ulp_error *err)
{
    for (size_t i = 0; i < g->n_keys; i++)
        if (strcmp(g->keys[i], key) == 0)
            return ULP_OK;
    char **v = realloc(g->keys, (g->n_keys + 1) * sizeof *v);
    if (v == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    g->keys = v;
    if ((v[g->n_keys] = strdup(key)) == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    g->n_keys++;
    return ULP_OK;
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static long long layer_key(const ulp_ladder_pair *p)
{
    return !p->has_first         ? (long long)INT32_MAX + 1
           : p->first.layer >= 0 ? p->first.layer
                                 : INT32_MAX;
}

static ulp_status decide_rung(ulp_ladder_result *r, int level, ulp_error *err)
{
    ulp_ladder_rung *g = &r->rungs[level];
    g->level = level;
    g->name = ulp_diff_ladder_name(level);
    for (size_t j = 0; j < r->n_pairs; j++) {
        const ulp_ladder_pair *p = &r->pairs[j];
        int tests = level == 0 ? p->rung == 0 || (p->rungs & 1u) : (p->rungs >> level) & 1u;
        if (!tests)
            continue;
        g->varied = 1;
        for (size_t k = 0; k < p->n_keys; k++)
            if (p->keys[k].level == level && !ignored(r, p->keys[k].key)) {
                ulp_status st = add_key(g, p->keys[k].key, err);
                if (st != ULP_OK)
                    return st;
            }
        if (compared_nothing(p)) {
            g->n_empty++;
            continue;
        }
        if (unwitnessed(p, level)) {
            g->n_unwitnessed++;
            continue;
        }
        if (p->rung != level) {
            g->n_mixed++;
            continue;
        }
        g->n_deciding++;
        if (p->identical)
            continue;
        g->n_breaking++;
        if (!g->has_first_break || layer_key(p) < layer_key(&r->pairs[g->first_break])) {
            g->has_first_break = 1;
            g->first_break = j;
        }
    }
    if (g->n_keys > 1)
        qsort(g->keys, g->n_keys, sizeof *g->keys, cmp_str);
    g->verdict = g->n_deciding == 0  ? ULP_LADDER_UNTESTED
                 : g->n_breaking > 0 ? ULP_LADDER_BREAKS
                                     : ULP_LADDER_HOLDS;
    return ULP_OK;
}

ulp_status ulp__ladder_decide(ulp_ladder_result *r, ulp_error *err)
{
    size_t *parent = malloc(r->n_runs * sizeof *parent), *group = malloc(r->n_runs * sizeof *group);
    if (parent == NULL || group == NULL) {
        free(parent);
        free(group);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < r->n_runs; i++)
        parent[i] = i;
    for (size_t j = 0; j < r->n_pairs; j++) {
        ulp_ladder_pair *p = &r->pairs[j];
        classify(r, p);
        if (p->identical) {
            size_t x = find(parent, p->a), y = find(parent, p->b);
            parent[x > y ? x : y] = x < y ? x : y;
        }
    }
    /* Groups numbered in the order of their first run. */
    r->n_groups = 0;
    for (size_t i = 0; i < r->n_runs; i++) {
        size_t root = find(parent, i);
        group[i] = root == i ? r->n_groups++ : group[root];
        r->runs[i].group = group[i];
    }
    free(parent);
    free(group);
    for (int level = 0; level < ULP_LADDER_RUNGS; level++) {
        ulp_status st = decide_rung(r, level, err);
        if (st != ULP_OK)
            return st;
    }
    /* The rungs counted them apart (n_empty); such a pair decides none. */
    for (size_t j = 0; j < r->n_pairs; j++)
        if (compared_nothing(&r->pairs[j]) || unwitnessed(&r->pairs[j], r->pairs[j].rung))
            r->pairs[j].rung = ULP_DIFF_LADDER_NONE;
    return ULP_OK;
}

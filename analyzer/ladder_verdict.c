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

/* What pair p tells rung `level` (the rung as its keys give it). */
static ulp_status tell_rung(ulp_ladder_result *r, int level, size_t j, const ulp_ladder_pair *p,
                            long long *best, ulp_error *err)
{
    ulp_ladder_rung *g = &r->rungs[level];
    int tests = level == 0 ? p->rung == 0 || (p->rungs & 1u) : (p->rungs >> level) & 1u;
    if (!tests)
        return ULP_OK;
    g->varied = 1;
    for (size_t k = 0; k < p->n_keys; k++)
        if (p->keys[k].level == level && !ignored(r, p->keys[k].key)) {
            ulp_status st = add_key(g, p->keys[k].key, err);
            if (st != ULP_OK)
                return st;
        }
    if (compared_nothing(p)) {
        g->n_empty++;
        return ULP_OK;
    }
    if (unwitnessed(p, level)) {
        g->n_unwitnessed++;
        return ULP_OK;
    }
    if (p->rung != level) {
        g->n_mixed++;
        return ULP_OK;
    }
    g->n_deciding++;
    if (p->identical)
        return ULP_OK;
    g->n_breaking++;
    r->rung_parted[level] += p->streams_part != 0; /* found by its tokens */
    if (!g->has_first_break || layer_key(p) < *best) {
        g->has_first_break = 1;
        g->first_break = j;
        *best = layer_key(p);
    }
    return ULP_OK;
}

/* Groups of bitwise-identical runs: the classes, joined where a compare
 * between two classes finds them identical (a selection that leaves out
 * what differs), numbered in the order of their first run. */
static ulp_status find_groups(ulp_ladder_result *r, ulp_error *err)
{
    const ulp__ladder_store *s = r->store;
    size_t nc = s->n_classes;
    size_t *parent = malloc((nc + 1) * sizeof *parent), *group = malloc((nc + 1) * sizeof *group);
    if (parent == NULL || group == NULL) {
        free(parent);
        free(group);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    for (size_t x = 0; x < nc; x++)
        parent[x] = x;
    for (size_t q = 0; q < nc * nc; q++)
        if (s->task_of[q] != SIZE_MAX && s->tasks[s->task_of[q]].identical) {
            size_t x = find(parent, q / nc), y = find(parent, q % nc);
            parent[x > y ? x : y] = x < y ? x : y;
        }
    /* Classes are numbered by their first run, so roots come first. */
    r->n_groups = 0;
    for (size_t x = 0; x < nc; x++) {
        size_t root = find(parent, x);
        group[x] = root == x ? r->n_groups++ : group[root];
    }
    for (size_t i = 0; i < r->n_runs; i++)
        r->runs[i].group = group[s->cls[i]];
    free(parent);
    free(group);
    return ULP_OK;
}

ulp_status ulp__ladder_decide(ulp_ladder_result *r, ulp_error *err)
{
    ulp_status st = find_groups(r, err);
    long long best[ULP_LADDER_RUNGS];
    for (int level = 0; level < ULP_LADDER_RUNGS; level++) {
        r->rungs[level].level = level;
        r->rungs[level].name = ulp_diff_ladder_name(level);
        r->rung_parted[level] = 0;
    }
    for (size_t a = 0, j = 0; st == ULP_OK && a < r->n_runs; a++)
        for (size_t b = a + 1; st == ULP_OK && b < r->n_runs; b++, j++) {
            const ulp_ladder_pair *p = ulp__ladder_view(r, a, b, 1);
            for (int level = 0; st == ULP_OK && level < ULP_LADDER_RUNGS; level++)
                st = tell_rung(r, level, j, p, &best[level], err);
        }
    for (int level = 0; st == ULP_OK && level < ULP_LADDER_RUNGS; level++) {
        ulp_ladder_rung *g = &r->rungs[level];
        if (g->n_keys > 1)
            qsort(g->keys, g->n_keys, sizeof *g->keys, cmp_str);
        g->verdict = g->n_deciding == 0  ? ULP_LADDER_UNTESTED
                     : g->n_breaking > 0 ? ULP_LADDER_BREAKS
                                         : ULP_LADDER_HOLDS;
    }
    return st;
}

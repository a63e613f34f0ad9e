/*
 * A ladder's pairs, read from its compares (ladder.h, ladder_priv.h).
 *
 * A ladder of N runs has N(N-1)/2 pairs, but only the compares of its
 * classes' first runs (and of each run with its class's first) are
 * distinct: bitwise-identical runs compare alike.  So the result keeps
 * those summaries, and a pair is built when it is read: its classes'
 * summary, its own runs, its /run keys (pointing into the runs' /run) and
 * the rung those keys let it decide.  Memory stays O(N + K^2) for K
 * classes, whatever N.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"
#include "ladder_priv.h"
#include "ulpprof/verdict.h"

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

/* The /run keys whose values differ between runs a and b, into `keys`
 * (room for both lists); the strings are the runs'. */
static size_t keys_of_runs(const ulp_ladder_run *a, const ulp_ladder_run *b, ulp_diff_run_key *keys)
{
    size_t i = 0, k = 0, n = 0;
    while (i < a->n_run || k < b->n_run) {
        const ulp_kv *x = i < a->n_run ? &a->run[i] : NULL;
        const ulp_kv *y = k < b->n_run ? &b->run[k] : NULL;
        int c = !x ? 1 : !y ? -1 : strcmp(x->key, y->key);
        if (c < 0) {
            keys[n++] = (ulp_diff_run_key){x->key, x->value, NULL, ulp_diff_ladder_level(x->key)};
            i++;
        } else if (c > 0) {
            keys[n++] = (ulp_diff_run_key){y->key, NULL, y->value, ulp_diff_ladder_level(y->key)};
            k++;
        } else {
            if (strcmp(x->value, y->value) != 0)
                keys[n++] =
                    (ulp_diff_run_key){x->key, x->value, y->value, ulp_diff_ladder_level(x->key)};
            i++;
            k++;
        }
    }
    return n;
}

void ulp__ladder_pair_runs(size_t n, size_t j, size_t *a, size_t *b)
{
    /* Row a starts at s(a) = a(2n-a-1)/2: the largest a with s(a) <= j. */
    double nn = (double)n - 0.5;
    double g = floor(nn - sqrt(nn * nn - 2.0 * (double)j));
    size_t x = g < 0 ? 0 : (size_t)g;
    if (x > n - 2)
        x = n - 2;
    while (x > 0 && x * (2 * n - x - 1) / 2 > j)
        x--;
    while (x + 1 <= n - 2 && (x + 1) * (2 * n - x - 2) / 2 <= j)
        x++;
    *a = x;
    *b = j - x * (2 * n - x - 1) / 2 + x + 1;
}

const ulp_ladder_pair *ulp__ladder_view(const ulp_ladder_result *r, size_t a, size_t b, int raw)
{
    ulp__ladder_store *s = r->store;
    size_t x = s->cls[a], y = s->cls[b];
    /* Same class: identical, as the compare of b with the class's first run said. */
    const ulp_ladder_pair *src = x == y ? &s->join[b] : &s->tasks[s->task_of[x * s->n_classes + y]];
    ulp_ladder_pair *p = &s->view;
    *p = *src;
    p->a = a;
    p->b = b;
    p->keys = s->keys;
    p->n_keys = keys_of_runs(&r->runs[a], &r->runs[b], s->keys);
    p->contract_word = p->contract_text = NULL;
    classify(r, p);
    if (!raw && ((p->identical && p->elements_compared == 0) ||
                 (p->rung == 2 && p->cache_witness == ULP_WITNESS_NONE)))
        p->rung = ULP_DIFF_LADDER_NONE; /* it decides none (ulp__ladder_decide) */
    return p;
}

const ulp_ladder_pair *ulp_ladder_result_pair(const ulp_ladder_result *r, size_t j)
{
    if (r == NULL || j >= r->n_pairs)
        return NULL;
    if (r->pairs)
        return &r->pairs[j];
    if (r->store == NULL)
        return NULL;
    size_t a, b;
    ulp__ladder_pair_runs(r->n_runs, j, &a, &b);
    return ulp__ladder_view(r, a, b, 0);
}

ulp_status ulp_ladder_result_expand(ulp_ladder_result *r, ulp_error *err)
{
    if (r->pairs || r->n_pairs == 0)
        return ULP_OK;
    if (r->store == NULL)
        return ulp__error(err, ULP_EINVAL, "a ladder result without its pairs or compares");
    ulp_ladder_pair *v = calloc(r->n_pairs, sizeof *v);
    if (v == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory for %zu ladder pairs", r->n_pairs);
    ulp_status st = ULP_OK;
    size_t j = 0;
    for (size_t a = 0; st == ULP_OK && a < r->n_runs; a++)
        for (size_t b = a + 1; st == ULP_OK && b < r->n_runs; b++, j++) {
            const ulp_ladder_pair *p = ulp__ladder_view(r, a, b, 0);
            v[j] = *p;
            v[j].keys = NULL;
            v[j].n_keys = 0;
            v[j].first.capture = NULL;
            v[j].part.source = NULL;
            if ((p->first.capture && (v[j].first.capture = strdup(p->first.capture)) == NULL) ||
                (p->part.source && (v[j].part.source = strdup(p->part.source)) == NULL))
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
            if (st == ULP_OK)
                st = ulp__ladder_keys_set(&v[j], p->keys, p->n_keys, err);
        }
    if (st != ULP_OK) {
        for (size_t q = 0; q < r->n_pairs; q++)
            ulp__ladder_pair_release(&v[q]);
        free(v);
        return st;
    }
    r->pairs = v;
    return ULP_OK;
}

/*
 * The contract's verdict on one pair `ulpprof diff --contract` compared: a
 * divergence that breaks a claim is a bug, named with the claim; one no
 * claim covers is not promised.  A claim of level L covers the pair when
 * both runs are within it (ulp__contract_in_claim, as check decides it)
 * and the /run keys the two runs differ in are all of rung L (none at
 * all for level 0), none without a rung.  A pair that differs keeps a
 * claim with a tolerance when every difference is within it
 * (contract_tolerance.c), and breaks it otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"
#include "ulpprof/diff.h"
#include "ulpprof/ladder.h"
#include "ulpprof/verdict.h"

static char *dup_text(const char *s)
{
    return strdup(s);
}

/* The contract's word on a pair: the runs' observations, the rungs of the /run keys
 * they differ in, whether the runs are identical, where they differ first, and
 * their files rank by rank (for the tolerance). */
static ulp_status judge_core(const ulp_contract *c, json_t *const *obs, unsigned rungs,
                             int uncontrolled, int identical, const char *first,
                             const char *const *fa, const char *const *fb, size_t n_files,
                             const char **verdict_out, char *text, size_t len, ulp_error *err)
{
    const json_t *claims = json_object_get(c->root, "claims");
    char why[200] = "";
    const char *verdict = NULL;
    size_t i;
    json_t *cl;
    *text = 0;
    json_array_foreach(claims, i, cl)
    {
        int level = (int)json_integer_value(json_object_get(cl, "level"));
        const char *name = json_string_value(json_object_get(cl, "name"));
        char w[160];
        int in = ulp__contract_in_claim(cl, obs[0], w, sizeof w) &&
                 ulp__contract_in_claim(cl, obs[1], w, sizeof w);
        int on_rung = !uncontrolled && (level == 0 ? rungs == 0 : rungs == (1u << level));
        if (!in || !on_rung) {
            if (!*why)
                snprintf(why, sizeof why, "claim %zu (level %d): %s", i + 1, level,
                         !in ? w : "the pair varies conditions of another rung");
            continue;
        }
        if (!identical && ulp__contract_has_tolerance(c->root, cl)) {
            int within;
            char t[512];
            ulp_status st =
                ulp__contract_tolerance(c->root, cl, fa, fb, n_files, &within, t, sizeof t, err);
            if (st != ULP_OK)
                return st;
            if (within) {
                verdict = "kept";
                snprintf(text, len, "claim %zu%s%s%s (level %d) covers the pair: %s", i + 1,
                         name ? " \"" : "", name ? name : "", name ? "\"" : "", level, t);
                continue;
            }
            verdict = "bug";
            snprintf(text, len, "breaks claim %zu%s%s%s (level %d, %s): %s", i + 1,
                     name ? " \"" : "", name ? name : "", name ? "\"" : "", level,
                     ulp_diff_ladder_name(level), t);
            break;
        }
        if (!identical) {
            verdict = "bug";
            snprintf(text, len, "breaks claim %zu%s%s%s (level %d, %s)%s%s", i + 1,
                     name ? " \"" : "", name ? name : "", name ? "\"" : "", level,
                     ulp_diff_ladder_name(level), first ? ": the runs differ first at " : "",
                     first ? first : "");
            break;
        }
        verdict = "kept";
        snprintf(text, len, "claim %zu%s%s%s (level %d) covers the pair and holds", i + 1,
                 name ? " \"" : "", name ? name : "", name ? "\"" : "", level);
    }
    if (!verdict) {
        verdict = "not promised";
        if (json_array_size(claims) == 0)
            snprintf(text, len, "the contract makes no claim");
        else
            snprintf(text, len, "no claim covers this pair (%s)", why);
    }
    *verdict_out = verdict;
    return ULP_OK;
}

ulp_status ulp_contract_judge(const ulp_contract *c, const char *path_a, const char *path_b,
                              const ulp_diff_result *r, ulp_diff_verdict *v, ulp_error *err)
{
    json_t *obs[2] = {NULL, NULL};
    ulp_status st = ulp__contract_observe(path_a, &obs[0], err);
    if (st == ULP_OK)
        st = ulp__contract_observe(path_b, &obs[1], err);
    if (st != ULP_OK) {
        json_decref(obs[0]);
        return st;
    }
    unsigned rungs = 0;
    int uncontrolled = 0;
    for (size_t i = 0; i < r->ladder.n_keys; i++) {
        int l = r->ladder.keys[i].level;
        if (l >= 0 && l < 8)
            rungs |= 1u << l;
        else
            uncontrolled = 1;
    }
    const ulp_diff_row *fd =
        r->has_first_divergence ? ulp_diff_result_row(r, r->first_divergence) : NULL;
    const char *fa[1] = {path_a}, *fb[1] = {path_b};
    const char *verdict = NULL;
    char text[1024];
    st = judge_core(c, obs, rungs, uncontrolled, r->identical, fd ? fd->name : NULL, fa, fb, 1,
                    &verdict, text, sizeof text, err);
    json_decref(obs[0]);
    json_decref(obs[1]);
    if (st != ULP_OK)
        return st;
    free(v->contract_verdict);
    free(v->contract_text);
    v->contract_verdict = dup_text(verdict);
    v->contract_text = dup_text(text);
    if (!v->contract_verdict || !v->contract_text)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    return ULP_OK;
}

ulp_status ulp_contract_judge_ladder(const ulp_contract *c, ulp_ladder_result *r, ulp_error *err)
{
    /* A word on every pair: the pairs are kept, not read from the compares. */
    ulp_status est = ulp_ladder_result_expand(r, err);
    if (est != ULP_OK)
        return est;
    json_t **obs = calloc(r->n_runs + 1, sizeof *obs);
    if (!obs)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    ulp_status st = ULP_OK;
    for (size_t i = 0; i < r->n_runs && st == ULP_OK; i++)
        st = ulp__contract_observe(r->runs[i].path, &obs[i], err);
    for (size_t k = 0; k < r->n_pairs && st == ULP_OK; k++) {
        ulp_ladder_pair *p = &r->pairs[k];
        const ulp_ladder_run *a = &r->runs[p->a], *b = &r->runs[p->b];
        size_t nf = a->n_files < b->n_files ? a->n_files : b->n_files;
        const char **fa = calloc(nf + 1, sizeof *fa), **fb = calloc(nf + 1, sizeof *fb);
        if (!fa || !fb) {
            free(fa);
            free(fb);
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            break;
        }
        /* Files rank by rank; other ranks on the two sides: the tolerance sees a
         * capture only one side has, and the pair is beyond it. */
        int same = a->n_files == b->n_files;
        for (size_t f = 0; f < nf; f++) {
            fa[f] = a->files[f].path;
            fb[f] = b->files[f].path;
            same &= a->files[f].rank == b->files[f].rank;
        }
        json_t *two[2] = {obs[p->a], obs[p->b]};
        const char *verdict = NULL;
        char text[1024];
        st = judge_core(c, two, p->rungs, p->uncontrolled || !same, p->identical,
                        p->has_first ? p->first.capture : NULL, fa, fb, nf, &verdict, text,
                        sizeof text, err);
        free(fa);
        free(fb);
        if (st != ULP_OK)
            break;
        free(p->contract_word);
        free(p->contract_text);
        p->contract_word = dup_text(verdict);
        p->contract_text = dup_text(text);
        if (!p->contract_word || !p->contract_text)
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < r->n_runs; i++)
        json_decref(obs[i]);
    free(obs);
    return st;
}

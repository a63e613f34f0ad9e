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
#include "ulpprof/verdict.h"

static char *dup_text(const char *s)
{
    return strdup(s);
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
    const json_t *claims = json_object_get(c->root, "claims");
    char text[1024] = "", why[200] = "";
    const char *verdict = NULL;
    size_t i;
    json_t *cl;
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
        if (!r->identical && ulp__contract_has_tolerance(c->root, cl)) {
            int within;
            char t[512];
            const char *fa[1] = {path_a}, *fb[1] = {path_b};
            st = ulp__contract_tolerance(c->root, cl, fa, fb, 1, &within, t, sizeof t, err);
            if (st != ULP_OK) {
                json_decref(obs[0]);
                json_decref(obs[1]);
                return st;
            }
            if (within) {
                verdict = "kept";
                snprintf(text, sizeof text, "claim %zu%s%s%s (level %d) covers the pair: %s", i + 1,
                         name ? " \"" : "", name ? name : "", name ? "\"" : "", level, t);
                continue;
            }
            verdict = "bug";
            snprintf(text, sizeof text, "breaks claim %zu%s%s%s (level %d, %s): %s", i + 1,
                     name ? " \"" : "", name ? name : "", name ? "\"" : "", level,
                     ulp_diff_ladder_name(level), t);
            break;
        }
        if (!r->identical) {
            const ulp_diff_row *fd =
                r->has_first_divergence ? ulp_diff_result_row(r, r->first_divergence) : NULL;
            verdict = "bug";
            snprintf(text, sizeof text, "breaks claim %zu%s%s%s (level %d, %s)%s%s", i + 1,
                     name ? " \"" : "", name ? name : "", name ? "\"" : "", level,
                     ulp_diff_ladder_name(level), fd ? ": the runs differ first at " : "",
                     fd ? fd->name : "");
            break;
        }
        verdict = "kept";
        snprintf(text, sizeof text, "claim %zu%s%s%s (level %d) covers the pair and holds", i + 1,
                 name ? " \"" : "", name ? name : "", name ? "\"" : "", level);
    }
    if (!verdict) {
        verdict = "not promised";
        if (json_array_size(claims) == 0)
            snprintf(text, sizeof text, "the contract makes no claim");
        else
            snprintf(text, sizeof text, "no claim covers this pair (%s)", why);
    }
    json_decref(obs[0]);
    json_decref(obs[1]);
    free(v->contract_verdict);
    free(v->contract_text);
    v->contract_verdict = dup_text(verdict);
    v->contract_text = dup_text(text);
    if (!v->contract_verdict || !v->contract_text)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    return ULP_OK;
}

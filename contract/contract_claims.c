/*
 * `contract check`, claim by claim.  A claim of level L promises that two
 * runs which differ only in conditions of rung L of the determinism ladder
 * (their differing /run keys all of that rung, none without a rung) are
 * bitwise identical: every captured layer and the logits.  Its scope
 * (identity fields), domain (/run key -> admitted values) and requires
 * (field path -> value, as each run shows it) choose the runs it speaks
 * of.  Every pair of such runs that varies only rung-L keys tests it --
 * also a pair that varies two keys of that rung (a hit against a miss cut
 * at the prefix): the claim, not the ladder, says which pairs are alike.
 * The claim is kept when every pair testing it is identical, broken when
 * one is not, untested when no pair tests it (never kept).  The pairs come
 * from the ladder's public API, which compares every pair of the runs.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"
#include "ulpprof/diff.h"
#include "ulpprof/ladder.h"

/* Whether run `obs` is within the claim; if not, `why` says which condition. */
int ulp__contract_in_claim(const json_t *claim, const json_t *obs, char *why, size_t len)
{
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(claim, "scope"), k, v)
    {
        const json_t *o = json_object_get(json_object_get(obs, "identity"), k);
        if (!ulp__value_equal(o, v)) {
            snprintf(why, len, "identity.%s", k);
            return 0;
        }
    }
    json_object_foreach(json_object_get(claim, "domain"), k, v)
    {
        const json_t *o = json_object_get(json_object_get(obs, "run"), k);
        int ok = 0;
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) ok |= o && ulp__value_equal(x, o);
        if (!ok) {
            snprintf(why, len, "domain %s", k);
            return 0;
        }
    }
    json_object_foreach(json_object_get(claim, "requires"), k, v)
    {
        if (!ulp__value_equal(ulp__observed_at(obs, k), v)) {
            snprintf(why, len, "requires %s", k);
            return 0;
        }
    }
    return 1;
}

static int tests_rung(const ulp_ladder_pair *p, int level)
{
    if (p->uncontrolled)
        return 0;
    return level == 0 ? p->rungs == 0 : p->rungs == (1u << level);
}

static const char *run_label(const ulp_ladder_result *res, size_t i)
{
    return res->runs[i].label ? res->runs[i].label : res->runs[i].path;
}

/* Weighs differing pair `p` against claim `cl`'s tolerance, rank by rank. */
static ulp_status pair_tolerance(const json_t *root, const json_t *cl, const ulp_ladder_result *res,
                                 const ulp_ladder_pair *p, int *within, char *text, size_t len,
                                 ulp_error *err)
{
    const ulp_ladder_run *a = &res->runs[p->a], *b = &res->runs[p->b];
    *within = 0;
    if (a->n_files != b->n_files) {
        snprintf(text, len, "beyond tolerance: the runs have other ranks");
        return ULP_OK;
    }
    const char **fa = calloc(a->n_files + 1, sizeof *fa), **fb = calloc(a->n_files + 1, sizeof *fb);
    if (!fa || !fb) {
        free(fa);
        free(fb);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    int same = 1;
    for (size_t i = 0; i < a->n_files; i++) {
        fa[i] = a->files[i].path;
        fb[i] = b->files[i].path;
        same &= a->files[i].rank == b->files[i].rank;
    }
    ulp_status st = ULP_OK;
    if (!same)
        snprintf(text, len, "beyond tolerance: the runs have other ranks");
    else
        st = ulp__contract_tolerance(root, cl, fa, fb, a->n_files, within, text, len, err);
    free(fa);
    free(fb);
    return st;
}

ulp_status ulp__contract_check_claims(const json_t *root, const char *const *runs, size_t n,
                                      json_t *const *obs, FILE *out, int *worst, ulp_error *err)
{
    *worst = 0;
    const json_t *claims = json_object_get(root, "claims");
    size_t nc = json_array_size(claims);
    fprintf(out, "claims\n");
    if (nc == 0) {
        fprintf(out, "  (none)\n");
        return ULP_OK;
    }
    ulp_ladder_result *res = NULL;
    if (n >= 2) {
        ulp_ladder_options lo;
        ulp_ladder_options_init(&lo);
        ulp_status st = ulp_ladder_compare(runs, n, &lo, &res, err);
        /* The claims hold on to several pairs at once: keep them all. */
        if (st == ULP_OK)
            st = ulp_ladder_result_expand(res, err);
        if (st != ULP_OK) {
            ulp_ladder_result_free(res);
            return st;
        }
    }
    int *in = calloc(n, sizeof *in);
    if (!in) {
        ulp_ladder_result_free(res);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    for (size_t c = 0; c < nc; c++) {
        const json_t *cl = json_array_get(claims, c);
        int level = (int)json_integer_value(json_object_get(cl, "level"));
        const char *name = json_string_value(json_object_get(cl, "name"));
        const char *rung = ulp_diff_ladder_name(level);
        size_t n_in = 0;
        char why[160] = "";
        for (size_t r = 0; r < n; r++) {
            char w[160];
            in[r] = ulp__contract_in_claim(cl, obs[r], w, sizeof w);
            n_in += (size_t)in[r];
            if (!in[r] && !*why)
                snprintf(why, sizeof why, "%s", w);
        }
        size_t tested = 0, differ = 0, admitted = 0;
        const ulp_ladder_pair *first = NULL, *first_same = NULL, *first_admitted = NULL;
        char tol[512] = "", tol_kept[512] = "";
        int has_tol = ulp__contract_has_tolerance(root, cl);
        for (size_t i = 0; res && i < res->n_pairs; i++) {
            const ulp_ladder_pair *p = &res->pairs[i];
            if (!in[p->a] || !in[p->b] || !tests_rung(p, level))
                continue;
            tested++;
            if (!p->identical) {
                if (has_tol) {
                    int within;
                    char t[512];
                    ulp_status st = pair_tolerance(root, cl, res, p, &within, t, sizeof t, err);
                    if (st != ULP_OK) {
                        free(in);
                        ulp_ladder_result_free(res);
                        return st;
                    }
                    if (within) {
                        admitted++;
                        if (!first_admitted) {
                            first_admitted = p;
                            snprintf(tol_kept, sizeof tol_kept, "%s", t);
                        }
                        continue;
                    }
                    if (!first || (p->has_first && first->has_first && p->first.layer >= 0 &&
                                   p->first.layer < first->first.layer))
                        snprintf(tol, sizeof tol, "%s", t);
                }
                differ++;
                if (!first || (p->has_first && first->has_first && p->first.layer >= 0 &&
                               p->first.layer < first->first.layer))
                    first = p;
            } else if (!first_same)
                first_same = p;
        }
        const char *verdict = tested == 0 ? "untested" : differ ? "BROKEN" : "kept";
        fprintf(out, "  %-13s claim %zu%s%s%s: level %d (%s): %zu of %zu runs in scope", verdict,
                c + 1, name ? " \"" : "", name ? name : "", name ? "\"" : "", level,
                rung ? rung : "?", n_in, n);
        if (n_in < n)
            fprintf(out, " (first one out: %s)", why);
        if (tested == 0)
            fprintf(out, "; no pair of them varies only rung %d%s\n", level,
                    n < 2 ? " (one run)" : "");
        else if (differ) {
            fprintf(out, "; %zu of %zu pairs on the rung differ; %s vs %s", differ, tested,
                    run_label(res, first->a), run_label(res, first->b));
            if (first->has_first) {
                fprintf(out, " first at %s", first->first.capture);
                if (first->first.layer >= 0)
                    fprintf(out, " (layer %d)", (int)first->first.layer);
                if (first->first.position >= 0)
                    fprintf(out, " position %lld", (long long)first->first.position);
                fprintf(out, ", max %llu ULP", (unsigned long long)first->first.max_ulp);
            }
            fprintf(out, "\n");
        } else if (admitted)
            fprintf(out, "; %zu pair%s on the rung, %zu bitwise identical, %zu %s (%s vs %s%s)\n",
                    tested, tested == 1 ? "" : "s", tested - admitted, admitted, tol_kept,
                    run_label(res, first_admitted->a), run_label(res, first_admitted->b),
                    admitted > 1 ? ", ..." : "");
        else
            fprintf(out, "; %zu pair%s on the rung, bitwise identical (%s vs %s%s)\n", tested,
                    tested == 1 ? "" : "s", run_label(res, first_same->a),
                    run_label(res, first_same->b), tested > 1 ? ", ..." : "");
        if (differ && *tol)
            fprintf(out, "                (%s)\n", tol);
        int v = tested == 0 ? 2 : differ ? 1 : 0;
        if (v == 1 || (v == 2 && *worst == 0))
            *worst = v;
    }
    free(in);
    ulp_ladder_result_free(res);
    return ULP_OK;
}

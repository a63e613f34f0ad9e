/*
 * A claim's tolerance, weighed.  A claim of level L admits, besides bitwise
 * identity, the differences its own `tolerance` ({"max_ulp": N}, every
 * capture) and the contract's `tolerances` of rung L ({"max_ulp": N and/or
 * "max_nats": X, "sites": [globs]}; no sites: every capture) bound.  A pair
 * that differs is within them when every capture that differs is named by
 * a bound that admits it: its max ULP at most max_ulp, or, for a logits
 * capture, the larger of KL(A||B) and KL(B||A) over its rows at most
 * max_nats.  Anything else is beyond: a capture no bound names, one above
 * its bound, NaN or inf where the other side is not, a shape or dtype
 * mismatch, a capture only one side has, token streams that parted.
 */
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"
#include "ulpprof/diff.h"
#include "ulpprof/snapshot.h"

/* One bound that applies to the claim. */
typedef struct tol_bound {
    const json_t *sites; /* array of globs; NULL: every capture */
    long long max_ulp;   /* -1: none */
    double max_nats;     /* NAN: none */
} tol_bound;

static size_t claim_bounds(const json_t *root, const json_t *claim, tol_bound *b, size_t cap)
{
    size_t n = 0;
    int level = (int)json_integer_value(json_object_get(claim, "level"));
    const json_t *own = json_object_get(json_object_get(claim, "tolerance"), "max_ulp");
    if (own && n < cap)
        b[n++] = (tol_bound){NULL, (long long)json_integer_value(own), (double)NAN};
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(root, "tolerances"), i, t)
    {
        if (json_integer_value(json_object_get(t, "rung")) != level || n >= cap)
            continue;
        const json_t *u = json_object_get(t, "max_ulp"), *x = json_object_get(t, "max_nats");
        b[n++] = (tol_bound){json_object_get(t, "sites"), u ? (long long)json_integer_value(u) : -1,
                             x ? json_number_value(x) : (double)NAN};
    }
    return n;
}

int ulp__contract_has_tolerance(const json_t *root, const json_t *claim)
{
    tol_bound b[1];
    return claim_bounds(root, claim, b, 1) > 0;
}

static int names(const tol_bound *b, const char *capture, const char **glob)
{
    if (!b->sites) {
        *glob = NULL;
        return 1;
    }
    size_t i;
    json_t *s;
    json_array_foreach(b->sites, i, s)
    {
        const char *g = json_string_value(s);
        if (g && fnmatch(g, capture, 0) == 0) {
            *glob = g;
            return 1;
        }
    }
    return 0;
}

/* The larger KL, in nats, over the rows of the logits pair of row `k`; -1 when none. */
static double row_nats(const ulp_diff_result *r, size_t k)
{
    for (size_t j = 0; j < r->n_logits; j++) {
        const ulp_diff_logits *lg = &r->logits[j];
        if (lg->row_index != k || !lg->has_dist)
            continue;
        double a = lg->dist.kl_ab_s.max, b = lg->dist.kl_ba_s.max;
        return a > b ? a : b;
    }
    return -1;
}

/* The worst admitted capture so far, for the "kept within tolerance" text. */
typedef struct tol_state {
    int beyond;
    char why[256];
    unsigned long long ulp; /* max ULP admitted by a max_ulp bound */
    long long ulp_bound;
    char ulp_at[128];
    const char *ulp_glob;
    double nats; /* max nats admitted by a max_nats bound; -1 none */
    double nats_bound;
    char nats_at[128];
} tol_state;

static void weigh(const ulp_diff_result *r, const tol_bound *b, size_t nb, const char *rank,
                  tol_state *s)
{
    if (r->n_parts > 0 && !s->beyond) {
        s->beyond = 1;
        snprintf(s->why, sizeof s->why, "the token streams parted%s", rank);
    }
    for (size_t k = 0; k < r->n_rows && !s->beyond; k++) {
        const ulp_diff_row *row = &r->rows[k];
        if (row->status == ULP_DIFF_IDENTICAL)
            continue;
        if (row->status != ULP_DIFF_DIFFERS) {
            s->beyond = 1;
            snprintf(s->why, sizeof s->why, "%s: %s%s", row->name,
                     ulp_diff_status_name(row->status), rank);
            break;
        }
        if (row->m.nonfinite_mismatch) {
            s->beyond = 1;
            snprintf(s->why, sizeof s->why, "%s: NaN or inf where the other side is not%s",
                     row->name, rank);
            break;
        }
        double nats = -2;
        int named = 0, ok = 0;
        unsigned long long over_ulp = 0;
        long long over_bound = -1;
        for (size_t i = 0; i < nb && !ok; i++) {
            const char *glob;
            if (!names(&b[i], row->name, &glob))
                continue;
            named = 1;
            if (b[i].max_ulp >= 0) {
                if (row->m.max_ulp <= (unsigned long long)b[i].max_ulp) {
                    ok = 1;
                    if (row->m.max_ulp >= s->ulp) {
                        s->ulp = row->m.max_ulp;
                        s->ulp_bound = b[i].max_ulp;
                        s->ulp_glob = glob;
                        snprintf(s->ulp_at, sizeof s->ulp_at, "%s", row->name);
                    }
                    break;
                }
                over_ulp = row->m.max_ulp;
                over_bound = b[i].max_ulp;
            }
            if (!isnan(b[i].max_nats)) {
                if (nats == -2)
                    nats = row_nats(r, k);
                if (nats >= 0 && nats <= b[i].max_nats) {
                    ok = 1;
                    if (nats >= s->nats) {
                        s->nats = nats;
                        s->nats_bound = b[i].max_nats;
                        snprintf(s->nats_at, sizeof s->nats_at, "%s", row->name);
                    }
                }
            }
        }
        if (ok)
            continue;
        s->beyond = 1;
        if (!named)
            snprintf(s->why, sizeof s->why, "%s differs (%llu ULP) and no tolerance names it%s",
                     row->name, (unsigned long long)row->m.max_ulp, rank);
        else if (over_bound >= 0)
            snprintf(s->why, sizeof s->why, "%llu ULP at %s > %lld%s", over_ulp, row->name,
                     over_bound, rank);
        else if (nats >= 0)
            snprintf(s->why, sizeof s->why, "%.3g nats at %s, above its max_nats%s", nats,
                     row->name, rank);
        else
            snprintf(s->why, sizeof s->why, "%s: no bound admits it%s", row->name, rank);
    }
}

static int any_nats(const tol_bound *b, size_t nb)
{
    for (size_t i = 0; i < nb; i++)
        if (!isnan(b[i].max_nats))
            return 1;
    return 0;
}

ulp_status ulp__contract_tolerance(const json_t *root, const json_t *claim,
                                   const char *const *files_a, const char *const *files_b,
                                   size_t n_files, int *within, char *text, size_t len,
                                   ulp_error *err)
{
    tol_bound b[64];
    size_t nb = claim_bounds(root, claim, b, sizeof b / sizeof b[0]);
    *within = 0;
    snprintf(text, len, "no tolerance");
    if (nb == 0)
        return ULP_OK;
    ulp_diff_options o;
    ulp_diff_options_init(&o);
    o.threads = 1;
    o.distributions = any_nats(b, nb);
    tol_state s = {.ulp_bound = -1, .nats = -1};
    for (size_t f = 0; f < n_files && !s.beyond; f++) {
        ulp_snapshot *sa = NULL, *sb = NULL;
        ulp_diff_result *r = NULL;
        ulp_status st = ulp_snapshot_open(files_a[f], &sa, err);
        if (st == ULP_OK)
            st = ulp_snapshot_open(files_b[f], &sb, err);
        if (st == ULP_OK)
            st = ulp_diff_run(sa, sb, &o, &r, err);
        if (st == ULP_OK) {
            char rank[48] = "";
            if (n_files > 1)
                snprintf(rank, sizeof rank, " (rank pair %zu)", f);
            weigh(r, b, nb, rank, &s);
        }
        ulp_diff_result_free(r);
        ulp_snapshot_close(sb);
        ulp_snapshot_close(sa);
        if (st != ULP_OK)
            return st;
    }
    if (s.beyond) {
        snprintf(text, len, "beyond tolerance: %s", s.why);
        return ULP_OK;
    }
    *within = 1;
    char u[300] = "", x[200] = "";
    if (s.ulp_bound >= 0) {
        if (s.ulp_glob)
            snprintf(u, sizeof u, " max %llu ULP at %s (sites %s) <= %lld", s.ulp, s.ulp_at,
                     s.ulp_glob, s.ulp_bound);
        else
            snprintf(u, sizeof u, " max %llu ULP at %s <= %lld", s.ulp, s.ulp_at, s.ulp_bound);
    }
    if (s.nats >= 0)
        snprintf(x, sizeof x, "%s max %.3g nats at %s <= %g", *u ? ";" : "", s.nats, s.nats_at,
                 s.nats_bound);
    snprintf(text, len, "kept within tolerance:%s%s", u, x);
    return ULP_OK;
}

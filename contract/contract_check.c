/*
 * `contract check`, field by field: every field the contract gives a value
 * (declared, or observed by an earlier emit) is held against what each run
 * shows.  A field is kept when every run that shows it shows that value
 * (one of the values, for a field observed to vary), broken when one run
 * shows another, unobservable when no run shows it.  A GEMM site's
 * configurations are held M by M; its policy "fixed" or "tile-invariant"
 * is falsified when the site ran two schemes (algorithm, tile, split-K,
 * reduction) across the observed M of its domain -- and is untested when
 * the runs show fewer than two M there.  The claims follow
 * (contract_claims.c).
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"

typedef struct tally {
    size_t kept, broken, unobservable, untested;
} tally;

static const char *label_of(const json_t *obs)
{
    const char *l = json_string_value(json_object_get(obs, "label"));
    return l ? l : "?";
}

static int matches(const json_t *field, const json_t *promise, const json_t *seen)
{
    if (json_is_true(json_object_get(field, "varies"))) {
        size_t i;
        json_t *x;
        json_array_foreach(promise, i, x) if (ulp__value_equal(x, seen)) return 1;
        return 0;
    }
    return ulp__value_equal(promise, seen);
}

static void print_line(FILE *out, const char *verdict, const char *path, const char *kind,
                       const json_t *promise, const char *seen, const char *where)
{
    char *p = ulp__value_text(promise);
    fprintf(out, "  %-13s %s: %s %s / %s%s%s\n", verdict, path, kind, p ? p : "?", seen,
            where ? " " : "", where ? where : "");
    free(p);
}

/* One plain or site type field. */
static void check_value_field(const char *path, const json_t *field, json_t *const *obs, size_t n,
                              FILE *out, tally *t)
{
    const json_t *promise = ulp__field_promise(field);
    if (!promise)
        return;
    const char *kind =
        json_object_get(field, "declared") || strcmp(ulp__field_source(field), "declared") == 0
            ? "declared"
            : "contract observed";
    size_t seen = 0;
    for (size_t r = 0; r < n; r++) {
        const json_t *o = ulp__observed_at(obs[r], path);
        if (!o)
            continue;
        seen++;
        if (!matches(field, promise, o)) {
            char *ot = ulp__value_text(o);
            char *text = malloc(strlen(ot ? ot : "") + 16);
            sprintf(text, "observed %s", ot ? ot : "?");
            char where[300];
            snprintf(where, sizeof where, "(run %s)", label_of(obs[r]));
            print_line(out, "BROKEN", path, kind, promise, text, where);
            free(text);
            free(ot);
            t->broken++;
            return;
        }
    }
    if (seen == 0) {
        print_line(out, "unobservable", path, kind, promise, "unobservable", NULL);
        t->unobservable++;
        return;
    }
    char *p = ulp__value_text(promise);
    char text[160];
    snprintf(text, sizeof text, "observed the same in %zu of %zu runs", seen, n);
    print_line(out, "kept", path, kind, promise, text, NULL);
    free(p);
    t->kept++;
}

/* The site's configurations, M by M, against what the contract lists for that M. */
static void check_configs(const char *site, const json_t *field, json_t *const *obs, size_t n,
                          FILE *out, tally *t)
{
    const json_t *promise = ulp__field_promise(field);
    if (!json_is_array(promise))
        return;
    size_t compared = 0;
    for (size_t r = 0; r < n; r++) {
        const json_t *cs =
            json_object_get(json_object_get(json_object_get(obs[r], "gemm"), site), "configs");
        size_t i, j;
        json_t *c, *p;
        json_array_foreach(cs, i, c)
        {
            int same_m = 0, ok = 0;
            json_array_foreach(promise, j, p)
            {
                if (!ulp__value_equal(json_object_get(p, "m"), json_object_get(c, "m")) ||
                    !ulp__config_same_shape(p, c))
                    continue;
                same_m = 1;
                ok |= ulp__value_equal(p, c);
            }
            if (!same_m)
                continue;
            compared++;
            if (!ok) {
                char *ot = ulp__config_text(c);
                fprintf(out, "  %-13s gemm.%s.configs: %s at M=%lld / observed %s (run %s)\n",
                        "BROKEN", site, "the contract lists another configuration",
                        (long long)json_integer_value(json_object_get(c, "m")), ot ? ot : "?",
                        label_of(obs[r]));
                free(ot);
                t->broken++;
                return;
            }
        }
    }
    if (compared == 0) {
        fprintf(out, "  %-13s gemm.%s.configs: no run ran an M the contract lists\n",
                "unobservable", site);
        t->unobservable++;
        return;
    }
    fprintf(out,
            "  %-13s gemm.%s.configs: %zu observed calls at listed M ran the listed "
            "configuration\n",
            "kept", site, compared);
    t->kept++;
}

static void check_policy(const char *site, const json_t *sitef, json_t *const *obs, size_t n,
                         FILE *out, tally *t)
{
    const json_t *pf = json_object_get(sitef, "policy");
    const char *policy = json_string_value(ulp__field_promise(pf));
    if (!policy)
        return;
    if (strcmp(policy, "m-dependent") == 0) {
        fprintf(out, "  %-13s gemm.%s.policy: m-dependent: nothing is promised across M\n", "kept",
                site);
        t->kept++;
        return;
    }
    const json_t *dom = ulp__field_promise(json_object_get(sitef, "m_domain"));
    json_int_t lo = dom ? json_integer_value(json_array_get(dom, 0)) : INT64_MIN;
    json_int_t hi = dom ? json_integer_value(json_array_get(dom, 1)) : INT64_MAX;
    /* The first configuration seen in the domain, and the first of another scheme. */
    const json_t *first = NULL, *other = NULL;
    const char *first_run = NULL, *other_run = NULL;
    json_t *ms = json_array();
    for (size_t r = 0; r < n && !other; r++) {
        const json_t *cs =
            json_object_get(json_object_get(json_object_get(obs[r], "gemm"), site), "configs");
        size_t i;
        json_t *c;
        json_array_foreach(cs, i, c)
        {
            json_int_t m = json_integer_value(json_object_get(c, "m"));
            if (m < lo || m > hi)
                continue;
            size_t k;
            json_t *x;
            int dup = 0;
            json_array_foreach(ms, k, x) dup |= json_integer_value(x) == m;
            if (!dup)
                json_array_append_new(ms, json_integer(m));
            json_t *a = ulp__config_scheme(c);
            json_t *b = first ? ulp__config_scheme(first) : NULL;
            if (!first) {
                first = c;
                first_run = label_of(obs[r]);
            } else if (!json_equal(a, b)) {
                other = c;
                other_run = label_of(obs[r]);
            }
            json_decref(a);
            json_decref(b);
            if (other)
                break;
        }
    }
    char domain[64];
    if (dom)
        snprintf(domain, sizeof domain, " over M %lld..%lld", (long long)lo, (long long)hi);
    else
        snprintf(domain, sizeof domain, " over every M");
    if (other) {
        char *a = ulp__config_text(first), *b = ulp__config_text(other);
        fprintf(out,
                "  %-13s gemm.%s.policy: declared %s%s / observed two configurations: %s "
                "(run %s), %s (run %s)\n",
                "BROKEN", site, policy, domain, a ? a : "?", first_run, b ? b : "?", other_run);
        free(a);
        free(b);
        t->broken++;
    } else if (json_array_size(ms) < 2) {
        fprintf(out,
                "  %-13s gemm.%s.policy: declared %s%s / the runs show %zu M there: nothing "
                "to falsify\n",
                "untested", site, policy, domain, json_array_size(ms));
        t->untested++;
    } else {
        char *a = ulp__config_text(first);
        fprintf(out,
                "  %-13s gemm.%s.policy: declared %s%s / observed one scheme at %zu M "
                "(%s)\n",
                "kept", site, policy, domain, json_array_size(ms), a ? a : "?");
        free(a);
        t->kept++;
    }
    json_decref(ms);
}

ulp_status ulp_contract_check(const ulp_contract *c, const char *const *runs, size_t n, FILE *out,
                              ulp_contract_verdict *verdict, ulp_error *err)
{
    *verdict = ULP_CONTRACT_BROKEN;
    if (n == 0)
        return ulp__error(err, ULP_EINVAL, "contract check: no run given");
    json_t **obs = calloc(n, sizeof *obs);
    if (!obs)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    ulp_status st = ULP_OK;
    for (size_t r = 0; r < n && st == ULP_OK; r++)
        st = ulp__contract_observe(runs[r], &obs[r], err);
    tally t = {0, 0, 0, 0};
    int claims = 0;
    if (st == ULP_OK) {
        const json_t *root = c->root;
        const char *prod = json_string_value(json_object_get(root, "producer"));
        fprintf(out, "contract %s (numerical_policy %s) against %zu run%s\n",
                prod && *prod ? prod : "(no producer)", c->digest, n, n == 1 ? "" : "s");
        fprintf(out, "fields\n");
        for (size_t i = 0; i < ulp__n_cfields; i++) {
            const ulp__cfield *f = &ulp__cfields[i];
            const json_t *fv = json_object_get(json_object_get(root, f->group), f->name);
            if (!fv || f->rung == ULP__NO_RUNG)
                continue;
            char path[128];
            snprintf(path, sizeof path, "%s.%s", f->group, f->name);
            check_value_field(path, fv, obs, n, out, &t);
        }
        const char *site;
        json_t *sv;
        json_object_foreach(json_object_get(root, "gemm"), site, sv)
        {
            const char *types[] = {"a_type", "b_type", "out_type", "compute"};
            for (size_t k = 0; k < 4; k++) {
                const json_t *fv = json_object_get(sv, types[k]);
                char path[600];
                snprintf(path, sizeof path, "gemm.%s.%s", site, types[k]);
                if (fv)
                    check_value_field(path, fv, obs, n, out, &t);
            }
            if (json_object_get(sv, "configs"))
                check_configs(site, json_object_get(sv, "configs"), obs, n, out, &t);
            if (json_object_get(sv, "policy"))
                check_policy(site, sv, obs, n, out, &t);
        }
        if (t.kept + t.broken + t.unobservable + t.untested == 0)
            fprintf(out, "  (the contract gives no field a value)\n");
        st = ulp__contract_check_claims(root, runs, n, obs, out, &claims, err);
    }
    for (size_t r = 0; r < n; r++)
        json_decref(obs[r]);
    free(obs);
    if (st != ULP_OK)
        return st;
    *verdict = t.broken || claims == 1 ? ULP_CONTRACT_BROKEN
               : claims == 2           ? ULP_CONTRACT_UNTESTED
                                       : ULP_CONTRACT_KEPT;
    fprintf(out, "verdict: %s (fields: %zu kept, %zu broken, %zu unobservable, %zu untested)\n",
            *verdict == ULP_CONTRACT_BROKEN     ? "broken"
            : *verdict == ULP_CONTRACT_UNTESTED ? "untested: some claim no pair of the runs tests"
                                                : "kept",
            t.kept, t.broken, t.unobservable, t.untested);
    return ULP_OK;
}

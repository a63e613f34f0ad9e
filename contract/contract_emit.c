/*
 * `contract emit`: a contract from what the runs show, merged with a
 * declaration.  A field every run shows alike is observed with that value;
 * one the runs show differently is observed with "varies": true and the
 * array of the distinct values; one no run shows is declared (when the
 * declaration gives it) or unobservable.  An observed field the
 * declaration also gives keeps it as "declared", so that check can hold
 * the one against the other.  A GEMM site's configurations are the union
 * over the runs; its policy is observed "m-dependent" when two observed M
 * ran different schemes, "fixed" when two or more M ran one, and is
 * unobservable from a single M.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"

static json_t *field(const char *source, json_t *value)
{
    json_t *f = json_pack("{s:s}", "source", source);
    if (value)
        json_object_set_new(f, "value", value);
    return f;
}

static void append_distinct(json_t *arr, const json_t *v)
{
    size_t i;
    json_t *x;
    json_array_foreach(arr, i, x) if (ulp__value_equal(x, v)) return;
    json_array_append(arr, ulp__mut(v));
}

static json_t *merge_plain(json_t *const *obs, size_t n, const char *group, const char *name)
{
    json_t *vals = json_array();
    for (size_t r = 0; r < n; r++) {
        const json_t *v = json_object_get(json_object_get(obs[r], group), name);
        if (v)
            append_distinct(vals, v);
    }
    json_t *f;
    if (json_array_size(vals) == 0)
        f = field("unobservable", NULL);
    else if (json_array_size(vals) == 1)
        f = field("observed", json_incref(json_array_get(vals, 0)));
    else {
        f = field("observed", json_incref(vals));
        json_object_set_new(f, "varies", json_true());
    }
    json_decref(vals);
    return f;
}

static json_t *merge_site(json_t *const *obs, size_t n, const char *site)
{
    json_t *out = json_object(), *configs = json_array();
    const char *types[] = {"a_type", "b_type", "out_type", "compute"};
    for (size_t t = 0; t < 4; t++) {
        json_t *vals = json_array();
        for (size_t r = 0; r < n; r++) {
            const json_t *v =
                json_object_get(json_object_get(json_object_get(obs[r], "gemm"), site), types[t]);
            if (json_is_array(v)) {
                size_t i;
                json_t *x;
                json_array_foreach(v, i, x) append_distinct(vals, x);
            } else if (v)
                append_distinct(vals, v);
        }
        json_t *f = json_array_size(vals) == 0 ? field("unobservable", NULL)
                    : json_array_size(vals) == 1
                        ? field("observed", json_incref(json_array_get(vals, 0)))
                        : field("observed", json_incref(vals));
        json_object_set_new(out, types[t], f);
        json_decref(vals);
    }
    for (size_t r = 0; r < n; r++) {
        const json_t *cs =
            json_object_get(json_object_get(json_object_get(obs[r], "gemm"), site), "configs");
        size_t i;
        json_t *c;
        json_array_foreach(cs, i, c) append_distinct(configs, c);
    }
    ulp__sort_values(configs);
    /* The distinct M and the distinct schemes. */
    json_t *ms = json_array(), *schemes = json_array();
    json_int_t lo = 0, hi = 0;
    size_t i;
    json_t *c;
    json_array_foreach(configs, i, c)
    {
        json_t *m = json_object_get(c, "m");
        json_int_t mv = json_integer_value(m);
        if (i == 0 || mv < lo)
            lo = mv;
        if (i == 0 || mv > hi)
            hi = mv;
        append_distinct(ms, m);
        json_t *sch = ulp__config_scheme(c);
        append_distinct(schemes, sch);
        json_decref(sch);
    }
    json_object_set_new(out, "configs",
                        json_array_size(configs) ? field("observed", json_incref(configs))
                                                 : field("unobservable", NULL));
    if (json_array_size(ms) >= 2)
        json_object_set_new(
            out, "policy",
            field("observed", json_string(json_array_size(schemes) > 1 ? "m-dependent" : "fixed")));
    else
        json_object_set_new(out, "policy", field("unobservable", NULL));
    json_object_set_new(out, "m_domain",
                        json_array_size(configs) ? field("observed", json_pack("[I,I]", lo, hi))
                                                 : field("unobservable", NULL));
    json_decref(ms);
    json_decref(schemes);
    json_decref(configs);
    return out;
}

/* Puts declared field `d` into `group` of the contract beside (or instead of) what was seen. */
static void merge_declared(json_t *group, const char *name, const json_t *d)
{
    const json_t *p = ulp__field_promise(d);
    if (!p)
        return;
    json_t *have = json_object_get(group, name);
    if (have && strcmp(ulp__field_source(have), "observed") == 0)
        json_object_set(have, "declared", ulp__mut(p));
    else
        json_object_set_new(group, name, field("declared", json_incref(ulp__mut(p))));
}

ulp_status ulp_contract_emit(const char *const *runs, size_t n, const ulp_contract *declared,
                             const char *producer, ulp_contract **out, ulp_error *err)
{
    *out = NULL;
    if (n == 0)
        return ulp__error(err, ULP_EINVAL, "contract emit: no run given");
    json_t **obs = calloc(n, sizeof *obs);
    if (!obs)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    ulp_status st = ULP_OK;
    for (size_t r = 0; r < n && st == ULP_OK; r++)
        st = ulp__contract_observe(runs[r], &obs[r], err);
    json_t *root = NULL;
    if (st == ULP_OK) {
        root = json_pack("{s:i}", "ulpprof_contract", ULP_CONTRACT_VERSION);
        const char *label = json_string_value(json_object_get(obs[0], "label"));
        json_object_set_new(root, "producer",
                            json_string(producer ? producer
                                        : label  ? label
                                                 : ""));
        json_t *paths = json_array();
        for (size_t r = 0; r < n; r++)
            json_array_append_new(paths, json_string(runs[r]));
        json_object_set_new(root, "runs", paths);
        for (size_t i = 0; i < ulp__n_cfields; i++) {
            const ulp__cfield *f = &ulp__cfields[i];
            json_t *g = json_object_get(root, f->group);
            if (!g)
                json_object_set_new(root, f->group, g = json_object());
            json_object_set_new(g, f->name, merge_plain(obs, n, f->group, f->name));
        }
        json_t *gemm = json_object();
        for (size_t r = 0; r < n; r++) {
            const char *site;
            json_t *sv;
            json_object_foreach(json_object_get(obs[r], "gemm"), site, sv)
            {
                if (!json_object_get(gemm, site))
                    json_object_set_new(gemm, site, merge_site(obs, n, site));
            }
        }
        json_object_set_new(root, "gemm", gemm);
        json_object_set_new(root, "claims", json_array());
        json_object_set_new(root, "tolerances", json_array());
    }
    if (st == ULP_OK && declared) {
        const json_t *d = declared->root;
        for (size_t i = 0; i < ulp__n_cgroups; i++) {
            const char *name;
            json_t *f;
            json_object_foreach(json_object_get(d, ulp__cgroups[i]), name, f)
                merge_declared(json_object_get(root, ulp__cgroups[i]), name, f);
        }
        const char *site;
        json_t *sv;
        json_object_foreach(json_object_get(d, "gemm"), site, sv)
        {
            json_t *g = json_object_get(json_object_get(root, "gemm"), site);
            if (!g)
                json_object_set_new(json_object_get(root, "gemm"), site, g = json_object());
            const char *name;
            json_t *f;
            json_object_foreach(sv, name, f) merge_declared(g, name, f);
        }
        const char *copy[] = {"claims", "tolerances", "note"};
        for (size_t i = 0; i < 3; i++)
            if (json_object_get(d, copy[i]))
                json_object_set(root, copy[i], json_object_get(d, copy[i]));
        if (!producer && json_object_get(d, "producer"))
            json_object_set(root, "producer", json_object_get(d, "producer"));
    }
    for (size_t r = 0; r < n; r++)
        json_decref(obs[r]);
    free(obs);
    if (st != ULP_OK)
        return st;
    if ((st = ulp__contract_validate(root, "emitted contract", err)) != ULP_OK) {
        json_decref(root);
        return st;
    }
    *out = ulp__contract_wrap(root);
    if (!*out) {
        json_decref(root);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    return ULP_OK;
}

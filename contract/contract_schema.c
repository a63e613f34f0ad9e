/*
 * The contract's schema: its groups and fields, and the validation that
 * turns a file into a normalized contract (every field an object
 * {source, value[, declared]}) or refuses it with one line naming the field.
 * A field written as a bare value (not an object) is declared.
 */
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"

/* clang-format off */
const ulp__cfield ulp__cfields[] = {
    /* group       name                      rung digest  where snapshots show it */
    {"identity",   "model",                    -1, 0, "run:model"},
    {"identity",   "model_shape",              -1, 0, "run:model_shape"},
    {"identity",   "dtype",                     0, 1, "run:dtype"},
    {"identity",   "capture_dtypes",            0, 1, ""},
    {"identity",   "writer",                    6, 0, ""},
    {"identity",   "engine",                    6, 0, "run:engine"},
    {"identity",   "engine_version",            6, 0, "run:engine_version"},
    {"identity",   "device",                    7, 0, "run:device env:device"},
    {"identity",   "blas",                      7, 0, "run:blas"},
    {"reduction",  "norm",                      0, 1, ""},
    {"reduction",  "softmax",                   0, 1, ""},
    {"reduction",  "attention_split",           1, 1, ""},
    {"reduction",  "kernels",                   0, 1, ""},
    {"collective", "algorithm",                 4, 1, "env:NCCL_ALGO"},
    {"collective", "protocol",                  4, 1, "env:NCCL_PROTO"},
    {"collective", "order",                     4, 1, ""},
    {"collective", "tp",                        4, 1, "run:tp"},
    {"quant",      "scheme",                    5, 1, "run:quantization run:quant"},
    {"quant",      "scale_granularity",         5, 1, ""},
    {"quant",      "scale_dtype",               5, 1, ""},
    {"quant",      "placement",                 5, 1, ""},
    {"scheduler",  "prefill_chunk",             3, 1, "run:prefill_chunk"},
    {"scheduler",  "split_at_block_boundary",   2, 1, ""},
    {"scheduler",  "block_size",                3, 1, "run:block_size"},
    {"scheduler",  "graph_buckets",             1, 1, ""},
    {"scheduler",  "step_rows",      ULP__NO_RUNG, 0, ""},
    {"kv",         "dtype",                     2, 1, "run:kv_cache_dtype run:kv_dtype"},
    {"kv",         "layout",                    2, 1, ""},
    {"kv",         "page_size",                 3, 1, "run:block_size"},
    {"kv",         "producer",                  2, 1, ""},
    {"sampling",   "argmax_tie_rule",           0, 1, ""},
};
const ulp__cfield ulp__csite[] = {
    {"gemm", "a_type",   0, 1, ""},
    {"gemm", "b_type",   0, 1, ""},
    {"gemm", "out_type", 0, 1, ""},
    {"gemm", "compute",  0, 1, ""},
    {"gemm", "configs",  1, 1, ""},
    {"gemm", "policy",   1, 1, ""},
    {"gemm", "m_domain", 1, 1, ""},
};
/* clang-format on */
const size_t ulp__n_cfields = sizeof ulp__cfields / sizeof ulp__cfields[0];
const size_t ulp__n_csite = sizeof ulp__csite / sizeof ulp__csite[0];
const char *const ulp__cgroups[] = {"identity",  "reduction", "collective", "quant",
                                    "scheduler", "kv",        "sampling"};
const size_t ulp__n_cgroups = sizeof ulp__cgroups / sizeof ulp__cgroups[0];

static const char *const top_keys[] = {"ulpprof_contract",
                                       "producer",
                                       "runs",
                                       "numerical_policy",
                                       "claims",
                                       "tolerances",
                                       "identity",
                                       "gemm",
                                       "reduction",
                                       "collective",
                                       "quant",
                                       "scheduler",
                                       "kv",
                                       "sampling",
                                       "note"};

static const char *const config_keys[] = {
    "m", "n", "k", "batch", "algo", "algo_id", "tile", "stages", "splitk", "reduction", "api"};

const ulp__cfield *ulp__cfield_find(const char *group, const char *name)
{
    if (strcmp(group, "gemm") == 0) {
        for (size_t i = 0; i < ulp__n_csite; i++)
            if (strcmp(ulp__csite[i].name, name) == 0)
                return &ulp__csite[i];
        return NULL;
    }
    for (size_t i = 0; i < ulp__n_cfields; i++)
        if (strcmp(ulp__cfields[i].group, group) == 0 && strcmp(ulp__cfields[i].name, name) == 0)
            return &ulp__cfields[i];
    return NULL;
}

static int in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

#define BAD(...) ulp__error(err, ULP_EFORMAT, __VA_ARGS__)

static int is_scalar(const json_t *v)
{
    return json_is_string(v) || json_is_number(v) || json_is_boolean(v) || json_is_null(v);
}

/* A field's value: scalars, arrays of scalars; configs, policy and m_domain have their shapes. */
static ulp_status check_value(const char *what, const char *where, const char *name,
                              const json_t *v, ulp_error *err)
{
    if (strcmp(name, "policy") == 0) {
        const char *p = json_string_value(v);
        if (!p || !in_list(p, (const char *const[]){"fixed", "tile-invariant", "m-dependent"}, 3))
            return BAD("%s: %s: must be \"fixed\", \"tile-invariant\" or \"m-dependent\"", what,
                       where);
        return ULP_OK;
    }
    if (strcmp(name, "m_domain") == 0) {
        if (!json_is_array(v) || json_array_size(v) != 2 ||
            !json_is_integer(json_array_get(v, 0)) || !json_is_integer(json_array_get(v, 1)) ||
            json_integer_value(json_array_get(v, 0)) > json_integer_value(json_array_get(v, 1)))
            return BAD("%s: %s: must be [lo, hi], integers with lo <= hi", what, where);
        return ULP_OK;
    }
    if (strcmp(name, "configs") == 0) {
        if (!json_is_array(v))
            return BAD("%s: %s: must be an array of configurations", what, where);
        size_t i;
        const json_t *c;
        json_array_foreach(v, i, c)
        {
            if (!json_is_object(c))
                return BAD("%s: %s[%zu]: must be an object", what, where, i);
            const char *k;
            const json_t *x;
            json_object_foreach(ulp__mut(c), k, x)
            {
                if (!in_list(k, config_keys, sizeof config_keys / sizeof config_keys[0]))
                    return BAD("%s: %s[%zu]: unknown key '%s'", what, where, i, k);
                if (!is_scalar(x))
                    return BAD("%s: %s[%zu].%s: must be a string or a number", what, where, i, k);
            }
        }
        return ULP_OK;
    }
    if (is_scalar(v))
        return ULP_OK;
    if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        json_array_foreach(v, i, x) if (!is_scalar(x)) return BAD(
            "%s: %s[%zu]: must be a string, number, boolean or null", what, where, i);
        return ULP_OK;
    }
    return BAD("%s: %s: must be a string, number, boolean, null or an array of them", what, where);
}

/* Normalizes one field in place (a bare value becomes {source: declared, value}). */
static ulp_status check_field(json_t *group, const char *gname, const char *name, json_t *f,
                              const char *what, const char *where, ulp_error *err)
{
    if (!json_is_object(f)) {
        json_t *o = json_pack("{s:s,s:O}", "source", "declared", "value", f);
        json_object_set_new(group, name, o);
        f = o;
    }
    const char *k;
    json_t *x;
    json_object_foreach(f, k, x)
    {
        if (!in_list(k, (const char *const[]){"source", "value", "declared", "varies", "note"}, 5))
            return BAD("%s: %s: unknown key '%s' (source, value, declared, varies, note)", what,
                       where, k);
    }
    const char *src = json_string_value(json_object_get(f, "source"));
    if (!src || !in_list(src, (const char *const[]){"observed", "declared", "unobservable"}, 3))
        return BAD("%s: %s.source: must be \"observed\", \"declared\" or \"unobservable\"", what,
                   where);
    json_t *v = json_object_get(f, "value");
    if (strcmp(src, "unobservable") == 0 && v)
        return BAD("%s: %s: an unobservable field has no value (declare it: source \"declared\")",
                   what, where);
    if (strcmp(src, "unobservable") != 0 && !v)
        return BAD("%s: %s: a %s field needs a value", what, where, src);
    json_t *var = json_object_get(f, "varies");
    if (var && (!json_is_true(var) || !json_is_array(v) || strcmp(src, "observed") != 0))
        return BAD("%s: %s.varies: only true, on an observed field whose value is the array of "
                   "the values the runs showed",
                   what, where);
    char sub[256];
    ulp_status st;
    if (v && var) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e)
        {
            snprintf(sub, sizeof sub, "%s.value[%zu]", where, i);
            if ((st = check_value(what, sub, name, e, err)) != ULP_OK)
                return st;
        }
    } else if (v) {
        snprintf(sub, sizeof sub, "%s.value", where);
        if ((st = check_value(what, sub, name, v, err)) != ULP_OK)
            return st;
    }
    json_t *d = json_object_get(f, "declared");
    if (d) {
        snprintf(sub, sizeof sub, "%s.declared", where);
        if ((st = check_value(what, sub, name, d, err)) != ULP_OK)
            return st;
    }
    (void)gname;
    return ULP_OK;
}

static ulp_status check_group(json_t *root, const char *gname, const char *what, ulp_error *err)
{
    json_t *g = json_object_get(root, gname);
    if (!g)
        return ULP_OK;
    if (!json_is_object(g))
        return BAD("%s: %s: must be an object", what, gname);
    const char *name;
    json_t *f;
    void *tmp;
    json_object_foreach_safe(g, tmp, name, f)
    {
        char where[256];
        snprintf(where, sizeof where, "%s.%s", gname, name);
        if (!ulp__cfield_find(gname, name))
            return BAD("%s: %s: unknown field (docs/contract.md lists the fields)", what, where);
        ulp_status st = check_field(g, gname, name, f, what, where, err);
        if (st != ULP_OK)
            return st;
    }
    return ULP_OK;
}

static ulp_status check_gemm(json_t *root, const char *what, ulp_error *err)
{
    json_t *g = json_object_get(root, "gemm");
    if (!g)
        return ULP_OK;
    if (!json_is_object(g))
        return BAD("%s: gemm: must be an object of sites", what);
    const char *site;
    json_t *s;
    json_object_foreach(g, site, s)
    {
        if (!json_is_object(s))
            return BAD("%s: gemm.%s: must be an object", what, site);
        const char *name;
        json_t *f;
        void *tmp;
        json_object_foreach_safe(s, tmp, name, f)
        {
            char where[512];
            snprintf(where, sizeof where, "gemm.%s.%s", site, name);
            if (!ulp__cfield_find("gemm", name))
                return BAD("%s: %s: unknown field (docs/contract.md lists the fields)", what,
                           where);
            ulp_status st = check_field(s, "gemm", name, f, what, where, err);
            if (st != ULP_OK)
                return st;
        }
    }
    return ULP_OK;
}

/* "group.name" of a plain group, or "gemm.SITE.name": a path `requires` may name. */
static int known_path(const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *dot = strchr(buf, '.');
    if (!dot)
        return 0;
    *dot = '\0';
    if (strcmp(buf, "gemm") == 0) {
        char *last = strrchr(dot + 1, '.');
        return last && last != dot + 1 && ulp__cfield_find("gemm", last + 1) != NULL;
    }
    return ulp__cfield_find(buf, dot + 1) != NULL;
}

static ulp_status check_claims(json_t *root, const char *what, ulp_error *err)
{
    json_t *c = json_object_get(root, "claims");
    if (!c)
        return ULP_OK;
    if (!json_is_array(c))
        return BAD("%s: claims: must be an array", what);
    size_t i;
    json_t *cl;
    json_array_foreach(c, i, cl)
    {
        if (!json_is_object(cl))
            return BAD("%s: claims[%zu]: must be an object", what, i);
        const char *k;
        json_t *x;
        json_object_foreach(cl, k, x)
        {
            if (!in_list(k,
                         (const char *const[]){"level", "name", "scope", "domain", "requires",
                                               "tolerance", "note"},
                         7))
                return BAD("%s: claims[%zu]: unknown key '%s'", what, i, k);
        }
        json_t *lv = json_object_get(cl, "level");
        if (!json_is_integer(lv) || json_integer_value(lv) < 0 || json_integer_value(lv) > 7)
            return BAD("%s: claims[%zu].level: must be an integer 0..7", what, i);
        json_t *nm = json_object_get(cl, "name");
        if (nm && !json_is_string(nm))
            return BAD("%s: claims[%zu].name: must be a string", what, i);
        json_t *sc = json_object_get(cl, "scope");
        if (sc) {
            if (!json_is_object(sc))
                return BAD("%s: claims[%zu].scope: must be an object of identity fields", what, i);
            json_object_foreach(sc, k, x)
            {
                if (!ulp__cfield_find("identity", k))
                    return BAD("%s: claims[%zu].scope.%s: not an identity field", what, i, k);
                if (!is_scalar(x))
                    return BAD("%s: claims[%zu].scope.%s: must be a string or a number", what, i,
                               k);
            }
        }
        json_t *dm = json_object_get(cl, "domain");
        if (dm) {
            if (!json_is_object(dm))
                return BAD("%s: claims[%zu].domain: must be an object of /run keys", what, i);
            json_object_foreach(dm, k, x)
            {
                if (!json_is_array(x) || json_array_size(x) == 0)
                    return BAD("%s: claims[%zu].domain.%s: must be a non-empty array of values",
                               what, i, k);
            }
        }
        json_t *rq = json_object_get(cl, "requires");
        if (rq) {
            if (!json_is_object(rq))
                return BAD("%s: claims[%zu].requires: must be an object of field paths", what, i);
            json_object_foreach(rq, k, x)
            {
                if (!known_path(k))
                    return BAD("%s: claims[%zu].requires.%s: not a contract field", what, i, k);
            }
        }
        json_t *tl = json_object_get(cl, "tolerance");
        if (tl) {
            json_t *mu = json_object_get(tl, "max_ulp");
            if (!json_is_object(tl) || json_object_size(tl) != 1 || !json_is_integer(mu) ||
                json_integer_value(mu) < 0)
                return BAD("%s: claims[%zu].tolerance: must be {\"max_ulp\": N}, N >= 0", what, i);
        }
    }
    return ULP_OK;
}

static ulp_status check_tolerances(json_t *root, const char *what, ulp_error *err)
{
    json_t *t = json_object_get(root, "tolerances");
    if (!t)
        return ULP_OK;
    if (!json_is_array(t))
        return BAD("%s: tolerances: must be an array", what);
    size_t i;
    json_t *x;
    json_array_foreach(t, i, x)
    {
        if (!json_is_object(x))
            return BAD("%s: tolerances[%zu]: must be an object", what, i);
        json_t *r = json_object_get(x, "rung");
        if (!json_is_integer(r) || json_integer_value(r) < 0 || json_integer_value(r) > 7)
            return BAD("%s: tolerances[%zu].rung: must be an integer 0..7", what, i);
        json_t *u = json_object_get(x, "max_ulp"), *nats = json_object_get(x, "max_nats");
        if ((u && (!json_is_integer(u) || json_integer_value(u) < 0)) ||
            (nats && !json_is_number(nats)) || (!u && !nats))
            return BAD("%s: tolerances[%zu]: needs max_ulp (integer >= 0) or max_nats (number)",
                       what, i);
        json_t *st = json_object_get(x, "sites");
        if (st) {
            int ok = json_is_array(st) && json_array_size(st) > 0;
            size_t j;
            json_t *g;
            json_array_foreach(st, j, g) ok &= json_is_string(g);
            if (!ok)
                return BAD("%s: tolerances[%zu].sites: must be a non-empty array of capture "
                           "name globs",
                           what, i);
        }
        const char *k;
        json_t *y;
        json_object_foreach(x, k, y)
        {
            if (!in_list(k, (const char *const[]){"rung", "max_ulp", "max_nats", "sites", "note"},
                         5))
                return BAD("%s: tolerances[%zu]: unknown key '%s'", what, i, k);
        }
    }
    return ULP_OK;
}

ulp_status ulp__contract_validate(json_t *root, const char *what, ulp_error *err)
{
    if (!json_is_object(root))
        return BAD("%s: not a contract: the top level must be a JSON object", what);
    json_t *v = json_object_get(root, "ulpprof_contract");
    if (!v)
        return BAD("%s: not a contract: no \"ulpprof_contract\" version", what);
    if (!json_is_integer(v))
        return BAD("%s: ulpprof_contract: must be an integer", what);
    if (json_integer_value(v) != ULP_CONTRACT_VERSION)
        return ulp__error(err, ULP_EVERSION, "%s: contract version %lld (this ulpprof reads %d)",
                          what, (long long)json_integer_value(v), ULP_CONTRACT_VERSION);
    const char *k;
    json_t *x;
    json_object_foreach(root, k, x)
    {
        if (!in_list(k, top_keys, sizeof top_keys / sizeof top_keys[0]))
            return BAD("%s: unknown top-level key '%s'", what, k);
    }
    json_t *p = json_object_get(root, "producer");
    if (p && !json_is_string(p))
        return BAD("%s: producer: must be a string", what);
    json_t *np = json_object_get(root, "numerical_policy");
    if (np && !json_is_string(np))
        return BAD("%s: numerical_policy: must be a string", what);
    ulp_status st;
    for (size_t i = 0; i < ulp__n_cgroups; i++)
        if ((st = check_group(root, ulp__cgroups[i], what, err)) != ULP_OK)
            return st;
    if ((st = check_gemm(root, what, err)) != ULP_OK ||
        (st = check_claims(root, what, err)) != ULP_OK ||
        (st = check_tolerances(root, what, err)) != ULP_OK)
        return st;
    return ULP_OK;
}

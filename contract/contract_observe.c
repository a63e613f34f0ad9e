/*
 * What one run shows about its numerics, read from its snapshots through
 * the public reader: /run, /env and /observed keys (the schema table names
 * which key shows which field, and a key "<group>.<field>" shows that field
 * in any snapshot), the writer, the capture dtypes, the kernel names of
 * /trace/kernels, the GEMM rows of /trace/gemms, a writer's emulated GEMM
 * descriptions (an /observed key "<site>_gemm" = "M=15: small-M 16x64,
 * split-K 4"), and the rows each step captured (from positions).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"
#include "ulpprof/ladder.h"

/* "16" -> 16, "true"/"false" -> booleans, else the string. */
static json_t *typed(const char *s)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s && *end == '\0' && (s[0] != '0' || s[1] == '\0') && s[0] != '+')
        return json_integer(v);
    if (strcmp(s, "true") == 0)
        return json_true();
    if (strcmp(s, "false") == 0)
        return json_false();
    return json_string(s);
}

static const char *kv_get(size_t n, const ulp_kv *(*get)(const ulp_snapshot *, size_t),
                          const ulp_snapshot *s, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        const ulp_kv *kv = get(s, i);
        if (kv && strcmp(kv->key, key) == 0)
            return kv->value;
    }
    return NULL;
}

/* The value of "run:K", "env:K" or "observed:K" in `s`, or NULL. */
static const char *source_value(const ulp_snapshot *s, const char *src)
{
    if (strncmp(src, "run:", 4) == 0)
        return ulp_snapshot_run_get(s, src + 4);
    if (strncmp(src, "env:", 4) == 0)
        return kv_get(ulp_snapshot_env_count(s), ulp_snapshot_env, s, src + 4);
    if (strncmp(src, "observed:", 9) == 0)
        return kv_get(ulp_snapshot_observed_count(s), ulp_snapshot_observed, s, src + 9);
    return NULL;
}

static void put(json_t *obs, const char *group, const char *name, json_t *v)
{
    json_t *g = json_object_get(obs, group);
    if (!g)
        json_object_set_new(obs, group, g = json_object());
    json_object_set_new(g, name, v);
}

/* Fields shown by keys: the generic "<group>.<name>" first, then the table's sources. */
static void observe_keys(const ulp_snapshot *s, json_t *obs)
{
    for (size_t i = 0; i < ulp__n_cfields; i++) {
        const ulp__cfield *f = &ulp__cfields[i];
        char key[128], src[160];
        snprintf(key, sizeof key, "%s.%s", f->group, f->name);
        const char *v = NULL;
        const char *kinds[] = {"run:", "observed:", "env:"};
        for (size_t k = 0; k < 3 && !v; k++) {
            snprintf(src, sizeof src, "%s%s", kinds[k], key);
            v = source_value(s, src);
        }
        const char *p = f->keys;
        while (!v && *p) {
            size_t len = strcspn(p, " ");
            snprintf(src, sizeof src, "%.*s", (int)len, p);
            v = source_value(s, src);
            p += len;
            p += strspn(p, " ");
        }
        if (v)
            put(obs, f->group, f->name, typed(v));
    }
    const char *w = ulp_snapshot_writer(s);
    if (w && *w)
        put(obs, "identity", "writer", json_string(w));
}

/* The reference workload's keys: whether the computed suffix begins at the cached prefix. */
static void observe_split(const ulp_snapshot *s, json_t *obs)
{
    if (json_object_get(json_object_get(obs, "scheduler"), "split_at_block_boundary"))
        return;
    const char *cache = ulp_snapshot_run_get(s, "cache"), *split = ulp_snapshot_run_get(s, "split");
    const char *pl = ulp_snapshot_run_get(s, "prefix_len"),
               *bs = ulp_snapshot_run_get(s, "block_size");
    const char *chunk = ulp_snapshot_run_get(s, "prefill_chunk");
    if (!cache || !split || !pl || !bs)
        return;
    long long prefix = atoll(pl), block = atoll(bs), c = chunk ? atoll(chunk) : 0;
    int starts =
        strcmp(cache, "hit") == 0 || strcmp(split, "none") != 0 || (c > 0 && prefix % c == 0);
    int at = starts && block > 0 && prefix % block == 0;
    put(obs, "scheduler", "split_at_block_boundary", json_boolean(at));
}

/*
 * The first `cap` keys of `obj` (jansson keeps insertion order) into
 * `keys`, sorted by strcmp; their count.  The keys stay owned by `obj`.
 */
static size_t sorted_keys(json_t *obj, const char **keys, size_t cap)
{
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) if (n < cap) keys[n++] = k;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    return n;
}

static void observe_captures(const ulp_snapshot *s, json_t *obs)
{
    json_t *pairs = json_object(), *steps = json_object();
    for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (!c)
            continue;
        json_object_set_new(pairs, c->role, json_string(ulp_dtype_name(c->dtype)));
        if (c->row_rank > 0 && c->positions) {
            char step[32];
            snprintf(step, sizeof step, "%020lld", (long long)(c->has_step ? c->step : 0));
            if (!json_object_get(steps, step))
                json_object_set_new(steps, step, json_integer((json_int_t)c->rows));
        }
    }
    char buf[512];
    size_t len = 0;
    buf[0] = '\0';
    /* The roles sorted, for a stable text. */
    const char *keys[64];
    size_t n = sorted_keys(pairs, keys, 64);
    for (size_t i = 0; i < n && len < sizeof buf; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s=%s", i ? " " : "", keys[i],
                                json_string_value(json_object_get(pairs, keys[i])));
    if (n)
        put(obs, "identity", "capture_dtypes", json_string(buf));
    if (json_object_size(steps)) {
        json_t *rows = json_array();
        /* Steps as zero-padded keys: sorting them sorts the steps. */
        const char *sk[4096];
        size_t m = sorted_keys(steps, sk, 4096);
        for (size_t i = 0; i < m; i++)
            json_array_append(rows, json_object_get(steps, sk[i]));
        put(obs, "scheduler", "step_rows", rows);
    }
    json_decref(pairs);
    json_decref(steps);
}

static void observe_kernels(const ulp_snapshot *s, json_t *obs)
{
    if (!ulp_snapshot_has_kernel_trace(s) || ulp_snapshot_kernel_count(s) == 0)
        return;
    json_t *names = json_object();
    for (size_t i = 0; i < ulp_snapshot_kernel_count(s); i++) {
        const ulp_kernel_info *k = ulp_snapshot_kernel(s, i);
        if (k && *k->name)
            json_object_set_new(names, k->name, json_true());
    }
    json_t *prev = json_object_get(json_object_get(obs, "reduction"), "kernels");
    size_t i;
    json_t *x;
    json_array_foreach(prev, i, x) json_object_set_new(names, json_string_value(x), json_true());
    json_t *list = json_array();
    const char *k;
    json_t *v;
    json_object_foreach(names, k, v) json_array_append_new(list, json_string(k));
    json_decref(names);
    /* Sorted by the caller's normalization (ulp__sort_values). */
    put(obs, "reduction", "kernels", list);
}

/* A site's object in obs.gemm, made on first use. */
static json_t *site_of(json_t *obs, const char *site)
{
    json_t *g = json_object_get(obs, "gemm");
    if (!g)
        json_object_set_new(obs, "gemm", g = json_object());
    json_t *s = json_object_get(g, site);
    if (!s) {
        json_object_set_new(g, site, s = json_object());
        json_object_set_new(s, "configs", json_array());
    }
    return s;
}

static void add_config(json_t *site, json_t *config)
{
    json_t *list = json_object_get(site, "configs");
    size_t i;
    json_t *x;
    json_array_foreach(list, i, x) if (json_equal(x, config))
    {
        json_decref(config);
        return;
    }
    json_array_append_new(list, config);
}

/* A type field of a site: one value, or the distinct values as an array. */
static void add_type(json_t *site, const char *name, const char *value)
{
    if (!*value)
        return;
    json_t *cur = json_object_get(site, name);
    json_t *v = json_string(value);
    if (!cur) {
        json_object_set_new(site, name, v);
        return;
    }
    if (json_is_string(cur)) {
        if (json_equal(cur, v)) {
            json_decref(v);
            return;
        }
        json_t *arr = json_array();
        json_array_append(arr, cur);
        json_object_set_new(site, name, arr);
        cur = arr;
    }
    size_t i;
    json_t *x;
    json_array_foreach(cur, i, x) if (json_equal(x, v))
    {
        json_decref(v);
        return;
    }
    json_array_append_new(cur, v);
}

static void observe_gemm_rows(const ulp_snapshot *s, json_t *obs)
{
    size_t n = ulp_snapshot_gemm_count(s);
    for (size_t i = 0; i < n; i++) {
        const ulp_gemm_info *g = ulp_snapshot_gemm(s, i);
        if (!g)
            continue;
        char site[512] = "";
        for (size_t c = 0; c < ulp_snapshot_capture_count(s) && !*site; c++) {
            const ulp_capture_info *ci = ulp_snapshot_capture(s, c);
            if (ci && ci->has_gemms && (int64_t)i >= ci->gemms[0] && (int64_t)i < ci->gemms[1])
                snprintf(site, sizeof site, "%s", ci->name);
        }
        if (!*site)
            snprintf(site, sizeof site, "gemm n=%lld k=%lld", (long long)g->n, (long long)g->k);
        json_t *st = site_of(obs, site);
        add_type(st, "a_type", g->a_type);
        add_type(st, "b_type", g->b_type);
        add_type(st, "out_type", g->d_type);
        add_type(st, "compute", g->compute);
        json_t *c = json_pack("{s:I,s:I,s:I}", "m", (json_int_t)g->m, "n", (json_int_t)g->n, "k",
                              (json_int_t)g->k);
        if (g->batch != 1)
            json_object_set_new(c, "batch", json_integer(g->batch));
        const char *strs[][2] = {{"api", g->api},
                                 {"algo", g->algo},
                                 {"tile", g->tile},
                                 {"stages", g->stages},
                                 {"reduction", g->reduction}};
        for (size_t k = 0; k < sizeof strs / sizeof strs[0]; k++)
            if (*strs[k][1])
                json_object_set_new(c, strs[k][0], json_string(strs[k][1]));
        if (g->algo_id >= 0)
            json_object_set_new(c, "algo_id", json_integer(g->algo_id));
        if (g->splitk > 0)
            json_object_set_new(c, "splitk", json_integer(g->splitk));
        add_config(st, c);
    }
}

/*
 * "M=15: small-M 16x64, split-K 4 (emulated)" -> {m 15, algo small-M, tile
 * 16x64, splitk 4, reduction "none"}; a further ", 2 k-lanes" is the
 * reduction.  NULL when the text is not in that form.
 */
static json_t *parse_described(const char *text)
{
    long long m;
    int used = 0;
    if (sscanf(text, "M=%lld: %n", &m, &used) != 1 || used == 0)
        return NULL;
    char body[256];
    snprintf(body, sizeof body, "%s", text + used);
    char *em = strstr(body, " (emulated)");
    if (em)
        *em = '\0';
    char *parts[8];
    int np = 0;
    for (char *p = strtok(body, ","); p && np < 8; p = strtok(NULL, ","))
        parts[np++] = p + strspn(p, " ");
    if (np < 2)
        return NULL;
    char *sp = strrchr(parts[0], ' ');
    long long sk;
    if (!sp || sscanf(parts[1], "split-K %lld", &sk) != 1)
        return NULL;
    *sp = '\0';
    json_t *c =
        json_pack("{s:I,s:s,s:s,s:I,s:s}", "m", (json_int_t)m, "algo", parts[0], "tile", sp + 1,
                  "splitk", (json_int_t)sk, "reduction", np > 2 ? parts[2] : "none");
    return c;
}

static void observe_described(const ulp_snapshot *s, json_t *obs)
{
    const char *dtype = ulp_snapshot_run_get(s, "dtype");
    char store[32] = "", acc[32] = "";
    int typed_text =
        dtype && sscanf(dtype, "%31s weights and activations, %31s accumulation", store, acc) == 2;
    for (size_t i = 0; i < ulp_snapshot_observed_count(s); i++) {
        const ulp_kv *kv = ulp_snapshot_observed(s, i);
        size_t len = kv ? strlen(kv->key) : 0;
        if (len <= 5 || strcmp(kv->key + len - 5, "_gemm") != 0)
            continue;
        json_t *c = parse_described(kv->value);
        if (!c)
            continue;
        char site[128];
        snprintf(site, sizeof site, "%.*s", (int)(len - 5), kv->key);
        json_t *st = site_of(obs, site);
        if (typed_text) {
            add_type(st, "a_type", store);
            add_type(st, "b_type", store);
            add_type(st, "out_type", store);
            add_type(st, "compute", acc);
        }
        add_config(st, c);
    }
}

static int config_cmp(const void *pa, const void *pb)
{
    const json_t *a = *(json_t *const *)pa, *b = *(json_t *const *)pb;
    json_int_t ma = json_integer_value(json_object_get(a, "m"));
    json_int_t mb = json_integer_value(json_object_get(b, "m"));
    if (ma != mb)
        return ma < mb ? -1 : 1;
    char *x = ulp__canonical(a), *y = ulp__canonical(b);
    int r = strcmp(x ? x : "", y ? y : "");
    free(x);
    free(y);
    return r;
}

void ulp__sort_values(json_t *arr)
{
    size_t n = json_array_size(arr);
    if (n < 2)
        return;
    json_t **v = malloc(n * sizeof *v);
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(arr, i));
    qsort(v, n, sizeof *v, config_cmp);
    json_array_clear(arr);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, v[i]);
    free(v);
}

static void normalize(json_t *obs)
{
    const char *k;
    json_t *st;
    json_object_foreach(json_object_get(obs, "gemm"), k, st)
    {
        ulp__sort_values(json_object_get(st, "configs"));
        const char *tk[] = {"a_type", "b_type", "out_type", "compute"};
        for (size_t i = 0; i < 4; i++)
            if (json_is_array(json_object_get(st, tk[i])))
                ulp__sort_values(json_object_get(st, tk[i]));
    }
    ulp__sort_values(json_object_get(json_object_get(obs, "reduction"), "kernels"));
}

ulp_status ulp__contract_observe(const char *run, json_t **out, ulp_error *err)
{
    *out = NULL;
    ulp_ladder_file *files = NULL;
    size_t n = 0;
    ulp_status st = ulp_ladder_run_files(run, &files, &n, err);
    if (st != ULP_OK)
        return st;
    json_t *obs = json_object();
    for (size_t i = 0; i < n && st == ULP_OK; i++) {
        ulp_snapshot *s = NULL;
        if ((st = ulp_snapshot_open(files[i].path, &s, err)) != ULP_OK)
            break;
        if (i == 0) {
            json_object_set_new(obs, "label", json_string(ulp_snapshot_label(s)));
            json_t *keys = json_object();
            for (size_t k = 0; k < ulp_snapshot_run_count(s); k++) {
                const ulp_kv *kv = ulp_snapshot_run(s, k);
                json_object_set_new(keys, kv->key, json_string(kv->value));
            }
            json_object_set_new(obs, "run", keys);
            observe_keys(s, obs);
            observe_split(s, obs);
            observe_captures(s, obs);
        }
        observe_kernels(s, obs);
        /* A writer's own description of its GEMMs stands in for rows it did not write. */
        if (ulp_snapshot_gemm_count(s) > 0)
            observe_gemm_rows(s, obs);
        else
            observe_described(s, obs);
        ulp_snapshot_close(s);
    }
    ulp_ladder_files_free(files, n);
    if (st != ULP_OK) {
        json_decref(obs);
        return st;
    }
    normalize(obs);
    *out = obs;
    return ULP_OK;
}

const json_t *ulp__observed_at(const json_t *obs, const char *path)
{
    char buf[600];
    snprintf(buf, sizeof buf, "%s", path);
    if (strncmp(buf, "gemm.", 5) == 0) {
        char *last = strrchr(buf + 5, '.');
        if (!last)
            return NULL;
        *last = '\0';
        return json_object_get(json_object_get(json_object_get(obs, "gemm"), buf + 5), last + 1);
    }
    char *dot = strchr(buf, '.');
    if (!dot)
        return NULL;
    *dot = '\0';
    return json_object_get(json_object_get(obs, buf), dot + 1);
}

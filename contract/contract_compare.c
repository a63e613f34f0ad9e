/*
 * `contract compare`: two producers' contracts side by side.  Each
 * bit-relevant field that both give a value and that differs is weighed by
 * the lowest rung of the ladder its difference breaks (the schema's table:
 * an accumulator or a configuration at the same M breaks even a repeat,
 * rung 0; a GEMM scheme that depends on M breaks rung 1 and up, since a
 * batch or a cache hit changes M; the split policy rung 2; chunking and
 * block size 3; collectives 4; quantization 5; engine 6; device and BLAS
 * 7).  The pair can promise at most the level below the lowest such rung
 * (-1: none), 7 when nothing differs -- as far as the fields show: a field
 * one side cannot observe is listed, and weighs nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"
#include "ulpprof/diff.h"

typedef struct weigh {
    int rung; /* lowest so far, 8: none */
    char reason[512];
    size_t differ, unknown;
} weigh;

static void note(weigh *w, int rung, const char *reason, FILE *out)
{
    fprintf(out, "  rung %-2d %s\n", rung < 0 ? 0 : rung, reason);
    w->differ++;
    if (rung < w->rung) {
        w->rung = rung;
        snprintf(w->reason, sizeof w->reason, "%s", reason);
    }
}

static const json_t *value_of(const json_t *f)
{
    return json_object_get(f, "value");
}

static void compare_value(const char *path, int rung, const json_t *fa, const json_t *fb,
                          const char *la, const char *lb, FILE *out, weigh *w)
{
    const json_t *a = value_of(fa), *b = value_of(fb);
    if (!a && !b)
        return;
    if (!a || !b) {
        w->unknown++;
        return;
    }
    if (ulp__value_equal(a, b))
        return;
    char *ta = ulp__value_text(a), *tb = ulp__value_text(b), r[512];
    snprintf(r, sizeof r, "%s differs: %s (%s) / %s (%s)", path, ta ? ta : "?", la, tb ? tb : "?",
             lb);
    free(ta);
    free(tb);
    note(w, rung, r, out);
}

/* Which part of two schemes differs, in words. */
static const char *scheme_word(const json_t *a, const json_t *b)
{
    if (!ulp__value_equal(json_object_get(a, "splitk"), json_object_get(b, "splitk")))
        return "split-K policy";
    if (!ulp__value_equal(json_object_get(a, "tile"), json_object_get(b, "tile")))
        return "tile policy";
    if (!ulp__value_equal(json_object_get(a, "reduction"), json_object_get(b, "reduction")))
        return "reduction scheme";
    return "algorithm";
}

static void compare_site(const char *site, const json_t *sa, const json_t *sb, const char *la,
                         const char *lb, FILE *out, weigh *w)
{
    const char *types[] = {"a_type", "b_type", "out_type", "compute"};
    for (size_t t = 0; t < 4; t++) {
        char path[600];
        snprintf(path, sizeof path, "gemm.%s.%s", site, types[t]);
        compare_value(path, 0, json_object_get(sa, types[t]), json_object_get(sb, types[t]), la, lb,
                      out, w);
    }
    const json_t *ca = value_of(json_object_get(sa, "configs"));
    const json_t *cb = value_of(json_object_get(sb, "configs"));
    if (!ca || !cb) {
        if (ca || cb)
            w->unknown++;
        return;
    }
    size_t i, j;
    json_t *x, *y;
    /* The same shape (M, N, K) configured differently: the producers part even
     * on a repeat.  A site of several GEMMs (q, k, v, o) has one per N and K. */
    json_array_foreach(ca, i, x) json_array_foreach(cb, j, y)
    {
        if (!ulp__value_equal(json_object_get(x, "m"), json_object_get(y, "m")) ||
            !ulp__config_same_shape(x, y) || ulp__value_equal(x, y))
            continue;
        char *tx = ulp__config_text(x), *ty = ulp__config_text(y), r[512];
        snprintf(r, sizeof r,
                 "gemm.%s.configs: the same M, another configuration: %s (%s) / %s (%s)", site, tx,
                 la, ty, lb);
        free(tx);
        free(ty);
        note(w, 0, r, out);
        return;
    }
    /* Across M: one scheme of A against another of B. */
    json_array_foreach(ca, i, x) json_array_foreach(cb, j, y)
    {
        if (!ulp__config_same_shape(x, y))
            continue;
        json_t *a = ulp__config_scheme(x), *b = ulp__config_scheme(y);
        int same = json_equal(a, b);
        if (!same) {
            char *tx = ulp__config_text(x), *ty = ulp__config_text(y), r[512];
            snprintf(r, sizeof r,
                     "%s at gemm site %s depends on M: %s (%s), %s (%s); a batch or a cache hit "
                     "changes M, and with it the reduction order",
                     scheme_word(a, b), site, tx, la, ty, lb);
            free(tx);
            free(ty);
            note(w, 1, r, out);
        }
        json_decref(a);
        json_decref(b);
        if (!same)
            return;
    }
}

ulp_status ulp_contract_compare(const ulp_contract *ca, const ulp_contract *cb, FILE *out,
                                int *level, ulp_error *err)
{
    const json_t *a = ca->root, *b = cb->root;
    const char *la = json_string_value(json_object_get(a, "producer"));
    const char *lb = json_string_value(json_object_get(b, "producer"));
    la = la && *la ? la : "A";
    lb = lb && *lb ? lb : "B";
    fprintf(out, "compare %s vs %s\n", la, lb);
    fprintf(out, "  numerical_policy: %s (%s)\n                    %s (%s)%s\n", ca->digest, la,
            cb->digest, lb, strcmp(ca->digest, cb->digest) == 0 ? ": the same" : ": differ");
    fprintf(out, "fields that differ\n");
    weigh w = {8, "", 0, 0};
    for (size_t i = 0; i < ulp__n_cfields; i++) {
        const ulp__cfield *f = &ulp__cfields[i];
        if (f->rung == ULP__NO_RUNG)
            continue;
        char path[128];
        snprintf(path, sizeof path, "%s.%s", f->group, f->name);
        compare_value(path, f->rung, json_object_get(json_object_get(a, f->group), f->name),
                      json_object_get(json_object_get(b, f->group), f->name), la, lb, out, &w);
    }
    const json_t *ga = json_object_get(a, "gemm"), *gb = json_object_get(b, "gemm");
    const char *site;
    json_t *sa;
    json_object_foreach(ulp__mut(ga), site, sa)
    {
        json_t *sb = json_object_get(gb, site);
        if (sb)
            compare_site(site, sa, sb, la, lb, out, &w);
        else
            w.unknown++;
    }
    json_object_foreach(ulp__mut(gb), site, sa) if (!json_object_get(ga, site)) w.unknown++;
    if (w.differ == 0)
        fprintf(out, "  (none)\n");
    *level = w.rung > 7 ? 7 : w.rung - 1;
    if (*level < 0)
        *level = -1;
    if (w.rung > 7)
        fprintf(out, "level: 7 (%s): no bit-relevant field differs", ulp_diff_ladder_name(7));
    else if (*level < 0)
        fprintf(out, "level: none: %s", w.reason);
    else
        fprintf(out, "level: at most %d (%s): %s", *level, ulp_diff_ladder_name(*level), w.reason);
    if (w.unknown)
        fprintf(out,
                "\n  (as far as the fields show: %zu field%s or site%s known on one side "
                "only)",
                w.unknown, w.unknown == 1 ? "" : "s", w.unknown == 1 ? "" : "s");
    fprintf(out, "\n");
    (void)err;
    return ULP_OK;
}

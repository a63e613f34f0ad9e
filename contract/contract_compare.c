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
 *
 * A difference found at many GEMM sites alike (the same part, the same
 * values on both sides: every layer's split-K policy) is one finding with
 * the list of its sites; the text names the sites by pattern, the JSON
 * lists every one.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "contract_priv.h"
#include "ulpprof/diff.h"

/*
 * The findings: an array of {"rung", "field" | "kind", "a", "b", "tail",
 * "sites": [...]}, in the order found; a site finding joins the one of the
 * same rung, kind and values.
 */
typedef struct weigh {
    json_t *found;
    const json_t *ga, *gb; /* the two gemm groups: the universe of site names */
    size_t differ, unknown;
} weigh;

static void note_field(weigh *w, int rung, const char *path, const char *ta, const char *tb)
{
    json_t *f = json_pack("{s:i, s:s, s:s, s:s}", "rung", rung < 0 ? 0 : rung, "field", path, "a",
                          ta, "b", tb);
    json_array_append_new(w->found, f);
    w->differ++;
}

static void note_site(weigh *w, int rung, const char *site, const char *kind, const char *ta,
                      const char *tb, const char *tail)
{
    w->differ++;
    rung = rung < 0 ? 0 : rung;
    size_t i;
    json_t *f;
    json_array_foreach(w->found, i, f)
    {
        json_t *sites = json_object_get(f, "sites");
        if (sites && json_integer_value(json_object_get(f, "rung")) == rung &&
            strcmp(json_string_value(json_object_get(f, "kind")), kind) == 0 &&
            strcmp(json_string_value(json_object_get(f, "a")), ta) == 0 &&
            strcmp(json_string_value(json_object_get(f, "b")), tb) == 0) {
            json_array_append_new(sites, json_string(site));
            return;
        }
    }
    f = json_pack("{s:i, s:s, s:s, s:s, s:s, s:[s]}", "rung", rung, "kind", kind, "a", ta, "b", tb,
                  "tail", tail, "sites", site);
    json_array_append_new(w->found, f);
}

static const json_t *value_of(const json_t *f)
{
    return json_object_get(f, "value");
}

/* Both sides' values of one field; 1 when they differ (texts into *ta, *tb). */
static int differ(const json_t *fa, const json_t *fb, weigh *w, char **ta, char **tb)
{
    const json_t *a = value_of(fa), *b = value_of(fb);
    if (!a && !b)
        return 0;
    if (!a || !b) {
        w->unknown++;
        return 0;
    }
    if (ulp__value_equal(a, b))
        return 0;
    *ta = ulp__value_text(a);
    *tb = ulp__value_text(b);
    return 1;
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

static void compare_site(const char *site, const json_t *sa, const json_t *sb, weigh *w)
{
    const char *types[] = {"a_type", "b_type", "out_type", "compute"};
    for (size_t t = 0; t < 4; t++) {
        char *ta = NULL, *tb = NULL, kind[64];
        if (differ(json_object_get(sa, types[t]), json_object_get(sb, types[t]), w, &ta, &tb)) {
            snprintf(kind, sizeof kind, "%s differs", types[t]);
            note_site(w, 0, site, kind, ta ? ta : "?", tb ? tb : "?", "");
        }
        free(ta);
        free(tb);
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
        char *tx = ulp__config_text(x), *ty = ulp__config_text(y);
        note_site(w, 0, site, "another configuration at the same M", tx ? tx : "?", ty ? ty : "?",
                  "");
        free(tx);
        free(ty);
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
            char *tx = ulp__config_text(x), *ty = ulp__config_text(y), kind[64];
            snprintf(kind, sizeof kind, "%s depends on M", scheme_word(a, b));
            note_site(w, 1, site, kind, tx ? tx : "?", ty ? ty : "?",
                      "; a batch or a cache hit changes M, and with it the reduction order");
            free(tx);
            free(ty);
        }
        json_decref(a);
        json_decref(b);
        if (!same)
            return;
    }
}

/* A site's pattern: every dot-separated part made of digits only becomes "*". */
static void site_pattern(const char *site, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = site; *p && o + 2 < len;) {
        const char *e = strchr(p, '.');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        size_t d = strspn(p, "0123456789");
        if (n > 0 && d == n) {
            out[o++] = '*';
        } else {
            size_t c = n < len - 2 - o ? n : len - 2 - o;
            memcpy(out + o, p, c);
            o += c;
        }
        p += n;
        if (*p == '.' && o + 2 < len)
            out[o++] = *p++;
        else if (*p == '.')
            p++;
    }
    out[o] = '\0';
}

/* How many sites of either contract have pattern `pat`. */
static size_t sites_of_pattern(const weigh *w, const char *pat)
{
    size_t n = 0;
    const char *site;
    json_t *v;
    char p[256];
    json_object_foreach(ulp__mut(w->ga), site, v)
    {
        site_pattern(site, p, sizeof p);
        n += strcmp(p, pat) == 0;
    }
    json_object_foreach(ulp__mut(w->gb), site, v)
    {
        site_pattern(site, p, sizeof p);
        n += strcmp(p, pat) == 0 && !json_object_get(w->ga, site);
    }
    return n;
}

#define SITES_NAMED 6 /* names a text line gives before "and N more" */

/*
 * The sites of a finding in words: a pattern stands for its sites when the
 * finding holds every site of either contract it matches; the others are
 * named one by one, the first SITES_NAMED of them.
 */
static void sites_text(const weigh *w, const json_t *sites, char *out, size_t len)
{
    size_t i, k, o = 0, shown = 0, more = 0;
    json_t *s, *t;
    json_t *done = json_array(); /* patterns already written */
    out[0] = '\0';
    json_array_foreach(sites, i, s)
    {
        char pat[256];
        const char *item = json_string_value(s);
        site_pattern(item, pat, sizeof pat);
        size_t in_group = 0, seen = 0;
        json_array_foreach(done, k, t) seen |= strcmp(json_string_value(t), pat) == 0;
        if (seen)
            continue;
        json_array_foreach(sites, k, t)
        {
            char q[256];
            site_pattern(json_string_value(t), q, sizeof q);
            in_group += strcmp(q, pat) == 0;
        }
        if (strchr(pat, '*') && in_group > 1 && in_group == sites_of_pattern(w, pat)) {
            json_array_append_new(done, json_string(pat));
            item = json_string_value(json_array_get(done, json_array_size(done) - 1));
        } else if (shown >= SITES_NAMED) {
            more++;
            continue;
        } else {
            shown++;
        }
        if (o < len)
            o += (size_t)snprintf(out + o, len - o, "%s%s", o ? ", " : "", item);
    }
    if (more && o < len)
        snprintf(out + o, len - o, " and %zu more", more);
    json_decref(done);
}

/* One finding as a report line (without the rung). */
static char *finding_text(const weigh *w, const json_t *f, const char *la, const char *lb)
{
    const char *ta = json_string_value(json_object_get(f, "a"));
    const char *tb = json_string_value(json_object_get(f, "b"));
    const json_t *sites = json_object_get(f, "sites");
    char buf[2048];
    if (!sites) {
        snprintf(buf, sizeof buf, "%s differs: %s (%s) / %s (%s)",
                 json_string_value(json_object_get(f, "field")), ta, la, tb, lb);
        return strdup(buf);
    }
    const char *kind = json_string_value(json_object_get(f, "kind"));
    const char *tail = json_string_value(json_object_get(f, "tail"));
    size_t n = json_array_size(sites);
    int scheme = strstr(kind, "depends on M") != NULL;
    if (n == 1) {
        snprintf(buf, sizeof buf, "%s at gemm site %s: %s (%s)%s %s (%s)%s", kind,
                 json_string_value(json_array_get(sites, 0)), ta, la, scheme ? "," : " /", tb, lb,
                 tail);
    } else {
        char names[1024];
        sites_text(w, sites, names, sizeof names);
        snprintf(buf, sizeof buf, "%s at %zu gemm sites (%s): %s (%s)%s %s (%s)%s", kind, n, names,
                 ta, la, scheme ? "," : " /", tb, lb, tail);
    }
    return strdup(buf);
}

/* Compares the two contracts, into w->found. */
static void compare_all(const json_t *a, const json_t *b, weigh *w)
{
    for (size_t i = 0; i < ulp__n_cfields; i++) {
        const ulp__cfield *f = &ulp__cfields[i];
        if (f->rung == ULP__NO_RUNG)
            continue;
        char path[128], *ta = NULL, *tb = NULL;
        snprintf(path, sizeof path, "%s.%s", f->group, f->name);
        if (differ(json_object_get(json_object_get(a, f->group), f->name),
                   json_object_get(json_object_get(b, f->group), f->name), w, &ta, &tb))
            note_field(w, f->rung, path, ta ? ta : "?", tb ? tb : "?");
        free(ta);
        free(tb);
    }
    const char *site;
    json_t *sa;
    json_object_foreach(ulp__mut(w->ga), site, sa)
    {
        json_t *sb = json_object_get(w->gb, site);
        if (sb)
            compare_site(site, sa, sb, w);
        else
            w->unknown++;
    }
    json_object_foreach(ulp__mut(w->gb), site, sa) if (!json_object_get(w->ga, site)) w->unknown++;
}

/* Site names in natural order: a run of digits compares as its number. */
static int natural_cmp(const void *pa, const void *pb)
{
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            while (*a == '0' && a[1] >= '0' && a[1] <= '9')
                a++;
            while (*b == '0' && b[1] >= '0' && b[1] <= '9')
                b++;
            size_t na = strspn(a, "0123456789"), nb = strspn(b, "0123456789");
            if (na != nb)
                return na < nb ? -1 : 1;
            int c = strncmp(a, b, na);
            if (c)
                return c;
            a += na;
            b += na;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

/* Every finding's sites in natural order (model.layers.2 before .10). */
static void sort_sites(weigh *w)
{
    size_t i;
    json_t *f;
    json_array_foreach(w->found, i, f)
    {
        json_t *sites = json_object_get(f, "sites");
        size_t n = json_array_size(sites);
        if (n < 2)
            continue;
        const char **names = malloc(n * sizeof *names);
        if (!names)
            continue; /* left in the order found */
        for (size_t k = 0; k < n; k++)
            names[k] = json_string_value(json_array_get(sites, k));
        qsort(names, n, sizeof *names, natural_cmp);
        json_t *sorted = json_array();
        for (size_t k = 0; k < n; k++)
            json_array_append_new(sorted, json_string(names[k]));
        free(names);
        json_object_set_new(f, "sites", sorted);
    }
}

/* The level the pair can promise and the finding behind it (NULL: nothing differs). */
static int level_of(const weigh *w, const json_t **why)
{
    int rung = 8;
    size_t i;
    json_t *f;
    *why = NULL;
    json_array_foreach(w->found, i, f)
    {
        int r = (int)json_integer_value(json_object_get(f, "rung"));
        if (r < rung) {
            rung = r;
            *why = f;
        }
    }
    int level = rung > 7 ? 7 : rung - 1;
    return level < 0 ? -1 : level;
}

static const char *label_of(const json_t *root, const char *dflt)
{
    const char *l = json_string_value(json_object_get(root, "producer"));
    return l && *l ? l : dflt;
}

static ulp_status start(const ulp_contract *ca, const ulp_contract *cb, weigh *w, ulp_error *err)
{
    *w = (weigh){json_array(), json_object_get(ca->root, "gemm"), json_object_get(cb->root, "gemm"),
                 0, 0};
    if (!w->found)
        return ulp__error(err, ULP_ENOMEM, "contract compare: out of memory");
    compare_all(ca->root, cb->root, w);
    sort_sites(w);
    return ULP_OK;
}

ulp_status ulp_contract_compare(const ulp_contract *ca, const ulp_contract *cb, FILE *out,
                                int *level, ulp_error *err)
{
    const char *la = label_of(ca->root, "A"), *lb = label_of(cb->root, "B");
    weigh w;
    ulp_status st = start(ca, cb, &w, err);
    if (st != ULP_OK)
        return st;
    fprintf(out, "compare %s vs %s\n", la, lb);
    fprintf(out, "  numerical_policy: %s (%s)\n                    %s (%s)%s\n", ca->digest, la,
            cb->digest, lb, strcmp(ca->digest, cb->digest) == 0 ? ": the same" : ": differ");
    fprintf(out, "fields that differ\n");
    size_t i;
    json_t *f;
    json_array_foreach(w.found, i, f)
    {
        char *t = finding_text(&w, f, la, lb);
        fprintf(out, "  rung %-2d %s\n", (int)json_integer_value(json_object_get(f, "rung")),
                t ? t : "?");
        free(t);
    }
    if (w.differ == 0)
        fprintf(out, "  (none)\n");
    const json_t *why;
    *level = level_of(&w, &why);
    char *reason = why ? finding_text(&w, why, la, lb) : NULL;
    if (!why)
        fprintf(out, "level: 7 (%s): no bit-relevant field differs", ulp_diff_ladder_name(7));
    else if (*level < 0)
        fprintf(out, "level: none: %s", reason ? reason : "?");
    else
        fprintf(out, "level: at most %d (%s): %s", *level, ulp_diff_ladder_name(*level),
                reason ? reason : "?");
    free(reason);
    if (w.unknown)
        fprintf(out,
                "\n  (as far as the fields show: %zu field%s or site%s known on one side "
                "only)",
                w.unknown, w.unknown == 1 ? "" : "s", w.unknown == 1 ? "" : "s");
    fprintf(out, "\n");
    json_decref(w.found);
    return ULP_OK;
}

ulp_status ulp_contract_compare_json(const ulp_contract *ca, const ulp_contract *cb, FILE *out,
                                     int *level, ulp_error *err)
{
    const char *la = label_of(ca->root, "A"), *lb = label_of(cb->root, "B");
    weigh w;
    ulp_status st = start(ca, cb, &w, err);
    if (st != ULP_OK)
        return st;
    const json_t *why;
    *level = level_of(&w, &why);
    json_t *diffs = json_array();
    size_t i;
    json_t *f;
    json_array_foreach(w.found, i, f)
    {
        char *t = finding_text(&w, f, la, lb);
        json_t *d = json_deep_copy(f);
        json_object_del(d, "tail");
        json_object_set_new(d, "text", json_string(t ? t : "?"));
        if (json_object_get(d, "sites"))
            json_object_set_new(
                d, "count", json_integer((json_int_t)json_array_size(json_object_get(d, "sites"))));
        json_array_append_new(diffs, d);
        free(t);
    }
    char *reason = why ? finding_text(&w, why, la, lb) : NULL;
    json_t *root = json_pack(
        "{s:s, s:{s:s, s:s}, s:{s:s, s:s}, s:b, s:i, s:s?, s:s?, s:o, s:I, s:I}", "format",
        "ulpprof-contract-compare", "a", "producer", la, "numerical_policy", ca->digest, "b",
        "producer", lb, "numerical_policy", cb->digest, "same_policy",
        strcmp(ca->digest, cb->digest) == 0, "level", *level, "level_name",
        *level >= 0 ? ulp_diff_ladder_name(*level) : NULL, "reason", reason, "differences", diffs,
        "differ", (json_int_t)w.differ, "one_side_only", (json_int_t)w.unknown);
    free(reason);
    json_decref(w.found);
    if (!root)
        return ulp__error(err, ULP_ENOMEM, "contract compare: out of memory");
    int rc = json_dumpf(root, out, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(root);
    fputc('\n', out);
    if (rc != 0)
        return ulp__error(err, ULP_EIO, "contract compare: cannot write the JSON");
    return ULP_OK;
}

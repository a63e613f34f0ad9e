/*
 * Pairing by site across layouts (docs/sites.md "Layouts"): a site's
 * tensor that one side captured itself (q@0) and the other only inside a
 * fused capture (qkv@0) or as column-parallel shards (q@0#0, q@0#1) is
 * made on that side out of runs of those captures (layouts.c), and
 * compared run by run.  Every shape is checked against the layout first:
 * one that does not fit is an error naming the file and capture, never a
 * comparison of the wrong elements.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_layouts.h"

static const size_t *find_key(const ulp__names *names, const char *site, int32_t layer,
                              int64_t rank, size_t *count)
{
    char key[96];
    if (rank >= 0)
        snprintf(key, sizeof key, "\x01%s@%d#%lld", site, (int)layer, (long long)rank);
    else
        snprintf(key, sizeof key, "\x01%s@%d", site, (int)layer);
    return ulp__names_find(names, key, count);
}

size_t ulp__layout_rank(const ulp_snapshot *s, const ulp__names *names, const char *key,
                        const ulp_capture_info *c)
{
    size_t n = 0, lo = 0;
    const size_t *idx = ulp__names_find(names, key, &n);
    for (size_t hi = n; lo < hi;) {
        size_t mid = lo + (hi - lo) / 2;
        if (ulp_snapshot_capture(s, idx[mid])->seq < c->seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int ulp__layout_consumed(const ulp__names *other, const ulp__site_keys *sk, int side, size_t i)
{
    const ulp__layout *l = &sk->layout[side][i];
    const char *site = sk->site[side][i];
    int32_t layer = sk->layer[side][i];
    size_t n = 0;
    if (site == NULL || l->kind == ULP__LAYOUT_NONE)
        return 0;
    if (l->kind == ULP__LAYOUT_SHARD)
        return find_key(other, site, layer, -1, &n) != NULL && n > 0;
    const char *parts[] = {"q", "k", "v", "gate", "up"};
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        const char *f = ulp__layout_fused_site(parts[p]);
        if (f != NULL && strcmp(f, site) == 0 && find_key(other, parts[p], layer, -1, &n) != NULL &&
            n > 0)
            return 1;
    }
    return 0;
}

static int shape_str(const ulp_capture_info *c, char *buf, size_t n)
{
    int w = snprintf(buf, n, "[");
    for (int k = 0; k < c->ndim && w < (int)n; k++)
        w += snprintf(buf + w, n - (size_t)w, "%s%lld", k ? ", " : "", (long long)c->shape[k]);
    if (w < (int)n)
        w += snprintf(buf + w, n - (size_t)w, "]");
    return w;
}

static ulp_status misfit(const ulp_snapshot *s, const ulp_capture_info *c, const char *site,
                         const ulp_capture_info *part, const char *why, ulp_error *err)
{
    char sf[128], sp[128];
    shape_str(c, sf, sizeof sf);
    shape_str(part, sp, sizeof sp);
    return ulp__error(err, ULP_EINVAL, "'%s': capture '%s' %s cannot hold %s %s: %s",
                      ulp_snapshot_path(s), c->name ? c->name : "", sf, site, sp, why);
}

/* The view from column shards, key site@layer#r; 0 when rank 0 has no j-th capture. */
static int shards_view(const ulp_snapshot *s, const ulp__names *names, const ulp__site_keys *sk,
                       int side, const char *site, int32_t layer, size_t j,
                       const ulp_capture_info *part, ulp__lview *v, ulp_error *err)
{
    size_t n = 0;
    const size_t *idx = find_key(names, site, layer, 0, &n);
    if (idx == NULL || j >= n)
        return 0;
    size_t nranks = (size_t)sk->layout[side][idx[j]].nranks;
    size_t *caps = calloc(nranks, sizeof *caps);
    const int64_t **shapes = calloc(nranks, sizeof *shapes);
    int rc = 1;
    if (caps == NULL || shapes == NULL) {
        rc = -2;
        goto cleanup;
    }
    for (size_t r = 0; r < nranks; r++) {
        size_t m = 0;
        const size_t *ir = find_key(names, site, layer, (int64_t)r, &m);
        if (ir == NULL || j >= m) {
            const ulp_capture_info *c0 = ulp_snapshot_capture(s, idx[j]);
            ulp__error(
                err, ULP_EINVAL,
                "'%s': capture '%s' is shard 0 of %zu of %s@%d, but shard %zu is not captured",
                ulp_snapshot_path(s), c0->name ? c0->name : "", nranks, site, (int)layer, r);
            rc = -1;
            goto cleanup;
        }
        const ulp_capture_info *c = ulp_snapshot_capture(s, ir[j]);
        caps[r] = ir[j];
        shapes[r] = c->shape;
        if (c->ndim != part->ndim || c->dtype != ulp_snapshot_capture(s, caps[0])->dtype ||
            (size_t)sk->layout[side][ir[j]].nranks != nranks) {
            misfit(s, c, site, part, "the shards differ in rank, dtype or count", err);
            rc = -1;
            goto cleanup;
        }
    }
    char why[200];
    int k = ulp__layout_concat(part->ndim, part->shape, nranks, caps, shapes, &v->runs, why,
                               sizeof why);
    if (k != 0) {
        rc = k;
        if (k == -1)
            misfit(s, ulp_snapshot_capture(s, caps[0]), site, part, why, err);
        goto cleanup;
    }
    v->cap = caps[0];
    ulp__layout_describe(&sk->layout[side][caps[0]], site, nranks, v->desc, sizeof v->desc);
cleanup:
    free(caps);
    free(shapes);
    return rc;
}

int ulp__layout_view(const ulp_snapshot *s, const ulp__names *names, const ulp__site_keys *sk,
                     int side, const char *site, int32_t layer, size_t j,
                     const ulp_capture_info *part, ulp__lview *v, ulp_error *err)
{
    v->runs.n = 0;
    const char *fused = ulp__layout_fused_site(site);
    size_t n = 0;
    const size_t *idx = fused != NULL ? find_key(names, fused, layer, -1, &n) : NULL;
    if (idx == NULL || j >= n)
        return shards_view(s, names, sk, side, site, layer, j, part, v, err);
    size_t cap = idx[j];
    const ulp_capture_info *c = ulp_snapshot_capture(s, cap);
    ulp__layout l = sk->layout[side][cap];
    if (l.kind == ULP__LAYOUT_NONE) /* a map rule without a layout: the plain blocks */
        l.kind = strcmp(fused, "qkv") == 0 ? ULP__LAYOUT_QKV : ULP__LAYOUT_GATE_UP;
    if (l.kind == ULP__LAYOUT_SHARD) {
        misfit(s, c, site, part,
               "a shard of a fused projection is not split (compare whole shards)", err);
        return -1;
    }
    if (l.kind == ULP__LAYOUT_QKV_GROUPS && l.d == 0) {
        misfit(s, c, site, part,
               "its q/k/v are interleaved per KV group, and the head size is not in the names: "
               "declare it in a map file (PATTERN qkv [qkv-groups D=N])",
               err);
        return -1;
    }
    if (c->ndim != part->ndim) {
        misfit(s, c, site, part, "another number of axes", err);
        return -1;
    }
    char why[200];
    int k =
        ulp__layout_split(&l, site, c->ndim, part->shape, c->shape, cap, &v->runs, why, sizeof why);
    if (k == -1)
        misfit(s, c, site, part, why, err);
    if (k != 0)
        return k;
    v->cap = cap;
    ulp__layout_describe(&l, site, 0, v->desc, sizeof v->desc);
    return 1;
}

int ulp__layout_same(const ulp__layout *x, const ulp__layout *y, const char *site)
{
    ulp__layout a = *x, b = *y;
    const char *f = site;
    /* No layout declared on a fused site is its plain blocks. */
    if (a.kind == ULP__LAYOUT_NONE && strcmp(f, "qkv") == 0)
        a.kind = ULP__LAYOUT_QKV;
    if (b.kind == ULP__LAYOUT_NONE && strcmp(f, "qkv") == 0)
        b.kind = ULP__LAYOUT_QKV;
    if (a.kind == ULP__LAYOUT_NONE && strcmp(f, "gate_up") == 0)
        a.kind = ULP__LAYOUT_GATE_UP;
    if (b.kind == ULP__LAYOUT_NONE && strcmp(f, "gate_up") == 0)
        b.kind = ULP__LAYOUT_GATE_UP;
    if (a.kind != b.kind)
        return 0;
    if (a.kind == ULP__LAYOUT_QKV_GROUPS)
        return a.d == b.d && a.d != 0;
    return 1;
}

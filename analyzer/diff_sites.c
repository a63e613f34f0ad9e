/*
 * Pairing by site (docs/sites.md): each capture's pairing key is its
 * (site, layer) where a rule of the site map knows its name, else its name;
 * diff_pair.c pairs the keys as it pairs names.  ULP_DIFF_BY_AUTO pairs by
 * site only when the snapshots share no capture name but do share a site.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"
#include "format/snapshot_summary.h"
#include "sites_priv.h"
#include "ulpprof/sites.h"

/* A site's key starts with a byte no capture name holds. */
#define SITE_MARK '\x01'

static char *make_key(const char *site, int32_t layer, const ulp__layout *lay, const char *name)
{
    size_t n = (site ? strlen(site) + 40 : 0) + strlen(name) + 3;
    char *k = malloc(n);
    if (k == NULL)
        return NULL;
    if (site != NULL && lay->kind == ULP__LAYOUT_SHARD)
        snprintf(k, n, "%c%s@%d#%lld", SITE_MARK, site, (int)layer, (long long)lay->rank);
    else if (site != NULL)
        snprintf(k, n, "%c%s@%d", SITE_MARK, site, (int)layer);
    else
        snprintf(k, n, "=%s", name);
    return k;
}

/*
 * `other` not NULL (auto, the snapshots sharing names): a capture whose
 * name the other snapshot has pairs by that name, as by name alone; the
 * others by site.
 */
static ulp_status side_keys(ulp__site_keys *sk, int side, const ulp_snapshot *s,
                            const ulp_snapshot *other, ulp_error *err)
{
    size_t n = ulp_snapshot_capture_count(s);
    sk->n[side] = n;
    sk->key[side] = calloc(n + 1, sizeof *sk->key[side]);
    sk->site[side] = calloc(n + 1, sizeof *sk->site[side]);
    sk->layer[side] = calloc(n + 1, sizeof *sk->layer[side]);
    sk->layout[side] = calloc(n + 1, sizeof *sk->layout[side]);
    if (sk->key[side] == NULL || sk->site[side] == NULL || sk->layer[side] == NULL ||
        sk->layout[side] == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (c == NULL)
            return ulp__error(err, ULP_EIO, "'%s': a capture cannot be described again",
                              ulp_snapshot_path(s));
        int32_t layer = -1;
        ulp__layout *lay = &sk->layout[side][i];
        const char *site = other != NULL && ulp_snapshot_find(other, c->name, 0) >= 0
                               ? NULL
                               : ulp__site_lookup_layout(sk->map, c->name, c->layer, &layer, lay);
        /* A shard of a file's rank is, within one snapshot, the capture itself. */
        if (lay->kind == ULP__LAYOUT_SHARD_FILE)
            lay->kind = ULP__LAYOUT_NONE;
        sk->site[side][i] = site;
        sk->layer[side][i] = site != NULL ? layer : c->layer;
        if ((sk->key[side][i] = make_key(site, layer, lay, c->name)) == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    return ULP_OK;
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static int has_key(char **sorted, size_t n, const char *key)
{
    return bsearch(&key, sorted, n, sizeof *sorted, cmp_str) != NULL;
}

/* Is a part's (q@3) fused site (qkv@3) among the sorted keys, or a fused
 * site's part? */
static int share_fused(char **sorted, size_t n, const char *site, int32_t layer)
{
    static const char *const parts[] = {"q", "k", "v", "gate", "up"};
    char key[96];
    const char *f = ulp__layout_fused_site(site);
    if (f != NULL) {
        snprintf(key, sizeof key, "%c%s@%d", SITE_MARK, f, (int)layer);
        return has_key(sorted, n, key);
    }
    for (size_t p = 0; p < sizeof parts / sizeof parts[0]; p++) {
        if (strcmp(ulp__layout_fused_site(parts[p]), site) != 0)
            continue;
        snprintf(key, sizeof key, "%c%s@%d", SITE_MARK, parts[p], (int)layer);
        if (has_key(sorted, n, key))
            return 1;
    }
    return 0;
}

/* Does some capture of A have a site that a capture of B has too (or the
 * fused site of it, or a part of it)? -1: no memory. */
static int share_site(const ulp__site_keys *sk)
{
    size_t nb = sk->n[1];
    char **sorted = malloc((nb + 1) * sizeof *sorted);
    if (sorted == NULL)
        return -1;
    memcpy(sorted, sk->key[1], nb * sizeof *sorted);
    qsort(sorted, nb, sizeof *sorted, cmp_str);
    int found = 0;
    for (size_t i = 0; i < sk->n[0] && !found; i++)
        found = sk->key[0][i][0] == SITE_MARK &&
                (has_key(sorted, nb, sk->key[0][i]) ||
                 share_fused(sorted, nb, sk->site[0][i], sk->layer[0][i]));
    free(sorted);
    return found;
}

/* Does some capture name of A occur in B? */
static int share_name(const ulp_snapshot *a, const ulp_snapshot *b)
{
    size_t na = ulp_snapshot_capture_count(a);
    /* The common case first, from the first captures alone: a table made in
     * pages then keeps only the pages a diff reads anyway. */
    const ulp_capture_info *a0 = na > 0 ? ulp_snapshot_capture(a, 0) : NULL;
    const ulp_capture_info *b0 =
        ulp_snapshot_capture_count(b) > 0 ? ulp_snapshot_capture(b, 0) : NULL;
    if (a0 != NULL && b0 != NULL && strcmp(a0->name, b0->name) == 0)
        return 1;
    for (size_t i = 0; i < na; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(a, i);
        if (c != NULL && ulp_snapshot_find(b, c->name, 0) >= 0)
            return 1;
    }
    return 0;
}

/* 1 when both snapshots have the same capture names (from their summaries,
 * without a walk of the captures): every capture can pair by name. */
static int same_names(const ulp_snapshot *a, const ulp_snapshot *b)
{
    const ulp__snapshot_summary *x = ulp__snapshot_summary_get(a);
    const ulp__snapshot_summary *y = ulp__snapshot_summary_get(b);
    if (x == NULL || y == NULL || x->nnames != y->nnames)
        return 0;
    for (size_t i = 0; i < x->nnames; i++)
        if (strcmp(x->names[i].name, y->names[i].name) != 0)
            return 0;
    return 1;
}

/*
 * Whether some name of x that may pair by site is one a rule of the map
 * knows: a name y lacks, or one whose occurrence 0 y may lack; `exclude`:
 * the snapshots are known to share a name, so that a name y has from
 * occurrence 0 on pairs by name (side_keys()).  *excluded: such a name was
 * seen (then they do share one).  From the summaries: whether a rule knows
 * a name does not depend on the capture's layer.
 */
static int site_candidate(const ulp_site_map *map, const ulp__snapshot_summary *x,
                          const ulp__snapshot_summary *y, int exclude, int *excluded)
{
    for (size_t i = 0; i < x->nnames; i++) {
        const ulp__name_summary *o = ulp__snapshot_summary_find(y, x->names[i].name);
        if (exclude && o != NULL && o->count > 0 && o->contiguous) {
            *excluded = 1;
            continue;
        }
        int32_t layer;
        ulp__layout lay;
        if (ulp__site_lookup_layout(map, x->names[i].name, -1, &layer, &lay) != NULL)
            return 1;
    }
    return 0;
}

/*
 * 0 when the name summaries show that no site can be shared (on one side
 * no name that may pair by site is known to the map): auto pairs by name
 * without the walk of every capture of both, which would make every page
 * of a table made in pages.  1: the captures must be walked.
 */
static int may_share_site(const ulp_site_map *map, const ulp_snapshot *a, const ulp_snapshot *b)
{
    const ulp__snapshot_summary *x = ulp__snapshot_summary_get(a);
    const ulp__snapshot_summary *y = ulp__snapshot_summary_get(b);
    if (x == NULL || y == NULL)
        return 1;
    int mixed = 0, unused = 0;
    if (!site_candidate(map, x, y, 1, &mixed))
        return 0;
    return site_candidate(map, y, x, mixed, &unused);
}

ulp_status ulp__site_keys_new(const ulp_snapshot *a, const ulp_snapshot *b,
                              const ulp_diff_options *o, ulp__site_keys **out, ulp_error *err)
{
    *out = NULL;
    if (o->by == ULP_DIFF_BY_NAME)
        return ULP_OK;
    if (o->by != ULP_DIFF_BY_AUTO && o->by != ULP_DIFF_BY_SITE)
        return ulp__error(err, ULP_EINVAL, "unknown pairing %d", o->by);
    ulp_site_map *map = NULL;
    ulp_status st = ulp_site_map_open(o->site_map, &map, err);
    if (st != ULP_OK)
        return st;
    /* Auto with names in common: the names pair, and the captures no name
     * pairs pair by site when some site is shared (HF's q_proj against
     * vLLM's qkv_proj); else by name alone, as before. */
    if (o->by == ULP_DIFF_BY_AUTO && (same_names(a, b) || !may_share_site(map, a, b))) {
        ulp_site_map_free(map);
        return ULP_OK;
    }
    int mixed = o->by == ULP_DIFF_BY_AUTO && share_name(a, b);
    ulp__site_keys *sk = calloc(1, sizeof *sk);
    if (sk == NULL) {
        ulp_site_map_free(map);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    sk->map = map;
    if ((st = side_keys(sk, 0, a, mixed ? b : NULL, err)) != ULP_OK ||
        (st = side_keys(sk, 1, b, mixed ? a : NULL, err)) != ULP_OK) {
        ulp__site_keys_free(sk);
        return st;
    }
    if (o->by == ULP_DIFF_BY_AUTO) {
        int shared = share_site(sk);
        if (shared < 0) {
            ulp__site_keys_free(sk);
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        if (!shared) { /* by name, as before: "the snapshots share no capture" */
            ulp__site_keys_free(sk);
            return ULP_OK;
        }
    }
    *out = sk;
    return ULP_OK;
}

void ulp__site_keys_free(ulp__site_keys *sk)
{
    if (sk == NULL)
        return;
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; sk->key[s] != NULL && i < sk->n[s]; i++)
            free(sk->key[s][i]);
        free(sk->key[s]);
        free(sk->site[s]);
        free(sk->layer[s]);
        free(sk->layout[s]);
    }
    ulp_site_map_free(sk->map);
    free(sk);
}

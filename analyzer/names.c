/*
 * A snapshot's captures by name (or by a key per capture, as the site
 * pairing gives): the capture indices sorted by (name, seq), each name's
 * run found by bisection, and whether every capture of a run carries
 * positions.  The pairing (diff_pair.c), the aligned rows (align.c) and
 * the parted streams (streams.c) look names up here; this file calls none
 * of them.
 */
#include <stdlib.h>
#include <string.h>

#include "diff_priv.h"
#include "format/name_summary.h"
#include "format/snapshot_read_priv.h"

typedef struct name_ent {
    const char *name;
    int64_t seq;
    size_t idx;
} name_ent;

struct ulp__names {
    const ulp_snapshot *s;
    const char *const *keys; /* [captures] the key of each capture; NULL: names */
    size_t *idx;             /* capture indices sorted by (name, seq)              */
    signed char *state;      /* [n]: ulp__names_positions of the name of idx[i]    */
    size_t n;
};

/* What groups capture i: its key, or its name. */
static const char *key_of(const ulp__names *n, size_t i)
{
    return n->keys != NULL ? n->keys[i] : ulp_snapshot_capture(n->s, i)->name;
}

/* The positions state of every run of one name, computed once: asked per
 * capture, counting the run each time made pairing O(captures x occurrences). */
static void names_states(ulp__names *n)
{
    for (size_t lo = 0, hi; lo < n->n; lo = hi) {
        const char *name = key_of(n, n->idx[lo]);
        int st = 0;
        uint64_t form = 0;
        for (hi = lo; hi < n->n; hi++) {
            const ulp_capture_info *c = ulp_snapshot_capture(n->s, n->idx[hi]);
            if (hi > lo && strcmp(key_of(n, n->idx[hi]), name) != 0)
                break;
            ulp__positions_add(&st, &form, hi == lo, c);
        }
        memset(n->state + lo, (signed char)st, hi - lo);
    }
}

static int by_name_seq(const void *pa, const void *pb)
{
    const name_ent *a = pa, *b = pb;
    int c = a->name == b->name ? 0 : strcmp(a->name, b->name);
    if (c != 0)
        return c;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

ulp_status ulp__names_build(const ulp_snapshot *s, ulp__names **out)
{
    return ulp__names_build_keys(s, NULL, out);
}

ulp_status ulp__names_build_keys(const ulp_snapshot *s, const char *const *keys, ulp__names **out)
{
    size_t count = ulp_snapshot_capture_count(s);
    ulp__names *n = calloc(1, sizeof *n);
    name_ent *e = malloc((count ? count : 1) * sizeof *e);
    if (n == NULL || e == NULL || (n->idx = malloc((count ? count : 1) * sizeof *n->idx)) == NULL ||
        (n->state = malloc(count ? count : 1)) == NULL) {
        if (n != NULL)
            free(n->idx);
        free(n);
        free(e);
        return ULP_ENOMEM;
    }
    /* The snapshot's (name, occurrence) order is the (name, seq) order
     * wherever occurrences rise with seq, as every writer numbers them. */
    const size_t *by_name = keys != NULL ? NULL : ulp__snapshot_by_name(s);
    if (by_name == NULL && keys == NULL) { /* a table in pages whose file changed since the open */
        free(n->idx);
        free(n);
        free(e);
        return ULP_EIO;
    }
    int same = 1;
    for (size_t i = 0; i < count; i++) {
        size_t k = by_name != NULL ? by_name[i] : i;
        const ulp_capture_info *c = ulp_snapshot_capture(s, k);
        e[i].name = keys != NULL ? keys[k] : c->name;
        e[i].seq = c->seq;
        e[i].idx = k;
        if (i > 0 && by_name_seq(&e[i - 1], &e[i]) > 0)
            same = 0;
    }
    if (!same)
        qsort(e, count, sizeof *e, by_name_seq);
    for (size_t i = 0; i < count; i++)
        n->idx[i] = e[i].idx;
    free(e);
    n->s = s;
    n->keys = keys;
    n->n = count;
    names_states(n);
    *out = n;
    return ULP_OK;
}

void ulp__names_free(ulp__names *n)
{
    if (n == NULL)
        return;
    free(n->idx);
    free(n->state);
    free(n);
}

const size_t *ulp__names_find(const ulp__names *n, const char *name, size_t *count)
{
    size_t lo = 0, hi = n->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(key_of(n, n->idx[mid]), name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* The run's end, by bisection too: a name may have 100,000 occurrences. */
    size_t end = n->n;
    for (size_t l = lo; l < end;) {
        size_t mid = l + (end - l) / 2;
        if (strcmp(key_of(n, n->idx[mid]), name) == 0)
            l = mid + 1;
        else
            end = mid;
    }
    *count = end - lo;
    return n->idx + lo;
}

int ulp__names_positions(const ulp__names *n, const size_t *idx, size_t count)
{
    return count == 0 ? 0 : n->state[idx - n->idx];
}

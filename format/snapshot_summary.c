/*
 * The snapshot summary (snapshot_summary.h) of a table read whole: one
 * walk over its captures in seq order, on first use.  A table made in
 * pages has its summary from the open, which saw every record once.
 */
#include <stdlib.h>
#include <string.h>

#include "common/strmap.h"
#include "snapshot_priv.h"
#include "snapshot_read_priv.h"
#include "snapshot_summary.h"

/* A summary being built: its names, growing. */
typedef struct building {
    ulp__snapshot_summary *sum;
    ulp__name_summary *v;
    size_t cap;
    ulp__strmap ids; /* name -> its index in v */
    /* The last name pointers seen and their indices: a table's captures
     * share one copy of each name, so most lookups skip the hash (20,000
     * of them were 4% of a diff of 10,000 captures). */
    struct {
        const char *ptr;
        size_t id;
    } seen[256];
} building;

/* Adds capture c (index i) to the summary being built; 0, or -1 out of memory. */
static int add_capture(building *bd, const ulp_snapshot *s, size_t i, const ulp_capture_info *c)
{
    ulp__snapshot_summary *sum = bd->sum;
    int inserted = 0;
    size_t slot = ((uintptr_t)c->name >> 4) % (sizeof bd->seen / sizeof bd->seen[0]);
    int64_t known = (int64_t)bd->seen[slot].id, *id = &known;
    if (bd->seen[slot].ptr != c->name) {
        id = ulp__strmap_upsert(&bd->ids, c->name, (int64_t)sum->nnames, &inserted);
        if (id == NULL)
            return -1;
        bd->seen[slot].ptr = c->name;
        bd->seen[slot].id = (size_t)*id;
    }
    if (inserted) {
        if (sum->nnames == bd->cap) {
            size_t grown = bd->cap ? 2 * bd->cap : 16;
            ulp__name_summary *v = realloc(bd->v, grown * sizeof *v);
            if (v == NULL)
                return -1;
            bd->v = v;
            bd->cap = grown;
        }
        bd->v[sum->nnames++] = (ulp__name_summary){.name = c->name};
    }
    ulp__summary_add(sum, &bd->v[*id], c, i, c->elements * ulp_dtype_size(c->dtype),
                     ulp__snapshot_mapped(s, i, 0) != NULL);
    return 0;
}

/* The summary of s by walking its captures; NULL when out of memory. */
static ulp__snapshot_summary *walk(const ulp_snapshot *s)
{
    ulp__snapshot_summary sum = {0};
    size_t n = s->ncaps;
    sum.largest_mapped = n;
    building bd = {.sum = &sum};
    ulp__strmap_init(&bd.ids);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = add_capture(&bd, s, i, ulp__snap_cap(s, i, NULL));
    ulp__strmap_release(&bd.ids);
    ulp__snapshot_summary *out = rc == 0 ? ulp__snapshot_summary_new(&sum, bd.v) : NULL;
    free(bd.v);
    return out;
}

const ulp__snapshot_summary *ulp__snapshot_summary_get(const ulp_snapshot *s)
{
    /* The summary is the snapshot's cache, not its state: made here once. */
    const ulp__snapshot_summary *lazy = ulp__snapshot_summary_lazy(s);
    if (lazy != NULL)
        return lazy; /* made by the open's pass over the records */
    ulp_snapshot *w = (ulp_snapshot *)(uintptr_t)s;
    ulp__snapshot_summary *sum = __atomic_load_n(&w->summary, __ATOMIC_ACQUIRE);
    if (sum != NULL)
        return sum;
    ulp__snapshot_summary *mine = walk(s), *none = NULL;
    if (mine == NULL)
        return NULL;
    /* Two threads may walk at once: the first to finish is kept. */
    if (__atomic_compare_exchange_n(&w->summary, &none, mine, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return mine;
    free(mine);
    return none;
}

int ulp__snapshot_trim_allowed(const ulp_snapshot *s)
{
    return s != NULL && s->stream;
}

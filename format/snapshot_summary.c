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

static int name_cmp(const void *pa, const void *pb)
{
    const ulp__name_summary *a = pa, *b = pb;
    return strcmp(a->name, b->name);
}

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

void ulp__summary_add(ulp__snapshot_summary *sum, ulp__name_summary *ns, const ulp_capture_info *c,
                      size_t i, uint64_t bytes, int mapped)
{
    int has = c->row_rank > 0;
    ns->contiguous = (ns->count == 0 || ns->contiguous) && c->occurrence == (int64_t)ns->count;
    ns->positions = ns->count == 0 || ns->positions == has ? has : -1;
    ns->count++;
    sum->any_rows |= has;
    sum->data_bytes += bytes;
    if (mapped && bytes > sum->largest_bytes) {
        sum->largest_bytes = bytes;
        sum->largest_mapped = i;
    }
}

/* The summary of s by walking its captures; NULL when out of memory. */
static ulp__snapshot_summary *walk(const ulp_snapshot *s)
{
    ulp__snapshot_summary sum = {0};
    size_t n = ulp_snapshot_capture_count(s);
    sum.largest_mapped = n;
    building bd = {.sum = &sum};
    ulp__strmap_init(&bd.ids);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = add_capture(&bd, s, i, ulp_snapshot_capture(s, i));
    ulp__strmap_release(&bd.ids);
    ulp__snapshot_summary *out = rc == 0 ? ulp__snapshot_summary_new(&sum, bd.v) : NULL;
    free(bd.v);
    return out;
}

ulp__snapshot_summary *ulp__snapshot_summary_new(const ulp__snapshot_summary *sum,
                                                 ulp__name_summary *names)
{
    ulp__snapshot_summary *out = malloc(sizeof *out + sum->nnames * sizeof *names);
    if (out == NULL)
        return NULL;
    ulp__name_summary *v = (ulp__name_summary *)(out + 1);
    if (sum->nnames > 0) {
        qsort(names, sum->nnames, sizeof *names, name_cmp);
        memcpy(v, names, sum->nnames * sizeof *names);
    }
    *out = *sum;
    out->names = v;
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

const ulp__name_summary *ulp__snapshot_summary_find(const ulp__snapshot_summary *sum,
                                                    const char *name)
{
    ulp__name_summary key = {name, 0, 0, 0};
    return bsearch(&key, sum->names, sum->nnames, sizeof key, name_cmp);
}

int ulp__snapshot_trim_allowed(const ulp_snapshot *s)
{
    return s != NULL && s->stream;
}

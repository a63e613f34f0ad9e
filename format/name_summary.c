/*
 * The per-name summary of a snapshot's captures (name_summary.h): the one
 * rule that adds a capture to it, and its sorted form.  Calls nothing of
 * the reader: the walk of a table read whole (snapshot_summary.c) and the
 * open's pass over a table made in pages (snapshot_pages.c) both use it.
 */
#include <stdlib.h>
#include <string.h>

#include "name_summary.h"

static int name_cmp(const void *pa, const void *pb)
{
    const ulp__name_summary *a = pa, *b = pb;
    return strcmp(a->name, b->name);
}

uint64_t ulp__row_form(const ulp_capture_info *c)
{
    /* FNV-1a over the dtype, the count of row axes and their extents. */
    uint64_t h = 1469598103934665603ull;
    int from = c->row_rank > 0 && c->row_rank <= c->ndim ? c->row_rank : 0;
    uint64_t words[2] = {(uint64_t)c->dtype, (uint64_t)(c->ndim - from)};
    for (int k = 0; k < 2 + c->ndim - from; k++) {
        uint64_t w = k < 2 ? words[k] : (uint64_t)c->shape[from + k - 2];
        for (int b = 0; b < 8; b++) {
            h ^= (w >> (8 * b)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    return h;
}

void ulp__positions_add(int *state, uint64_t *form, int first, const ulp_capture_info *c)
{
    int has = c->row_rank > 0;
    uint64_t f = has ? ulp__row_form(c) : 0;
    if (first) {
        *state = has;
        *form = f;
    } else if (*state == 0 || *state == -1 || !has) {
        *state = *state == 0 && !has ? 0 : -1;
    } else if (f != *form) {
        *state = -2; /* every one has positions so far, in several forms */
    }
}

void ulp__summary_add(ulp__snapshot_summary *sum, ulp__name_summary *ns, const ulp_capture_info *c,
                      size_t i, uint64_t bytes, int mapped)
{
    int has = c->row_rank > 0;
    ns->contiguous = (ns->count == 0 || ns->contiguous) && c->occurrence == (int64_t)ns->count;
    ulp__positions_add(&ns->positions, &ns->form, ns->count == 0, c);
    ns->count++;
    sum->any_rows |= has;
    sum->data_bytes += bytes;
    if (mapped && bytes > sum->largest_bytes) {
        sum->largest_bytes = bytes;
        sum->largest_mapped = i;
    }
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

const ulp__name_summary *ulp__snapshot_summary_find(const ulp__snapshot_summary *sum,
                                                    const char *name)
{
    ulp__name_summary key = {name, 0, 0, 0, 0};
    return bsearch(&key, sum->names, sum->nnames, sizeof key, name_cmp);
}

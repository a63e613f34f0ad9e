/*
 * The prompts of one run's requests (gen_prompts.h).  The fed token ids
 * are the captures of one name that all have role `input`, an integer
 * dtype, `positions` and one element per row (FORMAT.md "Parted token
 * streams"; the PyTorch helper's `input_ids`); when several names qualify,
 * the one written first.  A position fed twice (a recomputed prefix) is
 * taken from the first capture that feeds it.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gen_prompts.h"
#include "ulpprof/dtype.h"
#include "ulpprof/format.h"

static int ids_capture(const ulp_capture_info *c)
{
    const ulp_dtype_info *d = ulp_dtype_get(c->dtype);
    if (d == NULL || d->is_float || c->positions == NULL || c->row_rank < 1 || c->role == NULL ||
        strcmp(c->role, ulp_role_name(ULP_ROLE_INPUT)) != 0)
        return 0;
    for (int k = c->row_rank; k < c->ndim; k++)
        if (c->shape[k] != 1)
            return 0;
    return 1;
}

int ulp__prompts_named(const ulp_snapshot *s, const char *name)
{
    size_t n = ulp_snapshot_capture_count(s), seen = 0;
    for (size_t j = 0; j < n; j++) {
        const ulp_capture_info *d = ulp_snapshot_capture(s, j);
        if (strcmp(d->name, name) != 0)
            continue;
        if (!ids_capture(d))
            return 0;
        seen++;
    }
    return seen > 0;
}

/* The first-written name whose every capture holds fed token ids, or NULL. */
const char *ulp__prompts_name(const ulp_snapshot *s)
{
    size_t n = ulp_snapshot_capture_count(s);
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (ids_capture(c) && ulp__prompts_named(s, c->name))
            return c->name;
    }
    return NULL;
}

static int fed_cmp(const void *pa, const void *pb)
{
    const ulp__fed *a = pa, *b = pb;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    if (a->position != b->position)
        return a->position < b->position ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return a->row < b->row ? -1 : a->row > b->row;
}

ulp_status ulp__prompts_read(const ulp_snapshot *s, ulp__prompts *p, ulp_error *err)
{
    const char *name = ulp__prompts_name(s);
    if (name == NULL) {
        memset(p, 0, sizeof *p);
        return ULP_OK;
    }
    return ulp__prompts_read_named(s, name, p, err);
}

ulp_status ulp__prompts_read_named(const ulp_snapshot *s, const char *name, ulp__prompts *p,
                                   ulp_error *err)
{
    memset(p, 0, sizeof *p);
    if (name == NULL || !ulp__prompts_named(s, name))
        return ULP_OK;
    for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++)
        if (strcmp(ulp_snapshot_capture(s, i)->name, name) == 0) {
            name = ulp_snapshot_capture(s, i)->name; /* the snapshot's own string */
            break;
        }
    size_t total = 0, k = 0, n = ulp_snapshot_capture_count(s);
    for (size_t i = 0; i < n; i++)
        if (strcmp(ulp_snapshot_capture(s, i)->name, name) == 0)
            total += (size_t)ulp_snapshot_capture(s, i)->rows;
    p->v = malloc((total ? total : 1) * sizeof *p->v);
    if (p->v == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (strcmp(c->name, name) != 0)
            continue;
        size_t sz = ulp_dtype_size(c->dtype);
        unsigned char *buf = malloc((size_t)c->rows * sz + 1);
        if (buf == NULL) {
            ulp__prompts_free(p);
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        ulp_status st = ulp_snapshot_read(s, i, 0, c->rows, buf, err);
        if (st != ULP_OK) {
            free(buf);
            ulp__prompts_free(p);
            return st;
        }
        for (uint64_t r = 0; r < c->rows; r++, k++) {
            ulp__fed *f = &p->v[k];
            f->request = c->requests != NULL ? c->requests[r] : 0;
            f->position = c->positions[r];
            f->seq = c->seq;
            f->row = r;
            f->step = c->has_step ? c->step : -1;
            f->token =
                (int64_t)ulp_dtype_to_double(c->dtype, ulp_dtype_load_bits(c->dtype, buf + r * sz));
        }
        free(buf);
    }
    qsort(p->v, total, sizeof *p->v, fed_cmp);
    size_t m = 0; /* one row per (request, position): the first capture's */
    for (size_t i = 0; i < total; i++)
        if (m == 0 || p->v[m - 1].request != p->v[i].request ||
            p->v[m - 1].position != p->v[i].position)
            p->v[m++] = p->v[i];
    p->n = m;
    p->name = name;
    return ULP_OK;
}

void ulp__prompts_free(ulp__prompts *p)
{
    free(p->v);
    memset(p, 0, sizeof *p);
}

ulp__prompt ulp__prompts_get(const ulp__prompts *p, int64_t request, int64_t upto)
{
    ulp__prompt q = {NULL, 0, INT64_MAX, UINT64_MAX};
    size_t lo = 0, hi = p->n;
    while (lo < hi) { /* the request's first row */
        size_t mid = lo + (hi - lo) / 2;
        if (p->v[mid].request < request)
            lo = mid + 1;
        else
            hi = mid;
    }
    q.v = p->v + lo;
    while (lo + q.n < p->n && p->v[lo + q.n].request == request &&
           p->v[lo + q.n].position <= upto) {
        const ulp__fed *f = &p->v[lo + q.n];
        if (f->seq < q.seq || (f->seq == q.seq && f->row < q.row)) {
            q.seq = f->seq;
            q.row = f->row;
        }
        q.n++;
    }
    return q;
}

int ulp__prompts_match(const ulp__prompt *x, const ulp__prompt *y)
{
    if (x->n == 0 || y->n == 0 || x->v[x->n - 1].position != y->v[y->n - 1].position)
        return 0;
    size_t i = 0, j = 0, same = 1;
    while (i < x->n && j < y->n) {
        if (x->v[i].position != y->v[j].position) {
            same = 0;
            if (x->v[i].position < y->v[j].position)
                i++;
            else
                j++;
            continue;
        }
        if (x->v[i].token != y->v[j].token)
            return 0;
        i++;
        j++;
    }
    return same && x->n == y->n ? 2 : 1;
}

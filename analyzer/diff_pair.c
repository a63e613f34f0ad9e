/*
 * Pairing (FORMAT.md "Pairing and comparison semantics"): captures of A and
 * B pair by name and occurrence; rows come in A's seq order, then the
 * captures only B has, in B's seq order.  A pair of one dtype and shape is
 * compared element by element (diff_jobs.c); the others are rows with a
 * mismatch status.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"
#include "ulpprof/format.h"

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
}

static int same_shape(const ulp_capture_info *x, const ulp_capture_info *y)
{
    if (x->ndim != y->ndim)
        return 0;
    for (int k = 0; k < x->ndim; k++)
        if (x->shape[k] != y->shape[k])
            return 0;
    return 1;
}

static int selected(const ulp_diff_options *o, const ulp_capture_info *c)
{
    if (o->match && fnmatch(o->match, c->name, 0) != 0)
        return 0;
    if (o->role && strcmp(o->role, c->role ? c->role : ulp_role_name(ULP_ROLE_ACTIVATION)) != 0)
        return 0;
    return 1;
}

static ulp_status copy_kernels(const ulp_snapshot *s, const ulp_capture_info *c, int *has,
                               size_t *n, ulp_diff_kernel **out)
{
    *has = 0;
    *n = 0;
    *out = NULL;
    if (!c->has_kernels)
        return ULP_OK;
    size_t total = ulp_snapshot_kernel_count(s);
    int64_t first = c->kernels[0] < 0 ? 0 : c->kernels[0];
    int64_t last = c->kernels[1] > (int64_t)total ? (int64_t)total : c->kernels[1];
    *has = 1;
    if (last <= first)
        return ULP_OK;
    *out = calloc((size_t)(last - first), sizeof **out);
    if (*out == NULL)
        return ULP_ENOMEM;
    for (int64_t k = first; k < last; k++) {
        const ulp_kernel_info *ki = ulp_snapshot_kernel(s, (size_t)k);
        ulp_diff_kernel *dk = &(*out)[*n];
        dk->name = xstrdup(ki->name);
        if (dk->name == NULL)
            return ULP_ENOMEM;
        memcpy(dk->grid, ki->grid, sizeof dk->grid);
        memcpy(dk->block, ki->block, sizeof dk->block);
        (*n)++;
    }
    return ULP_OK;
}

static void fill_side(ulp_diff_row *row, const ulp_capture_info *c, int side_b)
{
    if (side_b) {
        row->seq_b = c->seq;
        row->dtype_b = c->dtype;
        row->ndim_b = c->ndim;
        memcpy(row->shape_b, c->shape, sizeof row->shape_b);
    } else {
        row->seq_a = c->seq;
        row->dtype_a = c->dtype;
        row->ndim_a = c->ndim;
        memcpy(row->shape_a, c->shape, sizeof row->shape_a);
    }
}

static ulp_status new_row(ulp_diff_result *r, const ulp_capture_info *c, ulp_diff_row **out)
{
    ulp_diff_row *row = &r->rows[r->n_rows++];
    memset(row, 0, sizeof *row);
    row->name = xstrdup(c->name);
    row->role = xstrdup(c->role ? c->role : ulp_role_name(ULP_ROLE_ACTIVATION));
    if (row->name == NULL || row->role == NULL)
        return ULP_ENOMEM;
    row->occurrence = c->occurrence;
    row->layer = c->layer;
    row->seq_a = row->seq_b = -1;
    row->dtype_a = row->dtype_b = ULP_DTYPE_INVALID;
    row->elements = c->elements;
    row->m.worst_flat = -1;
    row->m.max_abs_diff_flat = -1;
    *out = row;
    return ULP_OK;
}

/* Adds the row of A's capture `i`; a compared pair goes to pairs[*np]. */
static ulp_status pair_a(const ulp_snapshot *a, const ulp_snapshot *b, const ulp_diff_options *opts,
                         size_t i, ulp_diff_result *r, unsigned char *b_used, ulp__diff_pair *pairs,
                         size_t *np)
{
    const ulp_capture_info *ca = ulp_snapshot_capture(a, i);
    ptrdiff_t k = ulp_snapshot_find(b, ca->name, ca->occurrence);
    if (k >= 0)
        b_used[k] = 1; /* even when filtered out: it is not "only in B" */
    if (!selected(opts, ca))
        return ULP_OK;
    ulp_diff_row *row;
    if (new_row(r, ca, &row) != ULP_OK)
        return ULP_ENOMEM;
    fill_side(row, ca, 0);
    if (k < 0) {
        row->status = ULP_DIFF_ONLY_IN_A;
        r->n_only_a++;
        return ULP_OK;
    }
    const ulp_capture_info *cb = ulp_snapshot_capture(b, (size_t)k);
    fill_side(row, cb, 1);
    r->n_shared++;
    if (copy_kernels(a, ca, &row->has_kernels_a, &row->n_kernels_a, &row->kernels_a) ||
        copy_kernels(b, cb, &row->has_kernels_b, &row->n_kernels_b, &row->kernels_b))
        return ULP_ENOMEM;
    if (ca->dtype != cb->dtype) {
        row->status = ULP_DIFF_DTYPE_MISMATCH;
        return ULP_OK;
    }
    if (!same_shape(ca, cb)) {
        row->status = ULP_DIFF_SHAPE_MISMATCH;
        return ULP_OK;
    }
    row->status = ULP_DIFF_IDENTICAL; /* until a chunk differs */
    ulp__diff_pair *p = &pairs[(*np)++];
    p->row = r->n_rows - 1;
    p->ia = i;
    p->ib = (size_t)k;
    return ULP_OK;
}

ulp_status ulp__diff_pair_rows(const ulp_snapshot *a, const ulp_snapshot *b,
                               const ulp_diff_options *opts, ulp_diff_result *r,
                               ulp__diff_pair **pairs, size_t *npairs, ulp_error *err)
{
    size_t na = ulp_snapshot_capture_count(a), nb = ulp_snapshot_capture_count(b);
    unsigned char *b_used = calloc(nb + 1, 1);
    ulp_status st = ULP_OK;
    *npairs = 0;
    *pairs = calloc(na + 1, sizeof **pairs);
    r->rows = calloc(na + nb + 1, sizeof *r->rows);
    if (b_used == NULL || *pairs == NULL || r->rows == NULL)
        st = ULP_ENOMEM;
    for (size_t i = 0; st == ULP_OK && i < na; i++)
        st = pair_a(a, b, opts, i, r, b_used, *pairs, npairs);
    for (size_t k = 0; st == ULP_OK && k < nb; k++) {
        const ulp_capture_info *cb = ulp_snapshot_capture(b, k);
        if (b_used[k] || !selected(opts, cb))
            continue;
        ulp_diff_row *row;
        if ((st = new_row(r, cb, &row)) != ULP_OK)
            break;
        fill_side(row, cb, 1);
        row->status = ULP_DIFF_ONLY_IN_B;
        r->n_only_b++;
    }
    free(b_used);
    if (st != ULP_OK)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    return ULP_OK;
}

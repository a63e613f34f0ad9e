/*
 * The aligned pairing (FORMAT.md, "Aligned diff"): when every capture of a
 * name carries `positions` on both sides, the rows of all its occurrences
 * are gathered per (request, position) key and the keys both sides have
 * are compared row against row, in key order, wherever each run computed
 * them (a prefix pass, a suffix pass, a decode step, another batch row).
 *
 * The comparison itself stays diff.c's: this file turns the keys into
 * segments -- runs of consecutive rows in one capture of A matched to
 * consecutive rows in one capture of B -- over a compared view of shape
 * [keys, row axes...].
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "diff_priv.h"
#include "format/snapshot_read_priv.h"

int ulp__segs_push(ulp__segs *s, const ulp__segment *seg)
{
    if (ULP__GROW(s->v, s->cap, s->n + 1) != 0)
        return -1;
    s->v[s->n++] = *seg;
    return 0;
}

/* --- keys ----------------------------------------------------------------------------- */

typedef struct entry {
    int64_t request, position;
    size_t cap; /* snapshot capture index */
    uint64_t row;
} entry;

static int entry_cmp(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    if (a->position != b->position)
        return a->position < b->position ? -1 : 1;
    return a->cap < b->cap ? -1 : a->cap > b->cap;
}

/* Every row of the captures idx[0..n), sorted by key; a key in two captures is refused.
 * renumber (B's side): the result whose request pairs give B's requests A's numbers. */
static ulp_status gather(const ulp_snapshot *s, const size_t *idx, size_t n,
                         const ulp_diff_result *renumber, entry **out, size_t *count,
                         ulp_error *err)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (size_t)ulp_snapshot_capture(s, idx[i])->rows;
    entry *e = malloc((total ? total : 1) * sizeof *e);
    if (e == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, idx[i]);
        for (uint64_t r = 0; r < c->rows; r++) {
            e[k].request = c->requests != NULL ? c->requests[r] : 0;
            if (renumber != NULL)
                e[k].request = ulp__requests_b(renumber, e[k].request);
            e[k].position = c->positions[r];
            e[k].cap = idx[i];
            e[k].row = r;
            k++;
        }
    }
    qsort(e, total, sizeof *e, entry_cmp);
    for (size_t i = 1; i < total; i++) {
        if (e[i].request == e[i - 1].request && e[i].position == e[i - 1].position) {
            const ulp_capture_info *x = ulp_snapshot_capture(s, e[i - 1].cap);
            const ulp_capture_info *y = ulp_snapshot_capture(s, e[i].cap);
            ulp_status st = ulp__error(
                err, ULP_EBADATTR,
                "'%s': capture '%s': request %" PRId64 ", position %" PRId64
                " is in occurrences %" PRId64 " and %" PRId64
                "; which one to compare would be a guess (give different passes different "
                "'requests')",
                ulp_snapshot_path(s), x->name, e[i].request, e[i].position, x->occurrence,
                y->occurrence);
            free(e);
            return st;
        }
    }
    *out = e;
    *count = total;
    return ULP_OK;
}

/* 1 when every capture has the dtype and row axes of the first one (of side A). */
static int same_rows(const ulp_capture_info *ref, const ulp_capture_info *c)
{
    int ra = ref->ndim - ref->row_rank, rc = c->ndim - c->row_rank;
    if (ra != rc)
        return 0;
    for (int k = 0; k < ra; k++)
        if (ref->shape[ref->row_rank + k] != c->shape[c->row_rank + k])
            return 0;
    return 1;
}

static ulp_status copy_inputs(const ulp_snapshot *a, const size_t *ia, size_t na, ulp_diff_row *row)
{
    for (size_t i = 0; i < na; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(a, ia[i]);
        if (c->n_inputs == 0)
            continue;
        row->inputs = calloc(c->n_inputs, sizeof *row->inputs);
        if (row->inputs == NULL)
            return ULP_ENOMEM;
        for (size_t k = 0; k < c->n_inputs; k++) {
            if ((row->inputs[k] = strdup(c->inputs[k])) == NULL)
                return ULP_ENOMEM;
            row->n_inputs++;
        }
        break;
    }
    return ULP_OK;
}

/* The compared keys and the segments that cover them. */
static ulp_status merge_keys(const ulp_snapshot *a, const entry *ea, size_t na,
                             const ulp_snapshot *b, const entry *eb, size_t nb, uint64_t rowlen,
                             const ulp_diff_result *r, ulp_diff_row *row, ulp__segs *segs)
{
    int64_t part_req = 0, part_at = -1; /* the parted stream of the request in hand */
    int part_known = 0;
    size_t i = 0, j = 0, k = 0;
    size_t most = na < nb ? na : nb;
    row->keys = calloc(most ? most : 1, sizeof *row->keys);
    if (row->keys == NULL)
        return ULP_ENOMEM;
    ulp__segment cur = {0};
    int open = 0;
    uint64_t next_a = 0, next_b = 0;
    while (i < na && j < nb) {
        int c = ea[i].request != eb[j].request     ? (ea[i].request < eb[j].request ? -1 : 1)
                : ea[i].position != eb[j].position ? (ea[i].position < eb[j].position ? -1 : 1)
                                                   : 0;
        if (c < 0) {
            row->positions_only_in_a++;
            i++;
            continue;
        }
        if (c > 0) {
            row->positions_only_in_b++;
            j++;
            continue;
        }
        if (r->n_parts > 0 && (!part_known || part_req != ea[i].request)) {
            part_req = ea[i].request;
            part_at = ulp__streams_parted_at(r, part_req);
            part_known = 1;
        }
        if (part_at >= 0 && ea[i].position >= part_at) {
            row->positions_parted++; /* another token's stream: not compared */
            i++;
            j++;
            continue;
        }
        ulp_diff_key *key = &row->keys[k];
        key->request = ea[i].request;
        key->position = ea[i].position;
        key->occurrence_a = ulp_snapshot_capture(a, ea[i].cap)->occurrence;
        key->occurrence_b = ulp_snapshot_capture(b, eb[j].cap)->occurrence;
        key->origin_input = -1;
        /* Extend the open segment while both sides stay on consecutive rows. */
        if (open && cur.ia == ea[i].cap && cur.ib == eb[j].cap && next_a == ea[i].row &&
            next_b == eb[j].row) {
            cur.len += rowlen;
        } else {
            if (open && rowlen > 0 && ulp__segs_push(segs, &cur) < 0)
                return ULP_ENOMEM;
            cur.ia = ea[i].cap;
            cur.ib = eb[j].cap;
            cur.off_a = ea[i].row * rowlen;
            cur.off_b = eb[j].row * rowlen;
            cur.len = rowlen;
            cur.base = (uint64_t)k * rowlen;
            open = 1;
        }
        next_a = ea[i].row + 1;
        next_b = eb[j].row + 1;
        k++;
        i++;
        j++;
    }
    row->positions_only_in_a += na - i;
    row->positions_only_in_b += nb - j;
    if (open && rowlen > 0 && ulp__segs_push(segs, &cur) < 0)
        return ULP_ENOMEM;
    row->n_keys = k;
    row->positions_compared = k;
    return ULP_OK;
}

ulp_status ulp__align_row(const ulp_snapshot *a, const size_t *ia, size_t na, const ulp_snapshot *b,
                          const size_t *ib, size_t nb, const ulp_diff_result *r, ulp_diff_row *row,
                          ulp__segs *segs, uint64_t *rowlen, ulp_error *err)
{
    const ulp_capture_info *ref = ulp_snapshot_capture(a, ia[0]);
    const ulp_capture_info *refb = ulp_snapshot_capture(b, ib[0]);
    entry *ea = NULL, *eb = NULL;
    size_t nea = 0, neb = 0;
    ulp_status st;

    row->aligned = 1;
    row->first_request = row->first_position = -1;
    row->worst_request = row->worst_position = -1;
    if (copy_inputs(a, ia, na, row) != ULP_OK)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    if ((st = gather(a, ia, na, NULL, &ea, &nea, err)) != ULP_OK)
        return st;
    if ((st = gather(b, ib, nb, r, &eb, &neb, err)) != ULP_OK) {
        free(ea);
        return st;
    }
    /* The compared view: [keys, row axes...] of A's first capture. */
    int raxes = ref->ndim - ref->row_rank;
    *rowlen = 1;
    for (int k = 0; k < raxes; k++)
        *rowlen *= (uint64_t)ref->shape[ref->row_rank + k];
    row->ndim_a = row->ndim_b = 1 + raxes;
    memcpy(row->shape_a + 1, ref->shape + ref->row_rank, (size_t)raxes * sizeof(int64_t));
    memcpy(row->shape_b + 1, refb->shape + refb->row_rank,
           (size_t)(refb->ndim - refb->row_rank) * sizeof(int64_t));
    row->ndim_b = 1 + refb->ndim - refb->row_rank;
    row->dtype_a = ref->dtype;
    row->dtype_b = refb->dtype;
    row->status = ULP_DIFF_IDENTICAL;
    for (size_t i = 0; i < na + nb; i++) {
        const ulp_capture_info *c =
            i < na ? ulp_snapshot_capture(a, ia[i]) : ulp_snapshot_capture(b, ib[i - na]);
        if (c->dtype != (i < na ? ref->dtype : refb->dtype)) {
            row->status = ULP_DIFF_DTYPE_MISMATCH;
            row->dtype_b = c->dtype;
        } else if (!same_rows(ref, c) && row->status == ULP_DIFF_IDENTICAL) {
            row->status = ULP_DIFF_SHAPE_MISMATCH;
        }
    }
    if (row->status == ULP_DIFF_IDENTICAL && ref->dtype != refb->dtype) {
        /* Different float dtypes: compared in the coarser one (diff_cross.c), or not at all. */
        if (ulp__cross_coarser(ref->dtype, refb->dtype, &row->compared_dtype, &row->rounded_side))
            row->rounded = 1;
        else
            row->status = ULP_DIFF_DTYPE_MISMATCH;
    }
    st = merge_keys(a, ea, nea, b, eb, neb, *rowlen, r, row, segs);
    free(ea);
    free(eb);
    if (st != ULP_OK)
        return ulp__error(err, st, "out of memory");
    row->shape_a[0] = row->shape_b[0] = (int64_t)row->positions_compared;
    row->elements = row->positions_compared * *rowlen;
    if (row->status == ULP_DIFF_IDENTICAL && row->positions_compared == 0 &&
        row->positions_parted > 0) {
        /* Every key in common follows parted streams: nothing to compare,
         * and not a divergence of its own (the part is reported). */
        row->hint = strdup("every (request, position) in common follows token streams that "
                           "parted: not compared");
    } else if (row->status == ULP_DIFF_IDENTICAL && row->positions_compared == 0 &&
               (row->positions_only_in_a > 0 || row->positions_only_in_b > 0)) {
        /* Nothing in common is not "identical": a mismatch that says why.
         * Neither side with a row (an expert that got no tokens in either
         * run) is identical: the same empty tensor, 0 elements compared. */
        char hint[200];
        snprintf(hint, sizeof hint,
                 "no (request, position) in common: %" PRIu64 " keys only in A, %" PRIu64
                 " only in B; capture the same tokens in both runs",
                 row->positions_only_in_a, row->positions_only_in_b);
        row->status = ULP_DIFF_SHAPE_MISMATCH;
        row->hint = strdup(hint);
    }
    if (row->status != ULP_DIFF_IDENTICAL)
        segs->n = 0; /* nothing is compared */
    return ULP_OK;
}

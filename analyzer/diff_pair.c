/*
 * Pairing (FORMAT.md "Pairing and comparison semantics", "Aligned diff"):
 * captures of A and B pair by name and occurrence -- or, when every capture
 * of a name has positions on both sides, all occurrences of the name form
 * one row paired on (request, position) keys (align.c); rows come in A's
 * seq order, then the captures only B has, in B's seq order.  A pair of one
 * dtype and shape (or a --rows slice of one) is compared element by element
 * (diff_jobs.c); the others are rows with a mismatch status and, where one
 * axis differs, a hint.
 */
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "diff_layouts.h"
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

/*
 * A capture of s that a table made in pages cannot describe again
 * (ulp_snapshot_open_stream): the file changed since the open, or memory
 * ran out.
 */
static ulp_status lost(const ulp_snapshot *s, ulp_error *err)
{
    return ulp__error(err, ULP_EIO,
                      "'%s': a capture cannot be described again (the file changed since it was "
                      "opened, or memory ran out)",
                      ulp_snapshot_path(s));
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

static ulp_status copy_gemms(const ulp_snapshot *s, const ulp_capture_info *c, int *has, size_t *n,
                             ulp_gemm_info **out)
{
    *has = 0;
    *n = 0;
    *out = NULL;
    if (!c->has_gemms)
        return ULP_OK;
    size_t total = ulp_snapshot_gemm_count(s);
    int64_t first = c->gemms[0] < 0 ? 0 : c->gemms[0];
    int64_t last = c->gemms[1] > (int64_t)total ? (int64_t)total : c->gemms[1];
    *has = 1;
    if (last <= first)
        return ULP_OK;
    *out = calloc((size_t)(last - first), sizeof **out);
    if (*out == NULL)
        return ULP_ENOMEM;
    for (int64_t g = first; g < last; g++)
        (*out)[(*n)++] = *ulp_snapshot_gemm(s, (size_t)g);
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

/*
 * What pairing needs to know of a name: its captures on both sides and
 * whether they have positions.  Looked up once per name and kept by the
 * name's pointer (a snapshot keeps one copy of each name): 10,000 captures
 * of 100 names had made three bisections with strcmp(3) per capture.
 */
typedef struct name_info {
    const char *name; /* the pointer looked up; NULL in an empty slot */
    const size_t *ia, *ib;
    size_t na, nb;
    int pa, pb; /* ulp__names_positions of ia and of ib */
} name_info;
#define NAME_SLOTS 1024

/* A snapshot string and the result's copy of it. */
typedef struct str_slot {
    const char *src, *copy;
} str_slot;
#define STR_SLOTS 256

/* The pairing's state: both snapshots, the result and the pairs being built. */
struct ulp__pairing {
    str_slot strs[STR_SLOTS]; /* by the snapshot string's address */
    name_info *names;         /* [NAME_SLOTS], by the name's address */
    const ulp_snapshot *a, *b;
    ulp_diff_result *r;
    const ulp_diff_options *opts;
    unsigned char *b_used; /* B captures paired or filtered out      */
    unsigned char *a_done; /* A captures already in an aligned row  */
    ulp__names *na, *nb;
    ulp__lean *lean;    /* the pairing as A and B stream by; NULL: whole tables */
    ulp__site_keys *sk; /* pairing by site (whole tables); NULL: by name      */
    ulp__rows_spec rows;
    size_t n_sliced;
    ulp__segs segs;
    ulp__diff_pair *pairs;
    size_t npairs, cap_pairs;
    size_t next_a, next_b; /* the captures of A, then B, not yet paired       */
    size_t total_rows;     /* rows of the batches before the current one      */
};
typedef struct ulp__pairing pair_ctx;

/*
 * The result's copy of a snapshot string (ulp__diff_str), looked up by the
 * string's address first: a snapshot keeps one copy of each name and role,
 * and hashing every row's name and role into the result's set was 6% of
 * a diff of 10,000 captures.
 */
static const char *result_str(pair_ctx *pc, const char *s)
{
    str_slot *e = &pc->strs[((uintptr_t)s >> 4) % STR_SLOTS];
    if (e->src != s || e->copy == NULL) {
        e->src = s;
        e->copy = ulp__diff_str(pc->r, s);
    }
    return e->copy;
}

static ulp_status new_row(pair_ctx *pc, const ulp_capture_info *c, ulp_diff_row **out)
{
    ulp_diff_result *r = pc->r;
    ulp_diff_row *row = &r->rows[r->n_rows++];
    memset(row, 0, sizeof *row);
    row->name = result_str(pc, c->name ? c->name : "");
    row->role = result_str(pc, c->role ? c->role : ulp_role_name(ULP_ROLE_ACTIVATION));
    if (row->name == NULL || row->role == NULL)
        return ULP_ENOMEM;
    row->occurrence = c->occurrence;
    row->layer = c->layer;
    row->seq_a = row->seq_b = -1;
    row->dtype_a = row->dtype_b = ULP_DTYPE_INVALID;
    row->elements = c->elements;
    row->m.worst_flat = -1;
    row->m.max_abs_diff_flat = -1;
    row->max_abs_diff_fine_flat = -1;
    row->first_request = row->first_position = -1;
    row->worst_request = row->worst_position = -1;
    *out = row;
    return ULP_OK;
}

/* Paired by site: the row's site and layer from capture i of `side`, and
 * B's name when B has a capture there. */
static ulp_status site_fields(pair_ctx *pc, ulp_diff_row *row, int side, size_t i,
                              const ulp_capture_info *cb)
{
    if (pc->sk == NULL)
        return ULP_OK;
    const char *site = pc->sk->site[side][i];
    if (site != NULL && (row->site = result_str(pc, site)) == NULL)
        return ULP_ENOMEM;
    pc->r->n_paired_by_site += site != NULL;
    row->layer = pc->sk->layer[side][i];
    if (cb != NULL && (row->name_b = result_str(pc, cb->name ? cb->name : "")) == NULL)
        return ULP_ENOMEM;
    return ULP_OK;
}

/* Queues a segment of the last row for element comparison. */
static ulp_status add_pair(pair_ctx *pc, const ulp__segment *seg, uint64_t rowlen)
{
    if (ULP__GROW(pc->pairs, pc->cap_pairs, pc->npairs + 1) != 0)
        return ULP_ENOMEM;
    ulp__diff_pair *p = &pc->pairs[pc->npairs++];
    p->row = pc->r->n_rows - 1;
    p->ia = seg->ia;
    p->ib = seg->ib;
    p->off_a = seg->off_a;
    p->off_b = seg->off_b;
    p->len = seg->len;
    p->base = seg->base;
    p->rowlen = rowlen;
    return ULP_OK;
}

/* All captures of ca's name, compared on their (request, position) keys. */
static ulp_status pair_aligned(pair_ctx *pc, const ulp_capture_info *ca, const size_t *ia,
                               size_t na, const size_t *ib, size_t nb, ulp_error *err)
{
    ulp_diff_row *row;
    const ulp_capture_info *cb = ulp_snapshot_capture(pc->b, ib[0]);
    if (new_row(pc, ca, &row) != ULP_OK || site_fields(pc, row, 0, ia[0], cb) != ULP_OK)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    row->seq_a = ca->seq;
    row->seq_b = cb->seq;
    pc->r->n_shared++;
    if (copy_kernels(pc->a, ca, &row->has_kernels_a, &row->n_kernels_a, &row->kernels_a) ||
        copy_kernels(pc->b, cb, &row->has_kernels_b, &row->n_kernels_b, &row->kernels_b) ||
        copy_gemms(pc->a, ca, &row->has_gemms_a, &row->n_gemms_a, &row->gemms_a) ||
        copy_gemms(pc->b, cb, &row->has_gemms_b, &row->n_gemms_b, &row->gemms_b))
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    uint64_t rowlen = 0;
    pc->segs.n = 0;
    ulp_status st =
        ulp__align_row(pc->a, ia, na, pc->b, ib, nb, pc->r, row, &pc->segs, &rowlen, err);
    if (st != ULP_OK || row->status != ULP_DIFF_IDENTICAL)
        return st;
    for (size_t q = 0; q < pc->segs.n; q++)
        if (add_pair(pc, &pc->segs.v[q], rowlen) != ULP_OK)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
    return ULP_OK;
}

/* A pair of one occurrence on each side, of one dtype: sliced, whole, or a mismatch. */
static ulp_status pair_elements(pair_ctx *pc, ulp_diff_row *row, const ulp_capture_info *ca,
                                size_t i, const ulp_capture_info *cb, size_t k, ulp_error *err)
{
    row->status = ULP_DIFF_IDENTICAL; /* until a chunk differs */
    if (pc->rows.mode != 0) {
        pc->segs.n = 0;
        int rc = ulp__rows_slice(&pc->rows, ca, i, cb, k, row, &pc->segs);
        if (rc == -2)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        if (rc == -1)
            return ULP_OK;
        if (rc == 1) {
            pc->n_sliced++;
            for (size_t q = 0; q < pc->segs.n; q++)
                if (add_pair(pc, &pc->segs.v[q], 0) != ULP_OK)
                    return ulp__error(err, ULP_ENOMEM, "out of memory");
            return ULP_OK;
        }
    }
    if (!same_shape(ca, cb)) {
        row->status = ULP_DIFF_SHAPE_MISMATCH;
        row->hint = ulp__rows_hint(ca, cb);
        return ULP_OK;
    }
    ulp__segment whole = {i, k, 0, 0, ca->elements, 0};
    if (add_pair(pc, &whole, 0) != ULP_OK)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    return ULP_OK;
}

static const name_info *name_lookup(pair_ctx *pc, const char *name)
{
    name_info *e = &pc->names[((uintptr_t)name >> 4) % NAME_SLOTS];
    if (e->name == name)
        return e;
    e->name = name;
    e->ia = ulp__names_find(pc->na, name, &e->na);
    e->ib = ulp__names_find(pc->nb, name, &e->nb);
    e->pa = ulp__names_positions(pc->na, e->ia, e->na);
    e->pb = ulp__names_positions(pc->nb, e->ib, e->nb);
    return e;
}

/* Paired by site: the capture of B at capture i's rank among the
 * captures of its key in A (e->ia, in seq order), or -1. */
static ptrdiff_t find_b_site(const pair_ctx *pc, const name_info *e, const ulp_capture_info *ca)
{
    size_t lo = 0, hi = e->na;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ulp_snapshot_capture(pc->a, e->ia[mid])->seq < ca->seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < e->nb ? (ptrdiff_t)e->ib[lo] : -1;
}

/* The capture of B with ca's name and occurrence, or -1: where the writer
 * numbered occurrences in seq order, occurrence k is the name's k-th. */
static ptrdiff_t find_b(const pair_ctx *pc, const name_info *e, const ulp_capture_info *ca)
{
    if (pc->sk != NULL)
        return find_b_site(pc, e, ca);
    int64_t occ = ca->occurrence;
    if (occ >= 0 && (uint64_t)occ < e->nb &&
        ulp_snapshot_capture(pc->b, e->ib[occ])->occurrence == occ)
        return (ptrdiff_t)e->ib[occ];
    return ulp_snapshot_find(pc->b, ca->name, occ);
}

/* Pairs capture i of A through the whole tables: alone by occurrence, or
 * (aligned: *done) with every capture of its name. */
static ulp_status pair_whole(pair_ctx *pc, size_t i, const ulp_capture_info *ca, ptrdiff_t *k,
                             int *pa, int *pb, int *done, ulp_error *err)
{
    const name_info *e = name_lookup(pc, pc->sk != NULL ? pc->sk->key[0][i] : ca->name);
    *k = find_b(pc, e, ca);
    if (*k >= 0)
        pc->b_used[*k] = 1; /* even when filtered out: it is not "only in B" */
    size_t na = e->na, nb = e->nb;
    const size_t *ia = e->ia, *ib = e->ib;
    *pa = e->pa;
    *pb = e->pb;
    *done = *pa == 1 && *pb == 1;
    if (!*done)
        return ULP_OK;
    for (size_t q = 0; q < na; q++)
        pc->a_done[ia[q]] = 1;
    for (size_t q = 0; q < nb; q++)
        pc->b_used[ib[q]] = 1;
    return selected(pc->opts, ca) ? pair_aligned(pc, ca, ia, na, ib, nb, err) : ULP_OK;
}

/* Two dtypes: compared in the coarser one where one holds the other (diff_cross.c). */
static void cross_dtypes(ulp_diff_row *row, ulp_dtype da, ulp_dtype db)
{
    ulp_dtype coarse = da;
    int side = 0;
    if (da == db || row->status != ULP_DIFF_IDENTICAL)
        return;
    if (!ulp__cross_coarser(da, db, &coarse, &side)) {
        row->status = ULP_DIFF_DTYPE_MISMATCH;
        return;
    }
    row->rounded = 1;
    row->compared_dtype = coarse;
    row->rounded_side = side;
}

/*
 * Paired by site across layouts (diff_layouts.c): capture i of `side`,
 * which no capture of the other side pairs with by key.  *made 1 when a
 * row was made from the other side's fused or sharded captures, or when
 * capture i is itself fused or a shard that the other side's captures
 * compare through (no row of its own); 0: neither, pair it as before.
 */
static ulp_status layout_row(pair_ctx *pc, int side, size_t i, const ulp_capture_info *c, int *made,
                             ulp_error *err)
{
    const ulp__site_keys *sk = pc->sk;
    const ulp_snapshot *own = side ? pc->b : pc->a, *other = side ? pc->a : pc->b;
    const ulp__names *own_names = side ? pc->nb : pc->na, *other_names = side ? pc->na : pc->nb;
    const char *site = sk->site[side][i];
    *made = 0;
    if (site == NULL)
        return ULP_OK;
    if (sk->layout[side][i].kind != ULP__LAYOUT_NONE) {
        *made = ulp__layout_consumed(other_names, sk, side, i);
        return ULP_OK;
    }
    size_t j = ulp__layout_rank(own, own_names, sk->key[side][i], c);
    ulp__lview v = {{NULL, 0, 0}, 0, {0}};
    int rc =
        ulp__layout_view(other, other_names, sk, 1 - side, site, sk->layer[side][i], j, c, &v, err);
    if (rc <= 0) {
        free(v.runs.v);
        return rc == 0    ? ULP_OK
               : rc == -2 ? ulp__error(err, ULP_ENOMEM, "out of memory")
                          : ULP_EINVAL;
    }
    *made = 1;
    const ulp_capture_info *cv = ulp_snapshot_capture(other, v.cap);
    const ulp_capture_info *ca = side ? cv : c, *cb = side ? c : cv;
    for (size_t q = 0; side == 0 && q < v.runs.n; q++)
        pc->b_used[v.runs.v[q].cap] = 1;
    ulp_diff_row *row;
    ulp_status st = ULP_OK;
    if (!selected(pc->opts, c))
        goto cleanup;
    if (new_row(pc, ca, &row) != ULP_OK || site_fields(pc, row, side, i, cb) != ULP_OK ||
        (row->layout = ulp__diff_str(pc->r, v.desc)) == NULL) {
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
        goto cleanup;
    }
    fill_side(row, ca, 0);
    fill_side(row, cb, 1);
    /* The compared view is the site's tensor: the part's shape on both sides. */
    row->ndim_a = row->ndim_b = c->ndim;
    memcpy(row->shape_a, c->shape, sizeof row->shape_a);
    memcpy(row->shape_b, c->shape, sizeof row->shape_b);
    row->elements = c->elements;
    row->occurrence = c->occurrence;
    row->layout_side = 1 - side;
    row->status = ULP_DIFF_IDENTICAL; /* until a chunk differs */
    pc->r->n_shared++;
    cross_dtypes(row, ca->dtype, cb->dtype);
    if (row->status != ULP_DIFF_IDENTICAL)
        goto cleanup;
    for (size_t q = 0; q < v.runs.n; q++) {
        const ulp__lrun *u = &v.runs.v[q];
        ulp__segment seg = {side ? u->cap : i,
                            side ? i : u->cap,
                            side ? u->off : u->base,
                            side ? u->base : u->off,
                            u->len,
                            u->base};
        if (add_pair(pc, &seg, 0) != ULP_OK) {
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            break;
        }
    }
cleanup:
    free(v.runs.v);
    return st;
}

/* Paired by site: two captures of one fused site must hold it in one layout. */
static ulp_status same_layout(const pair_ctx *pc, size_t i, size_t k, const ulp_capture_info *ca,
                              const ulp_capture_info *cb, ulp_error *err)
{
    const char *site = pc->sk->site[0][i];
    if (site == NULL || (strcmp(site, "qkv") != 0 && strcmp(site, "gate_up") != 0) ||
        ulp__layout_same(&pc->sk->layout[0][i], &pc->sk->layout[1][k], site))
        return ULP_OK;
    return ulp__error(err, ULP_EINVAL,
                      "'%s' capture '%s' and '%s' capture '%s' hold %s@%d in different layouts "
                      "(docs/sites.md \"Layouts\"): capture its parts on one side",
                      ulp_snapshot_path(pc->a), ca->name ? ca->name : "", ulp_snapshot_path(pc->b),
                      cb->name ? cb->name : "", site, (int)pc->sk->layer[0][i]);
}

/* Why a name with positions was paired by occurrence (name_summary.h, ulp__row_form). */
static ulp_status forms_hint(ulp_diff_row *row, const char *side, ulp_error *err)
{
    char buf[700];
    snprintf(buf, sizeof buf,
             "%s's captures of this name hold rows of several dtypes or row shapes: paired "
             "occurrence by occurrence, not by (request, position)%s%.400s",
             side, row->hint != NULL ? "; " : "", row->hint != NULL ? row->hint : "");
    char *hint = strdup(buf);
    if (hint == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    free((char *)(uintptr_t)row->hint);
    row->hint = hint;
    return ULP_OK;
}

/* Pairs capture i of A: alone by occurrence, or with every capture of its name. */
static ulp_status pair_a(pair_ctx *pc, size_t i, ulp_error *err)
{
    const ulp_capture_info *ca = ulp_snapshot_capture(pc->a, i);
    ulp_diff_result *r = pc->r;
    ptrdiff_t k = -1;
    if (ca == NULL)
        return lost(pc->a, err);
    int pa = 0, pb = 0, done = 0;
    if (pc->lean != NULL) {
        int rc = ulp__lean_partner(pc->lean, ca, &k, &pa, &pb);
        if (rc == -1)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        if (rc != 0)
            return ulp__error(err, ULP_EIO, "'%s': its captures changed while being compared",
                              ulp_snapshot_path(pc->b));
    } else {
        if (pc->a_done[i])
            return ULP_OK;
        ulp_status st = pair_whole(pc, i, ca, &k, &pa, &pb, &done, err);
        if (st != ULP_OK || done)
            return st;
        int made = 0;
        if (pc->sk != NULL && k < 0 && (st = layout_row(pc, 0, i, ca, &made, err)) != ULP_OK)
            return st;
        if (made)
            return ULP_OK;
        if (pc->sk != NULL && k >= 0 &&
            (st = same_layout(pc, i, (size_t)k, ca, ulp_snapshot_capture(pc->b, (size_t)k), err)) !=
                ULP_OK)
            return st;
    }
    if (!selected(pc->opts, ca))
        return ULP_OK;
    ulp_diff_row *row;
    const ulp_capture_info *cb = k >= 0 ? ulp_snapshot_capture(pc->b, (size_t)k) : NULL;
    if (new_row(pc, ca, &row) != ULP_OK || site_fields(pc, row, 0, i, cb) != ULP_OK)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    fill_side(row, ca, 0);
    if (pa == 1 && (pb == 0 || pb == -1))
        row->positions_in = "a";
    else if (pb == 1 && (pa == 0 || pa == -1))
        row->positions_in = "b";
    if (k < 0) {
        row->status = ULP_DIFF_ONLY_IN_A;
        r->n_only_a++;
        return ULP_OK;
    }
    if (cb == NULL)
        return lost(pc->b, err);
    fill_side(row, cb, 1);
    r->n_shared++;
    if (copy_kernels(pc->a, ca, &row->has_kernels_a, &row->n_kernels_a, &row->kernels_a) ||
        copy_kernels(pc->b, cb, &row->has_kernels_b, &row->n_kernels_b, &row->kernels_b) ||
        copy_gemms(pc->a, ca, &row->has_gemms_a, &row->n_gemms_a, &row->gemms_a) ||
        copy_gemms(pc->b, cb, &row->has_gemms_b, &row->n_gemms_b, &row->gemms_b))
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    ulp_dtype coarse = ca->dtype;
    int side = 0;
    ulp_status st = ULP_OK;
    if (ca->dtype != cb->dtype && !ulp__cross_coarser(ca->dtype, cb->dtype, &coarse, &side))
        row->status = ULP_DIFF_DTYPE_MISMATCH;
    else if ((st = pair_elements(pc, row, ca, i, cb, (size_t)k, err)) == ULP_OK)
        cross_dtypes(row, ca->dtype, cb->dtype);
    if (st == ULP_OK && (pa == -2 || pb == -2) && row->status != ULP_DIFF_IDENTICAL)
        return forms_hint(row, pa == -2 ? "A" : "B", err);
    return st;
}

/* Captures on one side only and none on both: nothing was compared, so
 * there is no verdict to give, "identical" or not. */
static ulp_status no_shared(const pair_ctx *pc, ulp_error *err)
{
    const ulp_diff_options *o = pc->opts;
    const char *pa = ulp_snapshot_path(pc->a), *pb = ulp_snapshot_path(pc->b);
    return ulp__error(err, ULP_ENOTFOUND,
                      "'%s' and '%s' share no capture%s (%zu only in A, %zu only in B): nothing "
                      "to compare",
                      pa, pb, o->match != NULL || o->role != NULL ? " selected" : " name",
                      pc->r->n_only_a, pc->r->n_only_b);
}

/* A selection that selects nothing is an error, never "identical". */
static ulp_status check_selection(const pair_ctx *pc, ulp_error *err)
{
    const ulp_diff_options *o = pc->opts;
    const char *pa = ulp_snapshot_path(pc->a), *pb = ulp_snapshot_path(pc->b);
    size_t rows = pc->total_rows + pc->r->n_rows;
    if (rows == 0 && (o->match != NULL || o->role != NULL))
        return ulp__error(err, ULP_ENOTFOUND, "%s%s%s%s%s%s selects no capture of '%s' or '%s'",
                          o->match ? "--match '" : "", o->match ? o->match : "",
                          o->match ? "'" : "", o->match && o->role ? " with " : "",
                          o->role ? "--role " : "", o->role ? o->role : "", pa, pb);
    if (rows == 0)
        return ulp__error(err, ULP_ENOTFOUND,
                          "neither '%s' nor '%s' holds a capture: nothing to compare", pa, pb);
    /* One side holds captures the other lacks entirely (a writer that lost
     * everything, a run that captured nothing): the runs differ, as a
     * capture in one run only always does.  Both holding captures under no
     * common name, or a selection that one side lacks, is no comparison at
     * all. */
    if (pc->r->n_shared == 0 &&
        ((pc->r->n_only_a != 0 && pc->r->n_only_b != 0) || o->match != NULL || o->role != NULL))
        return no_shared(pc, err);
    if (pc->rows.mode != 0 && pc->n_sliced == 0)
        return ulp__error(err, ULP_ENOTFOUND,
                          "--rows '%s' selects nothing: no pair of captures without positions "
                          "has the rows on its token axis",
                          o->rows);
    return ULP_OK;
}

/* A row for capture cb, which only B has, if selected -- or, paired by
 * site, the row of what A's fused or sharded captures hold of it. */
static ulp_status only_b_row(pair_ctx *pc, const ulp_capture_info *cb, size_t k, ulp_error *err)
{
    if (cb == NULL)
        return lost(pc->b, err);
    int made = 0;
    ulp_status st;
    if (pc->sk != NULL && (st = layout_row(pc, 1, k, cb, &made, err)) != ULP_OK)
        return st;
    if (made || !selected(pc->opts, cb))
        return ULP_OK;
    ulp_diff_row *row;
    if (new_row(pc, cb, &row) != ULP_OK || site_fields(pc, row, 1, k, cb) != ULP_OK)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    fill_side(row, cb, 1);
    row->status = ULP_DIFF_ONLY_IN_B;
    pc->r->n_only_b++;
    return ULP_OK;
}

/* The captures only B has, in B's seq order, until `max_rows` rows. */
static ulp_status pair_only_b(pair_ctx *pc, size_t max_rows, ulp_error *err)
{
    size_t nb = ulp_snapshot_capture_count(pc->b);
    ulp_status st;
    if (pc->lean != NULL) {
        while (pc->next_b < nb && pc->r->n_rows < max_rows) {
            ptrdiff_t k = ulp__lean_next_only_b(pc->lean);
            if (k < 0)
                pc->next_b = nb;
            else if ((st = only_b_row(pc, ulp_snapshot_capture(pc->b, (size_t)k), (size_t)k,
                                      err)) != ULP_OK)
                return st;
        }
        return ULP_OK;
    }
    for (; pc->next_b < nb && pc->r->n_rows < max_rows; pc->next_b++)
        if (!pc->b_used[pc->next_b] && (st = only_b_row(pc, ulp_snapshot_capture(pc->b, pc->next_b),
                                                        pc->next_b, err)) != ULP_OK)
            return st;
    return ULP_OK;
}

/* The pairing keys of a side: its sites' keys, or NULL for the names. */
static const char *const *keys_of(const pair_ctx *pc, int side)
{
    return pc->sk != NULL ? (const char *const *)pc->sk->key[side] : NULL;
}

ulp_status ulp__pairing_new(const ulp_snapshot *a, const ulp_snapshot *b,
                            const ulp_diff_options *opts, ulp_diff_result *r, ulp__pairing **out,
                            ulp_error *err)
{
    size_t na = ulp_snapshot_capture_count(a), nb = ulp_snapshot_capture_count(b);
    *out = NULL;
    pair_ctx *pc = calloc(1, sizeof *pc);
    if (pc == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    pc->a = a;
    pc->b = b;
    pc->r = r;
    pc->opts = opts;
    ulp_status st = ulp__rows_parse(opts->rows, &pc->rows, err);
    if (st != ULP_OK) {
        free(pc);
        return st;
    }
    if ((st = ulp__site_keys_new(a, b, opts, &pc->sk, err)) != ULP_OK) {
        free(pc);
        return st;
    }
    r->by_site = pc->sk != NULL;
    /* Streaming where the snapshots allow it; else per-capture tables (by site: always). */
    int lean = pc->sk != NULL ? 0 : ulp__lean_new(a, b, &pc->lean);
    if (lean == -2) {
        ulp__pairing_free(pc);
        return ulp__error(err, ULP_EINVAL,
                          "ULPPROF_PAIRING=lean: '%s' and '%s' need the whole tables",
                          ulp_snapshot_path(a), ulp_snapshot_path(b));
    }
    if (lean == 0) {
        pc->names = calloc(NAME_SLOTS, sizeof *pc->names);
        pc->b_used = calloc(nb + 1, 1);
        pc->a_done = calloc(na + 1, 1);
    }
    if (lean < 0 || (lean == 0 && (pc->names == NULL || pc->b_used == NULL || pc->a_done == NULL ||
                                   ulp__names_build_keys(a, keys_of(pc, 0), &pc->na) != ULP_OK ||
                                   ulp__names_build_keys(b, keys_of(pc, 1), &pc->nb) != ULP_OK))) {
        ulp__pairing_free(pc);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    *out = pc;
    return ULP_OK;
}

ulp_status ulp__pairing_next(ulp__pairing *pc, size_t max_rows, const ulp__diff_pair **pairs,
                             size_t *npairs, int *done, ulp_error *err)
{
    size_t na = ulp_snapshot_capture_count(pc->a), nb = ulp_snapshot_capture_count(pc->b);
    ulp_status st = ULP_OK;
    pc->total_rows += pc->r->n_rows;
    pc->r->n_rows = 0;
    pc->npairs = 0;
    /* Each capture of A makes at most one row. */
    for (; st == ULP_OK && pc->next_a < na && pc->r->n_rows < max_rows; pc->next_a++)
        st = pair_a(pc, pc->next_a, err);
    if (st == ULP_OK && pc->next_a == na)
        st = pair_only_b(pc, max_rows, err);
    *done = pc->next_a == na && pc->next_b == nb;
    if (st == ULP_OK && *done)
        st = check_selection(pc, err); /* the end: was anything selected? */
    *pairs = pc->pairs;
    *npairs = pc->npairs;
    return st;
}

void ulp__pairing_low(const ulp__pairing *pc, size_t *low_a, size_t *low_b)
{
    /* The whole tables' pairing looks anywhere in either snapshot. */
    *low_a = pc->lean != NULL ? pc->next_a : 0;
    *low_b = pc->lean != NULL ? ulp__lean_low_b(pc->lean) : 0;
}

void ulp__pairing_free(ulp__pairing *pc)
{
    if (pc == NULL)
        return;
    ulp__lean_free(pc->lean);
    ulp__site_keys_free(pc->sk);
    free(pc->names);
    free(pc->b_used);
    free(pc->a_done);
    ulp__names_free(pc->na);
    ulp__names_free(pc->nb);
    free(pc->segs.v);
    free(pc->pairs);
    free(pc);
}

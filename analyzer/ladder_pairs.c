/*
 * One compare of a ladder (ladder.h): two runs rank by rank with
 * ulp_diff_run(), single-threaded, keeping only the pair's summary, its
 * differing keys and its first divergence.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"
#include "digest_compare.h"
#include "ladder_priv.h"
#include "ulpprof/digest.h"
#include "ulpprof/verdict.h"

size_t ulp_ladder_pair_index(size_t n, size_t a, size_t b)
{
    if (a > b) {
        size_t t = a;
        a = b;
        b = t;
    }
    /* Pairs (0,1..n-1), then (1,2..n-1), ...: row a starts after a*(2n-a-1)/2 pairs. */
    return a * (2 * n - a - 1) / 2 + (b - a - 1);
}

/*
 * The row of the first element whose bits differ: over the capture's row
 * axes when it records positions, else along axis 0; -1 when none.
 */
static int64_t first_row(const ulp_snapshot *sa, size_t ia, const ulp_snapshot *sb, size_t ib,
                         ulp_error *err, ulp_status *st)
{
    const ulp_capture_info *c = ulp_snapshot_capture(sa, ia);
    size_t es = ulp_dtype_size(c->dtype);
    uint64_t rows = c->row_rank > 0 && c->positions ? c->rows
                    : c->ndim >= 1                  ? (uint64_t)c->shape[0]
                                                    : 0;
    *st = ULP_OK;
    if (rows == 0 || es == 0)
        return -1;
    uint64_t per_row = c->elements / rows, chunk = 65536;
    unsigned char *x = malloc(chunk * es), *y = malloc(chunk * es);
    int64_t row = -1;
    if (!x || !y)
        *st = ulp__error(err, ULP_ENOMEM, "out of memory");
    for (uint64_t at = 0; *st == ULP_OK && row < 0 && at < c->elements; at += chunk) {
        uint64_t n = c->elements - at < chunk ? c->elements - at : chunk;
        if ((*st = ulp_snapshot_read(sa, ia, at, n, x, err)) != ULP_OK ||
            (*st = ulp_snapshot_read(sb, ib, at, n, y, err)) != ULP_OK)
            break;
        if (memcmp(x, y, n * es) == 0)
            continue;
        for (uint64_t k = 0; k < n; k++)
            if (memcmp(x + k * es, y + k * es, es) != 0) {
                row = per_row ? (int64_t)((at + k) / per_row) : 0;
                break;
            }
    }
    free(x);
    free(y);
    return row;
}

/* Layer order for "which divergence comes first": no layer (logits) after every layer. */
static int64_t layer_key(int32_t layer)
{
    return layer >= 0 ? layer : INT32_MAX;
}

static ulp_status note_first(ulp_ladder_pair *p, const ulp_diff_result *d, int rank,
                             const ulp_snapshot *sa, const ulp_snapshot *sb, ulp_error *err)
{
    const ulp_diff_row *row = &d->rows[d->first_divergence];
    if (p->has_first && layer_key(p->first.layer) <= layer_key(row->layer))
        return ULP_OK;
    char *name = strdup(row->name);
    if (name == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    free(p->first.capture);
    p->has_first = 1;
    p->first = (ulp_ladder_divergence){.capture = name,
                                       .occurrence = row->occurrence,
                                       .layer = row->layer,
                                       .rank = rank,
                                       .status = row->status,
                                       .differing = row->m.differing,
                                       .elements = row->elements,
                                       .max_ulp = row->m.max_ulp,
                                       .row = -1,
                                       .request = -1,
                                       .position = -1};
    if (row->aligned) {
        /* The diff paired the rows by token: its first differing key is the place. */
        p->first.request = row->first_request;
        p->first.position = row->first_position;
        return ULP_OK;
    }
    if (row->status != ULP_DIFF_DIFFERS)
        return ULP_OK;
    ptrdiff_t ia = ulp_snapshot_find(sa, row->name, row->occurrence);
    ptrdiff_t ib = ulp_snapshot_find(sb, row->name, row->occurrence);
    ulp_status st = ULP_OK;
    if (ia >= 0 && ib >= 0)
        p->first.row = first_row(sa, (size_t)ia, sb, (size_t)ib, err, &st);
    const ulp_capture_info *c = ia >= 0 ? ulp_snapshot_capture(sa, (size_t)ia) : NULL;
    if (c && c->positions && p->first.row >= 0 && (uint64_t)p->first.row < c->rows) {
        p->first.position = c->positions[p->first.row];
        p->first.request = c->requests ? c->requests[p->first.row] : 0;
    }
    return st;
}

/* The pair's verdict and cache witness over its rank pairs (ulpprof/verdict.h). */
static ulp_status note_verdict(ulp_ladder_pair *p, const ulp_diff_result *d, const ulp_snapshot *sa,
                               const ulp_snapshot *sb, ulp_error *err)
{
    ulp_diff_verdict *v = NULL;
    ulp_status st = ulp_diff_verdict_compute(sa, sb, d, &v, err);
    if (st != ULP_OK)
        return st;
    if (v->kind == ULP_VERDICT_DEFECT || p->verdict == ULP_VERDICT_IDENTICAL ||
        (p->verdict == ULP_VERDICT_UNKNOWN && v->kind == ULP_VERDICT_ROUNDING))
        if (p->verdict != ULP_VERDICT_DEFECT)
            p->verdict = (int)v->kind;
    if (v->witness == ULP_WITNESS_TAKEN || p->cache_witness == ULP_WITNESS_NOT_CACHE ||
        (p->cache_witness == ULP_WITNESS_UNKNOWN && v->witness == ULP_WITNESS_NONE))
        if (p->cache_witness != ULP_WITNESS_TAKEN)
            p->cache_witness = (int)v->witness;
    ulp_diff_verdict_free(v);
    return ULP_OK;
}

/* A rank only one run has was not compared: the runs differ there, as they
 * do where one file has a capture the other lacks. */
static void missing_ranks_differ(ulp_ladder_pair *p)
{
    if (p->ranks_only_a > 0 || p->ranks_only_b > 0)
        p->identical = 0;
}

/*
 * A rank pair where a side holds row digests only (FORMAT.md, "Digests"):
 * compared by digest, rows being capture names and the first divergence
 * the digest diff's (the first differing name in A's write order, its
 * first differing (request, position)); the /run keys as the diff finds
 * them.  B's requests are taken under A's numbers by their fed token ids,
 * and where those part (digest_parts.h), the rows of that request from the
 * parting position on were fed other tokens: they are left out of the
 * compare, and the pair says where the streams part (the lowest request's).
 */
static ulp_status digest_pair(ulp_ladder_pair *p, int rank, const ulp_snapshot *sa,
                              const ulp_snapshot *sb, const char *pa, const char *pb,
                              ulp_error *err)
{
    ulp_diff_ladder keys;
    ulp_digest_result *g = NULL;
    uint64_t after = 0;
    ulp_status st = ulp__ladder_run(sa, sb, &keys, err);
    if (st != ULP_OK)
        return st;
    st = ulp__digest_compare_cut(pa, pb, sa, sb, &after, &g, err);
    if (st == ULP_OK && p->n_ranks == 0)
        st = ulp__ladder_keys_set(p, keys.keys, keys.n_keys, err);
    if (st == ULP_OK) {
        p->n_ranks++;
        p->identical &= g->identical != 0 && g->nparts == 0;
        p->rows_after_part += after;
        p->parted_requests += g->nparts;
        for (size_t q = 0; q < g->nnames; q++) {
            const ulp_digest_name *nm = &g->names[q];
            p->rows++;
            p->differing_rows += nm->differing + nm->only_a + nm->only_b > 0;
            p->elements_compared += nm->compared;
        }
        if ((!g->identical || g->nparts > 0) && p->verdict == 0)
            p->verdict = ULP_VERDICT_UNKNOWN;
        if (g->nparts > 0 && !p->streams_part) {
            const ulp_digest_part *f = &g->parts[0];
            p->streams_part = 1;
            p->part = *f;
            p->part_rank = rank;
            g->parts[0].source = NULL; /* the pair's now */
        }
    }
    if (st == ULP_OK && g->first >= 0 && !p->has_first) {
        const ulp_digest_name *nm = &g->names[g->first];
        char *name = strdup(nm->name);
        if (name == NULL)
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
        else
            p->first = (ulp_ladder_divergence){.capture = name,
                                               .occurrence = -1,
                                               .layer = -1,
                                               .rank = rank,
                                               .status = ULP_DIFF_DIFFERS,
                                               .differing = nm->differing,
                                               .elements = nm->compared,
                                               .row = -1,
                                               .request = nm->has_first ? nm->first_request : -1,
                                               .position = nm->has_first ? nm->first_position : -1};
        p->has_first = name != NULL;
    }
    ulp_digest_result_free(g);
    ulp__ladder_free(&keys);
    return st;
}

ulp_status ulp__ladder_compare_pair(const ulp__ladder_ctx *w, ulp_ladder_pair *p, ulp_error *err)
{
    const ulp_ladder_run *ra = &w->r->runs[p->a], *rb = &w->r->runs[p->b];
    p->identical = 1;
    size_t i = 0, k = 0;
    ulp_status st = ULP_OK;
    while (st == ULP_OK && (i < ra->n_files || k < rb->n_files)) {
        int xa = i < ra->n_files ? ra->files[i].rank : INT32_MAX;
        int xb = k < rb->n_files ? rb->files[k].rank : INT32_MAX;
        if (xa != xb) {
            if (xa < xb) {
                p->ranks_only_a++;
                i++;
            } else {
                p->ranks_only_b++;
                k++;
            }
            continue;
        }
        const ulp_snapshot *sa = w->snaps[p->a][i], *sb = w->snaps[p->b][k];
        if (w->digest[p->a][i] || w->digest[p->b][k]) {
            st = digest_pair(p, xa, sa, sb, ra->files[i].path, rb->files[k].path, err);
            i++;
            k++;
            continue;
        }
        ulp_diff_result *d = NULL;
        if ((st = ulp_diff_run(sa, sb, w->diff, &d, err)) != ULP_OK)
            break;
        if (d->n_rows == 0) {
            st = ulp__error(err, ULP_EINVAL, "'%s' and '%s': nothing to compare (no capture%s)",
                            ra->files[i].path, rb->files[k].path,
                            w->diff->match || w->diff->role ? " selected" : "");
        } else {
            if (p->n_ranks == 0)
                st = ulp__ladder_keys_set(p, d->ladder.keys, d->ladder.n_keys, err);
            p->n_ranks++;
            p->identical &= d->identical != 0;
            p->rows += d->n_rows;
            p->elements_compared += d->elements_compared;
            for (size_t q = 0; q < d->n_rows; q++)
                p->differing_rows += d->rows[q].status != ULP_DIFF_IDENTICAL;
            for (size_t q = 0; q < d->n_logits; q++) {
                p->argmax_flips += d->logits[q].argmax_flips;
                p->logits_rows += d->logits[q].rows;
            }
            if (st == ULP_OK && d->has_first_divergence)
                st = note_first(p, d, xa, sa, sb, err);
            if (st == ULP_OK)
                st = note_verdict(p, d, sa, sb, err);
        }
        ulp_diff_result_free(d);
        i++;
        k++;
    }
    if (st == ULP_OK && p->n_ranks == 0)
        st =
            ulp__error(err, ULP_EINVAL, "'%s' and '%s' have no rank in common", ra->path, rb->path);
    missing_ranks_differ(p);
    return st;
}

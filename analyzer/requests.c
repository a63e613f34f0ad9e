/*
 * Requests paired by their tokens (FORMAT.md "Requests paired by their
 * tokens"): batch 1 and batch 4 number the same prompt differently (its
 * batch row, the order its request arrived in), so with recorded token ids
 * B's requests are renumbered onto A's before any key is gathered:
 *   - a request's prompt is its rows in the first (lowest seq) capture of
 *     the ids' name that holds it: the prefill pass, before decode parts;
 *   - B's request pairs with A's whose prompt is the same (first pass) or
 *     agrees with it on every position both have, at least one (second
 *     pass: one a prefix of the other); within a pass, B's requests in
 *     ascending number take A's first unpaired match, so two requests with
 *     the same tokens pair in order;
 *   - a request of B that pairs with none keeps its number, unless that is
 *     the number of an A request paired with another; then it is kept
 *     apart under a number neither run has (its keys are only in B).
 * When every pair keeps its number, nothing is renumbered (as before).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"

typedef struct tok {
    int64_t request, seq, position, token;
} tok;

/* One request of one side: its prompt's (position, token) rows, by position. */
typedef struct req {
    int64_t id;
    const tok *v;
    size_t n;
    ptrdiff_t partner; /* index on the other side; -1 */
} req;

typedef struct side {
    tok *toks;
    req *reqs;
    size_t nreq;
} side;

static int tok_cmp(const void *pa, const void *pb)
{
    const tok *a = pa, *b = pb;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return a->position < b->position ? -1 : a->position > b->position;
}

static void side_free(side *s)
{
    free(s->toks);
    free(s->reqs);
}

/* Every row of the ids' captures idx[0..n), then the prompt of each request. */
static ulp_status side_build(const ulp_snapshot *s, const size_t *idx, size_t n, side *out,
                             ulp_error *err)
{
    size_t total = 0, k = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n; i++)
        total += (size_t)ulp_snapshot_capture(s, idx[i])->rows;
    out->toks = malloc((total ? total : 1) * sizeof *out->toks);
    out->reqs = malloc((total ? total : 1) * sizeof *out->reqs);
    if (out->toks == NULL || out->reqs == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, idx[i]);
        size_t sz = ulp_dtype_size(c->dtype);
        unsigned char *buf = malloc((size_t)c->rows * sz + 1);
        if (buf == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        ulp_status st = ulp_snapshot_read(s, idx[i], 0, c->rows, buf, err);
        if (st != ULP_OK) {
            free(buf);
            return st;
        }
        for (uint64_t r = 0; r < c->rows; r++, k++) {
            tok *t = &out->toks[k];
            t->request = c->requests != NULL ? c->requests[r] : 0;
            t->seq = c->seq;
            t->position = c->positions[r];
            t->token =
                (int64_t)ulp_dtype_to_double(c->dtype, ulp_dtype_load_bits(c->dtype, buf + r * sz));
        }
        free(buf);
    }
    qsort(out->toks, total, sizeof *out->toks, tok_cmp);
    for (size_t i = 0; i < total;) {
        size_t j = i;
        while (j < total && out->toks[j].request == out->toks[i].request &&
               out->toks[j].seq == out->toks[i].seq)
            j++;
        req *q = &out->reqs[out->nreq++];
        q->id = out->toks[i].request;
        q->v = out->toks + i;
        q->n = j - i;
        q->partner = -1;
        while (j < total && out->toks[j].request == q->id)
            j++; /* the request's later passes */
        i = j;
    }
    return ULP_OK;
}

/* 2: the same prompt; 1: they agree on every common position, at least one; 0: else. */
static int match(const req *x, const req *y)
{
    size_t i = 0, j = 0, common = 0;
    while (i < x->n && j < y->n) {
        if (x->v[i].position != y->v[j].position) {
            int lt = x->v[i].position < y->v[j].position;
            i += lt;
            j += !lt;
            continue;
        }
        if (x->v[i].token != y->v[j].token)
            return 0;
        common++;
        i++;
        j++;
    }
    if (common == 0)
        return 0;
    return common == x->n && common == y->n ? 2 : 1;
}

static void pair_pass(side *sa, side *sb, int want)
{
    for (size_t j = 0; j < sb->nreq; j++) {
        if (sb->reqs[j].partner >= 0)
            continue;
        for (size_t i = 0; i < sa->nreq; i++) {
            if (sa->reqs[i].partner < 0 && match(&sa->reqs[i], &sb->reqs[j]) >= want) {
                sa->reqs[i].partner = (ptrdiff_t)j;
                sb->reqs[j].partner = (ptrdiff_t)i;
                break;
            }
        }
    }
}

/* 1 when A's request `id` is paired with a request of B. */
static int paired_a(const side *sa, int64_t id)
{
    for (size_t i = 0; i < sa->nreq; i++)
        if (sa->reqs[i].id == id)
            return sa->reqs[i].partner >= 0;
    return 0;
}

static int pair_cmp(const void *pa, const void *pb)
{
    const ulp_diff_request_pair *a = pa, *b = pb;
    return a->b < b->b ? -1 : a->b > b->b;
}

static ulp_status renumber(const side *sa, const side *sb, ulp_diff_request_pair **out,
                           size_t *nout, ulp_error *err)
{
    int moved = 0;
    int64_t top = INT64_MIN;
    for (size_t j = 0; j < sb->nreq; j++) {
        const req *q = &sb->reqs[j];
        moved |= q->partner >= 0 && sa->reqs[q->partner].id != q->id;
        top = q->id > top ? q->id : top;
    }
    for (size_t i = 0; i < sa->nreq; i++)
        top = sa->reqs[i].id > top ? sa->reqs[i].id : top;
    if (!moved || top > INT64_MAX - (int64_t)sb->nreq - 1)
        return ULP_OK; /* every pair keeps its number (or no number is left over) */
    ulp_diff_request_pair *v = calloc(sb->nreq ? sb->nreq : 1, sizeof *v);
    if (v == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    size_t n = 0;
    for (size_t j = 0; j < sb->nreq; j++) {
        const req *q = &sb->reqs[j];
        if (q->partner >= 0) {
            if (sa->reqs[q->partner].id != q->id)
                v[n++] = (ulp_diff_request_pair){q->id, sa->reqs[q->partner].id, 1};
        } else if (paired_a(sa, q->id)) {
            v[n++] = (ulp_diff_request_pair){q->id, ++top, 0};
        }
    }
    qsort(v, n, sizeof *v, pair_cmp);
    *out = v;
    *nout = n;
    return ULP_OK;
}

ulp_status ulp__requests_pairs(const ulp_snapshot *a, const size_t *ia, size_t na,
                               const ulp_snapshot *b, const size_t *ib, size_t nb,
                               ulp_diff_request_pair **out, size_t *nout, ulp_error *err)
{
    *out = NULL;
    *nout = 0;
    side sa, sb;
    ulp_status st = side_build(a, ia, na, &sa, err);
    if (st == ULP_OK)
        st = side_build(b, ib, nb, &sb, err);
    else
        memset(&sb, 0, sizeof sb);
    if (st == ULP_OK) {
        pair_pass(&sa, &sb, 2);
        pair_pass(&sa, &sb, 1);
        st = renumber(&sa, &sb, out, nout, err);
    }
    side_free(&sa);
    side_free(&sb);
    return st;
}

ulp_status ulp__requests_pair(const ulp_snapshot *a, const size_t *ia, size_t na,
                              const ulp_snapshot *b, const size_t *ib, size_t nb,
                              ulp_diff_result *r, ulp_error *err)
{
    return ulp__requests_pairs(a, ia, na, b, ib, nb, &r->request_pairs, &r->n_request_pairs, err);
}

int64_t ulp__requests_map(const ulp_diff_request_pair *v, size_t n, int64_t request)
{
    if (n == 0)
        return request;
    ulp_diff_request_pair want = {request, 0, 0};
    const ulp_diff_request_pair *p = bsearch(&want, v, n, sizeof want, pair_cmp);
    return p != NULL ? p->a : request;
}

int64_t ulp__requests_b(const ulp_diff_result *r, int64_t request)
{
    return r == NULL ? request : ulp__requests_map(r->request_pairs, r->n_request_pairs, request);
}

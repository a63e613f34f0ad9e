/*
 * Parted token streams of a ladder pair (ladder_streams.h).  Digest mode
 * keeps the fed token ids and the produced `tokens` in full (FORMAT.md
 * "Digests"), so a pair of digest-only runs still says where its
 * generations part: per request, the first position both runs fed with
 * different tokens.  Only these small captures are read: a few bytes per
 * position, freed once the pair is done.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "ladder_streams.h"
#include "ulpprof/dtype.h"

typedef struct fed_row {
    const char *name; /* the snapshot's */
    int64_t request, position, token, step;
} fed_row;

typedef struct tok_row {
    int64_t request, position;
    double margin;
} tok_row;

typedef struct side {
    fed_row *fed;
    size_t n_fed;
    tok_row *tok;
    size_t n_tok;
} side;

static int fed_cmp(const void *x, const void *y)
{
    const fed_row *a = x, *b = y;
    int c = strcmp(a->name, b->name);
    if (c != 0)
        return c;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    return a->position < b->position ? -1 : a->position > b->position;
}

static int tok_cmp(const void *x, const void *y)
{
    const tok_row *a = x, *b = y;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    return a->position < b->position ? -1 : a->position > b->position;
}

static int64_t read_int(const unsigned char *p, size_t size, int is_unsigned)
{
    int64_t v64;
    int32_t v32;
    int16_t v16;
    switch (size) {
    case 8:
        memcpy(&v64, p, 8);
        return v64;
    case 4:
        memcpy(&v32, p, 4);
        return v32;
    case 2:
        memcpy(&v16, p, 2);
        return v16;
    default:
        return is_unsigned ? (int64_t)p[0] : (int64_t)(int8_t)p[0];
    }
}

/* A capture of fed token ids (FORMAT.md "Parted token streams"). */
static int is_fed(const ulp_capture_info *c)
{
    const ulp_dtype_info *t = ulp_dtype_get(c->dtype);
    return strcmp(c->role, "input") == 0 && t != NULL && !t->is_float && c->positions != NULL &&
           c->rows == c->elements && c->elements > 0;
}

/* The produced tokens (FORMAT.md "Produced tokens"): f64 [rows, 2], token and margin. */
static int is_tokens(const ulp_capture_info *c)
{
    return strcmp(c->name, "tokens") == 0 && c->dtype == ULP_DTYPE_F64 && c->ndim == 2 &&
           c->shape[1] == 2 && c->row_rank == 1 && c->positions != NULL;
}

static ulp_status load(const ulp_snapshot *s, side *d, ulp_error *err)
{
    size_t nf = 0, nt = 0, cnt = ulp_snapshot_capture_count(s);
    for (size_t i = 0; i < cnt; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        nf += is_fed(c) ? (size_t)c->rows : 0;
        nt += is_tokens(c) ? (size_t)c->rows : 0;
    }
    d->fed = malloc((nf ? nf : 1) * sizeof *d->fed);
    d->tok = malloc((nt ? nt : 1) * sizeof *d->tok);
    if (d->fed == NULL || d->tok == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    ulp_status st = ULP_OK;
    for (size_t i = 0; st == ULP_OK && i < cnt; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        int fed = is_fed(c), tok = !fed && is_tokens(c);
        if (!fed && !tok)
            continue;
        size_t es = ulp_dtype_size(c->dtype);
        unsigned char *buf = malloc((size_t)c->elements * es + 1);
        if (buf == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        st = ulp_snapshot_read(s, i, 0, c->elements, buf, err);
        for (uint64_t r = 0; st == ULP_OK && r < c->rows; r++) {
            int64_t req = c->requests ? c->requests[r] : 0;
            if (fed) {
                d->fed[d->n_fed++] = (fed_row){c->name, req, c->positions[r],
                                               read_int(buf + r * es, es, c->dtype == ULP_DTYPE_U8),
                                               c->has_step ? c->step : -1};
            } else {
                double m;
                memcpy(&m, buf + (2 * r + 1) * sizeof m, sizeof m);
                d->tok[d->n_tok++] = (tok_row){req, c->positions[r], m};
            }
        }
        free(buf);
    }
    if (d->n_fed > 1)
        qsort(d->fed, d->n_fed, sizeof *d->fed, fed_cmp);
    if (d->n_tok > 1)
        qsort(d->tok, d->n_tok, sizeof *d->tok, tok_cmp);
    return st;
}

/* The `tokens` row of `request` at the greatest position below `position`; its index
 * among the request's rows in *step.  NULL when none. */
static const tok_row *produced(const side *d, int64_t request, int64_t position, int64_t *step)
{
    const tok_row *best = NULL;
    int64_t k = 0;
    for (size_t i = 0; i < d->n_tok; i++) {
        const tok_row *t = &d->tok[i];
        if (t->request != request || t->position >= position)
            continue;
        best = t;
        *step = k++;
    }
    return best;
}

/* Records a part of `request` at x (A's row) against y (B's): the lowest position per request. */
static ulp_status note(ulp__ladder_parts *p, const fed_row *x, const fed_row *y, ulp_error *err)
{
    size_t i = 0;
    while (i < p->n && p->request[i] < x->request)
        i++;
    if (i < p->n && p->request[i] == x->request) {
        if (x->position < p->position[i])
            p->position[i] = x->position;
        else
            return ULP_OK;
    } else {
        int64_t *r = realloc(p->request, (p->n + 1) * sizeof *r);
        if (r != NULL)
            p->request = r;
        int64_t *q = r ? realloc(p->position, (p->n + 1) * sizeof *q) : NULL;
        if (q == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        p->position = q;
        memmove(p->request + i + 1, p->request + i, (p->n - i) * sizeof *r);
        memmove(p->position + i + 1, p->position + i, (p->n - i) * sizeof *q);
        p->request[i] = x->request;
        p->position[i] = x->position;
        p->n++;
    }
    if (i == 0) { /* the lowest request's part, at its lowest position so far */
        free(p->first.source);
        p->first = (ulp_ladder_streams_part){.source = strdup(x->name),
                                             .request = x->request,
                                             .position = x->position,
                                             .token_a = x->token,
                                             .token_b = y->token,
                                             .step_a = x->step,
                                             .step_b = y->step};
        if (p->first.source == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    return ULP_OK;
}

ulp_status ulp__ladder_streams_find(const ulp_snapshot *sa, const ulp_snapshot *sb, int rank,
                                    ulp__ladder_parts *out, ulp_error *err)
{
    memset(out, 0, sizeof *out);
    side a = {0}, b = {0};
    ulp_status st = load(sa, &a, err);
    if (st == ULP_OK)
        st = load(sb, &b, err);
    /* Both sorted by (name, request, position): per (name, request), the first
     * position both hold whose tokens differ. */
    size_t i = 0, j = 0;
    while (st == ULP_OK && i < a.n_fed && j < b.n_fed) {
        int c = fed_cmp(&a.fed[i], &b.fed[j]);
        if (c != 0) {
            c < 0 ? i++ : j++;
            continue;
        }
        if (a.fed[i].token != b.fed[j].token)
            st = note(out, &a.fed[i], &b.fed[j], err);
        i++, j++;
    }
    if (st == ULP_OK && out->n > 0) {
        ulp_ladder_streams_part *f = &out->first;
        int64_t step = -1, unused = -1;
        const tok_row *ta = produced(&a, f->request, f->position, &step);
        const tok_row *tb = produced(&b, f->request, f->position, &unused);
        f->rank = rank;
        f->produced_step = ta ? step : -1;
        f->margin_a = ta ? ta->margin : (double)NAN;
        f->margin_b = tb ? tb->margin : (double)NAN;
    }
    free(a.fed);
    free(a.tok);
    free(b.fed);
    free(b.tok);
    if (st != ULP_OK)
        ulp__ladder_parts_free(out);
    return st;
}

void ulp__ladder_parts_free(ulp__ladder_parts *p)
{
    free(p->request);
    free(p->position);
    free(p->first.source);
    memset(p, 0, sizeof *p);
}

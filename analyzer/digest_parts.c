/*
 * Parted token streams of two snapshots (digest_parts.h).  A request's fed
 * tokens are the run's fed token ids (gen_prompts.c: one name, the first
 * capture that feeds a position); B's requests are taken under A's
 * numbers; per request, the first position both feed whose tokens differ.
 * The margins come from the produced `tokens` (FORMAT.md "Produced
 * tokens"), the request's row at the greatest position below the parting.
 * Only these small captures are read: a few bytes per position.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"
#include "digest_parts.h"
#include "gen_prompts.h"
#include "produced_tokens.h"

typedef struct tok_row {
    int64_t request, position;
    double margin;
} tok_row;

static int fed_cmp(const void *x, const void *y)
{
    const ulp__fed *a = x, *b = y;
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

/* The captures of `name` in s, into *idx[0..*n). */
static ulp_status indices(const ulp_snapshot *s, const char *name, size_t **idx, size_t *n,
                          ulp_error *err)
{
    size_t cnt = ulp_snapshot_capture_count(s);
    *n = 0;
    if ((*idx = malloc((cnt ? cnt : 1) * sizeof **idx)) == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; i < cnt; i++)
        if (strcmp(ulp_snapshot_capture(s, i)->name, name) == 0)
            (*idx)[(*n)++] = i;
    return ULP_OK;
}

ulp_status ulp__digest_requests(const ulp_snapshot *sa, const ulp_snapshot *sb,
                                ulp_diff_request_pair **v, size_t *n, ulp_error *err)
{
    *v = NULL;
    *n = 0;
    const char *name = ulp__prompts_name(sa);
    if (name == NULL || !ulp__prompts_named(sb, name))
        return ULP_OK;
    size_t *ia = NULL, *ib = NULL, na = 0, nb = 0;
    ulp_status st = indices(sa, name, &ia, &na, err);
    if (st == ULP_OK)
        st = indices(sb, name, &ib, &nb, err);
    if (st == ULP_OK)
        st = ulp__requests_pairs(sa, ia, na, sb, ib, nb, v, n, err);
    free(ia);
    free(ib);
    return st;
}

/* The produced tokens of s, requests through pairs[0..np), by (request, position). */
static ulp_status tokens_read(const ulp_snapshot *s, const ulp_diff_request_pair *pairs, size_t np,
                              tok_row **out, size_t *n, ulp_error *err)
{
    size_t cnt = ulp_snapshot_capture_count(s), total = 0;
    *n = 0;
    for (size_t i = 0; i < cnt; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        ulp_status st = ulp__tokens_check(c, ulp_snapshot_path(s), err);
        if (st != ULP_OK)
            return st;
        total += ulp__tokens_named(c->name) ? (size_t)c->rows : 0;
    }
    if ((*out = malloc((total ? total : 1) * sizeof **out)) == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (!ulp__tokens_named(c->name))
            continue;
        double *buf = malloc((size_t)c->elements * sizeof *buf + 1);
        if (buf == NULL)
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        ulp_status st = ulp_snapshot_read(s, i, 0, c->elements, buf, err);
        for (uint64_t r = 0; st == ULP_OK && r < c->rows; r++) {
            int64_t req = ulp__requests_map(pairs, np, c->requests ? c->requests[r] : 0);
            (*out)[(*n)++] = (tok_row){req, c->positions[r], buf[2 * r + 1]};
        }
        free(buf);
        if (st != ULP_OK)
            return st;
    }
    if (*n > 1)
        qsort(*out, *n, sizeof **out, tok_cmp);
    return ULP_OK;
}

/* The `tokens` row of `request` at the greatest position below `position`; its index among
 * the request's rows in *step.  NULL when none. */
static const tok_row *produced(const tok_row *v, size_t n, int64_t request, int64_t position,
                               int64_t *step)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* the request's first row */
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].request < request)
            lo = mid + 1;
        else
            hi = mid;
    }
    const tok_row *best = NULL;
    for (size_t k = lo; k < n && v[k].request == request && v[k].position < position; k++) {
        best = &v[k];
        *step = (int64_t)(k - lo);
    }
    return best;
}

/* The margins of each part, from both sides' produced tokens. */
static ulp_status margins(const ulp_snapshot *sa, const ulp_snapshot *sb,
                          const ulp_diff_request_pair *pairs, size_t npairs, ulp_digest_part *v,
                          size_t n, ulp_error *err)
{
    tok_row *ta = NULL, *tb = NULL;
    size_t na = 0, nb = 0;
    ulp_status st = tokens_read(sa, NULL, 0, &ta, &na, err);
    if (st == ULP_OK)
        st = tokens_read(sb, pairs, npairs, &tb, &nb, err);
    for (size_t k = 0; st == ULP_OK && k < n; k++) {
        int64_t step = -1, unused = -1;
        const tok_row *x = produced(ta, na, v[k].request, v[k].position, &step);
        const tok_row *y = produced(tb, nb, v[k].request, v[k].position, &unused);
        v[k].produced_step = x ? step : -1;
        v[k].margin_a = x ? x->margin : (double)NAN;
        v[k].margin_b = y ? y->margin : (double)NAN;
    }
    free(ta);
    free(tb);
    return st;
}

/* Appends the part at x (A's fed token) against y (B's). */
static ulp_status append(ulp_digest_part **v, size_t *n, const char *source, const ulp__fed *x,
                         const ulp__fed *y, ulp_error *err)
{
    ulp_digest_part *q = realloc(*v, (*n + 1) * sizeof *q);
    if (q == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    *v = q;
    q[*n] = (ulp_digest_part){.source = strdup(source),
                              .request = x->request,
                              .position = x->position,
                              .token_a = x->token,
                              .token_b = y->token,
                              .step_a = x->step,
                              .step_b = y->step,
                              .produced_step = -1,
                              .margin_a = (double)NAN,
                              .margin_b = (double)NAN};
    if (q[(*n)++].source == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    return ULP_OK;
}

ulp_status ulp__digest_parts_find(const ulp_snapshot *sa, const ulp_snapshot *sb,
                                  const ulp_diff_request_pair *pairs, size_t npairs,
                                  ulp_digest_part **out, size_t *n, ulp_error *err)
{
    *out = NULL;
    *n = 0;
    ulp__prompts fa, fb;
    memset(&fb, 0, sizeof fb);
    ulp_status st = ulp__prompts_read(sa, &fa, err);
    if (st == ULP_OK && fa.name != NULL)
        st = ulp__prompts_read_named(sb, fa.name, &fb, err);
    if (st == ULP_OK && fb.name != NULL && npairs > 0) {
        for (size_t k = 0; k < fb.n; k++)
            fb.v[k].request = ulp__requests_map(pairs, npairs, fb.v[k].request);
        qsort(fb.v, fb.n, sizeof *fb.v, fed_cmp);
    }
    /* Both by (request, position): per request, the first position both feed otherwise. */
    size_t i = 0, j = 0;
    while (st == ULP_OK && fb.name != NULL && i < fa.n && j < fb.n) {
        const ulp__fed *x = &fa.v[i], *y = &fb.v[j];
        int c = fed_cmp(x, y);
        if (c != 0) {
            c < 0 ? i++ : j++;
            continue;
        }
        if (x->token != y->token && (*n == 0 || (*out)[*n - 1].request != x->request))
            st = append(out, n, fa.name, x, y, err);
        i++, j++;
    }
    if (st == ULP_OK && *n > 0)
        st = margins(sa, sb, pairs, npairs, *out, *n, err);
    ulp__prompts_free(&fa);
    ulp__prompts_free(&fb);
    if (st != ULP_OK) {
        ulp__digest_parts_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return st;
}

void ulp__digest_parts_free(ulp_digest_part *v, size_t n)
{
    for (size_t k = 0; k < n; k++)
        free(v[k].source);
    free(v);
}

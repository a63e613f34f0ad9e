/*
 * The generations of many runs (streams.h, FORMAT.md "Produced tokens").
 * Each run's `tokens` captures (f64 [rows, 2]: the token the step produced
 * and its top-1 minus top-2 margin, with positions and requests) give, per
 * request, its completion: the rows in position order.  Runs are grouped by
 * their completion's exact tokens; each group is held against the most
 * common one, step by step.  Only the tokens are kept: a few bytes per
 * generated token and run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "ulpprof/snapshot.h"
#include "ulpprof/streams.h"

#define TOKENS_NAME "tokens"

typedef struct trow {
    int64_t request, position;
    double token, margin;
} trow;

/* One run's completion of one request. */
typedef struct gen {
    size_t run;
    int64_t request;
    size_t n;
    int64_t *tokens, *positions;
    double *margins;
} gen;

static int trow_cmp(const void *pa, const void *pb)
{
    const trow *a = pa, *b = pb;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    return a->position < b->position ? -1 : a->position > b->position;
}

static int is_tokens(const ulp_capture_info *c)
{
    return strcmp(c->name, TOKENS_NAME) == 0 && c->dtype == ULP_DTYPE_F64 && c->ndim == 2 &&
           c->shape[1] == 2 && c->row_rank == 1 && c->positions != NULL;
}

/* Every produced-token row of one file, sorted by (request, position). */
static ulp_status read_rows(const char *path, trow **out, size_t *n_out, ulp_error *err)
{
    ulp_snapshot *s = NULL;
    ulp_status st = ulp_snapshot_open(path, &s, err);
    if (st != ULP_OK)
        return st;
    size_t total = 0;
    for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++)
        if (is_tokens(ulp_snapshot_capture(s, i)))
            total += (size_t)ulp_snapshot_capture(s, i)->rows;
    trow *rows = malloc((total ? total : 1) * sizeof *rows);
    double *buf = NULL;
    size_t k = 0;
    if (rows == NULL)
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; st == ULP_OK && i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (!is_tokens(c))
            continue;
        free(buf);
        if ((buf = malloc((c->elements ? c->elements : 1) * sizeof *buf)) == NULL) {
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            break;
        }
        if ((st = ulp_snapshot_read(s, i, 0, c->elements, buf, err)) != ULP_OK)
            break;
        for (uint64_t r = 0; r < c->rows; r++, k++) {
            rows[k].request = c->requests ? c->requests[r] : 0;
            rows[k].position = c->positions[r];
            rows[k].token = buf[2 * r];
            rows[k].margin = buf[2 * r + 1];
            if (!(rows[k].token >= 0 && rows[k].token < 9007199254740992.0) ||
                rows[k].token != floor(rows[k].token)) {
                st = ulp__error(err, ULP_EBADATTR,
                                "'%s': capture '%s' row %llu holds %g, not a token id", path,
                                c->name, (unsigned long long)r, rows[k].token);
                break;
            }
        }
    }
    free(buf);
    ulp_snapshot_close(s);
    if (st == ULP_OK && total == 0)
        st = ulp__error(err, ULP_EINVAL,
                        "'%s' records no produced tokens (no '" TOKENS_NAME
                        "' capture: FORMAT.md \"Produced tokens\")",
                        path);
    if (st != ULP_OK) {
        free(rows);
        return st;
    }
    qsort(rows, total, sizeof *rows, trow_cmp);
    for (size_t i = 1; i < total; i++)
        if (rows[i].request == rows[i - 1].request && rows[i].position == rows[i - 1].position) {
            long long req = (long long)rows[i].request, pos = (long long)rows[i].position;
            free(rows);
            return ulp__error(err, ULP_EBADATTR,
                              "'%s': two produced tokens at request %lld, position %lld", path, req,
                              pos);
        }
    *out = rows;
    *n_out = total;
    return ULP_OK;
}

static int same_tokens(const ulp_streams_group *g, const gen *b)
{
    return g->n_tokens == b->n && memcmp(g->tokens, b->tokens, b->n * sizeof *b->tokens) == 0;
}

static int group_cmp(const void *pa, const void *pb)
{
    const ulp_streams_group *a = pa, *b = pb;
    if (a->n_runs != b->n_runs)
        return a->n_runs > b->n_runs ? -1 : 1;
    return a->runs[0] < b->runs[0] ? -1 : a->runs[0] > b->runs[0];
}

static void part(ulp_streams_group *g, const ulp_streams_group *c)
{
    size_t k = 0, n = g->n_tokens < c->n_tokens ? g->n_tokens : c->n_tokens;
    while (k < n && g->tokens[k] == c->tokens[k])
        k++;
    g->part_step = (int64_t)k;
    g->token = k < g->n_tokens ? g->tokens[k] : -1;
    g->token_common = k < c->n_tokens ? c->tokens[k] : -1;
    g->margin = k < g->n_tokens ? g->margins[k] : (double)NAN;
    g->margin_common = k < c->n_tokens ? c->margins[k] : (double)NAN;
}

/* Groups gens[0..n) (one request, runs ascending). */
static ulp_status group_request(ulp_streams_request *q, gen *gens, size_t n, ulp_error *err)
{
    q->request = gens[0].request;
    q->n_runs = n;
    if ((q->groups = calloc(n, sizeof *q->groups)) == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        size_t g = 0;
        while (g < q->n_groups && !same_tokens(&q->groups[g], &gens[i]))
            g++;
        ulp_streams_group *G = &q->groups[g];
        if (g == q->n_groups) {
            q->n_groups++;
            if ((G->runs = malloc(n * sizeof *G->runs)) == NULL)
                return ulp__error(err, ULP_ENOMEM, "out of memory");
            G->n_tokens = gens[i].n;
            G->tokens = gens[i].tokens;
            G->margins = gens[i].margins;
            G->positions = gens[i].positions;
        }
        G->runs[G->n_runs++] = gens[i].run;
    }
    qsort(q->groups, q->n_groups, sizeof *q->groups, group_cmp);
    const ulp_streams_group *c = &q->groups[0];
    q->groups[0].common = 1;
    q->groups[0].part_step = -1;
    q->groups[0].token = q->groups[0].token_common = -1;
    q->groups[0].margin = q->groups[0].margin_common = (double)NAN;
    size_t longest = 0;
    for (size_t g = 1; g < q->n_groups; g++) {
        part(&q->groups[g], c);
        if ((size_t)q->groups[g].part_step + 1 > longest)
            longest = (size_t)q->groups[g].part_step + 1;
    }
    q->n_hist = longest;
    if ((q->hist = calloc(longest + 1, sizeof *q->hist)) == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t g = 1; g < q->n_groups; g++)
        q->hist[q->groups[g].part_step] += q->groups[g].n_runs;
    return ULP_OK;
}

static int gen_cmp(const void *pa, const void *pb)
{
    const gen *a = pa, *b = pb;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    return a->run < b->run ? -1 : a->run > b->run;
}

ulp_status ulp_streams_group_runs(const char *const *paths, size_t n, ulp_streams_result **out,
                                  ulp_error *err)
{
    *out = NULL;
    ulp_streams_result *r = calloc(1, sizeof *r);
    gen *gens = NULL;
    size_t n_gens = 0, cap = 0;
    ulp_status st = r ? ULP_OK : ulp__error(err, ULP_ENOMEM, "out of memory");
    if (st == ULP_OK && (r->paths = calloc(n + 1, sizeof *r->paths)) == NULL)
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; st == ULP_OK && i < n; i++) {
        if ((r->paths[i] = strdup(paths[i])) == NULL) {
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            break;
        }
        r->n_runs = i + 1;
        trow *rows = NULL;
        size_t nr = 0;
        if ((st = read_rows(paths[i], &rows, &nr, err)) != ULP_OK)
            break;
        for (size_t a = 0; st == ULP_OK && a < nr;) {
            size_t b = a;
            while (b < nr && rows[b].request == rows[a].request)
                b++;
            if (n_gens == cap) {
                cap = cap ? 2 * cap : 16;
                gen *g2 = realloc(gens, cap * sizeof *gens);
                if (g2 == NULL) {
                    st = ulp__error(err, ULP_ENOMEM, "out of memory");
                    break;
                }
                gens = g2;
            }
            gen *g = &gens[n_gens];
            g->run = i;
            g->request = rows[a].request;
            g->n = b - a;
            g->tokens = malloc(g->n * sizeof *g->tokens);
            g->margins = malloc(g->n * sizeof *g->margins);
            g->positions = malloc(g->n * sizeof *g->positions);
            if (!g->tokens || !g->margins || !g->positions) {
                free(g->tokens);
                free(g->margins);
                free(g->positions);
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
                break;
            }
            n_gens++;
            for (size_t k = a; k < b; k++) {
                g->tokens[k - a] = (int64_t)rows[k].token;
                g->margins[k - a] = rows[k].margin;
                g->positions[k - a] = rows[k].position;
            }
            a = b;
        }
        free(rows);
    }
    if (st == ULP_OK) {
        qsort(gens, n_gens, sizeof *gens, gen_cmp);
        size_t nq = 0;
        for (size_t i = 0; i < n_gens; i++)
            nq += i == 0 || gens[i].request != gens[i - 1].request;
        if ((r->requests = calloc(nq + 1, sizeof *r->requests)) == NULL)
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
        for (size_t a = 0; st == ULP_OK && a < n_gens;) {
            size_t b = a;
            while (b < n_gens && gens[b].request == gens[a].request)
                b++;
            st = group_request(&r->requests[r->n_requests++], gens + a, b - a, err);
            a = b;
        }
    }
    /* The groups point at their first run's tokens; the rest are dropped. */
    for (size_t i = 0; i < n_gens; i++) {
        int kept = 0;
        for (size_t q = 0; r && r->requests && q < r->n_requests && !kept; q++)
            for (size_t g = 0; g < r->requests[q].n_groups && !kept; g++)
                kept = r->requests[q].groups[g].tokens == gens[i].tokens;
        if (!kept) {
            free(gens[i].tokens);
            free(gens[i].margins);
            free(gens[i].positions);
        }
    }
    free(gens);
    if (st != ULP_OK) {
        ulp_streams_result_free(r);
        return st;
    }
    *out = r;
    return ULP_OK;
}

void ulp_streams_result_free(ulp_streams_result *r)
{
    if (r == NULL)
        return;
    for (size_t q = 0; r->requests && q < r->n_requests; q++) {
        ulp_streams_request *Q = &r->requests[q];
        for (size_t g = 0; Q->groups && g < Q->n_groups; g++) {
            free(Q->groups[g].runs);
            free((void *)(uintptr_t)Q->groups[g].tokens);
            free((void *)(uintptr_t)Q->groups[g].margins);
            free((void *)(uintptr_t)Q->groups[g].positions);
        }
        free(Q->groups);
        free(Q->hist);
    }
    free(r->requests);
    for (size_t i = 0; r->paths && i < r->n_runs; i++)
        free(r->paths[i]);
    free(r->paths);
    free(r);
}

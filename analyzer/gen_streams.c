/*
 * The generations of many runs (streams.h, FORMAT.md "Produced tokens").
 * Each run's `tokens` captures (f64 [rows, 2]: the token the step produced
 * and its top-1 minus top-2 margin, with positions and requests) give, per
 * request, its completion: the rows in position order.  Runs are grouped by
 * their completion's exact tokens; each group is held against the most
 * common one, step by step.  Only the tokens are kept: a few bytes per
 * generated token and run.
 *
 * Which request is which across runs: with fed token ids (gen_prompts.h),
 * its prompt -- the tokens fed up to the position of its first produced
 * token, so a prompt split into chunks or partly served from a prefix
 * cache is still the same prompt.  Runs are read in order; a run's
 * requests, in the order they first appear in its ids, join the first
 * request seen before with the same prompt (first pass) or one that ends
 * at the same position and agrees wherever both were fed (second pass)
 * and that has no request of this run yet; the rest are new.  Without ids
 * in any run, by number.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "gen_prompts.h"
#include "produced_tokens.h"
#include "ulpprof/snapshot.h"
#include "ulpprof/streams.h"

typedef struct trow {
    int64_t request, position;
    double token, margin;
} trow;

/* One run's completion of one request. */
typedef struct gen {
    size_t run;
    int64_t request;
    size_t key_run; /* sort keys: the request's first run and number there (by prompt) */
    int64_t key_request;
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

/* Every produced-token row of one file, sorted by (request, position). */
static ulp_status read_rows(const ulp_snapshot *s, const char *path, trow **out, size_t *n_out,
                            ulp_error *err)
{
    ulp_status st = ULP_OK;
    size_t total = 0;
    for (size_t i = 0; st == ULP_OK && i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (ulp__tokens_named(c->name) && (st = ulp__tokens_check(c, path, err)) == ULP_OK)
            total += (size_t)c->rows;
    }
    if (st != ULP_OK)
        return st;
    trow *rows = malloc((total ? total : 1) * sizeof *rows);
    double *buf = NULL;
    size_t k = 0;
    if (rows == NULL)
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; st == ULP_OK && i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (!ulp__tokens_named(c->name))
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
    if (st == ULP_OK && total == 0)
        st = ulp__error(err, ULP_EINVAL,
                        "'%s' records no produced tokens (no '" ULP__TOKENS_NAME
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
    if (a->key_run != b->key_run)
        return a->key_run < b->key_run ? -1 : 1;
    if (a->key_request != b->key_request)
        return a->key_request < b->key_request ? -1 : 1;
    return a->run < b->run ? -1 : a->run > b->run;
}

/* A request identified by its prompt: the first member's, and the last run that joined. */
typedef struct ident {
    ulp__fed *v;
    size_t n;
    size_t run, last_run;
    int64_t request;
} ident;

typedef struct idents {
    ident *v;
    size_t n, cap;
} idents;

typedef struct member {
    gen *g;
    ulp__prompt p;
} member;

static int member_cmp(const void *pa, const void *pb)
{
    const member *a = pa, *b = pb;
    if (a->p.seq != b->p.seq)
        return a->p.seq < b->p.seq ? -1 : 1;
    return a->p.row < b->p.row ? -1 : a->p.row > b->p.row;
}

static void idents_free(idents *id)
{
    for (size_t i = 0; i < id->n; i++)
        free(id->v[i].v);
    free(id->v);
}

static void join(const ident *d, gen *g)
{
    g->key_run = d->run;
    g->key_request = d->request;
}

/* Identifies the requests of run `run` (gens[0..n)) by their prompts (gen_prompts.h). */
static ulp_status identify(idents *id, const ulp__prompts *pr, size_t run, const char *path,
                           gen *gens, size_t n, ulp_error *err)
{
    member *m = malloc((n ? n : 1) * sizeof *m);
    if (m == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) {
        m[k].g = &gens[k];
        m[k].p = ulp__prompts_get(pr, gens[k].request, gens[k].positions[0]);
        if (m[k].p.n == 0) {
            long long req = (long long)gens[k].request, pos = (long long)gens[k].positions[0];
            free(m);
            return ulp__error(err, ULP_EBADATTR,
                              "'%s': request %lld produces tokens from position %lld but its "
                              "'%s' feeds it no token there or before: its prompt is unknown",
                              path, req, pos, pr->name);
        }
    }
    qsort(m, n, sizeof *m, member_cmp);
    for (int want = 2; want >= 1; want--)
        for (size_t k = 0; k < n; k++) {
            if (m[k].g == NULL)
                continue;
            for (size_t d = 0; d < id->n; d++) {
                ulp__prompt ref = {id->v[d].v, id->v[d].n, 0, 0};
                if (id->v[d].last_run != run && ulp__prompts_match(&ref, &m[k].p) >= want) {
                    id->v[d].last_run = run;
                    join(&id->v[d], m[k].g);
                    m[k].g = NULL;
                    break;
                }
            }
        }
    ulp_status st = ULP_OK;
    for (size_t k = 0; k < n && st == ULP_OK; k++) {
        if (m[k].g == NULL)
            continue;
        if (id->n == id->cap) {
            size_t cap = id->cap ? 2 * id->cap : 16;
            ident *v = realloc(id->v, cap * sizeof *v);
            if (v == NULL) {
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
                break;
            }
            id->v = v;
            id->cap = cap;
        }
        ident *d = &id->v[id->n];
        if ((d->v = malloc(m[k].p.n * sizeof *d->v)) == NULL) {
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            break;
        }
        memcpy(d->v, m[k].p.v, m[k].p.n * sizeof *d->v);
        d->n = m[k].p.n;
        d->run = d->last_run = run;
        d->request = m[k].g->request;
        id->n++;
        join(d, m[k].g);
    }
    free(m);
    return st;
}

/* The runs that gave tokens for the request (gens[0..n), runs ascending) and those that did not. */
static ulp_status present_missing(ulp_streams_request *q, const gen *gens, size_t n, size_t runs,
                                  ulp_error *err)
{
    q->present_runs = malloc((n ? n : 1) * sizeof *q->present_runs);
    q->present_requests = malloc((n ? n : 1) * sizeof *q->present_requests);
    q->missing_runs = malloc((runs - n + 1) * sizeof *q->missing_runs);
    if (!q->present_runs || !q->present_requests || !q->missing_runs)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < runs; i++) {
        if (k < n && gens[k].run == i) {
            q->present_runs[k] = i;
            q->present_requests[k] = gens[k].request;
            k++;
        } else {
            q->missing_runs[q->n_missing++] = i;
        }
    }
    return ULP_OK;
}

/* The growing list of every run's completions. */
typedef struct gens_list {
    gen *v;
    size_t n, cap;
} gens_list;

/* One completion per request of the rows[0..nr) of run `run`. */
static ulp_status add_gens(gens_list *gl, const trow *rows, size_t nr, size_t run, ulp_error *err)
{
    for (size_t a = 0; a < nr;) {
        size_t b = a;
        while (b < nr && rows[b].request == rows[a].request)
            b++;
        if (gl->n == gl->cap) {
            size_t cap = gl->cap ? 2 * gl->cap : 16;
            gen *g2 = realloc(gl->v, cap * sizeof *g2);
            if (g2 == NULL)
                return ulp__error(err, ULP_ENOMEM, "out of memory");
            gl->v = g2;
            gl->cap = cap;
        }
        gen *g = &gl->v[gl->n];
        g->run = run;
        g->request = g->key_request = rows[a].request;
        g->key_run = 0;
        g->n = b - a;
        g->tokens = malloc(g->n * sizeof *g->tokens);
        g->margins = malloc(g->n * sizeof *g->margins);
        g->positions = malloc(g->n * sizeof *g->positions);
        if (!g->tokens || !g->margins || !g->positions) {
            free(g->tokens);
            free(g->margins);
            free(g->positions);
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        gl->n++;
        for (size_t k = a; k < b; k++) {
            g->tokens[k - a] = (int64_t)rows[k].token;
            g->margins[k - a] = rows[k].margin;
            g->positions[k - a] = rows[k].position;
        }
        a = b;
    }
    return ULP_OK;
}

/* How the runs read so far identify their requests. */
typedef struct id_state {
    idents id;
    const char *with, *without; /* the first run with token ids, and without */
} id_state;

static ulp_status read_run(const char *path, size_t run, gens_list *gl, id_state *is,
                           ulp_streams_result *r, ulp_error *err)
{
    ulp_snapshot *s = NULL;
    ulp_status st = ulp_snapshot_open(path, &s, err);
    if (st != ULP_OK)
        return st;
    trow *rows = NULL;
    size_t nr = 0, first = gl->n;
    ulp__prompts pr;
    memset(&pr, 0, sizeof pr);
    if ((st = read_rows(s, path, &rows, &nr, err)) == ULP_OK)
        st = add_gens(gl, rows, nr, run, err);
    free(rows);
    if (st == ULP_OK)
        st = ulp__prompts_read(s, &pr, err);
    if (st == ULP_OK) {
        if (pr.name != NULL && is->with == NULL) {
            is->with = path;
            if ((r->ids_name = strdup(pr.name)) == NULL)
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        if (pr.name == NULL && is->without == NULL)
            is->without = path;
    }
    if (st == ULP_OK && is->with != NULL && is->without != NULL)
        st = ulp__error(err, ULP_EINVAL,
                        "'%s' records no fed token ids and '%s' does: its requests cannot be "
                        "identified by their prompts (FORMAT.md \"Produced tokens\")",
                        is->without, is->with);
    if (st == ULP_OK && pr.name != NULL)
        st = identify(&is->id, &pr, run, path, gl->v + first, gl->n - first, err);
    ulp__prompts_free(&pr);
    ulp_snapshot_close(s);
    return st;
}

static int same_key(const gen *a, const gen *b)
{
    return a->key_run == b->key_run && a->key_request == b->key_request;
}

ulp_status ulp_streams_group_runs(const char *const *paths, size_t n, ulp_streams_result **out,
                                  ulp_error *err)
{
    *out = NULL;
    ulp_streams_result *r = calloc(1, sizeof *r);
    gens_list gl = {0};
    id_state is;
    memset(&is, 0, sizeof is);
    ulp_status st = r ? ULP_OK : ulp__error(err, ULP_ENOMEM, "out of memory");
    if (st == ULP_OK && (r->paths = calloc(n + 1, sizeof *r->paths)) == NULL)
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
    for (size_t i = 0; st == ULP_OK && i < n; i++) {
        if ((r->paths[i] = strdup(paths[i])) == NULL) {
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            break;
        }
        r->n_runs = i + 1;
        st = read_run(paths[i], i, &gl, &is, r, err);
    }
    idents_free(&is.id);
    gen *gens = gl.v;
    size_t n_gens = gl.n;
    if (st == ULP_OK) {
        r->by_prompt = is.with != NULL;
        qsort(gens, n_gens, sizeof *gens, gen_cmp);
        size_t nq = 0;
        for (size_t i = 0; i < n_gens; i++)
            nq += i == 0 || !same_key(&gens[i], &gens[i - 1]);
        if ((r->requests = calloc(nq + 1, sizeof *r->requests)) == NULL)
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
        for (size_t a = 0; st == ULP_OK && a < n_gens;) {
            size_t b = a;
            while (b < n_gens && same_key(&gens[b], &gens[a]))
                b++;
            ulp_streams_request *q = &r->requests[r->n_requests++];
            st = group_request(q, gens + a, b - a, err);
            if (st == ULP_OK)
                st = present_missing(q, gens + a, b - a, n, err);
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
        free(Q->present_runs);
        free(Q->present_requests);
        free(Q->missing_runs);
    }
    free(r->requests);
    for (size_t i = 0; r->paths && i < r->n_runs; i++)
        free(r->paths[i]);
    free(r->paths);
    free(r->ids_name);
    free(r);
}

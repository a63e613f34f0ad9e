/*
 * Token streams that part (FORMAT.md "Parted token streams"): where the two
 * runs fed different tokens at a (request, position), every key of that
 * request from there on belongs to another token's stream -- another
 * computation, not a numeric divergence -- and the aligned rows leave
 * those keys out (align.c).  Found before the pairing, per request, at the
 * first position whose fed token differs:
 *   - from recorded token ids: a name whose captures all have role `input`,
 *     an integer dtype, `positions`, and one element per row (the token fed
 *     at that key);
 *   - else, inferred: at the first key (r, q) where the stream's entry (the
 *     first aligned activation name in A's seq order that lists no
 *     `inputs` and has no layer: the embedding, which looks a token's row
 *     up) differs, and the logits at (r, q - 1), computed before the
 *     entry's row at q on both sides, emit different tokens -- greedy
 *     decode feeds the token emitted at q - 1 at q.
 * The logits at q - 1 give the margins (and, inferred, the tokens).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"
#include "format/snapshot_summary.h"
#include "ulpprof/format.h"

/* A name's captures on both sides, all with positions. */
typedef struct side_rows {
    const size_t *ia, *ib;
    size_t na, nb;
} side_rows;

/* One key of one side: the capture and row that hold it. */
typedef struct kentry {
    int64_t request, position;
    size_t cap;
    uint64_t row;
} kentry;

static int kentry_cmp(const void *pa, const void *pb)
{
    const kentry *a = pa, *b = pb;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    return a->position < b->position ? -1 : a->position > b->position;
}

/* Every row of the captures idx[0..n), sorted by key (NULL when out of memory); B's
 * (renumber: the result) under the numbers its requests are compared under. */
static kentry *keys_of(const ulp_snapshot *s, const size_t *idx, size_t n, size_t *count,
                       const ulp_diff_result *renumber)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += (size_t)ulp_snapshot_capture(s, idx[i])->rows;
    kentry *e = malloc((total ? total : 1) * sizeof *e);
    if (e == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, idx[i]);
        for (uint64_t r = 0; r < c->rows; r++, k++) {
            e[k].request = c->requests != NULL ? c->requests[r] : 0;
            if (renumber != NULL)
                e[k].request = ulp__requests_b(renumber, e[k].request);
            e[k].position = c->positions[r];
            e[k].cap = idx[i];
            e[k].row = r;
        }
    }
    qsort(e, total, sizeof *e, kentry_cmp);
    *count = total;
    return e;
}

static const kentry *find_key(const kentry *e, size_t n, int64_t req, int64_t pos)
{
    kentry want = {req, pos, 0, 0};
    return bsearch(&want, e, n, sizeof *e, kentry_cmp);
}

static uint64_t row_len(const ulp_capture_info *c)
{
    uint64_t len = 1;
    for (int k = c->row_rank; k < c->ndim; k++)
        len *= (uint64_t)c->shape[k];
    return len;
}

/* One row's raw bits into buf (row_len elements). */
static ulp_status read_row(const ulp_snapshot *s, const kentry *k, void *buf, ulp_error *err)
{
    const ulp_capture_info *c = ulp_snapshot_capture(s, k->cap);
    uint64_t len = row_len(c);
    return ulp_snapshot_read(s, k->cap, k->row * len, len, buf, err);
}

/* The stream's names: token ids, the entry, the logits (lowest A seq of each kind). */
typedef struct stream_names {
    side_rows ids, entry, logits;
    int has_ids, has_entry, has_logits;
    int64_t seq_ids, seq_entry, seq_logits;
} stream_names;

static int all_ids(const ulp_snapshot *s, const size_t *idx, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, idx[i]);
        const ulp_dtype_info *d = ulp_dtype_get(c->dtype);
        if (d == NULL || d->is_float || c->row_rank != c->ndim || c->role == NULL ||
            strcmp(c->role, ulp_role_name(ULP_ROLE_INPUT)) != 0)
            return 0;
    }
    return 1;
}

static void consider(stream_names *sn, const ulp_snapshot *a, const ulp_snapshot *b,
                     const side_rows *sr)
{
    const ulp_capture_info *ca = ulp_snapshot_capture(a, sr->ia[0]);
    const ulp_capture_info *cb = ulp_snapshot_capture(b, sr->ib[0]);
    const char *role = ca->role ? ca->role : ulp_role_name(ULP_ROLE_ACTIVATION);
    if (all_ids(a, sr->ia, sr->na) && all_ids(b, sr->ib, sr->nb)) {
        if (!sn->has_ids || ca->seq < sn->seq_ids) {
            sn->ids = *sr;
            sn->has_ids = 1;
            sn->seq_ids = ca->seq;
        }
        return;
    }
    if (ca->dtype != cb->dtype || row_len(ca) != row_len(cb))
        return;
    if (strcmp(role, ulp_role_name(ULP_ROLE_LOGITS)) == 0) {
        if (!sn->has_logits || ca->seq < sn->seq_logits) {
            sn->logits = *sr;
            sn->has_logits = 1;
            sn->seq_logits = ca->seq;
        }
    } else if (strcmp(role, ulp_role_name(ULP_ROLE_ACTIVATION)) == 0) {
        if (!sn->has_entry || ca->seq < sn->seq_entry) {
            sn->entry = *sr;
            sn->has_entry = 1;
            sn->seq_entry = ca->seq;
        }
    }
}

/*
 * The first aligned activation in A's seq order is the entry only when it
 * looks a token up: it lists no inputs and belongs to no layer.  A layer's
 * output differs wherever the numerics do; taking it for the entry would
 * read every flip before a differing row as a parted stream.
 */
static void entry_check(stream_names *sn, const ulp_snapshot *a)
{
    const ulp_capture_info *c = sn->has_entry ? ulp_snapshot_capture(a, sn->entry.ia[0]) : NULL;
    if (c != NULL && (c->n_inputs != 0 || c->layer >= 0))
        sn->has_entry = 0;
}

static ulp_status find_names(const ulp__names *na, const ulp__names *nb, const ulp_snapshot *a,
                             const ulp_snapshot *b, stream_names *sn)
{
    size_t count = ulp_snapshot_capture_count(a);
    memset(sn, 0, sizeof *sn);
    for (size_t i = 0; i < count; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(a, i);
        side_rows sr;
        if (c->row_rank == 0)
            continue;
        sr.ia = ulp__names_find(na, c->name, &sr.na);
        if (sr.na == 0 || ulp_snapshot_capture(a, sr.ia[0])->seq != c->seq)
            continue; /* one look per name, at its first capture */
        sr.ib = ulp__names_find(nb, c->name, &sr.nb);
        if (ulp__names_positions(na, sr.ia, sr.na) != 1 ||
            ulp__names_positions(nb, sr.ib, sr.nb) != 1)
            continue;
        consider(sn, a, b, &sr);
    }
    entry_check(sn, a);
    return ULP_OK;
}

/* Parts found so far. */
typedef struct parts {
    ulp_diff_part *v;
    size_t n, cap;
} parts;

static int push_part(parts *p, const ulp_diff_part *x)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 4;
        ulp_diff_part *g = realloc(p->v, cap * sizeof *g);
        if (g == NULL)
            return -1;
        p->v = g;
        p->cap = cap;
    }
    p->v[p->n++] = *x;
    return 0;
}

/* The logits at (req, pos) on both sides: argmax and margin; 0 when a side lacks the key. */
typedef struct logits_ctx {
    const ulp_snapshot *a, *b;
    const ulp_diff_result *r; /* B's requests renumbered */
    kentry *ka, *kb;
    size_t nka, nkb;
    double *za, *zb;
    unsigned char *raw;
    uint64_t vocab;
} logits_ctx;

static ulp_status logits_at(logits_ctx *lc, int64_t req, int64_t pos, ulp__logits_row *out,
                            const ulp_capture_info **cap_a, int *found, ulp_error *err)
{
    *found = 0;
    if (lc->ka == NULL || pos < 0)
        return ULP_OK;
    const kentry *x = find_key(lc->ka, lc->nka, req, pos);
    const kentry *y = find_key(lc->kb, lc->nkb, req, pos);
    if (x == NULL || y == NULL)
        return ULP_OK;
    const ulp_capture_info *c = ulp_snapshot_capture(lc->a, x->cap);
    size_t sz = ulp_dtype_size(c->dtype);
    for (int side = 0; side < 2; side++) {
        const ulp_snapshot *s = side ? lc->b : lc->a;
        const kentry *k = side ? y : x;
        ulp_status st = read_row(s, k, lc->raw, err);
        if (st != ULP_OK)
            return st;
        double *z = side ? lc->zb : lc->za;
        ulp_dtype dt = ulp_snapshot_capture(s, k->cap)->dtype;
        for (uint64_t i = 0; i < lc->vocab; i++)
            z[i] = ulp_dtype_to_double(dt, ulp_dtype_load_bits(dt, lc->raw + i * sz));
    }
    ulp__logits_row_stats(lc->za, lc->zb, lc->vocab, out);
    *cap_a = c;
    *found = 1;
    return ULP_OK;
}

/* Fills the margins, the step and (inferred) the tokens of part p from the logits at p - 1. */
static ulp_status part_logits(logits_ctx *lc, ulp_diff_part *p, int *flip, ulp_error *err)
{
    ulp__logits_row rs;
    const ulp_capture_info *c = NULL;
    int found = 0;
    *flip = 0;
    p->has_logits = 0;
    p->margin_a = p->margin_b = (double)NAN;
    p->step = -1;
    ulp_status st = logits_at(lc, p->request, p->position - 1, &rs, &c, &found, err);
    if (st != ULP_OK || !found)
        return st;
    p->has_logits = 1;
    p->logits = c->name;
    p->argmax_a = rs.argmax_a;
    p->argmax_b = rs.argmax_b;
    p->margin_a = rs.margin_a;
    p->margin_b = rs.margin_b;
    p->step = c->has_step ? c->step : -1;
    *flip = rs.argmax_a != rs.argmax_b;
    return ULP_OK;
}

/* Token ids: per request, the first common key whose ids differ. */
static ulp_status from_ids(const ulp_snapshot *a, const ulp_snapshot *b, const stream_names *sn,
                           logits_ctx *lc, parts *out, ulp_error *err)
{
    size_t nka = 0, nkb = 0;
    kentry *ka = keys_of(a, sn->ids.ia, sn->ids.na, &nka, NULL);
    kentry *kb = keys_of(b, sn->ids.ib, sn->ids.nb, &nkb, lc->r);
    ulp_status st = ULP_OK;
    if (ka == NULL || kb == NULL)
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
    int64_t parted = 0, done_req = 0;
    for (size_t i = 0, j = 0; st == ULP_OK && i < nka && j < nkb;) {
        int c = kentry_cmp(&ka[i], &kb[j]);
        if (c != 0) {
            i += c < 0;
            j += c > 0;
            continue;
        }
        if (parted && done_req == ka[i].request) {
            out->v[out->n - 1].positions_parted++;
            i++;
            j++;
            continue;
        }
        unsigned char xa[8], xb[8];
        if ((st = read_row(a, &ka[i], xa, err)) != ULP_OK ||
            (st = read_row(b, &kb[j], xb, err)) != ULP_OK)
            break;
        ulp_dtype da = ulp_snapshot_capture(a, ka[i].cap)->dtype;
        ulp_dtype db = ulp_snapshot_capture(b, kb[j].cap)->dtype;
        double ta = ulp_dtype_to_double(da, ulp_dtype_load_bits(da, xa));
        double tb = ulp_dtype_to_double(db, ulp_dtype_load_bits(db, xb));
        if (ta != tb) {
            ulp_diff_part p;
            int flip;
            memset(&p, 0, sizeof p);
            p.request = ka[i].request;
            p.position = ka[i].position;
            p.token_a = (int64_t)ta;
            p.token_b = (int64_t)tb;
            p.from_ids = 1;
            p.positions_parted = 1;
            p.source = ulp_snapshot_capture(a, ka[i].cap)->name;
            if ((st = part_logits(lc, &p, &flip, err)) != ULP_OK)
                break;
            if (push_part(out, &p) != 0)
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
            parted = 1;
            done_req = p.request;
        }
        i++;
        j++;
    }
    free(ka);
    free(kb);
    return st;
}

/*
 * Whether the entry's rows at key k (A's ka, B's kb) were computed after the
 * logits at the position before, on both sides: only then can the token
 * fed there be the one those logits emitted.  In a prefill the whole
 * prompt is looked up before any logits exist, so a flip inside it parts
 * nothing.
 */
static int fed_after(const logits_ctx *lc, const kentry *ka, const kentry *kb)
{
    const kentry *x = find_key(lc->ka, lc->nka, ka->request, ka->position - 1);
    const kentry *y = find_key(lc->kb, lc->nkb, kb->request, kb->position - 1);
    return x != NULL && y != NULL &&
           ulp_snapshot_capture(lc->a, x->cap)->seq < ulp_snapshot_capture(lc->a, ka->cap)->seq &&
           ulp_snapshot_capture(lc->b, y->cap)->seq < ulp_snapshot_capture(lc->b, kb->cap)->seq;
}

/* Inferred: per request, the first key where the entry differs and the logits before it flip. */
static ulp_status inferred(const ulp_snapshot *a, const ulp_snapshot *b, const stream_names *sn,
                           logits_ctx *lc, parts *out, ulp_error *err)
{
    size_t nka = 0, nkb = 0;
    kentry *ka = keys_of(a, sn->entry.ia, sn->entry.na, &nka, NULL);
    kentry *kb = keys_of(b, sn->entry.ib, sn->entry.nb, &nkb, lc->r);
    const ulp_capture_info *ref = ulp_snapshot_capture(a, sn->entry.ia[0]);
    size_t bytes = (size_t)(row_len(ref) * ulp_dtype_size(ref->dtype));
    unsigned char *ra = malloc(bytes + 1), *rb = malloc(bytes + 1);
    ulp_status st = ULP_OK;
    if (ka == NULL || kb == NULL || ra == NULL || rb == NULL)
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
    int parted = 0;
    int64_t done_req = 0;
    for (size_t i = 0, j = 0; st == ULP_OK && i < nka && j < nkb;) {
        int c = kentry_cmp(&ka[i], &kb[j]);
        if (c != 0) {
            i += c < 0;
            j += c > 0;
            continue;
        }
        if (parted && done_req == ka[i].request) {
            out->v[out->n - 1].positions_parted++;
        } else {
            if ((st = read_row(a, &ka[i], ra, err)) != ULP_OK ||
                (st = read_row(b, &kb[j], rb, err)) != ULP_OK)
                break;
            if (memcmp(ra, rb, bytes) != 0) {
                ulp_diff_part p;
                int flip;
                memset(&p, 0, sizeof p);
                p.request = ka[i].request;
                p.position = ka[i].position;
                p.source = ref->name;
                p.positions_parted = 1;
                if ((st = part_logits(lc, &p, &flip, err)) != ULP_OK)
                    break;
                if (flip && fed_after(lc, &ka[i], &kb[j])) {
                    p.token_a = p.argmax_a;
                    p.token_b = p.argmax_b;
                    if (push_part(out, &p) != 0)
                        st = ulp__error(err, ULP_ENOMEM, "out of memory");
                    parted = 1;
                    done_req = p.request;
                }
            }
        }
        i++;
        j++;
    }
    free(ra);
    free(rb);
    free(ka);
    free(kb);
    return st;
}

static ulp_status logits_init(logits_ctx *lc, const ulp_snapshot *a, const ulp_snapshot *b,
                              const stream_names *sn, const ulp_diff_result *r, ulp_error *err)
{
    memset(lc, 0, sizeof *lc);
    lc->a = a;
    lc->b = b;
    lc->r = r;
    if (!sn->has_logits)
        return ULP_OK;
    const ulp_capture_info *c = ulp_snapshot_capture(a, sn->logits.ia[0]);
    lc->vocab = row_len(c);
    lc->ka = keys_of(a, sn->logits.ia, sn->logits.na, &lc->nka, NULL);
    lc->kb = keys_of(b, sn->logits.ib, sn->logits.nb, &lc->nkb, lc->r);
    lc->za = malloc((lc->vocab + 1) * sizeof *lc->za);
    lc->zb = malloc((lc->vocab + 1) * sizeof *lc->zb);
    lc->raw = malloc((size_t)(lc->vocab * ulp_dtype_size(c->dtype)) + 8);
    if (lc->ka == NULL || lc->kb == NULL || lc->za == NULL || lc->zb == NULL || lc->raw == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    return ULP_OK;
}

static void logits_release(logits_ctx *lc)
{
    free(lc->ka);
    free(lc->kb);
    free(lc->za);
    free(lc->zb);
    free(lc->raw);
}

ulp_status ulp__streams_find(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_result *r,
                             ulp_error *err)
{
    const ulp__snapshot_summary *sa = ulp__snapshot_summary_get(a);
    const ulp__snapshot_summary *sb = ulp__snapshot_summary_get(b);
    if (sa != NULL && sb != NULL && (!sa->any_rows || !sb->any_rows))
        return ULP_OK; /* no positions on a side: no aligned row, no stream */
    ulp__names *na = NULL, *nb = NULL;
    ulp_status st = ulp__names_build(a, &na);
    if (st == ULP_OK)
        st = ulp__names_build(b, &nb);
    if (st != ULP_OK) {
        ulp__names_free(na);
        return ulp__error(err, st, "cannot index the captures by name");
    }
    stream_names sn;
    logits_ctx lc;
    parts found = {0};
    find_names(na, nb, a, b, &sn);
    if (sn.has_ids) /* B's requests renumbered onto A's by their tokens, first */
        st = ulp__requests_pair(a, sn.ids.ia, sn.ids.na, b, sn.ids.ib, sn.ids.nb, r, err);
    if (st == ULP_OK)
        st = logits_init(&lc, a, b, &sn, r, err);
    else
        memset(&lc, 0, sizeof lc);
    if (st == ULP_OK && sn.has_ids)
        st = from_ids(a, b, &sn, &lc, &found, err);
    else if (st == ULP_OK && sn.has_entry && sn.has_logits)
        st = inferred(a, b, &sn, &lc, &found, err);
    /* Names point into A: the result keeps its own copies. */
    for (size_t k = 0; st == ULP_OK && k < found.n; k++) {
        ulp_diff_part *p = &found.v[k];
        p->source = ulp__diff_str(r, p->source);
        p->logits = p->has_logits ? ulp__diff_str(r, p->logits) : NULL;
        if (p->source == NULL || (p->has_logits && p->logits == NULL))
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    logits_release(&lc);
    ulp__names_free(na);
    ulp__names_free(nb);
    if (st != ULP_OK) {
        free(found.v);
        return st;
    }
    r->parts = found.v;
    r->n_parts = found.n;
    return ULP_OK;
}

int64_t ulp__streams_parted_at(const ulp_diff_result *r, int64_t request)
{
    for (size_t k = 0; k < r->n_parts; k++)
        if (r->parts[k].request == request)
            return r->parts[k].position;
    return -1;
}

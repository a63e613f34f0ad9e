/*
 * Comparing two runs by row digests (FORMAT.md, "Digests"): each side's
 * rows keyed by (capture name, request, position), from /digests or, for
 * a capture written in full, from the digests of its rows computed here;
 * keys merged name by name in the order A wrote its names.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/digest.h"
#include "common/error.h"
#include "common/strmap.h"
#include "diff_priv.h"
#include "digest_compare.h"
#include "digest_parts.h"
#include "format/snapshot_digests.h"
#include "ulpprof/digest.h"
#include "ulpprof/snapshot.h"

typedef struct key_row {
    int32_t name;
    int32_t positional; /* 1: (request, position) is a token's, else (occurrence, row) */
    int64_t request, position;
    uint64_t digest;
} key_row;

typedef struct side {
    key_row *rows;
    size_t n, cap;
    int digest_only;
    int only; /* 1: only the rows with positions of request `want`, keyed as `as` */
    int64_t want, as;
} side;

typedef struct names {
    ulp__strmap ids;
    char **text;
    int64_t *seq_a, *seq_b;
    int32_t *layer; /* the first side's that names it */
    size_t n, cap;
} names;

static int64_t name_id(names *nm, const char *name, int64_t seq, int32_t layer, int in_a)
{
    int inserted = 0;
    int64_t *slot = ulp__strmap_upsert(&nm->ids, name, (int64_t)nm->n, &inserted);
    if (slot == NULL)
        return -1;
    int64_t id = *slot;
    if (inserted && nm->n >= INT32_MAX)
        return -1; /* the rows' name index is 32 bits */
    if (inserted) {
        if (nm->n == nm->cap) {
            size_t cap = nm->cap ? 2 * nm->cap : 64;
            char **t = realloc(nm->text, cap * sizeof(*t));
            int64_t *a = t ? realloc(nm->seq_a, cap * sizeof(*a)) : NULL;
            int64_t *b = a ? realloc(nm->seq_b, cap * sizeof(*b)) : NULL;
            int32_t *l = b ? realloc(nm->layer, cap * sizeof(*l)) : NULL;
            if (t)
                nm->text = t;
            if (a)
                nm->seq_a = a;
            if (b)
                nm->seq_b = b;
            if (l == NULL)
                return -1;
            nm->layer = l;
            nm->cap = cap;
        }
        nm->text[nm->n] = strdup(name);
        nm->seq_a[nm->n] = nm->seq_b[nm->n] = INT64_MAX;
        nm->layer[nm->n] = layer;
        nm->n++;
    }
    int64_t *seqs = in_a ? nm->seq_a : nm->seq_b;
    if (seq < seqs[id])
        seqs[id] = seq;
    return id;
}

/* Whether (request, position) lies at or after its request's part (parts by request). */
static int past_part(const ulp_digest_part *v, size_t n, int64_t request, int64_t position)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].request < request)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].request == request && position >= v[lo].position;
}

/* B's token rows under A's request numbers; with cut, the rows at or after their request's
 * part left out, counted in *after. */
static void settle(side *s, const ulp_digest_result *res, int cut, uint64_t *after)
{
    size_t m = 0;
    for (size_t k = 0; k < s->n; k++) {
        key_row r = s->rows[k];
        if (r.positional && res->n_request_pairs > 0)
            r.request = ulp__requests_map(res->request_pairs, res->n_request_pairs, r.request);
        if (cut && r.positional && past_part(res->parts, res->nparts, r.request, r.position)) {
            if (after)
                (*after)++;
            continue;
        }
        s->rows[m++] = r;
    }
    s->n = m;
}

static int push(side *s, key_row r)
{
    if (s->only && (!r.positional || r.request != s->want))
        return 0;
    if (s->only)
        r.request = s->as;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        key_row *p = realloc(s->rows, cap * sizeof(*p));
        if (p == NULL)
            return -1;
        s->rows = p;
        s->cap = cap;
    }
    s->rows[s->n++] = r;
    return 0;
}

/* The rows of one full capture, digested here as the writer would have. */
static ulp_status data_rows(const ulp_snapshot *snap, size_t i, int64_t id, side *s, ulp_error *err)
{
    const ulp_capture_info *c = ulp_snapshot_capture(snap, i);
    size_t elem = ulp_dtype_size(c->dtype);
    void *buf = malloc(c->elements > 0 ? (size_t)c->elements * elem : 1);
    if (buf == NULL)
        return ulp__error(err, ULP_ENOMEM, "%s: out of memory", ulp_snapshot_path(snap));
    ulp_status st = ulp_snapshot_read(snap, i, 0, c->elements, buf, err);
    ulp__digest_shape d = {c->ndim, c->shape, c->row_rank, c->row_rank > 0 ? c->positions : NULL};
    uint64_t rows = ulp__digest_row_count(&d);
    uint64_t *dg = st == ULP_OK ? malloc((size_t)(rows > 0 ? rows : 1) * 8) : NULL;
    if (st == ULP_OK && dg == NULL)
        st = ulp__error(err, ULP_ENOMEM, "%s: out of memory", ulp_snapshot_path(snap));
    if (st == ULP_OK) {
        ulp__digest_rows(&d, buf, elem, dg);
        for (uint64_t r = 0; r < rows && st == ULP_OK; r++) {
            key_row k = {(int32_t)id, d.positions != NULL,
                         d.positions ? (c->requests ? c->requests[r] : 0) : c->occurrence,
                         d.positions ? d.positions[r] : (int64_t)r, dg[r]};
            if (push(s, k) != 0)
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
        }
    }
    free(dg);
    free(buf);
    return st;
}

static ulp_status load(const char *path, names *nm, side *s, int in_a, ulp_error *err)
{
    ulp__digest_entry *e = NULL;
    size_t n = 0;
    int has_data = 0;
    ulp_status st = ulp__digests_read(path, &e, &n, &has_data, err);
    if (st != ULP_OK)
        return st;
    ulp__strmap full;
    ulp__strmap_init(&full);
    if (has_data) {
        ulp_snapshot *snap = NULL;
        st = ulp_snapshot_open(path, &snap, err);
        for (size_t i = 0; st == ULP_OK && i < ulp_snapshot_capture_count(snap); i++) {
            const ulp_capture_info *c = ulp_snapshot_capture(snap, i);
            int64_t id = name_id(nm, c->name, c->seq, c->layer, in_a);
            if (id < 0 || ulp__strmap_upsert(&full, c->name, 0, NULL) == NULL)
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
            else
                st = data_rows(snap, i, id, s, err);
        }
        ulp_snapshot_close(snap);
    }
    s->digest_only = !has_data && n > 0;
    for (size_t i = 0; st == ULP_OK && i < n; i++) {
        if (ulp__strmap_find(&full, e[i].name) != NULL)
            continue; /* the data is the exact answer */
        int64_t id = name_id(nm, e[i].name, e[i].seq, e[i].layer, in_a);
        if (id < 0)
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
        for (uint64_t r = 0; st == ULP_OK && r < e[i].rows; r++) {
            key_row k = {(int32_t)id, e[i].positions != NULL,
                         e[i].positions ? (e[i].requests ? e[i].requests[r] : 0) : e[i].occurrence,
                         e[i].positions ? e[i].positions[r] : (int64_t)r, e[i].digests[r]};
            if (push(s, k) != 0)
                st = ulp__error(err, ULP_ENOMEM, "out of memory");
        }
    }
    ulp__strmap_release(&full);
    ulp__digests_free(e, n);
    return st;
}

static int key_cmp(const void *x, const void *y)
{
    const key_row *a = x, *b = y;
    if (a->name != b->name)
        return a->name < b->name ? -1 : 1;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    if (a->position != b->position)
        return a->position < b->position ? -1 : 1;
    return 0;
}

static int order_cmp(const void *x, const void *y)
{
    const ulp_digest_name *a = x, *b = y;
    if (a->seq != b->seq)
        return a->seq < b->seq ? -1 : 1;
    return strcmp(a->name, b->name);
}

static ulp_status dup_check(const char *path, const side *s, const names *nm, ulp_error *err)
{
    for (size_t i = 1; i < s->n; i++)
        if (key_cmp(&s->rows[i - 1], &s->rows[i]) == 0)
            return ulp__error(err, ULP_EBADATTR,
                              "%s: capture '%s' has request %lld, position %lld in two "
                              "occurrences: which to compare is a guess",
                              path, nm->text[s->rows[i].name], (long long)s->rows[i].request,
                              (long long)s->rows[i].position);
    return ULP_OK;
}

int ulp_digest_only(const char *path)
{
    ulp__digest_entry *e = NULL;
    size_t n = 0;
    int has_data = 0;
    /* No /digests: not digest-only, without walking every capture for data. */
    if (!ulp__digests_present(path) || ulp__digests_read(path, &e, &n, &has_data, NULL) != ULP_OK)
        return 0;
    ulp__digests_free(e, n);
    return n > 0 && !has_data;
}

/* Adds (request, position) to the name's ranges. */
static int range_add(ulp_digest_range **v, size_t *n, size_t *cap, int64_t r, int64_t p)
{
    if (*n > 0 && (*v)[*n - 1].request == r) {
        (*v)[*n - 1].last = p; /* keys come sorted */
        return 0;
    }
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 4;
        ulp_digest_range *q = realloc(*v, c * sizeof(*q));
        if (q == NULL)
            return -1;
        *v = q;
        *cap = c;
    }
    (*v)[(*n)++] = (ulp_digest_range){r, p, p};
    return 0;
}

/* The requests paired and the parts of pa against pb (sa, sb when open already) into res. */
static ulp_status find_parts(const char *pa, const char *pb, const ulp_snapshot *sa,
                             const ulp_snapshot *sb, ulp_digest_result *res, ulp_error *err)
{
    ulp_snapshot *oa = NULL, *ob = NULL;
    ulp_status st = ULP_OK;
    if (sa == NULL && (st = ulp_snapshot_open(pa, &oa, err)) == ULP_OK)
        sa = oa;
    if (st == ULP_OK && sb == NULL && (st = ulp_snapshot_open(pb, &ob, err)) == ULP_OK)
        sb = ob;
    if (st == ULP_OK)
        st = ulp__digest_requests(sa, sb, &res->request_pairs, &res->n_request_pairs, err);
    if (st == ULP_OK)
        st = ulp__digest_parts_find(sa, sb, res->request_pairs, res->n_request_pairs, &res->parts,
                                    &res->nparts, err);
    ulp_snapshot_close(oa);
    ulp_snapshot_close(ob);
    return st;
}

/* how: 0 no parts (one request, req_a/req_b), 1 parts found, 2 and the rows after them cut. */
static ulp_status compare(const char *pa, const char *pb, const ulp_snapshot *sa,
                          const ulp_snapshot *sb, const int64_t *req_a, const int64_t *req_b,
                          int how, uint64_t *after, ulp_digest_result **out, ulp_error *err)
{
    *out = NULL;
    names nm = {0};
    ulp__strmap_init(&nm.ids);
    side a = {0}, b = {0};
    if (req_a != NULL) {
        a = (side){NULL, 0, 0, 0, 1, *req_a, *req_a};
        b = (side){NULL, 0, 0, 0, 1, *req_b, *req_a};
    }
    ulp_digest_result *res = calloc(1, sizeof(*res));
    ulp_digest_name *v = NULL;
    uint64_t cut_a = 0;
    ulp_status st = res ? ULP_OK : ULP_ENOMEM;
    if (st == ULP_OK)
        st = load(pa, &nm, &a, 1, err);
    if (st == ULP_OK)
        st = load(pb, &nm, &b, 0, err);
    if (st == ULP_OK && how > 0)
        st = find_parts(pa, pb, sa, sb, res, err);
    if (st == ULP_OK && how > 0) {
        ulp_digest_result none = {0}; /* A's numbers are A's own */
        none.parts = res->parts;
        none.nparts = res->nparts;
        settle(&a, &none, how == 2, &cut_a);
        settle(&b, res, how == 2, NULL);
    }
    if (st == ULP_OK) {
        qsort(a.rows, a.n, sizeof(key_row), key_cmp);
        qsort(b.rows, b.n, sizeof(key_row), key_cmp);
        st = dup_check(pa, &a, &nm, err);
    }
    if (st == ULP_OK)
        st = dup_check(pb, &b, &nm, err);
    if (st == ULP_OK && (v = calloc(nm.n ? nm.n : 1, sizeof(*v))) == NULL)
        st = ULP_ENOMEM;
    size_t *caps = st == ULP_OK ? calloc(nm.n ? nm.n : 1, sizeof(size_t)) : NULL;
    if (st == ULP_OK && caps == NULL)
        st = ULP_ENOMEM;
    uint64_t compared = 0;
    for (size_t i = 0; st == ULP_OK && i < nm.n; i++) {
        v[i].name = nm.text[i];
        v[i].layer = nm.layer[i];
        v[i].seq = nm.seq_a[i] != INT64_MAX ? nm.seq_a[i] : INT64_MAX / 2 + nm.seq_b[i] / 2;
    }
    size_t i = 0, j = 0;
    while (st == ULP_OK && (i < a.n || j < b.n)) {
        int c = i >= a.n ? 1 : j >= b.n ? -1 : key_cmp(&a.rows[i], &b.rows[j]);
        if (c < 0) {
            v[a.rows[i++].name].only_a++;
            continue;
        }
        if (c > 0) {
            v[b.rows[j++].name].only_b++;
            continue;
        }
        ulp_digest_name *x = &v[a.rows[i].name];
        x->compared++;
        compared++;
        if (a.rows[i].digest != b.rows[j].digest) {
            if (!x->differing) {
                x->has_first = 1;
                x->first_request = a.rows[i].request;
                x->first_position = a.rows[i].position;
            }
            x->differing++;
            ulp_digest_range *rv = x->ranges;
            if (range_add(&rv, &x->nranges, &caps[a.rows[i].name], a.rows[i].request,
                          a.rows[i].position) != 0)
                st = ULP_ENOMEM;
            x->ranges = rv;
        }
        i++, j++;
    }
    if (st == ULP_ENOMEM)
        ulp__error(err, st, "digest comparison: out of memory");
    if (st == ULP_OK && compared == 0)
        st = ulp__error(err, ULP_EINVAL, "%s and %s share no (capture, request, position) row", pa,
                        pb);
    if (st == ULP_OK) {
        qsort(v, nm.n, sizeof(*v), order_cmp);
        res->names = v;
        res->nnames = nm.n;
        res->digests_a = a.digest_only;
        res->digests_b = b.digest_only;
        res->first = -1;
        res->identical = 1;
        for (size_t k = 0; k < nm.n; k++) {
            if (v[k].differing && res->first < 0)
                res->first = (ptrdiff_t)k;
            if (v[k].differing || v[k].only_a || v[k].only_b)
                res->identical = 0;
        }
        *out = res;
        res = NULL;
        v = NULL;
        if (after)
            *after = cut_a;
        free(nm.text); /* the strings are the result's names now, the array is not */
        nm.text = NULL;
    }
    free(caps);
    if (v != NULL) {
        for (size_t k = 0; k < nm.n; k++)
            free(v[k].ranges);
        free(v);
    }
    if (nm.text != NULL)
        for (size_t k = 0; k < nm.n; k++)
            free(nm.text[k]);
    free(nm.text);
    free(nm.seq_a);
    free(nm.seq_b);
    free(nm.layer);
    ulp__strmap_release(&nm.ids);
    free(a.rows);
    free(b.rows);
    ulp_digest_result_free(res);
    return st;
}

ulp_status ulp_digest_compare(const char *pa, const char *pb, ulp_digest_result **out,
                              ulp_error *err)
{
    return compare(pa, pb, NULL, NULL, NULL, NULL, 1, NULL, out, err);
}

ulp_status ulp__digest_compare_cut(const char *pa, const char *pb, const ulp_snapshot *sa,
                                   const ulp_snapshot *sb, uint64_t *after, ulp_digest_result **out,
                                   ulp_error *err)
{
    return compare(pa, pb, sa, sb, NULL, NULL, 2, after, out, err);
}

ulp_status ulp_digest_compare_request(const char *pa, int64_t request_a, const char *pb,
                                      int64_t request_b, ulp_digest_result **out, ulp_error *err)
{
    return compare(pa, pb, NULL, NULL, &request_a, &request_b, 0, NULL, out, err);
}

void ulp_digest_result_free(ulp_digest_result *r)
{
    if (r == NULL)
        return;
    for (size_t k = 0; k < r->nnames; k++) {
        free(r->names[k].ranges);
        free(r->names[k].name);
    }
    free(r->names);
    free(r->request_pairs);
    ulp__digest_parts_free(r->parts, r->nparts);
    free(r);
}

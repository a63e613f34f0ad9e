/*
 * The kept captures of a killed writer's file, read from its capture
 * journal (FORMAT.md "Capture journal", kind 3; format/journal_kept.h):
 * each record is a whole capture that digest mode kept in /digests, written
 * when the writer accepted it, so the journal holds every one of them
 * whatever a kill did to /digests.  Read as snapshot_kept.c reads the
 * table's (the same seq, occurrence, attributes, rows and bytes), and merged
 * with them, so that a reader sees one set of kept captures either way.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/strmap.h"
#include "journal.h"
#include "journal_kept.h"
#include "snapshot_priv.h"

/* A name as its last defining record gave it (strings kept by the snapshot). */
typedef struct jdef {
    const char *name, *role;
    ulp_dtype dtype;
    int has_layer;
    int32_t layer;
    const char **inputs;
    uint32_t n_inputs;
} jdef;

typedef struct kj_walk {
    ulp_snapshot *s;
    ulp__cap_vec *jv;
    const unsigned char ***jmem;
    size_t jmem_cap;
    ulp__strmap *names;
    jdef *defs;
    size_t ndefs, defs_cap;
} kj_walk;

/* `n` bytes the snapshot keeps (frees at close); NULL when out of memory or absurd. */
static void *keep_alloc(ulp_snapshot *s, size_t n)
{
    if (ulp__snapshot_absurd_bytes(s, n))
        return NULL;
    char *q = malloc(n ? n : 1);
    return q != NULL ? ulp__snap_keep(s, q) : NULL;
}

static char *keep_str(ulp_snapshot *s, const char *p, size_t n)
{
    char *q = keep_alloc(s, n + 1);
    if (q != NULL) {
        memcpy(q, p, n);
        q[n] = '\0';
    }
    return q;
}

/* A record's definition into w->defs[k->id]: 0, 1 not one this writer wrote, -1 memory. */
static int define(kj_walk *w, const ulp__journal_kept *k)
{
    ulp_snapshot *s = w->s;
    if (k->id > w->ndefs || memchr(k->name, '\0', k->name_len) != NULL ||
        ulp_role_name((ulp_role)k->role) == NULL)
        return 1;
    jdef d = {0};
    if ((d.name = keep_str(s, k->name, k->name_len)) == NULL ||
        (d.role = keep_str(s, ulp_role_name((ulp_role)k->role),
                           strlen(ulp_role_name((ulp_role)k->role)))) == NULL ||
        (k->n_inputs > 0 &&
         (d.inputs = keep_alloc(s, (size_t)k->n_inputs * sizeof *d.inputs)) == NULL))
        return -1;
    d.dtype = (ulp_dtype)k->dtype;
    d.has_layer = k->has_layer;
    d.layer = k->layer;
    const unsigned char *cur = k->inputs, *end = k->inputs + k->inputs_bytes;
    for (uint32_t i = 0; i < k->n_inputs; i++) {
        const char *in;
        size_t len;
        if (ulp__journal_kept_input(&cur, end, &in, &len) < 0 || memchr(in, '\0', len) != NULL)
            return 1;
        if ((d.inputs[i] = keep_str(s, in, len)) == NULL)
            return -1;
    }
    d.n_inputs = k->n_inputs;
    if (k->id == w->ndefs) {
        if (ULP__GROW(w->defs, w->defs_cap, w->ndefs + 1) != 0)
            return -1;
        w->ndefs++;
    }
    w->defs[k->id] = d;
    return 0;
}

/* The capture of record `r` (payload `k`, name `d`) into c: NULL, or why it is no record's. */
static const char *capture_of(const ulp__journal_record *r, const ulp__journal_kept *k,
                              const jdef *d, ulp_capture_info *c)
{
    if (r->seq < 0 || r->occurrence < 0)
        return "a negative seq or occurrence";
    if ((k->flags & ULP__JKEPT_POSITIONS) && k->row_rank < 1)
        return "positions but no row axes";
    c->name = d->name;
    c->role = d->role;
    c->dtype = d->dtype;
    c->layer = d->has_layer ? d->layer : -1;
    c->inputs = d->n_inputs > 0 ? d->inputs : NULL;
    c->n_inputs = d->n_inputs;
    c->ndim = k->ndim;
    c->elements = 1;
    for (int i = 0; i < k->ndim; i++) {
        int64_t a = k->shape[i];
        if (a > 0 && c->elements > ULP__MAX_ELEMENTS / (uint64_t)a)
            return "an absurd shape";
        c->shape[i] = a;
        c->elements *= (uint64_t)a;
    }
    size_t esize = ulp_dtype_size(c->dtype);
    if (esize == 0 || c->elements > SIZE_MAX / esize || k->data_bytes != c->elements * esize)
        return "bytes that are not its shape's";
    c->occurrence = r->occurrence;
    c->seq = r->seq;
    c->time_ns = (int64_t)r->addr;
    c->has_step = (k->flags & ULP__JKEPT_STEP) != 0;
    c->step = c->has_step ? k->step : 0;
    c->has_kernels = k->has_kernels;
    memcpy(c->kernels, k->kernels, sizeof c->kernels);
    c->has_gemms = k->has_gemms;
    memcpy(c->gemms, k->gemms, sizeof c->gemms);
    c->has_graph_replay = k->has_graph_replay;
    memcpy(c->graph_replay, k->graph_replay, sizeof c->graph_replay);
    c->device_ptr = k->device_ptr;
    c->stream = k->stream;
    c->row_rank = (k->flags & ULP__JKEPT_POSITIONS) ? k->row_rank : 0;
    c->rows = (k->flags & ULP__JKEPT_POSITIONS) ? k->rows : 0;
    return NULL;
}

/* One kept record: 0 read, 1 the journal ends here (not one this writer wrote), -1 memory. */
static int visit(void *arg, const ulp__journal_record *r)
{
    kj_walk *w = arg;
    ulp_snapshot *s = w->s;
    if (r->kind != ULP__JOURNAL_KEPT)
        return 0;
    ulp__journal_kept k;
    if (ulp__journal_kept_decode((const unsigned char *)r->name, r->name_len, &k) < 0)
        return 1;
    if (k.flags & ULP__JKEPT_DEFINES) {
        int rc = define(w, &k);
        if (rc != 0)
            return rc;
    } else if (k.id >= w->ndefs) {
        return 1;
    }
    ulp_capture_info c;
    memset(&c, 0, sizeof c);
    if (capture_of(r, &k, &w->defs[k.id], &c) != NULL)
        return 1;
    int64_t *pos = NULL, *req = NULL;
    unsigned char *data = NULL;
    if ((c.rows > 0 && ((pos = keep_alloc(s, (size_t)c.rows * sizeof *pos)) == NULL ||
                        ((k.flags & ULP__JKEPT_REQUESTS) &&
                         (req = keep_alloc(s, (size_t)c.rows * sizeof *req)) == NULL))) ||
        (data = keep_alloc(s, k.data_bytes)) == NULL)
        return -1;
    ulp__journal_kept_rows(&k, pos, req);
    if (k.data_bytes > 0)
        memcpy(data, k.data, k.data_bytes);
    c.positions = pos;
    c.requests = req;
    if (pos != NULL) {
        char occs[32];
        snprintf(occs, sizeof occs, "%" PRId64, c.occurrence);
        ulp_error why;
        ulp_status st = ulp__rows_check_keys(s, &c, c.name, occs, &why);
        if (st == ULP_ENOMEM)
            return -1;
        if (st != ULP_OK)
            return 1;
    }
    if (ulp__cap_vec_push(w->jv) < 0 || ULP__GROW(*w->jmem, w->jmem_cap, w->jv->n) != 0 ||
        ulp__strmap_upsert(w->names, c.name, 1, NULL) == NULL)
        return -1;
    ulp__cap_entry *e = &w->jv->v[w->jv->n - 1];
    memset(e, 0, sizeof *e);
    e->info = c;
    e->src.offset = ULP__NO_OFFSET;
    e->src.oaddr = ULP__KEPT_JOURNAL;
    (*w->jmem)[w->jv->n - 1] = data;
    return 0;
}

ulp_status ulp__snapshot_kept_journal(ulp_snapshot *s, ulp__journal_state *js, ulp__cap_vec *jv,
                                      const unsigned char ***jmem, ulp__strmap *names,
                                      ulp_error *err)
{
    jv->n = 0;
    *jmem = NULL;
    kj_walk w = {.s = s, .jv = jv, .jmem = jmem, .names = names};
    ulp_error werr;
    ulp_status st = ulp__journal_walk(s, js, visit, &w, &werr);
    free(w.defs);
    if (st != ULP_OK) {
        jv->n = 0;
        free(*jmem);
        *jmem = NULL;
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    }
    return ULP_OK;
}

static int by_seq(const void *a, const void *b)
{
    int64_t x = (*(const ulp__cap_entry *const *)a)->info.seq;
    int64_t y = (*(const ulp__cap_entry *const *)b)->info.seq;
    return (x > y) - (x < y);
}

ulp_status ulp__snapshot_kept_merge(ulp_snapshot *s, ulp__cap_vec *kv, const unsigned char ***mem,
                                    ulp__cap_vec *jv, const unsigned char **jmem,
                                    const ulp__strmap *names, ulp_error *err)
{
    size_t n = kv->n + jv->n;
    ulp__cap_entry *v = calloc(n ? n : 1, sizeof *v);
    const unsigned char **m = calloc(n ? n : 1, sizeof *m);
    ulp__cap_entry **order = calloc(jv->n ? jv->n : 1, sizeof *order);
    if (v == NULL || m == NULL || order == NULL) {
        free(v);
        free(m);
        free(order);
        free(jmem);
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    }
    for (size_t i = 0; i < jv->n; i++)
        order[i] = &jv->v[i];
    qsort(order, jv->n, sizeof *order, by_seq);
    size_t k = 0;
    for (size_t i = 0; i < kv->n; i++) {
        const ulp_capture_info *c = &kv->v[i].info;
        if (ulp__strmap_find(names, c->name) != NULL) {
            ulp__cap_entry key, *kp = &key, **hit;
            key.info.seq = c->seq;
            hit = bsearch(&kp, order, jv->n, sizeof *order, by_seq);
            if (hit != NULL && strcmp((*hit)->info.name, c->name) == 0) {
                (*hit)->src.oaddr = 0; /* the copy's /digests keeps it (ulp__copy_digest_group) */
                continue;
            }
        }
        v[k] = kv->v[i];
        m[k++] = (*mem)[i];
    }
    for (size_t i = 0; i < jv->n; i++) {
        v[k] = jv->v[i];
        m[k++] = jmem[i];
    }
    s->kept_journaled = jv->n;
    free(order);
    free(kv->v);
    free(*mem);
    free(jmem);
    kv->v = v;
    kv->n = k;
    kv->cap = n ? n : 1;
    *mem = m;
    return ULP_OK;
}

/*
 * The captures a digest-mode file keeps in full in /digests (FORMAT.md
 * "Digests": the produced tokens and the fed token ids), read as captures
 * of the snapshot: per name whose group holds `value`, each occurrence the
 * table marks `kept` becomes the capture (name, kept_occurrence) of seq
 * kept_seq, its positions and requests the name's rows, its bytes its rows
 * of `value`, held in memory (a few bytes a position).  A reader of the
 * snapshot sees the captures a data-mode capture of the same run wrote to
 * /captures, whichever the file holds.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "common/strmap.h"
#include "digest_rows.h"
#include "digest_table.h"
#include "digest_view.h"
#include "h5types.h"
#include "snapshot_priv.h"

typedef struct kept_walk {
    ulp_snapshot *s;
    ulp__cap_vec *kv;
    const unsigned char ***mem; /* parallel to kv */
    size_t mem_cap;
    ulp_status st;
    ulp_error *err;
    char *left; /* lenient (a killed writer's file): the names left out, and why */
    size_t left_size;
    const ulp__strmap *journaled; /* names whose kept captures the journal holds, or NULL */
} kept_walk;

/* `n` bytes the snapshot keeps (frees at close); NULL when out of memory. */
static void *keep_alloc(ulp_snapshot *s, size_t n)
{
    char *q = malloc(n ? n : 1);
    return q != NULL ? ulp__snap_keep(s, q) : NULL;
}

/* A copy of `p` (n bytes) kept by the snapshot; NULL when out of memory. */
static void *keep_copy(ulp_snapshot *s, const void *p, size_t n)
{
    char *q = keep_alloc(s, n);
    if (q != NULL && n > 0)
        memcpy(q, p, n);
    return q;
}

/*
 * A name's `inputs` (its range of them, `v`), every element read once and kept by the
 * snapshot, into *all (*n of them; the occurrences point into it); -1 when they cannot be
 * read.
 */
static int load_inputs(ulp_snapshot *s, const ulp__digest_view *v, const char ***all, uint64_t *n)
{
    uint64_t len = v->ninputs;
    /* A damaged extent must not size an allocation: 16 bytes an element at least. */
    if (v->inputs < 0 || ulp__snapshot_absurd_bytes(s, len * 16))
        return -1;
    hid_t t = ulp__digest_str_type(0, 1);
    char **vs = calloc((size_t)(len > 0 ? len : 1), sizeof *vs);
    const char **kept = keep_alloc(s, (size_t)(len > 0 ? len : 1) * sizeof *kept);
    int bad = t < 0 || vs == NULL || kept == NULL ||
              ulp__digest_read_rows(v->inputs, t, 1, v->inputs_base, len, 1, vs) < 0;
    for (uint64_t i = 0; !bad && i < len; i++)
        bad = vs[i] == NULL || (kept[i] = keep_copy(s, vs[i], strlen(vs[i]) + 1)) == NULL;
    if (vs != NULL && t >= 0 && len > 0) { /* what HDF5 allocated, read or not */
        hsize_t m = (hsize_t)len;
        hid_t sp = H5Screate_simple(1, &m, NULL);
        if (sp >= 0) {
            H5Dvlen_reclaim(t, sp, H5P_DEFAULT, vs);
            H5Sclose(sp);
        }
    }
    free(vs);
    if (t >= 0)
        H5Tclose(t);
    *all = kept;
    *n = len;
    return bad ? -1 : 0;
}

/* The occurrence's inputs, elements [first, first + n) of its name's; -1 past them. */
static int occ_inputs(const ulp__digest_occ *o, const char **all, uint64_t n, ulp_capture_info *c)
{
    if (o->inputs_count == 0)
        return 0;
    if (all == NULL || o->inputs_first > n || o->inputs_count > n - o->inputs_first)
        return -1;
    c->inputs = all + o->inputs_first;
    c->n_inputs = o->inputs_count;
    return 0;
}

/* Capture info of kept occurrence `o` of `name`; NULL, or the problem. */
static const char *occ_info(const ulp__digest_occ *o, uint64_t nrows, uint64_t width,
                            ulp_capture_info *c)
{
    char dtype[ULP__DIGEST_STR + 1];
    memcpy(dtype, o->dtype, ULP__DIGEST_STR);
    dtype[ULP__DIGEST_STR] = '\0';
    c->dtype = ulp_dtype_from_name(dtype);
    if (c->dtype == ULP_DTYPE_INVALID)
        return "has a kept occurrence of a dtype this ulpprof does not know";
    if (o->ndim < 0 || o->ndim > ULP_SNAPSHOT_MAX_RANK || o->row_rank < 0 || o->row_rank > o->ndim)
        return "has a kept occurrence of a bad rank";
    if (o->kept_seq < 0 || o->kept_occurrence < 0)
        return "has a kept occurrence with a negative seq or occurrence";
    if (o->has_positions && o->row_rank < 1)
        return "has a kept occurrence with positions but no row axes";
    c->ndim = o->ndim;
    c->elements = 1;
    uint64_t rows = 1, w = 1;
    for (int k = 0; k < o->ndim; k++) {
        if (o->shape[k] < 0 ||
            (o->shape[k] > 0 && c->elements > ULP__MAX_ELEMENTS / (uint64_t)o->shape[k]))
            return "has a kept occurrence of an absurd shape";
        c->shape[k] = o->shape[k];
        c->elements *= (uint64_t)o->shape[k];
        if (k < o->row_rank)
            rows *= (uint64_t)o->shape[k];
        else
            w *= (uint64_t)o->shape[k];
    }
    if (rows != o->rows || w != width || o->first > nrows || o->rows > nrows - o->first)
        return "has a kept occurrence whose rows are not its shape's, or lie past `value`";
    c->occurrence = o->kept_occurrence;
    c->seq = o->kept_seq;
    c->layer = o->has_layer ? o->layer : -1;
    c->has_step = o->has_step != 0;
    c->step = o->has_step ? o->step : 0;
    c->time_ns = o->time_ns;
    c->has_kernels = o->has_kernels != 0;
    memcpy(c->kernels, o->kernels, sizeof c->kernels);
    c->has_gemms = o->has_gemms != 0;
    memcpy(c->gemms, o->gemms, sizeof c->gemms);
    c->has_graph_replay = o->has_graph_replay != 0;
    memcpy(c->graph_replay, o->graph_replay, sizeof c->graph_replay);
    c->device_ptr = o->device_ptr;
    c->stream = o->stream;
    c->row_rank = o->has_positions ? o->row_rank : 0;
    c->rows = o->has_positions ? o->rows : 0;
    return NULL;
}

/* The kept occurrences of one name's tables `v` (its `value` open) into w. */
static const char *one_view(kept_walk *w, const ulp__digest_view *v, const char *name,
                            int64_t *bad_occ)
{
    ulp_snapshot *s = w->s;
    /* occurrences, position, request, value: the name's, at its bases */
    hid_t ds[4] = {v->occ, v->position, v->request, v->value};
    int64_t len[3] = {(int64_t)v->nocc, (int64_t)v->nrows, (int64_t)v->nrows};
    uint64_t ob = v->occ_base, rb0 = v->row_base;
    hid_t vsp = ds[3] >= 0 ? H5Dget_space(ds[3]) : -1, vt = ds[3] >= 0 ? H5Dget_type(ds[3]) : -1;
    hid_t ot = ds[0] >= 0 ? H5Dget_type(ds[0]) : -1, mt = ulp__digest_occ_type();
    hsize_t vd[2] = {0, 0};
    ulp__digest_occ *occ = NULL;
    const char *why = NULL;
    if (ds[0] < 0 || ds[1] < 0 || ds[2] < 0 || v->nocc > INT64_MAX || v->nrows > INT64_MAX)
        why = "has `value` without its occurrences, position and request of one length";
    else if (vsp < 0 || vt < 0 || H5Sget_simple_extent_ndims(vsp) != 2 ||
             H5Sget_simple_extent_dims(vsp, vd, NULL) != 2 || vd[0] != (hsize_t)len[1])
        why = "has a `value` that is not 2-D with a row for each of its rows";
    else if (ot < 0 || mt < 0 || !ulp__digest_occ_has_kept(ot))
        why = "has `value` but an occurrences table without the fields kept, kept_seq and "
              "kept_occurrence";
    else if (!ulp__h5_ints_sound(ot) || !ulp__digest_ds_sound(ds[1]) ||
             !ulp__digest_ds_sound(ds[2]))
        why = "has a damaged integer type (its bits lie past its bytes)";
    else if ((H5Tget_class(vt) != H5T_INTEGER && H5Tget_class(vt) != H5T_FLOAT) ||
             (H5Tget_class(vt) == H5T_INTEGER && !ulp__h5_ints_sound(vt)))
        why = "has a `value` of a type that is not a sound integer or float";
    else if ((occ = calloc((size_t)(len[0] > 0 ? len[0] : 1), sizeof *occ)) == NULL)
        why = "is too large to read";
    else if (ulp__digest_read_rows(ds[0], mt, 1, ob, (uint64_t)len[0], 1, occ) < 0)
        why = "has an occurrences table that cannot be read";
    const char *kept_name = NULL;
    const char **inputs = NULL; /* the name's, read at its first kept occurrence with some */
    uint64_t ninputs = 0;
    /* The name's rows, read whole at its first kept occurrence (one read each, not three an
     * occurrence: 20,000 occurrences took 0.6 s so) and kept by the snapshot. */
    unsigned char *vbuf = NULL;
    int64_t *pbuf = NULL, *rbuf = NULL;
    const char *last_role = NULL;
    int64_t first_kept = -1;
    uint64_t upto = 0; /* rows read: to the end of the last kept occurrence within them */
    for (int64_t i = 0; why == NULL && i < len[0]; i++)
        if (occ[i].kept && occ[i].first <= (uint64_t)len[1] &&
            occ[i].rows <= (uint64_t)len[1] - occ[i].first && occ[i].first + occ[i].rows > upto)
            upto = occ[i].first + occ[i].rows;
    for (int64_t i = 0; why == NULL && i < len[0]; i++) {
        const ulp__digest_occ *o = &occ[i];
        if (!o->kept)
            continue;
        if (first_kept < 0)
            first_kept = i;
        *bad_occ = i;
        if (kept_name == NULL && (kept_name = keep_copy(s, name, strlen(name) + 1)) == NULL) {
            why = "is too large to read";
            break;
        }
        ulp_capture_info c;
        memset(&c, 0, sizeof c);
        c.name = kept_name;
        if ((why = occ_info(o, (uint64_t)len[1], (uint64_t)vd[1], &c)) != NULL)
            break;
        size_t esize = ulp_dtype_size(c.dtype);
        if (!ulp__h5_type_fits(vt, c.dtype)) {
            why = "has a kept occurrence whose dtype is not `value`'s type (size, class, byte "
                  "order)";
            break;
        }
        char role[ULP__DIGEST_STR + 1];
        memcpy(role, o->role, ULP__DIGEST_STR);
        role[ULP__DIGEST_STR] = '\0';
        const char *rname = role[0] ? role : "activation";
        /* The rows up to the last kept occurrence's (each bounded by the datasets' length:
         * occ_info), bytes a row: a damaged extent sizes nothing, nor wraps a product. */
        uint64_t n = upto, rb = (uint64_t)vd[1] * esize;
        if (vbuf == NULL &&
            (vd[1] > ((uint64_t)1 << 32) || (n > 0 && rb > UINT64_MAX / n) ||
             ulp__snapshot_absurd_bytes(s, n * rb) || ulp__snapshot_absurd_bytes(s, n * 16))) {
            why = "is too large to read";
            break;
        }
        /* Kept by the snapshot as soon as made: nothing to free on the way out. */
        if ((vbuf == NULL && ((vbuf = keep_alloc(s, (size_t)(n * rb))) == NULL ||
                              (pbuf = keep_alloc(s, (size_t)n * sizeof *pbuf)) == NULL ||
                              (rbuf = keep_alloc(s, (size_t)n * sizeof *rbuf)) == NULL)) ||
            (last_role == NULL || strcmp(last_role, rname) != 0
                 ? (c.role = last_role = keep_copy(s, rname, strlen(rname) + 1)) == NULL
                 : (c.role = last_role) == NULL) ||
            ulp__cap_vec_push(w->kv) < 0 || ULP__GROW(*w->mem, w->mem_cap, w->kv->n) != 0) {
            w->st = ulp__error(w->err, ULP_ENOMEM, "'%s': out of memory", s->path);
            break;
        }
        w->kv->n--; /* pushed again below, once read */
        if ((i == first_kept &&
             (ulp__digest_read_rows(ds[3], vt, 2, 0, n, vd[1], vbuf) < 0 ||
              ulp__digest_read_rows(ds[1], H5T_NATIVE_INT64, 1, rb0, n, 1, pbuf) < 0 ||
              ulp__digest_read_rows(ds[2], H5T_NATIVE_INT64, 1, rb0, n, 1, rbuf) < 0)) ||
            (o->inputs_count > 0 && inputs == NULL && load_inputs(s, v, &inputs, &ninputs) < 0) ||
            occ_inputs(o, inputs, ninputs, &c) < 0) {
            why = "has kept rows that cannot be read";
            break;
        }
        w->kv->n++;
        unsigned char *data = vbuf + o->first * rb;
        c.positions = c.rows > 0 ? pbuf + o->first : NULL;
        c.requests = c.rows > 0 && o->has_requests ? rbuf + o->first : NULL;
        char occs[32];
        snprintf(occs, sizeof occs, "%" PRId64, c.occurrence);
        ulp_status st =
            c.positions != NULL ? ulp__rows_check_keys(s, &c, name, occs, w->err) : ULP_OK;
        if (st != ULP_OK) {
            w->kv->n--;
            if (w->left != NULL && st != ULP_ENOMEM) { /* a killed file: this name left out */
                ulp_error_clear(w->err);
                why = "has a kept occurrence whose positions repeat or are negative";
            } else {
                w->st = st;
            }
            break;
        }
        ulp__cap_entry *e = &w->kv->v[w->kv->n - 1];
        memset(e, 0, sizeof *e);
        e->info = c;
        e->src.offset = ULP__NO_OFFSET;
        (*w->mem)[w->kv->n - 1] = data;
    }
    free(occ);
    if (mt >= 0)
        H5Tclose(mt);
    if (ot >= 0)
        H5Tclose(ot);
    if (vt >= 0)
        H5Tclose(vt);
    if (vsp >= 0)
        H5Sclose(vsp);
    return why;
}

/* What follows a name's kept captures that cannot be read: a killed writer's file (`left`)
 * leaves them out (those its journal holds need no table), another fails. */
static int name_failed(kept_walk *w, const char *name, const char *why, int64_t bad_occ,
                       size_t before)
{
    char occ[48] = "";
    if (bad_occ >= 0)
        snprintf(occ, sizeof occ, " (occurrence %" PRId64 ")", bad_occ);
    if (why != NULL && w->left != NULL && w->st == ULP_OK && w->journaled != NULL &&
        ulp__strmap_find(w->journaled, name) != NULL) {
        /* A killed writer's file whose journal holds the name's kept captures: its table is not
         * needed (snapshot_kept_journal.c). */
        w->kv->n = before;
        return 0;
    }
    if (why != NULL && w->left != NULL && w->st == ULP_OK) {
        /* A killed writer's file: this name's kept captures are left out, the others read. */
        w->kv->n = before;
        size_t n = strlen(w->left);
        snprintf(w->left + n, w->left_size - n,
                 "; the captures /digests/%s keeps are left out (%s%s)", name, why, occ);
        return 0;
    }
    if (why != NULL && w->st == ULP_OK)
        w->st =
            ulp__error(w->err, ULP_EFORMAT, "'%s': /digests/%s %s%s", w->s->path, name, why, occ);
    return w->st != ULP_OK ? -1 : 0;
}

static herr_t one_name(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    (void)info;
    kept_walk *w = arg;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    if (sub < 0)
        return 0; /* not a group: the digests' reader says so when they are read */
    int64_t bad_occ = -1;
    size_t before = w->kv->n;
    const char *why = NULL;
    if (H5Lexists(sub, "value", H5P_DEFAULT) > 0) {
        ulp__digest_view v;
        why = ulp__digest_view_group(sub, &v);
        if (why != NULL)
            why = "has `value` without its occurrences, position and request of one length";
        else
            why = one_view(w, &v, name, &bad_occ);
        ulp__digest_view_close(&v);
    }
    H5Gclose(sub);
    return name_failed(w, name, why, bad_occ, before);
}

/* A packed-2 /digests (a closed file's): each name that keeps rows, its ranges. */
static void shared_names(kept_walk *w, hid_t g)
{
    ulp__digests_shared d;
    const char *why = ulp__digests_shared_open(g, &d);
    if (why != NULL && w->st == ULP_OK)
        w->st = ulp__error(w->err, ULP_EFORMAT, "'%s': /digests %s", w->s->path, why);
    for (size_t i = 0; why == NULL && w->st == ULP_OK && i < d.n; i++) {
        if (!d.names[i].has_value)
            continue;
        ulp__digest_view v;
        int64_t bad_occ = -1;
        size_t before = w->kv->n;
        const char *vwhy = ulp__digests_shared_view(&d, i, &v);
        if (vwhy == NULL)
            vwhy = one_view(w, &v, d.names[i].name, &bad_occ);
        ulp__digest_view_close(&v);
        if (name_failed(w, d.names[i].name, vwhy, bad_occ, before) < 0)
            break;
    }
    ulp__digests_shared_close(&d);
}

ulp_status ulp__snapshot_kept_read(ulp_snapshot *s, ulp__cap_vec *kv, const unsigned char ***mem,
                                   char *left, size_t left_size, const ulp__strmap *journaled,
                                   ulp_error *err)
{
    kv->n = 0;
    *mem = NULL;
    hid_t file = s->file;
    /* Only the packed layout keeps captures; another is the digests' reader's to judge. */
    if (file < 0 || H5Lexists(file, "digests", H5P_DEFAULT) <= 0)
        return ULP_OK;
    hid_t g = H5Gopen2(file, "digests", H5P_DEFAULT);
    if (g < 0)
        return ULP_OK;
    char *layout = NULL;
    const char *why = NULL;
    int has = ulp__attr_read_str(g, "layout", &layout, &why) == 0;
    int packed = has && strcmp(layout, ULP__DIGEST_LAYOUT) == 0;
    int shared = has && strcmp(layout, ULP__DIGEST_LAYOUT_SHARED) == 0;
    free(layout);
    kept_walk w = {s, kv, mem, 0, ULP_OK, err, left, left_size, journaled};
    if (shared)
        shared_names(&w, g);
    else if (packed && H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, one_name, &w) < 0 &&
             w.st == ULP_OK)
        w.st = ulp__error(err, ULP_EFORMAT, "'%s': /digests cannot be listed", s->path);
    H5Gclose(g);
    if (w.st != ULP_OK) {
        kv->n = 0;
        free(*mem);
        *mem = NULL;
    }
    return w.st;
}

static int by_seq(const void *a, const void *b)
{
    int64_t x = (*(const ulp__cap_entry *const *)a)->info.seq;
    int64_t y = (*(const ulp__cap_entry *const *)b)->info.seq;
    return (x > y) - (x < y);
}

ulp_status ulp__snapshot_kept_install(ulp_snapshot *s, ulp__cap_vec *kv, const unsigned char **mem,
                                      ulp_error *err)
{
    if (kv->n == 0)
        return ULP_OK;
    size_t n = s->ncaps + kv->n;
    ulp_capture_info *caps = calloc(n, sizeof *caps);
    ulp__capture_src *srcs = calloc(n, sizeof *srcs);
    const unsigned char **kmem = calloc(n, sizeof *kmem);
    size_t *by_name = calloc(n, sizeof *by_name);
    const ulp_capture_info **order = calloc(n, sizeof *order);
    ulp__cap_entry **kept = calloc(kv->n, sizeof *kept);
    ulp_status st = ULP_OK;
    if (caps == NULL || srcs == NULL || kmem == NULL || by_name == NULL || order == NULL ||
        kept == NULL) {
        st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
        goto cleanup;
    }
    for (size_t i = 0; i < kv->n; i++)
        kept[i] = &kv->v[i];
    qsort(kept, kv->n, sizeof *kept, by_seq);
    /* Both in seq order: merged. */
    size_t a = 0, b = 0;
    for (size_t k = 0; k < n; k++) {
        int take_kept = b < kv->n && (a == s->ncaps || kept[b]->info.seq < s->caps[a].seq);
        if (take_kept) {
            caps[k] = kept[b]->info;
            srcs[k] = kept[b]->src;
            kmem[k] = mem[kept[b] - kv->v];
            b++;
        } else {
            caps[k] = s->caps[a];
            srcs[k] = s->srcs[a];
            a++;
        }
        if (k > 0 && caps[k].seq == caps[k - 1].seq) {
            st = ulp__error(err, ULP_EDUPSEQ,
                            "'%s': captures '%s/%" PRId64 "' and '%s/%" PRId64
                            "' both have seq %" PRId64 " (one kept in /digests)",
                            s->path, caps[k - 1].name, caps[k - 1].occurrence, caps[k].name,
                            caps[k].occurrence, caps[k].seq);
            goto cleanup;
        }
    }
    for (size_t k = 0; k < n; k++)
        order[k] = &caps[k];
    qsort(order, n, sizeof *order, ulp__cap_name_cmp);
    for (size_t k = 1; k < n; k++)
        if (ulp__cap_name_cmp(&order[k - 1], &order[k]) == 0) {
            st = ulp__error(err, ULP_EFORMAT,
                            "'%s': capture '%s' has occurrence %" PRId64
                            " twice (one kept in /digests)",
                            s->path, order[k]->name, order[k]->occurrence);
            goto cleanup;
        }
    for (size_t k = 0; k < n; k++)
        by_name[k] = (size_t)(order[k] - caps);
    free(s->caps);
    free(s->srcs);
    free(s->by_name);
    s->caps = caps;
    s->srcs = srcs;
    s->by_name = by_name;
    s->kept_mem = kmem;
    s->ncaps = n;
    caps = NULL;
    srcs = NULL;
    by_name = NULL;
    kmem = NULL;
cleanup:
    free(caps);
    free(srcs);
    free(kmem);
    free(by_name);
    free(order);
    free(kept);
    return st;
}

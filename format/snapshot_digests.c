/*
 * The reader of /digests, in both layouts (FORMAT.md, "Digests"): without
 * a `layout` attribute, each /digests/<name>/<occurrence> dataset read
 * with its `seq`, `positions` and `requests` attributes; with `layout` =
 * `packed-1`, each name's occurrence table and its row-aligned `digest`,
 * `position` and `request` datasets, every range checked against them;
 * with `packed-2`, each name's ranges of those datasets shared by all names
 * (digest_view.h), read alike.
 */
#include "snapshot_digests.h"

#include <hdf5.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "digest_rows.h"
#include "digest_table.h"
#include "digest_view.h"
#include "h5types.h"
#include "snapshot_priv.h"

typedef struct walk {
    hid_t group;
    const char *path;
    ulp__digest_entry *v;
    size_t n, cap;
    ulp_status st;
    ulp_error *err;
    const char *name; /* the capture name being walked */
} walk;

/* An integer attribute of `want` elements into `out` (malloc'd); 0 absent, -1 bad. */
static int int_attr(hid_t ds, const char *name, uint64_t want, int64_t **out)
{
    *out = NULL;
    if (H5Aexists(ds, name) <= 0)
        return 0;
    hid_t a = H5Aopen(ds, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    hid_t sp = H5Aget_space(a), t = H5Aget_type(a);
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    int rc = -1;
    if (n >= 0 && (uint64_t)n == want && t >= 0 && ulp__h5_ints_sound(t)) {
        *out = malloc((size_t)(want > 0 ? want : 1) * sizeof(int64_t));
        if (*out != NULL && H5Aread(a, H5T_NATIVE_INT64, *out) >= 0)
            rc = 1;
    }
    if (rc < 0) {
        free(*out);
        *out = NULL;
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (t >= 0)
        H5Tclose(t);
    H5Aclose(a);
    return rc;
}

static void entry_release(ulp__digest_entry *e)
{
    free(e->name);
    free(e->requests);
    free(e->positions);
    free(e->digests);
}

static herr_t one_occurrence(hid_t g, const char *occ, const H5L_info_t *info, void *arg)
{
    (void)info;
    walk *w = arg;
    char *end, back[24];
    long long o = strtoll(occ, &end, 10);
    /* The writer's decimal only: "00", "+0", " 0" or a number past INT64_MAX
     * (strtoll clamps it) would be a second occurrence of one number. */
    snprintf(back, sizeof back, "%lld", o);
    if (*end != '\0' || o < 0 || strcmp(back, occ) != 0) {
        w->st = ulp__error(w->err, ULP_EFORMAT, "%s: /digests/%s/%s is not an occurrence", w->path,
                           w->name, occ);
        return -1;
    }
    hid_t ds = H5Dopen2(g, occ, H5P_DEFAULT);
    hid_t sp = ds >= 0 ? H5Dget_space(ds) : -1;
    hssize_t rows = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    ulp__digest_entry e = {0};
    e.occurrence = o;
    int ok = rows >= 0 && ulp__digest_ds_sound(ds);
    if (ok) {
        e.rows = (uint64_t)rows;
        e.digests = malloc((size_t)(rows > 0 ? rows : 1) * sizeof(uint64_t));
        e.name = strdup(w->name);
        int64_t *seq = NULL, *layer = NULL;
        ok = e.digests != NULL && e.name != NULL &&
             (rows == 0 ||
              (ulp__h5_storage_whole(ds) &&
               H5Dread(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, e.digests) >= 0)) &&
             int_attr(ds, "seq", 1, &seq) == 1 &&
             int_attr(ds, "positions", e.rows, &e.positions) >= 0 &&
             int_attr(ds, "requests", e.rows, &e.requests) >= 0 &&
             int_attr(ds, "layer", 1, &layer) >= 0;
        if (seq != NULL)
            e.seq = seq[0];
        e.layer = layer != NULL && layer[0] >= INT32_MIN && layer[0] <= INT32_MAX
                      ? (int32_t)layer[0]
                      : -1;
        free(seq);
        free(layer);
    }
    if (sp >= 0)
        H5Sclose(sp);
    if (ds >= 0)
        H5Dclose(ds);
    if (ok && w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        ulp__digest_entry *p = realloc(w->v, cap * sizeof(*p));
        if (p == NULL)
            ok = 0;
        else
            w->v = p, w->cap = cap;
    }
    if (!ok) {
        entry_release(&e);
        w->st = ulp__error(w->err, ULP_EFORMAT,
                           "%s: /digests/%s/%s is not a digest dataset (uint64 rows, seq, "
                           "positions and requests of as many rows)",
                           w->path, w->name, occ);
        return -1;
    }
    w->v[w->n++] = e;
    return 0;
}

static herr_t one_name(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    (void)info;
    walk *w = arg;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    if (sub < 0) {
        w->st = ulp__error(w->err, ULP_EFORMAT, "%s: /digests/%s is not a group", w->path, name);
        return -1;
    }
    w->name = name;
    herr_t rc = H5Literate(sub, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, one_occurrence, w);
    H5Gclose(sub);
    return rc < 0 ? -1 : 0;
}

/* 1 when the file's compound of `ds` has every field the reader reads. */
static int table_fields(hid_t ds)
{
    static const char *const need[] = {"occurrence", "seq",       "first",         "rows",
                                       "layer",      "has_layer", "has_positions", "has_requests"};
    hid_t t = H5Dget_type(ds);
    int ok = t >= 0 && H5Tget_class(t) == H5T_COMPOUND;
    for (size_t i = 0; ok && i < sizeof(need) / sizeof(need[0]); i++)
        ok = H5Tget_member_index(t, need[i]) >= 0;
    if (t >= 0)
        H5Tclose(t);
    return ok;
}

/* One name's tables, `v` (either packed layout): every occurrence, as entries of `w`. */
static const char *packed_entries(walk *w, const char *name, const ulp__digest_view *v,
                                  int64_t *bad_occ)
{
    hid_t mt = ulp__digest_occ_type();
    ulp__digest_occ *occ = NULL;
    const char *why = NULL;
    if (!ulp__digest_ds_sound(v->occ) || !ulp__digest_ds_sound(v->digest) ||
        !ulp__digest_ds_sound(v->position) || !ulp__digest_ds_sound(v->request))
        why = "has a damaged integer type (its bits lie past its bytes)";
    else if (!table_fields(v->occ) || mt < 0)
        why = "has an occurrences table without the fields of the packed layout";
    else if ((occ = calloc((size_t)(v->nocc > 0 ? v->nocc : 1), sizeof(*occ))) == NULL)
        why = "is too large to read";
    else if (ulp__digest_read_rows(v->occ, mt, 1, v->occ_base, v->nocc, 1, occ) < 0)
        why = "has an occurrences table that cannot be read";
    uint64_t nrows = v->nrows;
    /* The name's rows, read once each (an H5Dread an occurrence and dataset took 200 ms
     * of a 512-step file's 7,000 occurrences); the occurrences' then copied out. */
    uint64_t *dig = NULL;
    int64_t *pos = NULL, *req = NULL;
    size_t nb = (size_t)(nrows > 0 ? nrows : 1);
    if (why == NULL &&
        (nrows > SIZE_MAX / sizeof(uint64_t) || (dig = malloc(nb * sizeof *dig)) == NULL ||
         (pos = malloc(nb * sizeof *pos)) == NULL || (req = malloc(nb * sizeof *req)) == NULL))
        why = "is too large to read";
    else if (why == NULL && (ulp__digest_read_rows(v->digest, H5T_NATIVE_UINT64, 1, v->row_base,
                                                   nrows, 1, dig) < 0 ||
                             ulp__digest_read_rows(v->position, H5T_NATIVE_INT64, 1, v->row_base,
                                                   nrows, 1, pos) < 0 ||
                             ulp__digest_read_rows(v->request, H5T_NATIVE_INT64, 1, v->row_base,
                                                   nrows, 1, req) < 0))
        why = "has rows that cannot be read";
    for (uint64_t i = 0; why == NULL && i < v->nocc; i++) {
        const ulp__digest_occ *o = &occ[i];
        if (o->occurrence != (int64_t)i) {
            why = "has an occurrence out of order (occurrence must equal its index)";
            *bad_occ = (int64_t)i;
        } else if (o->first > nrows || o->rows > nrows - o->first) {
            why = "has an occurrence whose rows lie past its digest datasets";
            *bad_occ = (int64_t)i;
        }
    }
    for (uint64_t i = 0; why == NULL && i < v->nocc; i++) {
        const ulp__digest_occ *o = &occ[i];
        if (w->n == w->cap) {
            size_t cap = w->cap ? 2 * w->cap : 64;
            ulp__digest_entry *p = realloc(w->v, cap * sizeof(*p));
            if (p == NULL) {
                why = "is too large to read";
                break;
            }
            w->v = p, w->cap = cap;
        }
        ulp__digest_entry e = {0};
        e.occurrence = o->occurrence;
        e.seq = o->seq;
        e.layer = o->has_layer ? o->layer : -1;
        e.rows = o->rows;
        size_t ob = (size_t)(o->rows > 0 ? o->rows : 1), at = (size_t)o->first;
        e.name = strdup(name);
        e.digests = malloc(ob * sizeof(uint64_t));
        if (o->has_positions)
            e.positions = malloc(ob * sizeof(int64_t));
        if (o->has_requests)
            e.requests = malloc(ob * sizeof(int64_t));
        if (e.name == NULL || e.digests == NULL || (o->has_positions && e.positions == NULL) ||
            (o->has_requests && e.requests == NULL)) {
            entry_release(&e);
            why = "is too large to read";
            *bad_occ = (int64_t)i;
            break;
        }
        size_t rb = (size_t)o->rows * sizeof(int64_t); /* within nrows: checked above */
        if (rb > 0) {
            memcpy(e.digests, dig + at, rb);
            if (e.positions != NULL)
                memcpy(e.positions, pos + at, rb);
            if (e.requests != NULL)
                memcpy(e.requests, req + at, rb);
        }
        w->v[w->n++] = e;
    }
    free(dig);
    free(pos);
    free(req);
    free(occ);
    if (mt >= 0)
        H5Tclose(mt);
    return why;
}

static void packed_failed(walk *w, const char *name, const char *why, int64_t bad_occ)
{
    if (bad_occ >= 0)
        w->st = ulp__error(w->err, ULP_EFORMAT, "%s: /digests/%s %s (occurrence %" PRId64 ")",
                           w->path, name, why, bad_occ);
    else
        w->st = ulp__error(w->err, ULP_EFORMAT, "%s: /digests/%s %s", w->path, name, why);
}

/* One name of a packed-1 /digests: its group's tables. */
static herr_t one_packed_name(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    (void)info;
    walk *w = arg;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    ulp__digest_view v;
    int64_t bad_occ = -1;
    const char *why = sub < 0 ? "is not a group" : ulp__digest_view_group(sub, &v);
    if (why == NULL)
        why = packed_entries(w, name, &v, &bad_occ);
    if (sub >= 0) {
        ulp__digest_view_close(&v);
        H5Gclose(sub);
    }
    if (why != NULL)
        packed_failed(w, name, why, bad_occ);
    return why != NULL ? -1 : 0;
}

/* A packed-2 /digests: each name's ranges of the shared tables. */
static int shared_names(walk *w, hid_t g)
{
    ulp__digests_shared d;
    const char *why = ulp__digests_shared_open(g, &d);
    if (why != NULL)
        w->st = ulp__error(w->err, ULP_EFORMAT, "%s: /digests %s", w->path, why);
    for (size_t i = 0; why == NULL && i < d.n; i++) {
        ulp__digest_view v;
        int64_t bad_occ = -1;
        why = ulp__digests_shared_view(&d, i, &v);
        if (why == NULL)
            why = packed_entries(w, d.names[i].name, &v, &bad_occ);
        ulp__digest_view_close(&v);
        if (why != NULL)
            packed_failed(w, d.names[i].name, why, bad_occ);
    }
    ulp__digests_shared_close(&d);
    return why != NULL ? -1 : 0;
}

/* 1 if the string attribute `name` of `obj` is one of the `n` strings of `any`. */
static int str_attr_in(hid_t obj, const char *name, const char *const *any, size_t n)
{
    const char *why = NULL;
    char *v = NULL;
    int in = 0;
    if (ulp__attr_read_str(obj, name, &v, &why) == 0)
        for (size_t i = 0; i < n && !in; i++)
            in = strcmp(v, any[i]) == 0;
    free(v);
    return in;
}

/* 1 if occurrence dataset `occ` is fed token ids: role `input`, an integer dtype, `positions`,
 * one element per position (FORMAT.md "Parted token streams"). */
static herr_t fed_ids(hid_t g, const char *occ, const H5L_info_t *info, void *arg)
{
    static const char *const roles[] = {"input"};
    static const char *const ints[] = {"i64", "i32", "i16", "i8", "u8"};
    (void)info;
    int *all = arg, ok = 0;
    hid_t ds = H5Dopen2(g, occ, H5P_DEFAULT);
    if (ds >= 0 && str_attr_in(ds, "role", roles, 1) && str_attr_in(ds, "dtype", ints, 5) &&
        H5Aexists(ds, "positions") > 0) {
        hid_t a = H5Aopen(ds, "positions", H5P_DEFAULT);
        hid_t as = a >= 0 ? H5Aget_space(a) : -1, dsp = H5Dget_space(ds);
        ok = as >= 0 && dsp >= 0 &&
             H5Sget_simple_extent_npoints(as) == H5Sget_simple_extent_npoints(dsp);
        if (dsp >= 0)
            H5Sclose(dsp);
        if (as >= 0)
            H5Sclose(as);
        if (a >= 0)
            H5Aclose(a);
    }
    if (ds >= 0)
        H5Dclose(ds);
    *all = *all && ok;
    return *all ? 0 : 1;
}

/* A dataset under /captures, but the produced tokens (`tokens`) and the fed token ids, which a
 * digest-mode file keeps in full beside their digests (FORMAT.md, "Digests"). */
static herr_t count_data(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    (void)info;
    if (strcmp(name, "tokens") == 0)
        return 0;
    H5G_info_t gi;
    hid_t sub = H5Gopen2(g, name, H5P_DEFAULT);
    if (sub >= 0 && H5Gget_info(sub, &gi) >= 0 && gi.nlinks > 0) {
        int all = 1;
        H5Literate(sub, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, fed_ids, &all);
        if (!all)
            *(int *)arg = 1;
    }
    if (sub >= 0)
        H5Gclose(sub);
    return 0;
}

static int by_key(const void *x, const void *y)
{
    const ulp__digest_entry *a = *(const ulp__digest_entry *const *)x;
    const ulp__digest_entry *b = *(const ulp__digest_entry *const *)y;
    int c = strcmp(a->name, b->name);
    return c != 0 ? c : (a->occurrence > b->occurrence) - (a->occurrence < b->occurrence);
}

/*
 * A damaged link table can list one link twice: a (name, occurrence) read
 * twice would be one capture compared as two.  ULP_EFORMAT naming it.
 */
static ulp_status twice(walk *w)
{
    if (w->n < 2)
        return ULP_OK;
    const ulp__digest_entry **p = malloc(w->n * sizeof *p);
    if (p == NULL)
        return ulp__error(w->err, ULP_ENOMEM, "%s: out of memory reading /digests", w->path);
    for (size_t i = 0; i < w->n; i++)
        p[i] = &w->v[i];
    qsort(p, w->n, sizeof *p, by_key);
    ulp_status st = ULP_OK;
    for (size_t i = 1; i < w->n && st == ULP_OK; i++)
        if (by_key(&p[i - 1], &p[i]) == 0)
            st = ulp__error(w->err, ULP_EFORMAT,
                            "%s: /digests lists %s occurrence %" PRId64 " twice", w->path,
                            p[i]->name, p[i]->occurrence);
    free(p);
    return st;
}

ulp_status ulp__digests_read(const char *path, ulp__digest_entry **out, size_t *n, int *has_data,
                             ulp_error *err)
{
    *out = NULL;
    *n = 0;
    *has_data = 0;
    hid_t file;
    H5E_BEGIN_TRY
    {
        file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    }
    H5E_END_TRY;
    if (file < 0)
        return ulp__error(err, ULP_EIO, "%s: cannot be opened as HDF5", path);
    walk w = {.path = path, .st = ULP_OK, .err = err};
    H5E_BEGIN_TRY
    {
        if (H5Lexists(file, "captures", H5P_DEFAULT) > 0) {
            hid_t c = H5Gopen2(file, "captures", H5P_DEFAULT);
            if (c >= 0) {
                H5Literate(c, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, count_data, has_data);
                H5Gclose(c);
            }
        }
        if (H5Lexists(file, "digests", H5P_DEFAULT) > 0) {
            w.group = H5Gopen2(file, "digests", H5P_DEFAULT);
            /* `layout` absent: a dataset per occurrence (files written before the
             * packed layout); `packed-1`: the occurrence tables. */
            char *layout = NULL;
            const char *why = NULL;
            /* ulp__attr_read_str: 0 read, 1 absent, -1 not a string. */
            int has = w.group >= 0 ? ulp__attr_read_str(w.group, "layout", &layout, &why) : 1;
            int packed = has == 0 && strcmp(layout, ULP__DIGEST_LAYOUT) == 0;
            int shared = has == 0 && strcmp(layout, ULP__DIGEST_LAYOUT_SHARED) == 0;
            if (has < 0 || (has == 0 && !packed && !shared))
                w.st = ulp__error(err, ULP_EFORMAT,
                                  "%s: /digests has layout '%s' (this ulpprof reads '%s', '%s' "
                                  "or none)",
                                  path, has == 0 ? layout : "?", ULP__DIGEST_LAYOUT,
                                  ULP__DIGEST_LAYOUT_SHARED);
            free(layout);
            if (w.st != ULP_OK)
                ;
            else if (w.group >= 0 && shared)
                (void)shared_names(&w, w.group);
            else if (w.group < 0 || H5Literate(w.group, H5_INDEX_NAME, H5_ITER_NATIVE, NULL,
                                               packed ? one_packed_name : one_name, &w) < 0) {
                if (w.st == ULP_OK)
                    w.st = ulp__error(err, ULP_EFORMAT, "%s: /digests cannot be read", path);
            }
            if (w.group >= 0)
                H5Gclose(w.group);
        }
    }
    H5E_END_TRY;
    H5Fclose(file);
    if (w.st == ULP_OK)
        w.st = twice(&w);
    if (w.st != ULP_OK) {
        ulp__digests_free(w.v, w.n);
        return w.st;
    }
    *out = w.v;
    *n = w.n;
    return ULP_OK;
}

int ulp__digests_present(const char *path)
{
    hid_t file;
    htri_t has = 0;
    H5E_BEGIN_TRY
    {
        file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
        if (file >= 0)
            has = H5Lexists(file, "digests", H5P_DEFAULT);
    }
    H5E_END_TRY;
    if (file >= 0)
        H5Fclose(file);
    return has > 0;
}

void ulp__digests_free(ulp__digest_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        entry_release(&e[i]);
    free(e);
}

/*
 * Reading attributes of a snapshot as FORMAT.md allows them to be written:
 * strings fixed- or variable-length, integers of any width and sign, and
 * /run, /env values of any simple type rendered as text.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/grow.h"
#include "h5types.h"
#include "snapshot_priv.h"

/* Opens attribute `name`: 1 absent, 0 opened (*a, *type, *npoints set), -1 error. */
static int attr_open(hid_t obj, const char *name, hid_t *a, hid_t *type, hssize_t *npoints,
                     const char **why)
{
    htri_t ex = H5Aexists(obj, name);
    if (ex == 0)
        return 1;
    *a = ex > 0 ? H5Aopen(obj, name, H5P_DEFAULT) : -1;
    if (*a < 0) {
        *why = "cannot be read";
        return -1;
    }
    *type = H5Aget_type(*a);
    hid_t space = H5Aget_space(*a);
    *npoints = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (space >= 0)
        H5Sclose(space);
    if (*type < 0 || *npoints < 0) {
        if (*type >= 0)
            H5Tclose(*type);
        H5Aclose(*a);
        *why = "cannot be read";
        return -1;
    }
    return 0;
}

/* The most bytes of fixed-length strings one attribute is read with. */
#define STRINGS_MAX_BYTES ((size_t)16 << 20)

/* Reads `n` strings of a string attribute into malloc'd copies in out[]:
 * 0, -1 (cannot be read), or -2 (out of memory). */
static int read_strings(hid_t a, hid_t ftype, size_t n, char **out)
{
    int rc = -1;
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    if (H5Tis_variable_str(ftype) > 0) {
        char **v = calloc(n ? n : 1, sizeof *v);
        hid_t mt = H5Tcopy(H5T_C_S1);
        if (v == NULL || mt < 0 || H5Tset_size(mt, H5T_VARIABLE) < 0 ||
            H5Tset_cset(mt, H5Tget_cset(ftype)) < 0 || H5Aread(a, mt, v) < 0) {
            free(v);
            if (mt >= 0)
                H5Tclose(mt);
            return v == NULL ? -2 : -1;
        }
        rc = 0;
        for (size_t i = 0; i < n; i++) {
            out[i] = strdup(v[i] ? v[i] : "");
            if (out[i] == NULL)
                rc = -2;
            H5free_memory(v[i]);
        }
        free(v);
        H5Tclose(mt);
        return rc;
    }
    /* Fixed length: read with the file's own padding so that a string filling
     * its whole width is not cut by a forced terminator.  A width a damaged
     * or hostile file declares past any real attribute is unreadable, not a
     * lack of memory (the calloc would fail). */
    size_t width = H5Tget_size(ftype);
    if (width == 0 || n > STRINGS_MAX_BYTES / width)
        return -1;
    char *buf = calloc(n * width + 1, 1);
    hid_t mt = H5Tcopy(ftype);
    if (buf == NULL)
        rc = -2;
    if (buf != NULL && mt >= 0 && H5Aread(a, mt, buf) >= 0) {
        int spacepad = H5Tget_strpad(ftype) == H5T_STR_SPACEPAD;
        rc = 0;
        for (size_t i = 0; i < n; i++) {
            size_t len = strnlen(buf + i * width, width);
            if (spacepad)
                while (len > 0 && buf[i * width + len - 1] == ' ')
                    len--;
            out[i] = strndup(buf + i * width, len);
            if (out[i] == NULL)
                rc = -2;
        }
    }
    free(buf);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

int ulp__attr_read_str(hid_t obj, const char *name, char **out, const char **why)
{
    hid_t a, type;
    hssize_t np;
    *out = NULL;
    int rc = attr_open(obj, name, &a, &type, &np, why);
    if (rc != 0)
        return rc;
    rc = -1;
    if (H5Tget_class(type) != H5T_STRING)
        *why = "is not a string";
    else if (np != 1)
        *why = "is not a single string";
    else if ((rc = read_strings(a, type, 1, out)) < 0)
        *why = rc == -2 ? "cannot be read: out of memory" : "cannot be read";
    rc = rc < 0 ? -1 : 0;
    H5Tclose(type);
    H5Aclose(a);
    return rc;
}

/* Reads n integers; `want_signed` decides the memory type and the range check. */
static int read_ints(hid_t obj, const char *name, void *out, size_t n, int want_signed,
                     const char **why)
{
    hid_t a, type;
    hssize_t np;
    int rc = attr_open(obj, name, &a, &type, &np, why);
    if (rc != 0)
        return rc;
    rc = -1;
    int file_signed = H5Tget_class(type) == H5T_INTEGER && H5Tget_sign(type) != H5T_SGN_NONE;
    if (H5Tget_class(type) != H5T_INTEGER) {
        *why = "is not an integer";
    } else if ((size_t)np != n) {
        *why = n == 1 ? "is not a single integer" : "has the wrong number of elements";
    } else if (!ulp__h5_ints_sound(type)) {
        *why = "has a damaged integer type (its bits lie past its bytes)";
    } else {
        /* Read in the file's signedness, then check the range ourselves:
         * HDF5 would silently clamp an out-of-range value. */
        uint64_t *v = calloc(n, sizeof *v);
        if (v == NULL) {
            *why = "cannot be read: out of memory";
        } else if (H5Aread(a, file_signed ? H5T_NATIVE_INT64 : H5T_NATIVE_UINT64, v) >= 0) {
            rc = 0;
            for (size_t i = 0; i < n; i++) {
                if (want_signed && !file_signed && v[i] > (uint64_t)INT64_MAX)
                    rc = -1;
                if (!want_signed && file_signed && (int64_t)v[i] < 0)
                    rc = -1;
            }
            if (rc == 0)
                memcpy(out, v, n * sizeof *v);
            else
                *why = "is out of range";
        } else {
            *why = "cannot be read";
        }
        free(v);
    }
    H5Tclose(type);
    H5Aclose(a);
    return rc;
}

int ulp__attr_read_i64(hid_t obj, const char *name, int64_t *out, const char **why)
{
    return read_ints(obj, name, out, 1, 1, why);
}

int ulp__attr_read_u64(hid_t obj, const char *name, uint64_t *out, const char **why)
{
    return read_ints(obj, name, out, 1, 0, why);
}

int ulp__attr_read_i64_array(hid_t obj, const char *name, int64_t *out, size_t n, const char **why)
{
    return read_ints(obj, name, out, n, 1, why);
}

int ulp__attr_read_str_array(hid_t obj, const char *name, char ***out, size_t *n, const char **why)
{
    hid_t a, type;
    hssize_t np;
    *out = NULL;
    *n = 0;
    int rc = attr_open(obj, name, &a, &type, &np, why);
    if (rc != 0)
        return rc;
    rc = -1;
    char **v = NULL;
    if (H5Tget_class(type) != H5T_STRING) {
        *why = "is not a string";
    } else if ((v = calloc(np > 0 ? (size_t)np : 1, sizeof *v)) == NULL) {
        *why = "cannot be read: out of memory";
    } else if ((rc = read_strings(a, type, (size_t)np, v)) < 0) {
        *why = rc == -2 ? "cannot be read: out of memory" : "cannot be read";
        rc = -1;
    } else {
        *out = v;
        *n = (size_t)np;
        v = NULL;
        rc = 0;
    }
    for (hssize_t i = 0; v != NULL && i < np; i++)
        free(v[i]);
    free(v);
    H5Tclose(type);
    H5Aclose(a);
    return rc;
}

ulp_status ulp__attr_check_object(const ulp_snapshot *s, hid_t obj, const char *where,
                                  ulp_error *err)
{
    char bad[64];
    int fit = ulp__ohdr_attrs_fit(s, obj, bad, sizeof bad);
    if (fit == -2)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    if (fit == 0)
        return ulp__error(err, ULP_EBADATTR,
                          "'%s': attribute '%s' of '%s' declares more bytes than its header "
                          "message holds (a damaged file)",
                          s->path, bad, where);
    return ULP_OK;
}

/* --- /run and /env ------------------------------------------------------------ */

typedef struct strbuf {
    char *p;
    size_t len, cap;
    int oom;
} strbuf;

static void sb_add(strbuf *b, const char *s)
{
    size_t n = strlen(s);
    if (b->oom)
        return;
    if (ULP__GROW(b->p, b->cap, b->len + n + 1) != 0) {
        b->oom = 1;
        return;
    }
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

/* The shortest "%.*g" that reads back as the same double. */
static void fmt_double(char *out, size_t size, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}

#define KV_MAX_ELEMENTS 64 /* longer arrays are shown up to here, then "..." */

#define RENDER_MAX_ELEMENTS ((size_t)1 << 16)

/* Renders the value of attribute `a` as text (malloc'd), or NULL on failure. */
static char *render_attr(hid_t a)
{
    hid_t type = H5Aget_type(a), space = H5Aget_space(a);
    hssize_t np = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    int ndims = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    strbuf b = {0};
    char num[64];
    char **strs = NULL;
    void *vals = NULL;
    size_t n = np > 0 ? (size_t)np : 0;

    if (type < 0 || np < 0) {
        sb_add(&b, "(unreadable)");
        goto done;
    }
    int is_array = ndims > 0 && np != 1;
    /* /run and /env hold short facts; a damaged or hostile extent must not
     * make us allocate for billions of elements before HDF5 reads them. */
    if (n > RENDER_MAX_ELEMENTS) {
        snprintf(num, sizeof num, "(%zu elements, not shown)", n);
        sb_add(&b, num);
        goto done;
    }
    size_t width = cls == H5T_STRING && H5Tis_variable_str(type) <= 0 ? H5Tget_size(type) : 0;
    if (width > 0 && n > STRINGS_MAX_BYTES / width) {
        snprintf(num, sizeof num, "(%zu bytes, not shown)", n * width);
        sb_add(&b, num);
        goto done;
    }
    if (cls == H5T_STRING) {
        strs = calloc(n ? n : 1, sizeof *strs);
        if (strs == NULL) {
            b.oom = 1;
            goto done;
        }
        int got = read_strings(a, type, n, strs);
        if (got == -2)
            b.oom = 1;
        if (got < 0) {
            sb_add(&b, "(unreadable)");
            goto done;
        }
    } else if (cls == H5T_INTEGER && !ulp__h5_ints_sound(type)) {
        sb_add(&b, "(a damaged integer type)"); /* a different number on each read */
        goto done;
    } else if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
        vals = calloc(n ? n : 1, 8);
        hid_t mt = cls == H5T_FLOAT                    ? H5T_NATIVE_DOUBLE
                   : H5Tget_sign(type) == H5T_SGN_NONE ? H5T_NATIVE_UINT64
                                                       : H5T_NATIVE_INT64;
        if (vals == NULL) {
            b.oom = 1;
            goto done;
        }
        if (n > 0 && H5Aread(a, mt, vals) < 0) {
            sb_add(&b, "(unreadable)");
            goto done;
        }
    } else {
        sb_add(&b, "(value of an unsupported type)");
        goto done;
    }
    if (is_array)
        sb_add(&b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i > 0)
            sb_add(&b, ", ");
        if (i == KV_MAX_ELEMENTS) {
            sb_add(&b, "...");
            break;
        }
        if (strs != NULL) {
            sb_add(&b, strs[i]);
        } else if (cls == H5T_FLOAT) {
            fmt_double(num, sizeof num, ((const double *)vals)[i]);
            sb_add(&b, num);
        } else if (H5Tget_sign(type) == H5T_SGN_NONE) {
            snprintf(num, sizeof num, "%" PRIu64, ((const uint64_t *)vals)[i]);
            sb_add(&b, num);
        } else {
            snprintf(num, sizeof num, "%" PRId64, ((const int64_t *)vals)[i]);
            sb_add(&b, num);
        }
    }
    if (is_array)
        sb_add(&b, "]");
done:
    if (b.p == NULL && !b.oom)
        sb_add(&b, "");
    if (strs != NULL)
        for (size_t i = 0; i < n; i++)
            free(strs[i]);
    free(strs);
    free(vals);
    if (type >= 0)
        H5Tclose(type);
    if (space >= 0)
        H5Sclose(space);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

typedef struct kv_ctx {
    ulp_snapshot *s;
    ulp_kv *kv;
    size_t n, cap;
    int failed;
} kv_ctx;

static herr_t kv_visit(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    kv_ctx *c = data;
    (void)info;
    if (ULP__GROW(c->kv, c->cap, c->n + 1) != 0) {
        c->failed = 1;
        return -1;
    }
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
    char *value = a >= 0 ? render_attr(a) : strdup("(unreadable)");
    if (a >= 0)
        H5Aclose(a);
    char *key = ulp__snap_keep(c->s, strdup(name));
    value = ulp__snap_keep(c->s, value);
    if (key == NULL || value == NULL) {
        c->failed = 1;
        return -1;
    }
    c->kv[c->n].key = key;
    c->kv[c->n].value = value;
    c->n++;
    return 0;
}

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const ulp_kv *)a)->key, ((const ulp_kv *)b)->key);
}

ulp_status ulp__attr_read_kv(ulp_snapshot *s, const char *gpath, ulp_kv **out, size_t *n,
                             ulp_error *err)
{
    *out = NULL;
    *n = 0;
    htri_t ex = H5Lexists(s->file, gpath, H5P_DEFAULT);
    if (ex == 0)
        return ULP_OK;
    H5O_info_t oi;
    if (ex < 0 || H5Oget_info_by_name2(s->file, gpath, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': '%s' cannot be opened", s->path, gpath);
    if (oi.type != H5O_TYPE_GROUP)
        return ulp__error(err, ULP_EFORMAT, "'%s': '%s' is not a group", s->path, gpath);
    hid_t g = H5Gopen2(s->file, gpath, H5P_DEFAULT);
    if (g < 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': '%s' cannot be opened", s->path, gpath);
    ulp_status st = ulp__attr_check_object(s, g, gpath, err);
    if (st != ULP_OK) {
        H5Gclose(g);
        return st;
    }
    kv_ctx c = {.s = s};
    hsize_t idx = 0;
    herr_t rc = H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, kv_visit, &c);
    H5Gclose(g);
    if (c.failed) {
        free(c.kv);
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory reading '%s'", s->path, gpath);
    }
    if (rc < 0) {
        free(c.kv);
        return ulp__error(err, ULP_EBADATTR, "'%s': the attributes of '%s' cannot be read", s->path,
                          gpath);
    }
    if (c.n > 1)
        qsort(c.kv, c.n, sizeof *c.kv, kv_cmp);
    *out = c.kv;
    *n = c.n;
    return ULP_OK;
}

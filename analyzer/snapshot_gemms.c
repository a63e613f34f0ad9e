/*
 * Reading /trace/gemms (FORMAT.md): the cuBLAS / cuBLASLt calls of the CUDA
 * collector.  Fields are matched by name (common/gemm_row.h), so a writer
 * may add fields or reorder them; absent ones read as 0 or "".  Strings
 * must be fixed-length (a longer one is cut to the field).
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/gemm_row.h"
#include "snapshot_priv.h"

/* The public row has the members of the file's row, one for one. */
#define SAME_MEMBER(name, kind, comment)                                                           \
    _Static_assert(sizeof(((ulp_gemm_info *)0)->name) == sizeof(((ulp__gemm_row *)0)->name),       \
                   "ulp_gemm_info." #name);
ULP__GEMM_ROW_FIELDS(SAME_MEMBER)

#define COPY_MEMBER(name, kind, comment) memcpy(&g->name, &r->name, sizeof g->name);

static int field_fits(hid_t t, ulp__gemm_kind k)
{
    if (ulp__gemm_kind_strlen(k) == 0)
        return H5Tget_class(t) == H5T_INTEGER;
    return H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) == 0;
}

/* Terminates each string field (the file's may fill it). */
static void terminate(ulp__gemm_row *r)
{
    for (size_t i = 0; i < ulp__gemm_field_count; i++) {
        size_t len = ulp__gemm_kind_strlen(ulp__gemm_fields[i].kind);
        if (len > 0)
            ((char *)r + ulp__gemm_fields[i].offset)[len - 1] = '\0';
    }
}

ulp_status ulp__snapshot_read_gemms(ulp_snapshot *s, ulp_error *err)
{
    hid_t d = -1, type = -1, mt = -1;
    ulp__gemm_row *raw = NULL;
    hssize_t n = 0;
    ulp_status st = ulp__trace_open_table(s, "/trace/gemms", H5T_COMPOUND, "1-D compound dataset",
                                          0, &d, &type, &n, err);
    if (st != ULP_OK || d < 0)
        return st;
    mt = H5Tcreate(H5T_COMPOUND, sizeof(ulp__gemm_row));
    if (mt < 0)
        goto hdf5_fail;
    int nmembers = 0;
    for (size_t i = 0; i < ulp__gemm_field_count; i++) {
        const ulp__gemm_field *f = &ulp__gemm_fields[i];
        int idx = H5Tget_member_index(type, f->name);
        if (idx < 0)
            continue;
        hid_t ft = H5Tget_member_type(type, (unsigned)idx);
        int ok = ft >= 0 && field_fits(ft, f->kind);
        /* A string is read in the file's character set (HDF5 converts
         * lengths and padding, not ASCII to UTF-8). */
        hid_t memt = -1;
        if (ok && ulp__gemm_kind_strlen(f->kind) > 0) {
            memt = H5Tcopy(ft);
            if (memt >= 0 && (H5Tset_size(memt, ulp__gemm_kind_strlen(f->kind)) < 0 ||
                              H5Tset_strpad(memt, H5T_STR_NULLPAD) < 0)) {
                H5Tclose(memt);
                memt = -1;
            }
        } else if (ok) {
            memt = ulp__gemm_field_type(f->kind, 0);
        }
        if (ft >= 0)
            H5Tclose(ft);
        if (!ok) {
            st = ulp__error(
                err, ULP_EFORMAT, "'%s': '/trace/gemms' field '%s' is not %s", s->path, f->name,
                ulp__gemm_kind_strlen(f->kind) ? "a fixed-length string" : "an integer");
            goto cleanup;
        }
        int rc = memt >= 0 ? H5Tinsert(mt, f->name, f->offset, memt) : -1;
        if (memt >= 0)
            H5Tclose(memt);
        if (rc < 0)
            goto hdf5_fail;
        nmembers++;
    }
    raw = calloc(n ? (size_t)n : 1, sizeof *raw);
    s->gemms = calloc(n ? (size_t)n : 1, sizeof *s->gemms);
    if (raw == NULL || s->gemms == NULL) {
        st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory reading '/trace/gemms'", s->path);
        goto cleanup;
    }
    if (n > 0 && nmembers > 0 && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0)
        goto hdf5_fail;
    for (hssize_t i = 0; i < n; i++) {
        ulp__gemm_row *r = &raw[i];
        ulp_gemm_info *g = &s->gemms[i];
        terminate(r);
        ULP__GEMM_ROW_FIELDS(COPY_MEMBER)
    }
    s->ngemms = (size_t)n;
    goto cleanup;
hdf5_fail:
    st = ulp__error(err, ULP_EFORMAT, "'%s': '/trace/gemms' cannot be read", s->path);
cleanup:
    free(raw);
    if (mt >= 0)
        H5Tclose(mt);
    if (type >= 0)
        H5Tclose(type);
    if (d >= 0)
        H5Dclose(d);
    return st;
}

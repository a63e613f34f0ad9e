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
#include "snapshot_table.h"

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

static void gemm_field(size_t i, const char **name, size_t *offset)
{
    *name = ulp__gemm_fields[i].name;
    *offset = ulp__gemm_fields[i].offset;
}

static int gemm_member(size_t i, hid_t ft, hid_t *memt, const char **want)
{
    ulp__gemm_kind k = ulp__gemm_fields[i].kind;
    if (!field_fits(ft, k)) {
        *want = ulp__gemm_kind_strlen(k) ? "a fixed-length string" : "an integer";
        return 0;
    }
    /* A string is read in the file's character set (HDF5 converts lengths
     * and padding, not ASCII to UTF-8). */
    if (ulp__gemm_kind_strlen(k) == 0) {
        *memt = ulp__gemm_field_type(k, 0);
        return 1;
    }
    *memt = H5Tcopy(ft);
    if (*memt >= 0 && (H5Tset_size(*memt, ulp__gemm_kind_strlen(k)) < 0 ||
                       H5Tset_strpad(*memt, H5T_STR_NULLPAD) < 0)) {
        H5Tclose(*memt);
        *memt = -1;
    }
    return 1;
}

ulp_status ulp__snapshot_read_gemms(ulp_snapshot *s, ulp_error *err)
{
    static const ulp__trace_table table = {"/trace/gemms", sizeof(ulp__gemm_row),
                                           sizeof(ulp_gemm_info), gemm_field, gemm_member};
    void *rows, *info;
    hssize_t n;
    ulp_status st = ulp__trace_read_table(s, &table, ulp__gemm_field_count, &rows, &info, &n, err);
    if (st != ULP_OK || rows == NULL)
        return st;
    ulp__gemm_row *raw = rows;
    s->gemms = info;
    for (hssize_t i = 0; i < n; i++) {
        ulp__gemm_row *r = &raw[i];
        ulp_gemm_info *g = &s->gemms[i];
        terminate(r);
        ULP__GEMM_ROW_FIELDS(COPY_MEMBER)
    }
    s->ngemms = (size_t)n;
    free(rows);
    return ULP_OK;
}

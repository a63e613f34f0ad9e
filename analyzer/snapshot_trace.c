/*
 * Reading /trace (FORMAT.md): the kernel names and the per-launch compound
 * rows.  Fields are matched by name through a memory compound type, so a
 * writer may add fields or order them differently; absent fields read as 0.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/kernel_row.h"
#include "snapshot_priv.h"
#include "snapshot_table.h"

static ulp_status read_names(ulp_snapshot *s, ulp_error *err)
{
    hid_t d = -1, type = -1, mt = -1;
    char **v = NULL;
    char *fixed = NULL;
    ulp_status st = ULP_OK;
    hssize_t n;
    /* A variable-length string takes at least 16 bytes in the file. */
    st = ulp__trace_open_table(s, "/trace/names", H5T_STRING, "1-D array of strings", 16, &d, &type,
                               &n, err);
    if (st != ULP_OK || d < 0)
        return st;
    s->kernel_names = calloc(n ? (size_t)n : 1, sizeof *s->kernel_names);
    if (s->kernel_names == NULL)
        goto oom;
    if (n == 0)
        goto cleanup;
    if (H5Tis_variable_str(type) > 0) {
        uint64_t bad = 0;
        int checked = ulp__gheap_check(s, d, (uint64_t)n, &bad);
        if (checked == -2)
            goto oom;
        if (checked == 0) {
            st = ulp__error(err, ULP_EFORMAT,
                            "'%s': '/trace/names' cannot be read: its global heap at byte %" PRIu64
                            " is damaged (a torn write?)",
                            s->path, bad);
            goto cleanup;
        }
        v = calloc((size_t)n, sizeof *v);
        mt = H5Tcopy(H5T_C_S1);
        if (v == NULL || mt < 0)
            goto oom;
        if (H5Tset_size(mt, H5T_VARIABLE) < 0 || H5Tset_cset(mt, H5Tget_cset(type)) < 0 ||
            H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0) {
            st = ulp__error(err, ULP_EFORMAT, "'%s': '/trace/names' cannot be read", s->path);
            goto cleanup;
        }
        for (hssize_t i = 0; i < n; i++) {
            char *p = ulp__snap_keep(s, strdup(v[i] ? v[i] : ""));
            H5free_memory(v[i]);
            v[i] = NULL;
            if (p == NULL) {
                for (hssize_t j = i + 1; j < n; j++)
                    H5free_memory(v[j]);
                goto oom;
            }
            s->kernel_names[i] = p;
            s->nkernel_names++;
        }
    } else {
        size_t w = H5Tget_size(type);
        fixed = calloc((size_t)n, w);
        mt = H5Tcopy(type);
        if (fixed == NULL || mt < 0)
            goto oom;
        if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, fixed) < 0) {
            st = ulp__error(err, ULP_EFORMAT, "'%s': '/trace/names' cannot be read", s->path);
            goto cleanup;
        }
        for (hssize_t i = 0; i < n; i++) {
            char *p = ulp__snap_keep(s, strndup(fixed + (size_t)i * w, w));
            if (p == NULL)
                goto oom;
            s->kernel_names[i] = p;
            s->nkernel_names++;
        }
    }
    goto cleanup;
oom:
    st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory reading '/trace/names'", s->path);
cleanup:
    free(v);
    free(fixed);
    if (mt >= 0)
        H5Tclose(mt);
    if (type >= 0)
        H5Tclose(type);
    if (d >= 0)
        H5Dclose(d);
    return st;
}

/* Whether member type `t` can hold a field of kind `k`. */
static int field_fits(hid_t t, ulp__kernel_kind k)
{
    if (k != ULP__KERNEL_KIND_I32X3)
        return H5Tget_class(t) == H5T_INTEGER;
    if (H5Tget_class(t) != H5T_ARRAY || H5Tget_array_ndims(t) != 1)
        return 0;
    hsize_t n = 0;
    H5Tget_array_dims2(t, &n);
    hid_t base = H5Tget_super(t);
    int ok = n == 3 && base >= 0 && H5Tget_class(base) == H5T_INTEGER;
    if (base >= 0)
        H5Tclose(base);
    return ok;
}

static void kernel_field(size_t i, const char **name, size_t *offset)
{
    *name = ulp__kernel_fields[i].name;
    *offset = ulp__kernel_fields[i].offset;
}

static int kernel_member(size_t i, hid_t ft, hid_t *memt, const char **want)
{
    ulp__kernel_kind k = ulp__kernel_fields[i].kind;
    if (!field_fits(ft, k)) {
        *want = k == ULP__KERNEL_KIND_I32X3 ? "an array of 3 integers" : "an integer";
        return 0;
    }
    *memt = ulp__kernel_field_type(k, 0);
    return 1;
}

static ulp_status read_kernels(ulp_snapshot *s, ulp_error *err)
{
    static const ulp__trace_table table = {"/trace/kernels", sizeof(ulp__kernel_row),
                                           sizeof(ulp_kernel_info), kernel_field, kernel_member};
    void *rows, *info;
    hssize_t n;
    ulp_status st =
        ulp__trace_read_table(s, &table, ulp__kernel_field_count, &rows, &info, &n, err);
    if (st != ULP_OK || rows == NULL)
        return st;
    const ulp__kernel_row *raw = rows;
    s->kernels = info;
    for (hssize_t i = 0; i < n; i++) {
        const ulp__kernel_row *r = &raw[i];
        ulp_kernel_info *k = &s->kernels[i];
        k->seq = r->seq;
        k->correlation_id = r->correlation_id;
        k->name = r->name_id < s->nkernel_names ? s->kernel_names[r->name_id] : "";
        memcpy(k->grid, r->grid, sizeof k->grid);
        memcpy(k->block, r->block, sizeof k->block);
        k->shared_static = r->shared_static;
        k->shared_dynamic = r->shared_dynamic;
        k->registers = r->registers;
        k->stream = r->stream;
        k->device = r->device;
        k->start_ns = r->start_ns;
        k->end_ns = r->end_ns;
    }
    s->nkernels = (size_t)n;
    s->has_kernel_trace = 1;
    free(rows);
    return ULP_OK;
}

ulp_status ulp__snapshot_read_trace(ulp_snapshot *s, ulp_error *err)
{
    htri_t ex = H5Lexists(s->file, "/trace", H5P_DEFAULT);
    if (ex == 0)
        return ULP_OK;
    H5O_info_t oi;
    if (ex < 0 || H5Oget_info_by_name2(s->file, "/trace", &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        oi.type != H5O_TYPE_GROUP)
        return ulp__error(err, ULP_EFORMAT, "'%s': '/trace' is not a group", s->path);
    ulp_status st = read_names(s, err);
    if (st == ULP_OK)
        st = read_kernels(s, err);
    if (st == ULP_OK)
        st = ulp__snapshot_read_gemms(s, err);
    return st;
}

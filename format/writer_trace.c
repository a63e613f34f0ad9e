/* The kernel trace of the writer: /trace/kernels rows and the /trace/names
 * they point to; /trace/gemms, the GEMM calls. */
#include <stdlib.h>

#include "writer_internal.h"

/* Rows per chunk of the extendible /trace datasets: 80 KiB of kernel rows. */
#define TRACE_CHUNK_ROWS 1024

static hid_t extendible_1d(hid_t loc, const char *name, hid_t type, hid_t lcpl, hsize_t chunk)
{
    hsize_t zero = 0, unlimited = H5S_UNLIMITED;
    hid_t space = H5Screate_simple(1, &zero, &unlimited);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = -1;
    if (space >= 0 && dcpl >= 0 && H5Pset_chunk(dcpl, 1, &chunk) >= 0)
        ds = H5Dcreate2(loc, name, type, space, lcpl, dcpl, H5P_DEFAULT);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return ds;
}

static int trace_open(ulp__writer *w)
{
    w->str_type = H5Tcopy(H5T_C_S1);
    if (w->str_type < 0 || H5Tset_size(w->str_type, H5T_VARIABLE) < 0 ||
        H5Tset_cset(w->str_type, H5T_CSET_UTF8) < 0)
        return -1;
    w->row_mtype = ulp__kernel_row_type(0);
    w->row_ftype = ulp__kernel_row_type(1);
    if (w->row_mtype < 0 || w->row_ftype < 0)
        return -1;
    hid_t gcpl = ulp__h5_small_gcpl(3, 7); /* names, kernels, gemms */
    w->trace =
        gcpl < 0 ? H5I_INVALID_HID : H5Gcreate2(w->file, "trace", H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (gcpl >= 0)
        H5Pclose(gcpl);
    if (w->trace < 0)
        return -1;
    w->names_ds = extendible_1d(w->trace, "names", w->str_type, H5P_DEFAULT, 256);
    if (w->names_ds < 0)
        return -1;
    w->kernels_ds = extendible_1d(w->trace, "kernels", w->row_ftype, H5P_DEFAULT, TRACE_CHUNK_ROWS);
    return w->kernels_ds < 0 ? -1 : 0;
}

/* Appends `n` elements at row `at` of a 1-D extendible dataset. */
static int append_rows(hid_t ds, hid_t mtype, hsize_t at, hsize_t n, const void *buf)
{
    hsize_t size = at + n;
    if (H5Dset_extent(ds, &size) < 0)
        return -1;
    hid_t fspace = H5Dget_space(ds);
    /* The memory space has the slab's size: H5S_ALL here would read the
     * buffer at the slab's file offset (docs/hdf5.md). */
    hid_t mspace = H5Screate_simple(1, &n, NULL);
    int rc = -1;
    if (fspace >= 0 && mspace >= 0 &&
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &at, NULL, &n, NULL) >= 0 &&
        H5Dwrite(ds, mtype, mspace, fspace, H5P_DEFAULT, buf) >= 0)
        rc = 0;
    if (mspace >= 0)
        H5Sclose(mspace);
    if (fspace >= 0)
        H5Sclose(fspace);
    return rc;
}

ulp_status ulp__writer_append_kernels(ulp__writer *w, const ulp__kernel_row *rows,
                                      const char *const *names, size_t n, ulp_error *err)
{
    if (n == 0)
        return ULP_OK;
    if (rows == NULL || names == NULL)
        return ulp__error(err, ULP_EINVAL, "writer: no kernel rows");
    if (w->trace_broken)
        return ulp__error(err, ULP_EIO, "cannot append to /trace in '%s': an earlier batch failed",
                          w->path);

    ulp_status st = ULP_OK;
    ulp__kernel_row *copy = malloc(n * sizeof(*copy));
    const char **fresh = malloc(n * sizeof(*fresh));
    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);
    if (copy == NULL || fresh == NULL) {
        st = ulp__error(err, ULP_ENOMEM, "kernel trace: out of memory");
        goto cleanup;
    }
    if (w->trace < 0 && trace_open(w) < 0) {
        st = ulp__writer_h5_fail(err, w, "create /trace");
        w->trace_broken = 1;
        goto cleanup;
    }
    /* Intern the names: new ones get the next rows of /trace/names. */
    size_t nfresh = 0;
    for (size_t i = 0; i < n; i++) {
        const char *name = names[i] != NULL ? names[i] : "";
        int inserted = 0;
        int64_t *id = ulp__strmap_upsert(&w->name_ids, name, 0, &inserted);
        if (id == NULL) {
            st = ulp__error(err, ULP_ENOMEM, "kernel trace: out of memory");
            w->trace_broken = 1;
            goto cleanup;
        }
        if (inserted) {
            *id = (int64_t)(w->name_count + nfresh);
            fresh[nfresh++] = name;
        }
        copy[i] = rows[i];
        copy[i].name_id = (uint32_t)*id;
    }
    /* Names first: a kill between the two writes leaves unused names, never
     * rows pointing past /trace/names. */
    if (nfresh > 0 && append_rows(w->names_ds, w->str_type, w->name_count, nfresh, fresh) < 0) {
        st = ulp__writer_h5_fail(err, w, "append to /trace/names");
        w->trace_broken = 1;
        goto cleanup;
    }
    w->name_count += nfresh;
    if (append_rows(w->kernels_ds, w->row_mtype, w->kernel_count, n, copy) < 0) {
        st = ulp__writer_h5_fail(err, w, "append to /trace/kernels");
        w->trace_broken = 1;
        goto cleanup;
    }
    w->kernel_count += n;
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
        st = ulp__writer_h5_fail(err, w, "flush");

cleanup:
    ulp__h5_quiet_end(&q);
    free(copy);
    free(fresh);
    return st;
}

ulp_status ulp__writer_append_gemms(ulp__writer *w, const ulp__gemm_row *rows, size_t n,
                                    ulp_error *err)
{
    if (n == 0)
        return ULP_OK;
    if (rows == NULL)
        return ulp__error(err, ULP_EINVAL, "writer: no GEMM rows");
    if (w->trace_broken)
        return ulp__error(err, ULP_EIO, "cannot append to /trace in '%s': an earlier batch failed",
                          w->path);
    ulp_status st = ULP_OK;
    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);
    if (w->trace < 0 && trace_open(w) < 0) {
        st = ulp__writer_h5_fail(err, w, "create /trace");
        w->trace_broken = 1;
        goto cleanup;
    }
    if (w->gemms_ds < 0) {
        w->gemm_mtype = ulp__gemm_row_type(0);
        w->gemm_ftype = ulp__gemm_row_type(1);
        if (w->gemm_mtype >= 0 && w->gemm_ftype >= 0)
            w->gemms_ds =
                extendible_1d(w->trace, "gemms", w->gemm_ftype, H5P_DEFAULT, TRACE_CHUNK_ROWS / 4);
        if (w->gemms_ds < 0) {
            st = ulp__writer_h5_fail(err, w, "create /trace/gemms");
            w->trace_broken = 1;
            goto cleanup;
        }
    }
    if (append_rows(w->gemms_ds, w->gemm_mtype, w->gemm_count, n, rows) < 0) {
        st = ulp__writer_h5_fail(err, w, "append to /trace/gemms");
        w->trace_broken = 1;
        goto cleanup;
    }
    w->gemm_count += n;
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
        st = ulp__writer_h5_fail(err, w, "flush");
cleanup:
    ulp__h5_quiet_end(&q);
    return st;
}

void ulp__writer_trace_release(ulp__writer *w)
{
    hid_t *types[] = {&w->str_type, &w->row_mtype, &w->row_ftype, &w->gemm_mtype, &w->gemm_ftype};
    if (w->gemms_ds >= 0)
        H5Dclose(w->gemms_ds);
    w->gemms_ds = H5I_INVALID_HID;
    if (w->names_ds >= 0)
        H5Dclose(w->names_ds);
    if (w->kernels_ds >= 0)
        H5Dclose(w->kernels_ds);
    if (w->trace >= 0)
        H5Gclose(w->trace);
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (*types[i] >= 0)
            H5Tclose(*types[i]);
    w->names_ds = w->kernels_ds = w->trace = H5I_INVALID_HID;
    w->str_type = w->row_mtype = w->row_ftype = H5I_INVALID_HID;
    ulp__strmap_release(&w->name_ids);
}

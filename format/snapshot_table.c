/*
 * Reading one 1-D /trace table (FORMAT.md): its declared length checked
 * against the file, and compound rows whose fields are matched by name
 * through a memory compound type, so a writer may add fields or order them
 * differently; absent fields read as 0.
 */
#include <inttypes.h>
#include <stdlib.h>

#include "common/error.h"
#include "h5types.h"
#include "snapshot_table.h"

/* Opens dataset `path` if it exists: 1 absent, 0 opened, -1 not a dataset. */
static int open_dataset(hid_t file, const char *path, hid_t *d)
{
    if (H5Lexists(file, path, H5P_DEFAULT) <= 0)
        return 1;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(file, path, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0 ||
        oi.type != H5O_TYPE_DATASET)
        return -1;
    *d = H5Dopen2(file, path, H5P_DEFAULT);
    return *d < 0 ? -1 : 0;
}

/* The length of a 1-D dataset, or -1. */
static hssize_t length_1d(hid_t d)
{
    hid_t space = H5Dget_space(d);
    if (space < 0)
        return -1;
    hssize_t n = H5Sget_simple_extent_ndims(space) == 1 ? H5Sget_simple_extent_npoints(space) : -1;
    H5Sclose(space);
    return n;
}

ulp_status ulp__trace_open_table(ulp_snapshot *s, const char *path, H5T_class_t cls,
                                 const char *kind, size_t row_bytes, hid_t *d, hid_t *type,
                                 hssize_t *n, ulp_error *err)
{
    ulp_status st = ULP_OK;
    *d = *type = -1;
    int rc = open_dataset(s->file, path, d);
    if (rc > 0)
        return ULP_OK;
    if (rc < 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': '%s' is not a dataset", s->path, path);
    *n = length_1d(*d);
    *type = H5Dget_type(*d);
    if (*n < 0 || *type < 0 || H5Tget_class(*type) != cls) {
        st = ulp__error(err, ULP_EFORMAT, "'%s': '%s' is not a %s", s->path, path, kind);
    } else {
        if (row_bytes == 0)
            row_bytes = H5Tget_size(*type);
        if (row_bytes == 0 || (uint64_t)*n > UINT64_MAX / row_bytes ||
            ulp__snapshot_absurd_bytes(s, (uint64_t)*n * row_bytes))
            st = ulp__error(err, ULP_ESHAPE,
                            "'%s': '%s' declares %" PRIu64 " entries, absurd for a file of %" PRIu64
                            " bytes",
                            s->path, path, (uint64_t)*n, s->file_size);
    }
    if (st != ULP_OK) {
        if (*type >= 0)
            H5Tclose(*type);
        H5Dclose(*d);
        *d = *type = -1;
    }
    return st;
}

ulp_status ulp__trace_read_table(ulp_snapshot *s, const ulp__trace_table *t, size_t nfields,
                                 void **rows, void **info, hssize_t *n, ulp_error *err)
{
    hid_t d = -1, type = -1, mt = -1;
    *rows = *info = NULL;
    *n = 0;
    ulp_status st = ulp__trace_open_table(s, t->path, H5T_COMPOUND, "1-D compound dataset", 0, &d,
                                          &type, n, err);
    if (st != ULP_OK || d < 0)
        return st;
    mt = H5Tcreate(H5T_COMPOUND, t->row_size);
    if (mt < 0)
        goto hdf5_fail;
    int nmembers = 0;
    for (size_t i = 0; i < nfields; i++) {
        const char *name;
        size_t offset;
        t->field(i, &name, &offset);
        int idx = H5Tget_member_index(type, name);
        if (idx < 0)
            continue; /* optional: stays 0 */
        hid_t ft = H5Tget_member_type(type, (unsigned)idx);
        hid_t memt = -1;
        const char *want = "";
        /* HDF5 converts the members: a damaged integer type would give a
         * different number on each read (ulp__h5_ints_sound). */
        int sound = ft >= 0 && ulp__h5_ints_sound(ft);
        int ok = sound && t->member(i, ft, &memt, &want);
        if (ft >= 0)
            H5Tclose(ft);
        if (ft >= 0 && !sound) {
            st = ulp__error(err, ULP_EFORMAT,
                            "'%s': '%s' field '%s' has a damaged integer type (bits past its "
                            "bytes)",
                            s->path, t->path, name);
            goto cleanup;
        }
        if (!ok) {
            st = ulp__error(err, ULP_EFORMAT, "'%s': '%s' field '%s' is not %s", s->path, t->path,
                            name, want);
            goto cleanup;
        }
        int rc = memt >= 0 ? H5Tinsert(mt, name, offset, memt) : -1;
        if (memt >= 0)
            H5Tclose(memt);
        if (rc < 0)
            goto hdf5_fail;
        nmembers++;
    }
    *rows = calloc(*n ? (size_t)*n : 1, t->row_size);
    *info = calloc(*n ? (size_t)*n : 1, t->info_size);
    if (*rows == NULL || *info == NULL) {
        st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory reading '%s'", s->path, t->path);
        goto cleanup;
    }
    if (*n > 0 && nmembers > 0 &&
        (!ulp__h5_storage_whole(d) || H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, *rows) < 0))
        goto hdf5_fail;
    goto cleanup;
hdf5_fail:
    st = ulp__error(err, ULP_EFORMAT, "'%s': '%s' cannot be read", s->path, t->path);
cleanup:
    if (st != ULP_OK) {
        free(*rows);
        free(*info);
        *rows = *info = NULL;
    }
    if (mt >= 0)
        H5Tclose(mt);
    if (type >= 0)
        H5Tclose(type);
    if (d >= 0)
        H5Dclose(d);
    return st;
}

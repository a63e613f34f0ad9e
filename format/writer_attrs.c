/*
 * The attributes of a new capture dataset (FORMAT.md), written with the
 * dataspaces and string types the writer keeps, and without asking first
 * whether each one exists: the dataset was created a moment ago.  The
 * generic writers of format/h5types.c build a dataspace (and a string
 * type) and look the name up in the object header for every attribute;
 * for a capture's eight or more attributes that was a fifth of the
 * writer's time per small capture.  The attributes are the same bytes.
 */
#include <string.h>

#include "capture_rows.h"
#include "writer_internal.h"

/* A fixed-length, NUL-terminated UTF-8 string type for `s` (as ulp__h5_attr_write_str). */
static hid_t str_type(const char *s)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, strlen(s) + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 ||
                   H5Tset_cset(t, H5T_CSET_UTF8) < 0)) {
        H5Tclose(t);
        t = H5I_INVALID_HID;
    }
    return t;
}

ulp_status ulp__writer_attrs_init(ulp__writer *w, ulp_error *err)
{
    hsize_t two = 2;
    w->attr_scalar = H5Screate(H5S_SCALAR);
    w->attr_pair = H5Screate_simple(1, &two, NULL);
    int ok = w->attr_scalar >= 0 && w->attr_pair >= 0;
    for (int i = 0; i < ULP_DTYPE_COUNT; i++)
        ok = ok && (w->attr_dtype[i] = str_type(ulp_dtype_name((ulp_dtype)i))) >= 0;
    for (int i = 0; i < ULP_ROLE_COUNT; i++)
        ok = ok && (w->attr_role[i] = str_type(ulp_role_name((ulp_role)i))) >= 0;
    return ok ? ULP_OK : ulp__writer_h5_fail(err, w, "build the attribute types");
}

static void close_id(hid_t *id, herr_t (*fn)(hid_t))
{
    if (*id >= 0)
        fn(*id);
    *id = H5I_INVALID_HID;
}

void ulp__writer_attrs_release(ulp__writer *w)
{
    close_id(&w->attr_scalar, H5Sclose);
    close_id(&w->attr_pair, H5Sclose);
    for (int i = 0; i < ULP_DTYPE_COUNT; i++)
        close_id(&w->attr_dtype[i], H5Tclose);
    for (int i = 0; i < ULP_ROLE_COUNT; i++)
        close_id(&w->attr_role[i], H5Tclose);
}

/* Creates attribute `name` of `ds` (not there yet) and writes `buf`; 0 on success. */
static int attr_new(hid_t ds, const char *name, hid_t type, hid_t space, const void *buf)
{
    hid_t a = H5Acreate2(ds, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0)
        return -1;
    int rc = H5Awrite(a, type, buf) < 0 ? -1 : 0;
    H5Aclose(a);
    return rc;
}

int ulp__writer_capture_attrs(ulp__writer *w, hid_t ds, const ulp__desc *d, int64_t seq,
                              int64_t time_ns)
{
    hid_t one = w->attr_scalar, two = w->attr_pair;
    ulp_role role = ulp_role_name(d->role) != NULL ? d->role : ULP_ROLE_ACTIVATION;
    if (attr_new(ds, "dtype", w->attr_dtype[d->dtype], one, ulp_dtype_name(d->dtype)) < 0 ||
        attr_new(ds, "seq", H5T_STD_I64LE, one, &seq) < 0 ||
        attr_new(ds, "role", w->attr_role[role], one, ulp_role_name(role)) < 0 ||
        attr_new(ds, "time_ns", H5T_STD_I64LE, one, &time_ns) < 0)
        return -1;
    if (d->layer != ULP_LAYER_NONE) {
        int32_t layer = d->layer;
        if (attr_new(ds, "layer", H5T_STD_I32LE, one, &layer) < 0)
            return -1;
    }
    if (d->step != ULP_STEP_NONE && attr_new(ds, "step", H5T_STD_I64LE, one, &d->step) < 0)
        return -1;
    if (d->has_kernels && attr_new(ds, "kernels", H5T_STD_I64LE, two, d->kernels) < 0)
        return -1;
    if (d->has_gemms && attr_new(ds, "gemms", H5T_STD_I64LE, two, d->gemms) < 0)
        return -1;
    if (d->has_graph_replay &&
        attr_new(ds, "graph_replay", H5T_STD_I64LE, two, d->graph_replay) < 0)
        return -1;
    if (d->device_ptr != 0 && attr_new(ds, "device_ptr", H5T_STD_U64LE, one, &d->device_ptr) < 0)
        return -1;
    if (d->stream != 0 && attr_new(ds, "stream", H5T_STD_U64LE, one, &d->stream) < 0)
        return -1;
    return ulp__capture_rows_write(ds, d);
}

/* HDF5 file types for the snapshot dtypes, and attribute writers. */
#include <string.h>

#include "h5types.h"

/* Longest string attribute value kept in its object header (bytes). */
#define ATTR_FIXED_MAX ((size_t)16 << 10)

/*
 * A 2-byte float type.  The order of calls is the one that HDF5 1.10
 * accepts (docs/hdf5.md): fields first, then size, then bias.
 */
static hid_t narrow_float(size_t exp_pos, size_t exp_bits, size_t man_bits, size_t bias)
{
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0)
        return t;
    if (H5Tset_fields(t, 15, exp_pos, exp_bits, 0, man_bits) < 0 || H5Tset_size(t, 2) < 0 ||
        H5Tset_ebias(t, bias) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

hid_t ulp__h5_file_type(ulp_dtype dtype)
{
    switch (dtype) {
    case ULP_DTYPE_F64:
        return H5Tcopy(H5T_IEEE_F64LE);
    case ULP_DTYPE_F32:
        return H5Tcopy(H5T_IEEE_F32LE);
    case ULP_DTYPE_F16:
        return narrow_float(10, 5, 10, 15);
    case ULP_DTYPE_BF16:
        return narrow_float(7, 8, 7, 127);
    case ULP_DTYPE_F8E4M3:
    case ULP_DTYPE_F8E5M2:
    case ULP_DTYPE_U8:
        return H5Tcopy(H5T_STD_U8LE);
    case ULP_DTYPE_I64:
        return H5Tcopy(H5T_STD_I64LE);
    case ULP_DTYPE_I32:
        return H5Tcopy(H5T_STD_I32LE);
    case ULP_DTYPE_I16:
        return H5Tcopy(H5T_STD_I16LE);
    case ULP_DTYPE_I8:
        return H5Tcopy(H5T_STD_I8LE);
    default:
        return -1;
    }
}

int ulp__h5_type_fits(hid_t type, ulp_dtype dtype)
{
    size_t want = ulp_dtype_size(dtype);
    if (want == 0)
        return 0;
    H5T_class_t cls = H5Tget_class(type);
    if (cls != H5T_FLOAT && cls != H5T_INTEGER)
        return 0;
    if (H5Tget_size(type) != want)
        return 0;
    if (want > 1 && H5Tget_order(type) != H5T_ORDER_LE)
        return 0;
    return 1;
}

int ulp__h5_ints_sound(hid_t type)
{
    H5T_class_t cls = H5Tget_class(type);
    if (cls == H5T_COMPOUND) {
        int n = H5Tget_nmembers(type), ok = n >= 0;
        for (int i = 0; ok && i < n; i++) {
            hid_t m = H5Tget_member_type(type, (unsigned)i);
            ok = m >= 0 && ulp__h5_ints_sound(m);
            if (m >= 0)
                H5Tclose(m);
        }
        return ok;
    }
    if (cls == H5T_ARRAY || cls == H5T_VLEN || cls == H5T_ENUM) {
        /* Their elements are of the base type: a packed table's shape and
         * pair members are int64 arrays. */
        hid_t base = H5Tget_super(type);
        int ok = base >= 0 && ulp__h5_ints_sound(base);
        if (base >= 0)
            H5Tclose(base);
        return ok;
    }
    if (cls != H5T_INTEGER)
        return 1;
    size_t size = H5Tget_size(type), prec = H5Tget_precision(type);
    int off = H5Tget_offset(type);
    return size > 0 && prec > 0 && off >= 0 && (size_t)off <= 8 * size &&
           prec <= 8 * size - (size_t)off;
}

static int attr_write(hid_t obj, const char *name, hid_t type, hid_t space, const void *buf)
{
    int rc = -1;
    if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0)
        return -1;
    hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0)
        return -1;
    if (H5Awrite(a, type, buf) >= 0)
        rc = 0;
    H5Aclose(a);
    return rc;
}

static int attr_write_scalar(hid_t obj, const char *name, hid_t type, const void *buf)
{
    hid_t space = H5Screate(H5S_SCALAR);
    if (space < 0)
        return -1;
    int rc = attr_write(obj, name, type, space, buf);
    H5Sclose(space);
    return rc;
}

int ulp__h5_attr_write_str(hid_t obj, const char *name, const char *value)
{
    /*
     * Fixed-length UTF-8, NUL-terminated, stored in the object's header.  Not
     * variable-length (what h5py writes for a str): those live in the file's
     * global heap, which HDF5 rewrites in place as strings are added, and a
     * kill that tears that rewrite leaves every string in the file unreadable
     * -- HDF5 1.10 loops forever decoding it (tests/python/test_crash.py,
     * part D).  A value too long for an object header (64 KiB) is the
     * exception.
     */
    size_t len = strlen(value);
    int fixed = len < ATTR_FIXED_MAX;
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return -1;
    int rc = -1;
    if (H5Tset_size(t, fixed ? len + 1 : H5T_VARIABLE) >= 0 &&
        H5Tset_strpad(t, H5T_STR_NULLTERM) >= 0 && H5Tset_cset(t, H5T_CSET_UTF8) >= 0)
        rc = attr_write_scalar(obj, name, t, fixed ? (const void *)value : (const void *)&value);
    H5Tclose(t);
    return rc;
}

int ulp__h5_attr_write_i32(hid_t obj, const char *name, int32_t value)
{
    return attr_write_scalar(obj, name, H5T_STD_I32LE, &value);
}

int ulp__h5_attr_write_i64(hid_t obj, const char *name, int64_t value)
{
    return attr_write_scalar(obj, name, H5T_STD_I64LE, &value);
}

void ulp__h5_silence(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

hid_t ulp__h5_small_gcpl(unsigned links, unsigned name_len)
{
    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    if (gcpl >= 0 &&
        (H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED) < 0 ||
         H5Pset_est_link_info(gcpl, links, name_len) < 0 || H5Pset_obj_track_times(gcpl, 0) < 0)) {
        H5Pclose(gcpl);
        gcpl = H5I_INVALID_HID;
    }
    return gcpl;
}

int ulp__h5_dcpl_no_attrs(hid_t dcpl)
{
    if (H5Pset_obj_track_times(dcpl, 0) < 0)
        return -1;
#if H5_VERSION_GE(1, 10, 5)
    if (H5Pset_dset_no_attrs_hint(dcpl, 1) < 0)
        return -1;
#endif
    return 0;
}

void ulp__h5_fapl_fixed_cache(hid_t fapl, size_t bytes)
{
    H5AC_cache_config_t mdc;
    mdc.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    if (fapl < 0 || H5Pget_mdc_config(fapl, &mdc) < 0)
        return;
    mdc.set_initial_size = 1;
    mdc.initial_size = bytes;
    mdc.min_size = bytes;
    mdc.max_size = bytes;
    mdc.incr_mode = H5C_incr__off;
    mdc.flash_incr_mode = H5C_flash_incr__off;
    mdc.decr_mode = H5C_decr__off;
    H5Pset_mdc_config(fapl, &mdc);
}

int ulp__h5_storage_whole(hid_t ds)
{
    hid_t dcpl = H5Dget_create_plist(ds);
    H5D_layout_t layout = dcpl >= 0 ? H5Pget_layout(dcpl) : H5D_LAYOUT_ERROR;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (layout == H5D_CHUNKED)
        return 1;
    if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT)
        return 0;
    hid_t t = H5Dget_type(ds), sp = H5Dget_space(ds);
    size_t size = t >= 0 ? H5Tget_size(t) : 0;
    hssize_t n = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
    if (t >= 0)
        H5Tclose(t);
    if (sp >= 0)
        H5Sclose(sp);
    if (n < 0 || size == 0 || (uint64_t)n > UINT64_MAX / size)
        return 0;
    return n == 0 || (uint64_t)H5Dget_storage_size(ds) >= (uint64_t)n * size;
}

/* The /trace/gemms row: its field table and HDF5 compound types (gemm_row.h). */
#include "gemm_row.h"

#define ULP__GEMM_FIELD(name, kind, comment)                                                       \
    {#name, offsetof(ulp__gemm_row, name), ULP__GEMM_KIND_##kind},

const ulp__gemm_field ulp__gemm_fields[] = {ULP__GEMM_ROW_FIELDS(ULP__GEMM_FIELD)};
const size_t ulp__gemm_field_count = sizeof(ulp__gemm_fields) / sizeof(ulp__gemm_fields[0]);

size_t ulp__gemm_kind_strlen(ulp__gemm_kind kind)
{
    switch (kind) {
    case ULP__GEMM_KIND_S4:
        return 4;
    case ULP__GEMM_KIND_S12:
        return 12;
    case ULP__GEMM_KIND_S16:
        return 16;
    case ULP__GEMM_KIND_S24:
        return 24;
    case ULP__GEMM_KIND_S32:
        return 32;
    default:
        return 0;
    }
}

hid_t ulp__gemm_field_type(ulp__gemm_kind kind, int file)
{
    switch (kind) {
    case ULP__GEMM_KIND_U64:
        return H5Tcopy(file ? H5T_STD_U64LE : H5T_NATIVE_UINT64);
    case ULP__GEMM_KIND_U32:
        return H5Tcopy(file ? H5T_STD_U32LE : H5T_NATIVE_UINT32);
    case ULP__GEMM_KIND_I32:
        return H5Tcopy(file ? H5T_STD_I32LE : H5T_NATIVE_INT32);
    case ULP__GEMM_KIND_I64:
        return H5Tcopy(file ? H5T_STD_I64LE : H5T_NATIVE_INT64);
    default: {
        hid_t t = H5Tcopy(H5T_C_S1);
        if (t >= 0 &&
            (H5Tset_size(t, ulp__gemm_kind_strlen(kind)) < 0 ||
             H5Tset_strpad(t, H5T_STR_NULLPAD) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)) {
            H5Tclose(t);
            t = H5I_INVALID_HID;
        }
        return t;
    }
    }
}

hid_t ulp__gemm_row_type(int file)
{
    size_t size = 0;
    for (size_t i = 0; i < ulp__gemm_field_count; i++) {
        hid_t ft = ulp__gemm_field_type(ulp__gemm_fields[i].kind, 1);
        if (ft < 0)
            return H5I_INVALID_HID;
        size += H5Tget_size(ft);
        H5Tclose(ft);
    }
    hid_t t = H5Tcreate(H5T_COMPOUND, file ? size : sizeof(ulp__gemm_row));
    size_t off = 0;
    for (size_t i = 0; t >= 0 && i < ulp__gemm_field_count; i++) {
        const ulp__gemm_field *f = &ulp__gemm_fields[i];
        hid_t ft = ulp__gemm_field_type(f->kind, file);
        if (ft < 0 || H5Tinsert(t, f->name, file ? off : f->offset, ft) < 0) {
            H5Tclose(t);
            t = H5I_INVALID_HID;
        }
        if (ft >= 0) {
            off += H5Tget_size(ft);
            H5Tclose(ft);
        }
    }
    return t;
}

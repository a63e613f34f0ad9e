/* The /trace/gemms row: its field table and HDF5 compound types (gemm_row.h). */
#include "gemm_row.h"
#include "row_type.h"

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

static hid_t field(size_t i, int file, const char **name, size_t *offset)
{
    *name = ulp__gemm_fields[i].name;
    *offset = ulp__gemm_fields[i].offset;
    return ulp__gemm_field_type(ulp__gemm_fields[i].kind, file);
}

hid_t ulp__gemm_row_type(int file)
{
    return ulp__row_type(ulp__gemm_field_count, sizeof(ulp__gemm_row), file, field);
}

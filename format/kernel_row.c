/* The /trace/kernels row: its field table and HDF5 compound types (kernel_row.h). */
#include "kernel_row.h"
#include "row_type.h"

#define ULP__KERNEL_FIELD(name, kind, comment)                                                     \
    {#name, offsetof(ulp__kernel_row, name), ULP__KERNEL_KIND_##kind},

const ulp__kernel_field ulp__kernel_fields[] = {ULP__KERNEL_ROW_FIELDS(ULP__KERNEL_FIELD)};
const size_t ulp__kernel_field_count = sizeof(ulp__kernel_fields) / sizeof(ulp__kernel_fields[0]);

hid_t ulp__kernel_field_type(ulp__kernel_kind kind, int file)
{
    hsize_t three = 3;
    switch (kind) {
    case ULP__KERNEL_KIND_U64:
        return H5Tcopy(file ? H5T_STD_U64LE : H5T_NATIVE_UINT64);
    case ULP__KERNEL_KIND_U32:
        return H5Tcopy(file ? H5T_STD_U32LE : H5T_NATIVE_UINT32);
    case ULP__KERNEL_KIND_I32:
        return H5Tcopy(file ? H5T_STD_I32LE : H5T_NATIVE_INT32);
    case ULP__KERNEL_KIND_I32X3:
        return H5Tarray_create2(file ? H5T_STD_I32LE : H5T_NATIVE_INT32, 1, &three);
    }
    return H5I_INVALID_HID;
}

static hid_t field(size_t i, int file, const char **name, size_t *offset)
{
    *name = ulp__kernel_fields[i].name;
    *offset = ulp__kernel_fields[i].offset;
    return ulp__kernel_field_type(ulp__kernel_fields[i].kind, file);
}

hid_t ulp__kernel_row_type(int file)
{
    return ulp__row_type(ulp__kernel_field_count, sizeof(ulp__kernel_row), file, field);
}

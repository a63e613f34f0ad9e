/* The /trace/kernels row: its field table and HDF5 compound types (kernel_row.h). */
#include "kernel_row.h"

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

hid_t ulp__kernel_row_type(int file)
{
    size_t size = 0;
    for (size_t i = 0; i < ulp__kernel_field_count; i++) {
        hid_t ft = ulp__kernel_field_type(ulp__kernel_fields[i].kind, 1);
        if (ft < 0)
            return H5I_INVALID_HID;
        size += H5Tget_size(ft);
        H5Tclose(ft);
    }
    hid_t t = H5Tcreate(H5T_COMPOUND, file ? size : sizeof(ulp__kernel_row));
    size_t off = 0;
    for (size_t i = 0; t >= 0 && i < ulp__kernel_field_count; i++) {
        const ulp__kernel_field *f = &ulp__kernel_fields[i];
        hid_t ft = ulp__kernel_field_type(f->kind, file);
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

#include "row_type.h"

hid_t ulp__row_type(size_t n, size_t mem_size, int file, ulp__row_field_fn field)
{
    const char *name;
    size_t offset, size = 0;
    for (size_t i = 0; i < n; i++) {
        hid_t ft = field(i, 1, &name, &offset);
        if (ft < 0)
            return H5I_INVALID_HID;
        size += H5Tget_size(ft);
        H5Tclose(ft);
    }
    hid_t t = H5Tcreate(H5T_COMPOUND, file ? size : mem_size);
    size_t off = 0;
    for (size_t i = 0; t >= 0 && i < n; i++) {
        hid_t ft = field(i, file, &name, &offset);
        if (ft < 0 || H5Tinsert(t, name, file ? off : offset, ft) < 0) {
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

/* The packed digest layout's row datasets, read (digest_rows.h). */
#include "digest_rows.h"

#include "h5types.h"

int64_t ulp__digest_open_1d(hid_t g, const char *name, hid_t *ds)
{
    *ds = H5Lexists(g, name, H5P_DEFAULT) > 0 ? H5Dopen2(g, name, H5P_DEFAULT) : -1;
    hid_t sp = *ds >= 0 ? H5Dget_space(*ds) : -1;
    hsize_t n = 0;
    int64_t len = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 1 &&
                          H5Sget_simple_extent_dims(sp, &n, NULL) == 1 && n <= INT64_MAX
                      ? (int64_t)n
                      : -1;
    if (sp >= 0)
        H5Sclose(sp);
    return len;
}

int ulp__digest_ds_sound(hid_t ds)
{
    hid_t t = H5Dget_type(ds);
    int ok = t >= 0 && ulp__h5_ints_sound(t);
    if (t >= 0)
        H5Tclose(t);
    return ok;
}

int ulp__digest_read_rows(hid_t ds, hid_t mt, int rank, uint64_t first, uint64_t n, uint64_t width,
                          void *out)
{
    if (n == 0 || (rank == 2 && width == 0))
        return 0;
    hsize_t start[2] = {first, 0}, count[2] = {n, width};
    hid_t fs = H5Dget_space(ds), ms = H5Screate_simple(rank, count, NULL);
    int bad = fs < 0 || ms < 0 || !ulp__h5_storage_whole(ds) ||
              H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
              H5Dread(ds, mt, ms, fs, H5P_DEFAULT, out) < 0;
    if (fs >= 0)
        H5Sclose(fs);
    if (ms >= 0)
        H5Sclose(ms);
    return bad ? -1 : 0;
}

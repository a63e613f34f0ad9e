/*
 * The packed digest layout's occurrence table (digest_table.h), for the
 * writer and the reader alike.
 */
#include "digest_table.h"

hid_t ulp__digest_str_type(size_t n, int vlen)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, vlen ? H5T_VARIABLE : n) < 0 ||
                   H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)) {
        H5Tclose(t);
        t = H5I_INVALID_HID;
    }
    return t;
}

hid_t ulp__digest_occ_type(void)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(ulp__digest_occ));
    hid_t s = ulp__digest_str_type(ULP__DIGEST_STR, 0);
    hsize_t rank = ULP_MAX_RANK, two = 2;
    hid_t shape = H5Tarray_create2(H5T_NATIVE_INT64, 1, &rank);
    hid_t pair = H5Tarray_create2(H5T_NATIVE_INT64, 1, &two);
    int bad = t < 0 || s < 0 || shape < 0 || pair < 0;
#define M(f, ty) bad = bad || H5Tinsert(t, #f, HOFFSET(ulp__digest_occ, f), ty) < 0
    M(occurrence, H5T_NATIVE_INT64);
    M(seq, H5T_NATIVE_INT64);
    M(first, H5T_NATIVE_UINT64);
    M(rows, H5T_NATIVE_UINT64);
    M(time_ns, H5T_NATIVE_INT64);
    M(step, H5T_NATIVE_INT64);
    M(layer, H5T_NATIVE_INT32);
    M(ndim, H5T_NATIVE_INT32);
    M(row_rank, H5T_NATIVE_INT32);
    M(has_step, H5T_NATIVE_UINT8);
    M(has_layer, H5T_NATIVE_UINT8);
    M(has_positions, H5T_NATIVE_UINT8);
    M(has_requests, H5T_NATIVE_UINT8);
    M(dtype, s);
    M(role, s);
    M(shape, shape);
    M(inputs_first, H5T_NATIVE_UINT64);
    M(inputs_count, H5T_NATIVE_UINT32);
    M(has_kernels, H5T_NATIVE_UINT8);
    M(has_gemms, H5T_NATIVE_UINT8);
    M(has_graph_replay, H5T_NATIVE_UINT8);
    M(kernels, pair);
    M(gemms, pair);
    M(graph_replay, pair);
    M(device_ptr, H5T_NATIVE_UINT64);
    M(stream, H5T_NATIVE_UINT64);
    M(kept, H5T_NATIVE_UINT8);
    M(kept_seq, H5T_NATIVE_INT64);
    M(kept_occurrence, H5T_NATIVE_INT64);
#undef M
    if (s >= 0)
        H5Tclose(s);
    if (shape >= 0)
        H5Tclose(shape);
    if (pair >= 0)
        H5Tclose(pair);
    if (bad && t >= 0) {
        H5Tclose(t);
        t = H5I_INVALID_HID;
    }
    return t;
}

int ulp__digest_occ_has_kept(hid_t t)
{
    return H5Tget_class(t) == H5T_COMPOUND && H5Tget_member_index(t, "kept") >= 0 &&
           H5Tget_member_index(t, "kept_seq") >= 0 &&
           H5Tget_member_index(t, "kept_occurrence") >= 0;
}

/*
 * The filters of a compressed row dataset: shuffle and deflate, then a
 * Fletcher-32 checksum of each compressed chunk.  Why the checksum: a
 * chunk a killed writer's flush was rewriting can be torn, and HDF5 1.10
 * inflates a torn chunk short and copies a whole chunk out of it (past its
 * own buffer); with the checksum it refuses the chunk instead, and the
 * reader leaves that name out of the killed file.
 */
herr_t ulp__digest_squeeze(hid_t pl)
{
    return H5Pset_shuffle(pl) >= 0 && H5Pset_deflate(pl, 1) >= 0 && H5Pset_fletcher32(pl) >= 0 ? 0
                                                                                               : -1;
}

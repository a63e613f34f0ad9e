/*
 * The digests of captures written instead of (or beside) their bytes:
 * /digests/<name>/<occurrence>, a uint64 per row (FORMAT.md, "Digests").
 * A group of its own, so that a reader that knows only /captures never
 * takes a digest for a tensor.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/digest.h"
#include "writer_internal.h"

static hid_t digest_lcpl(const ulp__writer *w, const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p >= 0x80)
            return w->lcpl;
    return H5P_DEFAULT;
}

static int write_meta(hid_t ds, const ulp__desc *d)
{
    hsize_t n = (hsize_t)d->ndim;
    int64_t zero = 0;
    hid_t sp = d->ndim > 0 ? H5Screate_simple(1, &n, NULL) : H5Screate(H5S_SCALAR);
    if (sp < 0)
        return -1;
    /* Rank 0: `shape` is the scalar 0 and `ndim` says there is no axis. */
    hid_t a = H5Acreate2(ds, "shape", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc =
        a < 0 || H5Awrite(a, H5T_NATIVE_INT64, d->ndim > 0 ? (const void *)d->shape : &zero) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    int32_t ndim = d->ndim;
    hid_t one = H5Screate(H5S_SCALAR);
    a = rc ? -1 : H5Acreate2(ds, "ndim", H5T_STD_I32LE, one, H5P_DEFAULT, H5P_DEFAULT);
    rc = rc || a < 0 || H5Awrite(a, H5T_NATIVE_INT32, &ndim) < 0;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(one);
    return rc ? -1 : 0;
}

static hid_t open_group(ulp__writer *w, const char *name, int *kept, ulp_error *err, ulp_status *st)
{
    if (w->digests < 0) {
        w->digests = H5Gcreate2(w->file, "digests", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (w->digests < 0) {
            *st = ulp__writer_h5_fail(err, w, "create /digests");
            return H5I_INVALID_HID;
        }
        hid_t t = H5Tcopy(H5T_C_S1), one = H5Screate(H5S_SCALAR);
        static const char algo[] = ULP__DIGEST_ALGORITHM;
        H5Tset_size(t, sizeof(algo) - 1);
        hid_t a = H5Acreate2(w->digests, "algorithm", t, one, H5P_DEFAULT, H5P_DEFAULT);
        int bad = a < 0 || H5Awrite(a, t, algo) < 0;
        if (a >= 0)
            H5Aclose(a);
        H5Tclose(t);
        H5Sclose(one);
        if (bad) {
            *st = ulp__writer_h5_fail(err, w, "write /digests");
            return H5I_INVALID_HID;
        }
    }
    /* A name's group stays open after its first digest (up to
     * ULP__WRITER_GROUPS_OPEN names): looking it up and opening it again
     * for every digest was a tenth of the writer's time per digest. */
    int64_t *id = ulp__strmap_find(&w->digest_groups, name);
    if (id != NULL) {
        *kept = 1;
        return (hid_t)*id;
    }
    *kept = 0;
    htri_t has = H5Lexists(w->digests, name, H5P_DEFAULT);
    hid_t g = has > 0
                  ? H5Gopen2(w->digests, name, H5P_DEFAULT)
                  : H5Gcreate2(w->digests, name, digest_lcpl(w, name), H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) {
        *st = ulp__writer_h5_fail(err, w, "create a digest group");
        return g;
    }
    int inserted = 0;
    if (w->digest_groups.count < ULP__WRITER_GROUPS_OPEN &&
        ulp__strmap_upsert(&w->digest_groups, name, (int64_t)g, &inserted) != NULL && inserted)
        *kept = 1;
    return g;
}

void ulp__writer_digests_release(ulp__writer *w)
{
    for (size_t i = 0; i < w->digest_groups.cap; i++)
        if (w->digest_groups.keys[i] != NULL)
            H5Gclose((hid_t)w->digest_groups.values[i]);
    ulp__strmap_release(&w->digest_groups);
    ulp__strmap_release(&w->digest_occ);
    if (w->digests >= 0)
        H5Gclose(w->digests);
    w->digests = H5I_INVALID_HID;
}

ulp_status ulp__writer_add_digests(ulp__writer *w, const ulp__desc *d, const uint64_t *digests,
                                   uint64_t rows, ulp_error *err)
{
    if (w == NULL || d == NULL || d->name == NULL || (rows > 0 && digests == NULL))
        return ulp__error(err, ULP_EINVAL, "writer: invalid digests");
    int inserted = 0;
    int64_t *occ = ulp__strmap_upsert(&w->digest_occ, d->name, 0, &inserted);
    if (occ == NULL)
        return ulp__error(err, ULP_ENOMEM, "digests of '%s': out of memory", d->name);
    ulp_status st = ULP_OK;
    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);
    int kept = 0;
    hid_t g = open_group(w, d->name, &kept, err, &st), sp = H5I_INVALID_HID, ds = H5I_INVALID_HID;
    if (g >= 0) {
        char dsname[32];
        snprintf(dsname, sizeof(dsname), "%" PRId64, *occ);
        /* Shaped as the capture's row axes, like its `positions`. */
        hsize_t dims[ULP_MAX_RANK] = {(hsize_t)rows};
        int rr = d->positions != NULL ? d->row_rank : 1;
        for (int i = 0; d->ndim > 0 && i < rr; i++)
            dims[i] = (hsize_t)d->shape[i];
        sp = H5Screate_simple(d->ndim > 0 ? rr : 1, dims, NULL);
        ds = sp < 0
                 ? H5I_INVALID_HID
                 : H5Dcreate2(g, dsname, H5T_STD_U64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int64_t time_ns = d->time_ns;
        if (ds < 0 ||
            (rows > 0 &&
             H5Dwrite(ds, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, digests) < 0) ||
            ulp__writer_capture_attrs(w, ds, d, w->digest_seq, time_ns) != 0 ||
            write_meta(ds, d) != 0)
            st = ulp__writer_h5_fail(err, w, "write digests");
    }
    if (ds >= 0)
        H5Dclose(ds);
    if (sp >= 0)
        H5Sclose(sp);
    if (g >= 0 && !kept)
        H5Gclose(g);
    if (st == ULP_OK) {
        (*occ)++;
        w->digest_seq++;
    }
    ulp__h5_quiet_end(&q);
    return st;
}

/*
 * Sealing a capture index (index_seal.h).
 */
#include "index_seal.h"

#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/le.h"
#include "h5types.h"
#include "journal.h"

uint64_t ulp__index_stamp_of(uint64_t now)
{
    /* Odd: a file system that keeps times in coarser units (100 ns, 1 us,
     * 1 s, all even) truncates it, and never shows it back; an even stamp
     * it would keep, and a write in the same unit could be given it too. */
    return now < 3 ? 0 : (now - 1) % 2 != 0 ? now - 1 : now - 2;
}

uint64_t ulp__index_stamp_now(void)
{
    /* Coarse: the clock of the kernel's file times.  Every write after this
     * reading gets an mtime at or after it, never before it. */
#ifdef CLOCK_REALTIME_COARSE
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) != 0 || ts.tv_sec <= 0)
        return 0;
    return ulp__index_stamp_of((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
#else
    return 0; /* no stamp: readers hash */
#endif
}

int ulp__index_stamp_set(int fd, uint64_t stamp)
{
    if (stamp == 0)
        return 0;
    struct timespec t[2] = {
        {.tv_sec = 0, .tv_nsec = UTIME_OMIT},
        {.tv_sec = (time_t)(stamp / 1000000000u), .tv_nsec = (long)(stamp % 1000000000u)}};
    return futimens(fd, t);
}

int ulp__index_seal_create(hid_t file, uint64_t bytes, uint64_t count, uint64_t *seal_off,
                           uint64_t *stamp)
{
    unsigned char seal[ULP__INDEX_SEAL_BYTES] = {0};
    memcpy(seal, ULP__INDEX_MAGIC, 8);
    ulp__le64_put(seal + 24, bytes);
    ulp__le64_put(seal + 32, count);
    *stamp = ulp__index_stamp_now();
    ulp__le64_put(seal + ULP__INDEX_STAMP_AT, *stamp);
    int rc = -1;
    hsize_t n = sizeof seal;
    hid_t ds = H5I_INVALID_HID, space = H5Screate_simple(1, &n, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    htri_t has_group = H5Lexists(file, "/" ULP__INDEX_GROUP, H5P_DEFAULT);
    if (has_group == 0) {
        hid_t gcpl = ulp__h5_small_gcpl(2, 7); /* records, seal */
        hid_t g = gcpl < 0 ? H5I_INVALID_HID
                           : H5Gcreate2(file, ULP__INDEX_GROUP, H5P_DEFAULT, gcpl, H5P_DEFAULT);
        if (gcpl >= 0)
            H5Pclose(gcpl);
        if (g < 0)
            goto cleanup;
        H5Gclose(g);
    }
    /* Contiguous and allocated now: the hash is written at its offset after the close. */
    if (has_group < 0 || space < 0 || dcpl < 0 || H5Pset_layout(dcpl, H5D_CONTIGUOUS) < 0 ||
        H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY) < 0 || ulp__h5_dcpl_no_attrs(dcpl) < 0 ||
        (ds = H5Dcreate2(file, ULP__INDEX_SEAL, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl,
                         H5P_DEFAULT)) < 0 ||
        H5Dwrite(ds, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, seal) < 0)
        goto cleanup;
    haddr_t off = H5Dget_offset(ds);
    if (off != HADDR_UNDEF) {
        *seal_off = (uint64_t)off;
        rc = 0;
    }
cleanup:
    if (ds >= 0)
        H5Dclose(ds);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    return rc;
}

int ulp__index_seal_write(int fd, uint64_t seal_off, uint64_t jfirst, ulp__index_range *skip,
                          size_t n)
{
    struct stat sb;
    if (fd < 0 || seal_off == 0 || fstat(fd, &sb) != 0 || sb.st_size <= 0)
        return -1;
    uint64_t size = (uint64_t)sb.st_size, hash = 0;
    n = ulp__index_add_unhashed(skip, n, seal_off, jfirst);
    if (ulp__index_hash_file(fd, size, skip, n, &hash) != 0)
        return -1;
    unsigned char field[ULP__INDEX_HASHED_FIELDS];
    ulp__le64_put(field, hash);
    ulp__le64_put(field + 8, size);
    return ulp__journal_pwrite(fd, field, sizeof field, seal_off + ULP__INDEX_HASH_AT) < 0 ? -1 : 0;
}

/*
 * The capture index's writer (index_write.h): records gathered in a buffer
 * and appended to /index/records a chunk at a time; at the finish the
 * seal, and the open map; after HDF5 has closed the file, the seal's hash.
 */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "h5types.h"
#include "index_runs.h"
#include "index_seal.h"
#include "index_write.h"

#define CHUNK_BYTES ((hsize_t)64 << 10) /* of /index/records once it grows: the most it wastes */

void ulp__index_writer_init(ulp__index_writer *x, size_t spill)
{
    memset(x, 0, sizeof *x);
    x->records = H5I_INVALID_HID;
    x->spill = spill;
}

void ulp__index_writer_off(ulp__index_writer *x)
{
    x->off = 1;
    free(x->buf);
    x->buf = NULL;
    x->used = x->cap = 0;
    free(x->ranges);
    x->ranges = NULL;
    x->nranges = x->ranges_cap = 0;
}

/*
 * /index/records: chunked and growing while the records outgrow the buffer;
 * contiguous, of their exact size, when they all fit in it at the finish (a
 * small file does not grow by a mostly empty chunk).  -1 on failure.
 */
static hid_t records_create(ulp__index_writer *x, hid_t file, int final)
{
    hid_t ds = H5I_INVALID_HID;
    hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = CHUNK_BYTES, exact = x->used;
    hid_t gcpl = ulp__h5_small_gcpl(2, 7); /* records, seal */
    hid_t g = gcpl < 0 ? H5I_INVALID_HID
                       : H5Gcreate2(file, ULP__INDEX_GROUP, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (gcpl >= 0)
        H5Pclose(gcpl);
    hid_t space =
        final ? H5Screate_simple(1, &exact, NULL) : H5Screate_simple(1, &zero, &unlimited);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (g >= 0 && space >= 0 && dcpl >= 0 && ulp__h5_dcpl_no_attrs(dcpl) >= 0 &&
        (final ? H5Pset_layout(dcpl, H5D_CONTIGUOUS) : H5Pset_chunk(dcpl, 1, &chunk)) >= 0)
        ds = H5Dcreate2(file, ULP__INDEX_RECORDS, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl,
                        H5P_DEFAULT);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (g >= 0)
        H5Gclose(g);
    return ds;
}

/* Appends the buffered records to /index/records (`final`: at the finish); -1 on failure. */
static int records_spill(ulp__index_writer *x, hid_t file, int final)
{
    if (x->used == 0)
        return 0;
    int fixed = final && x->records < 0;
    if (x->records < 0 && (x->records = records_create(x, file, final)) < 0)
        return -1;
    hsize_t start = x->bytes, count = x->used, size = x->bytes + x->used;
    int rc = -1;
    hid_t fspace = -1, mspace = H5Screate_simple(1, &count, NULL);
    if (mspace >= 0 && (fixed || H5Dset_extent(x->records, &size) >= 0) &&
        (fspace = H5Dget_space(x->records)) >= 0 &&
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
        H5Dwrite(x->records, H5T_NATIVE_UCHAR, mspace, fspace, H5P_DEFAULT, x->buf) >= 0)
        rc = 0;
    if (fspace >= 0)
        H5Sclose(fspace);
    if (mspace >= 0)
        H5Sclose(mspace);
    if (rc == 0) {
        x->bytes += x->used;
        x->used = 0;
    }
    return rc;
}

void ulp__index_writer_add(ulp__index_writer *x, hid_t file, const ulp__index_entry *e,
                           uint64_t data_bytes)
{
    if (x->off)
        return;
    size_t len = ulp__index_record_size(e);
    int ok = len > 0;
    if (ok && x->used + len > x->spill && records_spill(x, file, 0) < 0)
        ok = 0;
    if (ok && ULP__GROW(x->buf, x->cap, x->used + len) != 0)
        ok = 0;
    if (ok && e->offset != ULP__INDEX_NO_OFFSET &&
        ULP__GROW(x->ranges, x->ranges_cap, x->nranges + 1) != 0)
        ok = 0;
    if (ok) {
        ulp__index_record_encode(x->buf + x->used, e);
        x->used += len;
        x->count++;
        if (e->offset != ULP__INDEX_NO_OFFSET)
            x->ranges[x->nranges++] = (ulp__index_range){e->offset, data_bytes};
    } else {
        ulp__index_writer_off(x);
    }
}

int ulp__index_writer_finish(ulp__index_writer *x, hid_t file, ulp__index_seal_job *job)
{
    memset(job, 0, sizeof *job);
    if (x->off)
        return -1;
    if (x->count > 0 && (records_spill(x, file, 1) < 0 || x->records < 0))
        return -1;
    if (ulp__index_seal_create(file, x->bytes, x->count, &job->seal_off, &job->stamp) < 0)
        return -1;
    job->ranges = x->ranges;
    job->nranges = x->nranges;
    job->ranges_cap = x->ranges_cap;
    x->ranges = NULL;
    x->nranges = x->ranges_cap = 0;
    return 0;
}

void ulp__index_writer_map(ulp__index_writer *x, ulp__open_map *m, ulp__index_seal_job *job)
{
    job->map = NULL;
    job->map_len = 0;
    if (job->seal_off == 0)
        return;
    ulp__index_mem *runs = NULL;
    size_t nruns = 0;
    /* Flushed first: a chunk still in HDF5's cache has no place in the file yet. */
    if (x->bytes > 0 && (x->records < 0 || H5Dflush(x->records) < 0 ||
                         ulp__index_runs(x->records, x->bytes, UINT64_MAX, &runs, &nruns) != 0))
        return;
    m->runs = runs;
    m->nruns = nruns;
    if (ulp__map_encode(m, job->seal_off, &job->map, &job->map_len) != 0)
        job->map = NULL;
    m->runs = NULL;
    m->nruns = 0;
    free(runs);
}

int ulp__index_writer_seal(int fd, uint64_t jfirst, ulp__index_seal_job *job)
{
    int rc = -1;
    /* Room for the seal's fields and the journal's closed mark. */
    if (fd >= 0 && job->seal_off > 0 &&
        ULP__GROW(job->ranges, job->ranges_cap, job->nranges + 2) == 0) {
        /* The open map first: the seal's size and hash cover it. */
        if (job->map != NULL)
            (void)ulp__map_append(fd, job->map, job->map_len);
        rc = ulp__index_seal_write(fd, job->seal_off, jfirst, job->ranges, job->nranges);
    }
    ulp__index_seal_job_drop(job);
    return rc;
}

void ulp__index_seal_job_drop(ulp__index_seal_job *job)
{
    free(job->ranges);
    free(job->map);
    job->map = NULL;
    job->ranges = NULL;
    job->nranges = job->ranges_cap = 0;
    job->map_len = 0;
}

void ulp__index_writer_release(ulp__index_writer *x)
{
    if (x->records >= 0)
        H5Dclose(x->records);
    x->records = H5I_INVALID_HID;
    free(x->buf);
    free(x->ranges);
    x->buf = NULL;
    x->ranges = NULL;
}

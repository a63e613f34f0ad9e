/*
 * The capture index (format/index.h): one record per capture written,
 * gathered in a buffer and appended to /index/records a chunk at a time;
 * at close the seal, and after HDF5 has closed the file, the seal's hash.
 *
 * The index is a cache.  Nothing here may fail a capture or the close: a
 * failure only leaves the file without a valid seal, and readers then read
 * the captures through the groups.
 */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "index_seal.h"
#include "open_map.h"
#include "writer_internal.h"

#define SPILL_BYTES ((size_t)256 << 10) /* records buffered before they go to the file */
#define CHUNK_BYTES ((hsize_t)64 << 10) /* of /index/records once it grows: the most it wastes */

/* Gives up the index for this file (a failure, or memory). */
static void index_off(ulp__writer *w)
{
    w->index_off = 1;
    free(w->ibuf);
    w->ibuf = NULL;
    w->iused = w->icap = 0;
    free(w->iranges);
    w->iranges = NULL;
    w->nranges = w->ranges_cap = 0;
}

/*
 * /index/records: chunked and growing while the records outgrow the buffer;
 * contiguous, of their exact size, when they all fit in it at close (a
 * small file does not grow by a mostly empty chunk).  -1 on failure.
 */
static hid_t records_create(ulp__writer *w, int final)
{
    hid_t ds = H5I_INVALID_HID;
    hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = CHUNK_BYTES, exact = w->iused;
    hid_t g = H5Gcreate2(w->file, ULP__INDEX_GROUP, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space =
        final ? H5Screate_simple(1, &exact, NULL) : H5Screate_simple(1, &zero, &unlimited);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (g >= 0 && space >= 0 && dcpl >= 0 &&
        (final ? H5Pset_layout(dcpl, H5D_CONTIGUOUS) : H5Pset_chunk(dcpl, 1, &chunk)) >= 0)
        ds = H5Dcreate2(w->file, ULP__INDEX_RECORDS, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl,
                        H5P_DEFAULT);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (space >= 0)
        H5Sclose(space);
    if (g >= 0)
        H5Gclose(g);
    return ds;
}

/* Appends the buffered records to /index/records (`final`: at close); -1 on failure. */
static int records_spill(ulp__writer *w, int final)
{
    if (w->iused == 0)
        return 0;
    int fixed = final && w->index_records < 0;
    if (w->index_records < 0 && (w->index_records = records_create(w, final)) < 0)
        return -1;
    hsize_t start = w->ibytes, count = w->iused, size = w->ibytes + w->iused;
    int rc = -1;
    hid_t fspace = -1, mspace = H5Screate_simple(1, &count, NULL);
    if (mspace >= 0 && (fixed || H5Dset_extent(w->index_records, &size) >= 0) &&
        (fspace = H5Dget_space(w->index_records)) >= 0 &&
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
        H5Dwrite(w->index_records, H5T_NATIVE_UCHAR, mspace, fspace, H5P_DEFAULT, w->ibuf) >= 0)
        rc = 0;
    if (fspace >= 0)
        H5Sclose(fspace);
    if (mspace >= 0)
        H5Sclose(mspace);
    if (rc == 0) {
        w->ibytes += w->iused;
        w->iused = 0;
    }
    return rc;
}

void ulp__writer_index_add(ulp__writer *w, const ulp_capture_desc *d, const ulp__writer_written *c)
{
    if (w->index_off)
        return;
    const char *role = ulp_role_name(d->role);
    if (role == NULL)
        role = "activation";
    ulp__index_entry e = {
        .seq = c->seq,
        .occurrence = c->occurrence,
        .oaddr = c->oaddr,
        .offset = c->offset,
        .dtype = (int32_t)d->dtype,
        .ndim = d->ndim,
        .layer = d->layer != ULP_LAYER_NONE ? d->layer : -1,
        .step = d->step,
        .device_ptr = d->device_ptr,
        .stream = d->stream,
        .time_ns = c->time_ns,
        .name = d->name,
        .name_len = (uint32_t)strlen(d->name),
        .role = role,
        .role_len = (uint32_t)strlen(role),
    };
    if (d->step != ULP_STEP_NONE)
        e.flags |= ULP__INDEX_HAS_STEP;
    if (d->has_kernels) {
        e.flags |= ULP__INDEX_HAS_KERNELS;
        memcpy(e.kernels, d->kernels, sizeof e.kernels);
    }
    if (d->has_gemms) {
        e.flags |= ULP__INDEX_HAS_GEMMS;
        memcpy(e.gemms, d->gemms, sizeof e.gemms);
    }
    if (d->has_graph_replay) {
        e.flags |= ULP__INDEX_HAS_GRAPH_REPLAY;
        memcpy(e.graph_replay, d->graph_replay, sizeof e.graph_replay);
    }
    for (int i = 0; i < d->ndim; i++)
        e.shape[i] = d->shape[i];
    if (d->positions != NULL) {
        e.flags |= ULP__INDEX_HAS_POSITIONS;
        e.row_rank = d->row_rank;
        e.rows = 1;
        for (int i = 0; i < d->row_rank; i++)
            e.rows *= (uint64_t)d->shape[i];
        e.positions = (const unsigned char *)d->positions;
        if (d->requests != NULL) {
            e.flags |= ULP__INDEX_HAS_REQUESTS;
            e.requests = (const unsigned char *)d->requests;
        }
    }
    char small[512], *inputs;
    size_t ilen = 0;
    e.n_inputs = d->n_inputs > 0 ? (uint32_t)d->n_inputs : 0;
    if ((inputs = ulp__index_inputs_join(d->inputs, e.n_inputs, small, sizeof small, &ilen)) ==
        NULL) {
        index_off(w);
        return;
    }
    e.inputs = inputs;
    e.inputs_len = (uint32_t)ilen;

    size_t len = ulp__index_record_size(&e);
    int ok = len > 0;
    if (ok && w->iused + len > SPILL_BYTES && records_spill(w, 0) < 0)
        ok = 0;
    if (ok && ULP__GROW(w->ibuf, w->icap, w->iused + len) != 0)
        ok = 0;
    if (ok && c->offset != ULP__INDEX_NO_OFFSET &&
        ULP__GROW(w->iranges, w->ranges_cap, w->nranges + 1) != 0)
        ok = 0;
    if (ok) {
        ulp__index_record_encode(w->ibuf + w->iused, &e);
        w->iused += len;
        w->icount++;
        if (c->offset != ULP__INDEX_NO_OFFSET)
            w->iranges[w->nranges++] = (ulp__index_range){c->offset, c->bytes};
    } else {
        index_off(w);
    }
    if (inputs != small)
        free(inputs);
}

void ulp__writer_index_off(ulp__writer *w)
{
    index_off(w);
}

int ulp__writer_index_finish(ulp__writer *w, ulp__index_seal_job *job)
{
    memset(job, 0, sizeof *job);
    if (w->index_off || w->fd < 0 || w->jbytes == 0)
        return -1;
    if (w->icount > 0 && (records_spill(w, 1) < 0 || w->index_records < 0))
        return -1;
    if (ulp__index_seal_create(w->file, w->ibytes, w->icount, &job->seal_off, &job->stamp) < 0)
        return -1;
    ulp__writer_map_finish(w, job);
    job->ranges = w->iranges;
    job->nranges = w->nranges;
    job->ranges_cap = w->ranges_cap;
    w->iranges = NULL;
    w->nranges = w->ranges_cap = 0;
    return 0;
}

int ulp__writer_index_seal(int fd, uint64_t jfirst, ulp__index_seal_job *job)
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
    free(job->ranges);
    free(job->map);
    job->map = NULL;
    job->ranges = NULL;
    job->nranges = job->ranges_cap = 0;
    return rc;
}

void ulp__writer_index_release(ulp__writer *w)
{
    if (w->index_records >= 0)
        H5Dclose(w->index_records);
    w->index_records = H5I_INVALID_HID;
    free(w->ibuf);
    free(w->iranges);
    w->ibuf = NULL;
    w->iranges = NULL;
}

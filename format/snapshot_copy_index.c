/*
 * The capture index of a clean copy (ulp_snapshot_copy, `ulpprof repair`):
 * one record per capture, as the writer keeps them, and the seal, so that
 * the copy opens in one read of its records however many captures it has
 * -- also when the original had no index (written by h5py or before the
 * index existed, or changed after its writer closed it).
 *
 * The records describe the copy's own datasets (their header addresses and
 * data offsets), with what the reader found in the original.  The seal's
 * hash is computed once the copy is closed (copy_index_seal); a copy that
 * cannot be sealed is still a valid file, read through its groups.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/grow.h"
#include "index_seal.h"
#include "open_map.h"
#include "snapshot_priv.h"

/* Where the copy of capture `c` keeps its bytes: as the groups' reader locates them. */
static int copied_place(hid_t caps, const ulp_capture_info *c, uint64_t *oaddr, uint64_t *offset)
{
    char rel[64];
    snprintf(rel, sizeof rel, "%" PRId64, c->occurrence);
    hid_t g = H5Gopen2(caps, c->name, H5P_DEFAULT);
    hid_t d = g >= 0 ? H5Dopen2(g, rel, H5P_DEFAULT) : H5I_INVALID_HID;
    hid_t dcpl = d >= 0 ? H5Dget_create_plist(d) : H5I_INVALID_HID;
    H5O_info_t oi;
    int rc = dcpl >= 0 && H5Oget_info2(d, &oi, H5O_INFO_BASIC) >= 0 ? 0 : -1;
    *oaddr = (uint64_t)oi.addr;
    *offset = ULP__INDEX_NO_OFFSET;
    if (rc == 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS && c->elements > 0) {
        haddr_t off = H5Dget_offset(d);
        if (off != HADDR_UNDEF)
            *offset = (uint64_t)off;
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (d >= 0)
        H5Dclose(d);
    if (g >= 0)
        H5Gclose(g);
    return rc;
}

/* The record of capture `c`, its copy at oaddr/offset, appended to *buf. */
static int add_record(const ulp_capture_info *c, uint64_t oaddr, uint64_t offset,
                      unsigned char **buf, size_t *used, size_t *cap)
{
    ulp__index_entry e = {
        .seq = c->seq,
        .occurrence = c->occurrence,
        .oaddr = oaddr,
        .offset = offset,
        .dtype = (int32_t)c->dtype,
        .ndim = c->ndim,
        .layer = c->layer,
        .step = c->step,
        .device_ptr = c->device_ptr,
        .stream = c->stream,
        .time_ns = c->time_ns,
        .name = c->name,
        .name_len = (uint32_t)strlen(c->name),
        .role = c->role,
        .role_len = (uint32_t)strlen(c->role),
    };
    e.flags = (c->has_step ? ULP__INDEX_HAS_STEP : 0) |
              (c->has_kernels ? ULP__INDEX_HAS_KERNELS : 0) |
              (c->has_gemms ? ULP__INDEX_HAS_GEMMS : 0) |
              (c->has_graph_replay ? ULP__INDEX_HAS_GRAPH_REPLAY : 0);
    memcpy(e.kernels, c->kernels, sizeof e.kernels);
    memcpy(e.gemms, c->gemms, sizeof e.gemms);
    memcpy(e.graph_replay, c->graph_replay, sizeof e.graph_replay);
    memcpy(e.shape, c->shape, (size_t)c->ndim * sizeof *e.shape);
    if (c->positions != NULL) {
        e.flags |= ULP__INDEX_HAS_POSITIONS;
        e.row_rank = c->row_rank;
        e.rows = c->rows;
        e.positions = (const unsigned char *)c->positions;
        if (c->requests != NULL) {
            e.flags |= ULP__INDEX_HAS_REQUESTS;
            e.requests = (const unsigned char *)c->requests;
        }
    }
    char small[512];
    size_t ilen = 0;
    char *inputs = ulp__index_inputs_join(c->inputs, c->n_inputs, small, sizeof small, &ilen);
    if (inputs == NULL)
        return -1;
    e.inputs = inputs;
    e.n_inputs = (uint32_t)c->n_inputs;
    e.inputs_len = (uint32_t)ilen;
    size_t len = ulp__index_record_size(&e);
    int rc = len > 0 && ULP__GROW(*buf, *cap, *used + len) == 0 ? 0 : -1;
    if (rc == 0) {
        ulp__index_record_encode(*buf + *used, &e);
        *used += len;
    }
    if (inputs != small)
        free(inputs);
    return rc;
}

/* Writes the records as one contiguous /index/records of `n` bytes. */
static int write_records(hid_t out, const unsigned char *buf, size_t n)
{
    hid_t g = H5Gcreate2(out, ULP__INDEX_GROUP, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0)
        return -1;
    H5Gclose(g);
    if (n == 0)
        return 0;
    hsize_t dims = n;
    hid_t space = H5Screate_simple(1, &dims, NULL);
    hid_t ds = space >= 0 ? H5Dcreate2(out, ULP__INDEX_RECORDS, H5T_STD_U8LE, space, H5P_DEFAULT,
                                       H5P_DEFAULT, H5P_DEFAULT)
                          : H5I_INVALID_HID;
    int rc =
        ds >= 0 && H5Dwrite(ds, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0 ? 0 : -1;
    if (ds >= 0)
        H5Dclose(ds);
    if (space >= 0)
        H5Sclose(space);
    return rc;
}

int ulp__copy_index_write(const ulp_snapshot *s, hid_t out, ulp__copy_seal *job)
{
    memset(job, 0, sizeof *job);
    unsigned char *buf = NULL;
    size_t used = 0, cap = 0;
    /* One range per capture's data, and room for what the seal adds. */
    job->skip = malloc((s->ncaps + 2) * sizeof *job->skip);
    hid_t caps = H5Gopen2(out, "captures", H5P_DEFAULT);
    int rc = job->skip != NULL && caps >= 0 ? 0 : -1;
    for (size_t i = 0; i < s->ncaps && rc == 0; i++) {
        const ulp_capture_info *c = ulp__snap_cap(s, i, NULL);
        uint64_t oaddr, offset;
        rc = c == NULL ? -1 : copied_place(caps, c, &oaddr, &offset);
        if (rc == 0)
            rc = add_record(c, oaddr, offset, &buf, &used, &cap);
        if (rc == 0 && offset != ULP__INDEX_NO_OFFSET)
            job->skip[job->nskip++] =
                (ulp__index_range){offset, c->elements * ulp_dtype_size(c->dtype)};
    }
    if (caps >= 0)
        H5Gclose(caps);
    if (rc == 0)
        rc = write_records(out, buf, used);
    if (rc == 0)
        rc = ulp__index_seal_create(out, used, s->ncaps, &job->seal_off, &job->stamp);
    /* Without a map the copy opens through HDF5, as before. */
    if (rc == 0 && ulp__copy_map_make(s, out, used, job) != 0) {
        free(job->map);
        job->map = NULL;
        job->map_len = 0;
    }
    free(buf);
    if (rc != 0)
        ulp__copy_seal_drop(job);
    return rc;
}

void ulp__copy_seal_drop(ulp__copy_seal *job)
{
    free(job->skip);
    free(job->map);
    memset(job, 0, sizeof *job);
}

int ulp__copy_index_seal(const char *path, ulp__copy_seal *job)
{
    int rc = -1;
    if (job->skip != NULL) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
            /* The open map first: the seal's size and hash cover it. */
            if (job->map != NULL)
                (void)ulp__map_append(fd, job->map, job->map_len);
            rc = ulp__index_seal_write(fd, job->seal_off, ULP__INDEX_NO_JOURNAL, job->skip,
                                       job->nskip);
            /* The last change to the copy: its stamp (format/index.h). */
            if (rc == 0)
                (void)ulp__index_stamp_set(fd, job->stamp);
            if (close(fd) != 0)
                rc = -1;
        }
    }
    ulp__copy_seal_drop(job);
    return rc;
}

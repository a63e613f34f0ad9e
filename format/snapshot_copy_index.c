/*
 * The capture index of a clean copy (ulp_snapshot_copy, `ulpprof repair`):
 * one record per capture, as the writer keeps them, and the seal, so that
 * the copy opens in one read of its records however many captures it has
 * -- also when the original had no index (written by h5py or before the
 * index existed, or changed after its writer closed it).
 *
 * The records describe the copy's own datasets (their header addresses and
 * data offsets), with what the reader found in the original.  They, the
 * seal and the open map are written through the index's writer
 * (index_write.h), the snapshot writer's own, all records in one
 * contiguous /index/records.  The seal's hash is computed once the copy is
 * closed (copy_index_seal); a copy that cannot be sealed is still a valid
 * file, read through its groups.
 *
 * The open map (FORMAT.md, "Open map") holds the copy's root attributes,
 * /run and /env as the reader rendered them from the original (the copy
 * holds the same attributes, H5Ocopy'd).  A copy has no journal: its map
 * says so (ULP__INDEX_NO_JOURNAL), and its seal, written after H5Fclose
 * with the map before it, is what says it was written whole.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5types.h"
#include "index_seal.h"
#include "index_write.h"
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

/* The record of capture `c`, its copy at oaddr/offset, added to the index `x` of `out`. */
static void add_record(ulp__index_writer *x, hid_t out, const ulp_capture_info *c, uint64_t oaddr,
                       uint64_t offset)
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
    if (inputs == NULL) {
        ulp__index_writer_off(x);
        return;
    }
    e.inputs = inputs;
    e.n_inputs = (uint32_t)c->n_inputs;
    e.inputs_len = (uint32_t)ilen;
    ulp__index_writer_add(x, out, &e, c->elements * ulp_dtype_size(c->dtype));
    if (inputs != small)
        free(inputs);
}

/* s's key/value pairs as the map's; NULL when out of memory (n > 0). */
static ulp__map_kv *map_kvs(const ulp_kv *kv, size_t n)
{
    ulp__map_kv *m = malloc((n ? n : 1) * sizeof *m);
    for (size_t i = 0; m != NULL && i < n; i++) {
        m[i].key = kv[i].key;
        m[i].value = kv[i].value;
    }
    return m;
}

/* The copy's open map into job->map, through the index's writer `x`; NULL there when not made. */
static void copy_map(const ulp_snapshot *s, ulp__index_writer *x, int kept,
                     ulp__index_seal_job *job)
{
    job->map = NULL;
    job->map_len = 0;
    ulp__map_kv *run = map_kvs(s->run, s->nrun), *env = map_kvs(s->env, s->nenv);
    ulp__map_kv *obs = map_kvs(s->observed, s->nobserved);
    if (run != NULL && env != NULL && obs != NULL && s->nrun <= UINT32_MAX &&
        s->nenv <= UINT32_MAX && s->nobserved <= UINT32_MAX) {
        ulp__open_map m = {
            /* ulp_snapshot_copy copies /trace when the reader read it. */
            .flags = (ulp__copy_has_trace(s) ? ULP__MAP_HAS_TRACE : 0) |
                     (s->nobserved > 0 ? ULP__MAP_HAS_OBSERVED : 0) |
                     (kept ? ULP__MAP_HAS_KEPT : 0),
            .journal = ULP__INDEX_NO_JOURNAL,
            .format_version = s->format_version,
            .created_unix_ns = s->created_unix_ns,
            .format = ULP__FORMAT_NAME,
            .label = s->label != NULL ? s->label : "",
            .writer = s->writer != NULL ? s->writer : "",
            .run = run,
            .env = env,
            .nrun = (uint32_t)s->nrun,
            .nenv = (uint32_t)s->nenv,
            .observed = obs,
            .nobserved = (uint32_t)s->nobserved,
        };
        ulp__index_writer_map(x, &m, job);
    }
    free(run);
    free(env);
    free(obs);
}

/* Whether the copy's /digests keeps some capture. */
static int kept_any(const ulp_snapshot *s, const unsigned char *in_digests)
{
    for (size_t i = 0; in_digests != NULL && i < s->ncaps; i++)
        if (in_digests[i])
            return 1;
    return 0;
}

int ulp__copy_index_write(const ulp_snapshot *s, hid_t out, const unsigned char *in_digests,
                          ulp__index_seal_job *job)
{
    memset(job, 0, sizeof *job);
    ulp__index_writer x;
    ulp__index_writer_init(&x, SIZE_MAX); /* one contiguous /index/records */
    hid_t caps = H5Gopen2(out, "captures", H5P_DEFAULT);
    int rc = caps >= 0 ? 0 : -1;
    for (size_t i = 0; i < s->ncaps && rc == 0 && !x.off; i++) {
        if (in_digests != NULL && in_digests[i])
            continue; /* in the copy's /digests: not a record of the index */
        const ulp_capture_info *c = ulp__snap_cap(s, i, NULL);
        uint64_t oaddr, offset;
        rc = c == NULL ? -1 : copied_place(caps, c, &oaddr, &offset);
        if (rc == 0)
            add_record(&x, out, c, oaddr, offset);
    }
    if (caps >= 0)
        H5Gclose(caps);
    if (rc == 0)
        rc = ulp__index_writer_finish(&x, out, job);
    /* Without a map the copy opens through HDF5, as before. */
    if (rc == 0)
        copy_map(s, &x, kept_any(s, in_digests), job);
    ulp__index_writer_release(&x);
    if (rc != 0)
        ulp__index_seal_job_drop(job);
    return rc;
}

int ulp__copy_index_seal(const char *path, ulp__index_seal_job *job)
{
    int rc = -1;
    if (job->seal_off > 0) {
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd >= 0) {
            rc = ulp__index_writer_seal(fd, ULP__INDEX_NO_JOURNAL, job);
            /* The last change to the copy: its stamp (format/index.h). */
            if (rc == 0)
                (void)ulp__index_stamp_set(fd, job->stamp);
            if (close(fd) != 0)
                rc = -1;
        }
    }
    ulp__index_seal_job_drop(job);
    return rc;
}

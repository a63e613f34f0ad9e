/*
 * The snapshot writer's capture index (format/index.h): one record per
 * capture written, from its descriptor, through the index's writer
 * (index_write.c); at close the seal, and after HDF5 has closed the file,
 * the seal's hash.
 *
 * The index is a cache.  Nothing here may fail a capture or the close: a
 * failure only leaves the file without a valid seal, and readers then read
 * the captures through the groups.
 */
#include <stdlib.h>
#include <string.h>

#include "index_write.h"
#include "writer_internal.h"

#define SPILL_BYTES ((size_t)256 << 10) /* records buffered before they go to the file */

void ulp__writer_index_init(ulp__writer *w)
{
    ulp__index_writer_init(&w->index, SPILL_BYTES);
}

void ulp__writer_index_add(ulp__writer *w, const ulp__desc *d, const ulp__writer_written *c)
{
    if (w->index.off)
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
        ulp__index_writer_off(&w->index);
        return;
    }
    e.inputs = inputs;
    e.inputs_len = (uint32_t)ilen;

    ulp__index_writer_add(&w->index, w->file, &e, c->bytes);
    if (inputs != small)
        free(inputs);
}

void ulp__writer_index_off(ulp__writer *w)
{
    ulp__index_writer_off(&w->index);
}

int ulp__writer_index_finish(ulp__writer *w, ulp__index_seal_job *job)
{
    memset(job, 0, sizeof *job);
    if (w->index.off || w->fd < 0 || w->jbytes == 0)
        return -1;
    if (ulp__index_writer_finish(&w->index, w->file, job) != 0)
        return -1;
    ulp__writer_map_finish(w, job);
    return 0;
}

int ulp__writer_index_seal(int fd, uint64_t jfirst, ulp__index_seal_job *job)
{
    return ulp__index_writer_seal(fd, jfirst, job);
}

void ulp__writer_index_release(ulp__writer *w)
{
    ulp__index_writer_release(&w->index);
}

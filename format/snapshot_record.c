/*
 * One capture index record (format/index.h) decoded and checked as the
 * groups' reader checks a dataset: shared by the table read whole
 * (snapshot_index.c) and the table made in pages (snapshot_pages.c), so
 * that both accept exactly the same records.
 */
#include <stdlib.h>
#include <string.h>

#include "common/strset.h"
#include "index.h"
#include "snapshot_priv.h"

/* Checks a decoded record as the groups' reader checks a dataset; fills `c`. */
static int entry_ok(const ulp_snapshot *s, const ulp__index_entry *e, ulp_capture_info *c,
                    uint64_t *bytes)
{
    if (e->dtype < 0 || e->dtype >= ULP_DTYPE_COUNT || ulp_dtype_size((ulp_dtype)e->dtype) == 0 ||
        e->seq < 0 || e->occurrence < 0 || e->name_len == 0)
        return 0;
    uint64_t elements = 1;
    for (int k = 0; k < e->ndim; k++) {
        if (e->shape[k] < 0 || (uint64_t)e->shape[k] > ULP__MAX_ELEMENTS ||
            (elements != 0 && (uint64_t)e->shape[k] > ULP__MAX_ELEMENTS / elements))
            return 0;
        elements *= (uint64_t)e->shape[k];
        c->shape[k] = e->shape[k];
    }
    *bytes = elements * ulp_dtype_size((ulp_dtype)e->dtype);
    if (ulp__snapshot_absurd_bytes(s, *bytes))
        return 0;
    if (e->offset != ULP__INDEX_NO_OFFSET &&
        (elements == 0 || e->offset > s->file_size || *bytes > s->file_size - e->offset))
        return 0;
    if (((e->flags & ULP__INDEX_HAS_KERNELS) &&
         (e->kernels[0] < 0 || e->kernels[1] < e->kernels[0])) ||
        ((e->flags & ULP__INDEX_HAS_GEMMS) && (e->gemms[0] < 0 || e->gemms[1] < e->gemms[0])))
        return 0;
    int has_pos = (e->flags & ULP__INDEX_HAS_POSITIONS) != 0;
    if ((!has_pos && (e->flags & ULP__INDEX_HAS_REQUESTS)) ||
        (has_pos && (e->row_rank < 1 || e->row_rank > e->ndim)))
        return 0;
    c->dtype = (ulp_dtype)e->dtype;
    c->ndim = e->ndim;
    c->elements = elements;
    c->occurrence = e->occurrence;
    c->seq = e->seq;
    c->layer = e->layer;
    c->role = e->role;
    c->name = e->name;
    c->has_step = (e->flags & ULP__INDEX_HAS_STEP) != 0;
    c->step = c->has_step ? e->step : 0;
    c->has_kernels = (e->flags & ULP__INDEX_HAS_KERNELS) != 0;
    c->has_gemms = (e->flags & ULP__INDEX_HAS_GEMMS) != 0;
    c->has_graph_replay = (e->flags & ULP__INDEX_HAS_GRAPH_REPLAY) != 0;
    if (c->has_kernels)
        memcpy(c->kernels, e->kernels, sizeof c->kernels);
    if (c->has_gemms)
        memcpy(c->gemms, e->gemms, sizeof c->gemms);
    if (c->has_graph_replay)
        memcpy(c->graph_replay, e->graph_replay, sizeof c->graph_replay);
    c->device_ptr = e->device_ptr;
    c->stream = e->stream;
    c->time_ns = e->time_ns;
    if (has_pos) {
        uint64_t rows = 1;
        for (int k = 0; k < e->row_rank; k++)
            rows *= (uint64_t)e->shape[k];
        if (rows != e->rows)
            return 0;
        /* Records are 8-byte aligned in a malloc'd buffer, and the host is
         * little-endian (checked by the caller): the arrays are used in place. */
        c->row_rank = e->row_rank;
        c->rows = rows;
        c->positions = (const int64_t *)(const void *)e->positions;
        c->requests = (const int64_t *)(const void *)e->requests;
    }
    return 1;
}

/* The inputs of `e` as a malloc'd array of pointers into the record, in *out. */
static int entry_inputs(const ulp__index_entry *e, ulp_capture_info *c, const char ***out)
{
    *out = NULL;
    if (e->n_inputs == 0)
        return 0;
    const char **v = malloc(e->n_inputs * sizeof *v);
    if (v == NULL)
        return -1;
    const char *p = e->inputs;
    for (uint32_t i = 0; i < e->n_inputs; i++, p += strlen(p) + 1)
        v[i] = p;
    c->inputs = v;
    c->n_inputs = e->n_inputs;
    *out = v;
    return 0;
}

size_t ulp__record_take(const ulp_snapshot *s, const unsigned char *p, size_t avail,
                        ulp__strset *names, ulp__strset *roles, ulp__record_out *o)
{
    ulp_error ignored;
    ulp__index_entry e;
    ulp_capture_info *c = o->c;
    /* What entry_ok() sets only when the record has it (a memset of the whole
     * struct was 6% of making a page again). */
    memset(c->shape, 0, sizeof c->shape);
    memset(c->kernels, 0, sizeof c->kernels);
    memset(c->gemms, 0, sizeof c->gemms);
    memset(c->graph_replay, 0, sizeof c->graph_replay);
    c->row_rank = 0;
    c->rows = 0;
    c->positions = NULL;
    c->requests = NULL;
    c->n_inputs = 0;
    c->inputs = NULL;
    o->inputs = NULL;
    size_t len = ulp__index_record_decode(p, avail, &e);
    if (len == 0 || (e.name = ulp__strset_add(names, e.name, &o->name_no)) == NULL ||
        (e.role = o->role != NULL && strcmp(o->role, e.role) == 0
                      ? o->role
                      : ulp__strset_add(roles, e.role, NULL)) == NULL)
        return 0;
    if (!entry_ok(s, &e, c, &o->bytes) ||
        (c->rows > 0 && !o->trusted &&
         ulp__rows_check_keys(s, c, c->name, "", &ignored) != ULP_OK) ||
        entry_inputs(&e, c, &o->inputs) < 0)
        return 0;
    o->src->h5path = NULL;
    o->src->oaddr = e.oaddr;
    o->src->offset = e.offset;
    return len;
}

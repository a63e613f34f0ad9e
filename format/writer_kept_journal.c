/*
 * The journal record of a kept capture (format/journal_kept.h), written by
 * the writer when it accepts the capture, before its rows join their name's
 * buffer: no flush can then write /digests rows of it that the journal does
 * not already hold, so a writer killed at any later point (inside a flush
 * that rewrites /digests included) leaves every kept capture it accepted
 * readable from the journal.  Why at acceptance rather than with the link
 * batches of /captures datasets: a kept capture's record is its only copy
 * until the next flush of /digests (up to 1 MiB a name later), and one
 * pwrite of a few dozen bytes costs less than the capture's own digests;
 * a batch would be lost whole by a kill before it is written.
 */
#include <stdlib.h>
#include <string.h>

#include "journal_kept.h"
#include "writer_internal.h"

/* What a name's definition holds, as bytes to compare: dtype, role, layer, inputs. */
static unsigned char *definition_blob(const ulp__desc *d, ulp_role role, size_t *len)
{
    size_t n = 7;
    for (int32_t i = 0; i < d->n_inputs; i++)
        n += strlen(d->inputs[i]) + 1;
    unsigned char *b = malloc(n);
    if (b == NULL)
        return NULL;
    b[0] = (unsigned char)d->dtype;
    b[1] = (unsigned char)role;
    b[2] = d->layer != ULP_LAYER_NONE;
    memcpy(b + 3, &d->layer, 4);
    size_t at = 7;
    for (int32_t i = 0; i < d->n_inputs; i++) {
        size_t l = strlen(d->inputs[i]) + 1;
        memcpy(b + at, d->inputs[i], l);
        at += l;
    }
    *len = n;
    return b;
}

ulp_status ulp__writer_journal_kept(ulp__writer *w, ulp__kept_jname *jn, const ulp__desc *d,
                                    int64_t seq, int64_t occurrence, int row_rank, uint64_t rows,
                                    const void *data, size_t nbytes, ulp_error *err)
{
    ulp_role role = ulp_role_name(d->role) != NULL ? d->role : ULP_ROLE_ACTIVATION;
    size_t def_len = 0;
    unsigned char *def = definition_blob(d, role, &def_len);
    if (def == NULL)
        return ulp__error(err, ULP_ENOMEM, "kept capture '%s': out of memory", d->name);
    ulp__journal_kept k;
    memset(&k, 0, sizeof k);
    /* A name's first record, or one whose unchanging fields changed, defines it. */
    int defines = jn->id < 0 || jn->def_len != def_len || memcmp(jn->def, def, def_len) != 0;
    k.id = (uint32_t)(jn->id < 0 ? w->jkept_names : jn->id);
    k.flags = (defines ? ULP__JKEPT_DEFINES : 0u) |
              (d->step != ULP_STEP_NONE ? ULP__JKEPT_STEP : 0u) |
              (d->positions != NULL ? ULP__JKEPT_POSITIONS : 0u) |
              (d->positions != NULL && d->requests != NULL ? ULP__JKEPT_REQUESTS : 0u) |
              (d->has_kernels || d->has_gemms || d->has_graph_replay || d->device_ptr != 0 ||
                       d->stream != 0
                   ? ULP__JKEPT_DEVICE
                   : 0u);
    k.name = d->name;
    k.name_len = strlen(d->name);
    k.dtype = (unsigned)d->dtype;
    k.role = (unsigned)role;
    k.has_layer = d->layer != ULP_LAYER_NONE;
    k.layer = d->layer;
    k.n_inputs = d->n_inputs > 0 ? (uint32_t)d->n_inputs : 0;
    k.ndim = d->ndim;
    k.row_rank = row_rank;
    for (int i = 0; i < d->ndim && i < ULP_MAX_RANK; i++)
        k.shape[i] = d->shape[i];
    k.step = d->step;
    k.rows = rows;
    k.has_kernels = d->has_kernels != 0;
    k.has_gemms = d->has_gemms != 0;
    k.has_graph_replay = d->has_graph_replay != 0;
    memcpy(k.kernels, d->kernels, sizeof k.kernels);
    memcpy(k.gemms, d->gemms, sizeof k.gemms);
    memcpy(k.graph_replay, d->graph_replay, sizeof k.graph_replay);
    k.device_ptr = d->device_ptr;
    k.stream = d->stream;
    k.data = data;
    k.data_bytes = nbytes;
    size_t bound = ulp__journal_kept_bound(&k, d->inputs);
    unsigned char small[256];
    unsigned char *pay = bound == 0 ? NULL : bound <= sizeof small ? small : malloc(bound);
    if (pay == NULL) {
        free(def);
        return ulp__error(err, bound == 0 ? ULP_EINVAL : ULP_ENOMEM,
                          "kept capture '%s': too large for the capture journal", d->name);
    }
    size_t len = ulp__journal_kept_encode(pay, &k, d->positions, d->requests, d->inputs);
    ulp__journal_record r = {.kind = ULP__JOURNAL_KEPT,
                             .seq = seq,
                             .occurrence = occurrence,
                             .addr = (uint64_t)d->time_ns,
                             .name = (const char *)pay,
                             .name_len = len};
    ulp_status st = ulp__writer_journal_append(w, &r, err);
    if (pay != small)
        free(pay);
    if (st != ULP_OK) {
        free(def);
        return st;
    }
    if (jn->id < 0)
        jn->id = (int64_t)w->jkept_names++;
    if (defines) {
        free(jn->def);
        jn->def = def;
        jn->def_len = def_len;
    } else {
        free(def);
    }
    return ULP_OK;
}

/* The writer's capture descriptor (capture_desc.h). */
#include "capture_desc.h"

#include <string.h>

#include "ulpprof/capture.h"
#include "ulpprof/snapshot.h"

void ulp__desc_init(ulp__desc *d)
{
    memset(d, 0, sizeof *d);
    d->dtype = ULP_DTYPE_INVALID;
    d->layer = ULP_LAYER_NONE;
    d->role = ULP_ROLE_ACTIVATION;
    d->step = ULP_STEP_NONE;
}

void ulp__desc_of_capture(const ulp_capture_info *c, ulp__desc *d)
{
    ulp__desc_init(d);
    d->name = c->name;
    d->dtype = c->dtype;
    d->ndim = c->ndim;
    d->shape = c->shape;
    d->layer = c->layer;
    int role = ulp_role_from_name(c->role);
    d->role = role >= 0 ? (ulp_role)role : ULP_ROLE_ACTIVATION;
    d->step = c->has_step ? c->step : ULP_STEP_NONE;
    d->time_ns = c->time_ns;
    d->positions = c->positions;
    d->requests = c->requests;
    d->row_rank = c->positions != NULL ? c->row_rank : 1;
    d->n_inputs = (int32_t)c->n_inputs;
    d->inputs = c->inputs;
    d->has_kernels = c->has_kernels;
    memcpy(d->kernels, c->kernels, sizeof d->kernels);
    d->device_ptr = c->device_ptr;
    d->stream = c->stream;
    d->has_gemms = c->has_gemms;
    memcpy(d->gemms, c->gemms, sizeof d->gemms);
    d->has_graph_replay = c->has_graph_replay;
    memcpy(d->graph_replay, c->graph_replay, sizeof d->graph_replay);
}

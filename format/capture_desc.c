/* The writer's capture descriptor (capture_desc.h). */
#include "capture_desc.h"

#include <string.h>

#include "ulpprof/capture.h"

void ulp__desc_init(ulp__desc *d)
{
    memset(d, 0, sizeof *d);
    d->dtype = ULP_DTYPE_INVALID;
    d->layer = ULP_LAYER_NONE;
    d->role = ULP_ROLE_ACTIVATION;
    d->step = ULP_STEP_NONE;
}

/* The one check of a capture descriptor, for the session and the writer. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "capture_check.h"
#include "capture_name.h"
#include "capture_rows.h"
#include "ulpprof/dtype.h"
#include "ulpprof/format.h"

ulp_status ulp__capture_check(const ulp__desc *d, size_t *nbytes, char *why, size_t n)
{
    if (d == NULL) {
        snprintf(why, n, "capture without a descriptor");
        return ULP_EINVAL;
    }
    if (d->name == NULL) {
        snprintf(why, n, "capture without a name");
        return ULP_EINVAL;
    }
    if (!ulp__capture_name_ok(d->name)) {
        snprintf(why, n,
                 "capture name '%.200s' is empty, '.', '..', holds '/' or a control "
                 "character, or is not UTF-8",
                 d->name);
        return ULP_EINVAL;
    }
    size_t esize = ulp_dtype_size(d->dtype);
    if (esize == 0) {
        snprintf(why, n, "capture '%.200s': unknown dtype %d", d->name, (int)d->dtype);
        return ULP_EINVAL;
    }
    if (d->ndim < 0 || d->ndim > ULP_MAX_RANK) {
        snprintf(why, n, "capture '%.200s': rank %d is not in 0..%d", d->name, d->ndim,
                 ULP_MAX_RANK);
        return ULP_EINVAL;
    }
    if (d->ndim > 0 && d->shape == NULL) {
        snprintf(why, n, "capture '%.200s': rank %d without a shape", d->name, d->ndim);
        return ULP_EINVAL;
    }
    if (ulp_role_name(d->role) == NULL) {
        snprintf(why, n, "capture '%.200s': unknown role %d", d->name, (int)d->role);
        return ULP_EINVAL;
    }
    uint64_t elements = 1;
    for (int i = 0; i < d->ndim; i++) {
        if (d->shape[i] < 0) {
            snprintf(why, n, "capture '%.200s': extent %" PRId64 " of axis %d is negative", d->name,
                     d->shape[i], i);
            return ULP_EINVAL;
        }
        uint64_t e = (uint64_t)d->shape[i];
        if (e != 0 && elements > UINT64_MAX / e) {
            snprintf(why, n, "capture '%.200s': shape overflows", d->name);
            return ULP_EINVAL;
        }
        elements *= e;
    }
    /* The charge adds an overhead, so keep clear of SIZE_MAX. */
    if (elements > (SIZE_MAX / 2) / esize) {
        snprintf(why, n, "capture '%.200s': %" PRIu64 " elements are too many", d->name, elements);
        return ULP_EINVAL;
    }
    /* A range the file would hold and every reader then refuse (FORMAT.md). */
    if (d->has_kernels && (d->kernels[0] < 0 || d->kernels[1] < d->kernels[0])) {
        snprintf(why, n, "capture '%.200s': kernel range [%" PRId64 ", %" PRId64 ") is %s", d->name,
                 d->kernels[0], d->kernels[1], d->kernels[0] < 0 ? "negative" : "backwards");
        return ULP_EINVAL;
    }
    *nbytes = (size_t)elements * esize;
    return ulp__capture_rows_check(d, why, n);
}

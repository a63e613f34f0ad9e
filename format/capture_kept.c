/* The captures kept in full whatever the mode (capture_kept.h). */
#include "capture_kept.h"

#include <string.h>

int ulp__desc_kept_in_full(const ulp__desc *d)
{
    if (d->name != NULL && strcmp(d->name, "tokens") == 0)
        return 1;
    const ulp_dtype_info *t = ulp_dtype_get(d->dtype);
    if (d->role != ULP_ROLE_INPUT || t == NULL || t->is_float || d->positions == NULL)
        return 0;
    for (int i = d->row_rank; i < d->ndim; i++)
        if (d->shape[i] != 1)
            return 0;
    return 1;
}

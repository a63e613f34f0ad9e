/*
 * The layout of the produced-token captures (produced_tokens.h), checked
 * alike by every command that reads them.
 */
#include "produced_tokens.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "ulpprof/dtype.h"

int ulp__tokens_named(const char *name)
{
    return name != NULL && strcmp(name, ULP__TOKENS_NAME) == 0;
}

/* "[3, 2]" into buf (cut short past its size). */
static void shape_text(const ulp_capture_info *c, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < c->ndim && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)c->shape[d]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

ulp_status ulp__tokens_check(const ulp_capture_info *c, const char *path, ulp_error *err)
{
    if (!ulp__tokens_named(c->name))
        return ULP_OK;
    const char *what = NULL;
    if (c->dtype != ULP_DTYPE_F64)
        what = "its dtype is not f64";
    else if (c->ndim != 2 || c->shape[1] != 2)
        what = "its shape is not [rows, 2]";
    else if (c->row_rank != 1 || c->positions == NULL)
        what = "it has no positions over axis 0";
    if (what == NULL)
        return ULP_OK;
    char shape[200];
    shape_text(c, shape, sizeof shape);
    const char *dt = ulp_dtype_name(c->dtype);
    return ulp__error(err, ULP_EBADATTR,
                      "'%s': capture '%s' #%lld is %s %s: %s (produced tokens are f64 [rows, 2] "
                      "with positions: FORMAT.md \"Produced tokens\")",
                      path, c->name, (long long)c->occurrence, dt ? dt : "?", shape, what);
}

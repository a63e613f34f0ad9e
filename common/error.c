/* Filling an ulp_error with a formatted one-line message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

static ulp_status error_vset(ulp_error *err, ulp_status status, const char *fmt, va_list ap)
{
    if (err == NULL)
        return status;
    err->status = status;
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    /* Messages are one line: a stray newline from a caller would break it. */
    for (char *p = err->msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return status;
}

ulp_status ulp__error(ulp_error *err, ulp_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, status, fmt, ap);
    va_end(ap);
    return status;
}

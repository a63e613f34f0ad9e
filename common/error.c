/* Filling an ulp_error with a formatted one-line message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

/*
 * Copies `full` into `out` (`size` bytes).  When it does not fit, quoted
 * parts ('...', most often paths) longer than ELIDE_AT lose their middle,
 * so that the end of the message, which says what went wrong, survives a
 * long path.
 */
#define ELIDE_AT   120
#define ELIDE_HEAD 40
#define ELIDE_TAIL 60
static void fit(char *out, size_t size, const char *full)
{
    size_t o = 0;
    int fits = strlen(full) < size;
    for (const char *p = full; *p && o + 1 < size;) {
        const char *close = *p == '\'' ? strchr(p + 1, '\'') : NULL;
        if (!fits && close != NULL && (size_t)(close - p - 1) > ELIDE_AT) {
            size_t n = (size_t)snprintf(out + o, size - o, "'%.*s...%.*s", ELIDE_HEAD, p + 1,
                                        ELIDE_TAIL, close - ELIDE_TAIL);
            o = n < size - o ? o + n : size - 1;
            p = close + 1;
            if (o + 1 < size)
                out[o++] = '\'';
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
}

static ulp_status error_vset(ulp_error *err, ulp_status status, const char *fmt, va_list ap)
{
    if (err == NULL)
        return status;
    err->status = status;
    char full[8192];
    vsnprintf(full, sizeof full, fmt, ap);
    fit(err->msg, sizeof(err->msg), full);
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

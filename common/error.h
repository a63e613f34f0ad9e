/* Internal helpers for filling an ulp_error (common/, used by every library). */
#ifndef ULPPROF_COMMON_ERROR_H
#define ULPPROF_COMMON_ERROR_H

#include "ulpprof/status.h"

#if defined(__GNUC__) || defined(__clang__)
#define ULP__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define ULP__PRINTF(fmt, args)
#endif

/*
 * Sets `err` (may be NULL) to `status` with a printf-style message and
 * returns `status`, so that callers can write `return ulp__error(...)`.
 */
ulp_status ulp__error(ulp_error *err, ulp_status status, const char *fmt, ...) ULP__PRINTF(3, 4);

#endif /* ULPPROF_COMMON_ERROR_H */

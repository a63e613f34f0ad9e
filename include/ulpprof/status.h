/*
 * ulpprof status codes.
 *
 * Every library function that can fail returns an ulp_status: 0 (ULP_OK) on
 * success, a negative code on error.  The codes and their messages come from
 * one X-macro, as libuv's UV_ERRNO_MAP, so the two can never drift apart.
 *
 * A human-readable detail (file, dataset, what was expected) travels beside
 * the code in an ulp_error, which callers may pass as NULL when they only
 * want the code.
 */
#ifndef ULPPROF_STATUS_H
#define ULPPROF_STATUS_H

#include "ulpprof/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, code, message) */
#define ULP_STATUS_MAP(XX)                                                                         \
    XX(OK, 0, "success")                                                                           \
    XX(EINVAL, -1, "invalid argument")                                                             \
    XX(ENOMEM, -2, "out of memory")                                                                \
    XX(EIO, -3, "input/output error")                                                              \
    XX(ENOENT, -4, "no such file")                                                                 \
    XX(ENOTHDF5, -5, "not an HDF5 file")                                                           \
    XX(EFORMAT, -6, "not an ulpprof snapshot")                                                     \
    XX(EVERSION, -7, "unsupported format version")                                                 \
    XX(EBADATTR, -8, "attribute breaks the snapshot format")                                       \
    XX(EDTYPE, -9, "unknown or inconsistent dtype")                                                \
    XX(ESHAPE, -10, "invalid shape")                                                               \
    XX(ETRUNC, -11, "file is truncated")                                                           \
    XX(EDUPSEQ, -12, "duplicate or missing seq")                                                   \
    XX(ENOTFOUND, -13, "not found")                                                                \
    XX(ECLOSED, -14, "session is closed")                                                          \
    XX(EDISABLED, -15, "capture is disabled")                                                      \
    XX(EHDF5, -16, "HDF5 library error")                                                           \
    XX(ETHREAD, -17, "thread error")                                                               \
    XX(ERANGE, -18, "value out of range")                                                          \
    XX(EUNSUPPORTED, -19, "not supported")                                                         \
    XX(ENOSPC, -20, "no space left on device")                                                     \
    XX(EBUSY, -21, "called again while in use (from a signal handler?)")

typedef enum ulp_status {
#define ULP__STATUS_ENUM(name, code, msg) ULP_##name = (code),
    ULP_STATUS_MAP(ULP__STATUS_ENUM)
#undef ULP__STATUS_ENUM
} ulp_status;

/* The static message for a status; "unknown status" for codes not in the map. */
ULP_API const char *ulp_status_str(ulp_status status);

/* The symbolic name of a status ("ULP_EFORMAT"), for logs and tests. */
ULP_API const char *ulp_status_name(ulp_status status);

/*
 * An error with its detail.  `msg` holds one line without a trailing
 * newline, in git's style: "cannot open 'x.h5': not an HDF5 file".
 */
#define ULP_ERROR_MSG_MAX 512
typedef struct ulp_error {
    ulp_status status;
    char msg[ULP_ERROR_MSG_MAX];
} ulp_error;

/* Resets an error to ULP_OK with an empty message.  NULL is accepted. */
ULP_API void ulp_error_clear(ulp_error *err);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_STATUS_H */

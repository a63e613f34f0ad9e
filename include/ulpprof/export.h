/* Symbol visibility for the ulpprof libraries (built with hidden visibility). */
#ifndef ULPPROF_EXPORT_H
#define ULPPROF_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define ULP_API __attribute__((visibility("default")))
#else
#define ULP_API
#endif

#define ULP_VERSION_MAJOR  0
#define ULP_VERSION_MINOR  2
#define ULP_VERSION_PATCH  0
#define ULP_VERSION_STRING "0.2.0"

/* The snapshot format version this build writes and the highest it reads. */
#define ULP_FORMAT_VERSION 1

#endif /* ULPPROF_EXPORT_H */

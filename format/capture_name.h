/* The capture-name rule of the collector.  Internal to the collector. */
#ifndef ULPPROF_FORMAT_CAPTURE_NAME_H
#define ULPPROF_FORMAT_CAPTURE_NAME_H

/*
 * Whether `name` can be a capture name: not empty, no '/', not "." or "..",
 * valid UTF-8 without control characters below 0x20.
 */
int ulp__capture_name_ok(const char *name);

#endif /* ULPPROF_FORMAT_CAPTURE_NAME_H */

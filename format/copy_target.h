/*
 * The file a copy of a snapshot writes (ulp_snapshot_copy, its digest
 * rendition): created here, never over one that exists, and removed on
 * failure only while it is still the file this call made.
 */
#ifndef ULPPROF_FORMAT_COPY_TARGET_H
#define ULPPROF_FORMAT_COPY_TARGET_H

#include <sys/stat.h>

#include "ulpprof/status.h"

/* Creates `path` empty (O_EXCL) and records its identity in *made.  A path
 * that exists is refused, so that the copy's file is ours to remove. */
ulp_status ulp__copy_target_create(const char *path, struct stat *made, ulp_error *err);

/* Removes `path` if it is still the file that *made recorded. */
void ulp__copy_target_remove(const char *path, const struct stat *made);

#endif

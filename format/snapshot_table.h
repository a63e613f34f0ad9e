/*
 * Reading the 1-D tables of /trace (FORMAT.md), for the kernel trace
 * (snapshot_trace.c) and the GEMM calls (snapshot_gemms.c).  Uses nothing
 * of the reader but the snapshot's fields and its size check.  Not
 * installed.
 */
#ifndef ULPPROF_FORMAT_SNAPSHOT_TABLE_H
#define ULPPROF_FORMAT_SNAPSHOT_TABLE_H

#include <hdf5.h>
#include <stddef.h>

#include "snapshot_priv.h"

/*
 * Opens the 1-D /trace dataset `path`, whose type must be of class `cls`
 * (described as `kind` in the error), and refuses a declared length that no
 * file of this size can hold -- before anything is allocated for it.  A row
 * takes `row_bytes` in the file, or the type's size when 0.  On success *d,
 * *type and *n are the caller's to close; *d < 0 when the file has no such
 * dataset.  On error nothing is left open.
 */
ulp_status ulp__trace_open_table(ulp_snapshot *s, const char *path, H5T_class_t cls,
                                 const char *kind, size_t row_bytes, hid_t *d, hid_t *type,
                                 hssize_t *n, ulp_error *err);

/* A table of compound rows, each field matched by name in the file. */
typedef struct ulp__trace_table {
    const char *path; /* "/trace/kernels"                       */
    size_t row_size;  /* of the memory row the fields fill        */
    size_t info_size; /* of the public row the caller fills       */
    /* Field `i`'s name and offset in the memory row. */
    void (*field)(size_t i, const char **name, size_t *offset);
    /* 1 with *memt the memory type that reads field `i` from a file member
     * of type `ft` (-1 on an HDF5 failure), or 0 when `ft` cannot hold the
     * field, with *want what it must be ("an integer"). */
    int (*member)(size_t i, hid_t ft, hid_t *memt, const char **want);
} ulp__trace_table;

/*
 * Reads table `t` of `nfields` fields: *rows its *n memory rows (absent
 * fields 0), *info *n zeroed public rows for the caller to fill; both the
 * caller's to free.  Absent table: ULP_OK with *rows NULL.  On error both
 * are NULL.
 */
ulp_status ulp__trace_read_table(ulp_snapshot *s, const ulp__trace_table *t, size_t nfields,
                                 void **rows, void **info, hssize_t *n, ulp_error *err);

#endif

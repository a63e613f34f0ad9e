/*
 * A capture as the writer stores it: the fields of the caller's
 * ulp_capture_desc (ulpprof/capture.h) and of the CUDA collector's
 * ulp_capture_device_ext (ulpprof/capture_device.h) in one flat struct of
 * this library's own layout.  The session builds one from the caller's
 * structs (each read by its struct_size); the CUDA collector fills one
 * directly.  Internal to the collector: its layout may change freely.
 */
#ifndef ULPPROF_FORMAT_CAPTURE_DESC_H
#define ULPPROF_FORMAT_CAPTURE_DESC_H

#include <stdint.h>

#include "ulpprof/dtype.h"
#include "ulpprof/format.h"

typedef struct ulp__desc {
    /* ulp_capture_desc's */
    const char *name;
    const void *data;
    ulp_dtype dtype;
    int ndim;
    const int64_t *shape;
    int32_t layer;
    ulp_role role;
    int64_t step;
    int64_t time_ns;
    const int64_t *positions;
    const int64_t *requests;
    int32_t row_rank;
    int32_t n_inputs;
    const char *const *inputs;
    /* ulp_capture_device_ext's */
    int has_kernels;
    int64_t kernels[2];
    uint64_t device_ptr;
    uint64_t stream;
    int has_gemms;
    int64_t gemms[2];
    int has_graph_replay;
    int64_t graph_replay[2];
} ulp__desc;

/* The defaults of ulp_capture_desc_init(), every device field absent. */
void ulp__desc_init(ulp__desc *d);

/* The writer's descriptor of a capture a reader found, as its producer passed it (its data
 * pointer NULL; strings and rows point into `c`). */
struct ulp_capture_info;
void ulp__desc_of_capture(const struct ulp_capture_info *c, ulp__desc *d);

#endif /* ULPPROF_FORMAT_CAPTURE_DESC_H */

/*
 * One kernel launch as the collector keeps it, decoded from a CUPTI
 * activity record.  Decoding is a pure function of the record (plus the C++
 * demangler found at run time), so tests feed it synthetic records.
 */
#ifndef ULPPROF_CUDA_KERNEL_H
#define ULPPROF_CUDA_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>

#include "ulpprof/status.h"

typedef struct ulp__cuda_kernel {
    uint32_t correlation_id; /* of the API call that launched it */
    char *name;              /* demangled (or as given); owned, malloc'd */
    int32_t grid[3];
    int32_t block[3];
    int32_t shared_static;  /* bytes */
    int32_t shared_dynamic; /* bytes */
    int32_t registers;      /* per thread */
    uint32_t stream_id;     /* CUPTI stream id (not a CUstream value) */
    uint32_t device;
    uint32_t context_id;
    uint64_t start_ns; /* CUPTI timestamps; 0 when CUPTI had none */
    uint64_t end_ns;
    uint64_t graph_node_id; /* 0 outside CUDA graphs */
} ulp__cuda_kernel;

/*
 * Decodes a CONCURRENT_KERNEL (or KERNEL) record.  `out->name` is a new
 * string the caller frees with free(); ULP_ENOMEM leaves it NULL.
 */
ulp_status ulp__cuda_kernel_decode(const CUpti_ActivityKernel10 *rec, ulp__cuda_kernel *out);

/*
 * Demangles a C++ symbol with the process's __cxa_demangle (looked up at
 * run time, so nothing links libstdc++).  Returns a malloc'd string: the
 * demangled name, or a copy of `mangled` when it is not a C++ name or no
 * demangler is present.  NULL only when out of memory; "" for NULL input.
 */
char *ulp__cuda_demangle(const char *mangled);

/* Frees the names of `n` kernels (the structs belong to the caller). */
void ulp__cuda_kernels_release(ulp__cuda_kernel *k, size_t n);

#endif /* ULPPROF_CUDA_KERNEL_H */

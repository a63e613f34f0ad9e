/*
 * CUPTI, bound at run time (dlopen of libcupti.so.13): the kernel activity
 * trace, the correlation id of the collector's own copies, and tracking of
 * CUDA-graph stream captures.  Process-wide: there is one CUPTI.
 */
#ifndef ULPPROF_CUDA_CUPTI_H
#define ULPPROF_CUDA_CUPTI_H

#include <stdint.h>

#include "cuda_devcap.h"
#include "cuda_ops.h"
#include "cuda_trace.h"
#include "ulpprof/status.h"

/*
 * Loads CUPTI, subscribes and enables the kernel trace into `trace`.  Call
 * it from InitializeInjection (inside the first cuInit).  On failure
 * (library missing, another subscriber such as Nsight or torch.profiler)
 * nothing stays enabled and `err` says why; the caller warns once.
 */
ulp_status ulp__cupti_start(ulp__cuda_trace *trace, int gemms, ulp_error *err);

/* 1 once ulp__cupti_start() succeeded. */
int ulp__cupti_active(void);

/* The hooks for cuda_devcap.c (all NULL when CUPTI is not active). */
void ulp__cupti_hooks(ulp__cuda_hooks *out);

/* The device capture whose graph taps follow CUDA graphs through the
 * callbacks (cuda_graphcb.h); NULL stops that. */
void ulp__cupti_set_devcap(ulp__devcap *dc);

/* Brackets a cuBLAS call on this thread: gemm_end gives the first and
 * last correlation ids of the kernel launches made inside (0, 0: none
 * seen).  Launch callbacks are enabled by ulp__cupti_start when `gemms`. */
void ulp__cupti_gemm_begin(void);
void ulp__cupti_gemm_end(uint32_t *first, uint32_t *last);

/* Delivers buffered kernel records: forced (incomplete buffers too) or not. */
void ulp__cupti_flush(int forced);

/* Records CUPTI reported as dropped (buffers full), so far. */
uint64_t ulp__cupti_dropped(void);

/* CUPTI's API version (cuptiGetVersion); 0 when unknown. */
uint32_t ulp__cupti_version(void);

#endif /* ULPPROF_CUDA_CUPTI_H */

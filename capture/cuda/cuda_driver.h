/*
 * Run-time binding of the CUDA driver: fills an ops table from the
 * libcuda.so.1 of the process with dlopen/dlsym, so that the collector
 * links no CUDA library and loads on machines without a driver.
 */
#ifndef ULPPROF_CUDA_DRIVER_H
#define ULPPROF_CUDA_DRIVER_H

#include "cuda_ops.h"
#include "ulpprof/status.h"

/*
 * Fills `ops` from libcuda.so.1: the copy already loaded in the process, or
 * (when `load` is 1) one loaded now.  ULP_ENOENT when there is none,
 * ULP_EUNSUPPORTED when a required symbol is missing; `err` says which.
 */
ulp_status ulp__cuda_driver_bind(ulp__cuda_ops *ops, int load, ulp_error *err);

#endif /* ULPPROF_CUDA_DRIVER_H */

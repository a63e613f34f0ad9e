/*
 * The CUPTI callbacks that follow a CUDA graph's life for the graph taps
 * (cuda_graphcap.h): end of stream capture (driver cuStreamEndCapture: the
 * capture id at entry, the CUgraph or the error at exit), clone, graph and
 * executable creation and destruction (resource domain), and launches
 * (driver cuGraphLaunch: the gate at entry, the harvest at exit).  The
 * runtime's calls reach the driver, so the driver domain sees them all.
 *
 * A pure function of the callback data and the devcap, so that tests feed
 * it CUPTI's structures without CUPTI.
 */
#ifndef ULPPROF_CUDA_GRAPHCB_H
#define ULPPROF_CUDA_GRAPHCB_H

#include <stddef.h>

#include <cupti.h>

#include "cuda_devcap.h"

/* The driver-domain and resource-domain callback ids to enable. */
extern const CUpti_CallbackId ulp__graphcb_driver_ids[];
extern const size_t ulp__graphcb_driver_count;
extern const CUpti_CallbackId ulp__graphcb_resource_ids[];
extern const size_t ulp__graphcb_resource_count;

/* Handles one callback; returns 1 when it was one of ours.  `dc` may be
 * NULL (no device capture yet: nothing to follow). */
int ulp__graphcb_handle(ulp__devcap *dc, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                        const void *cbdata);

#endif /* ULPPROF_CUDA_GRAPHCB_H */

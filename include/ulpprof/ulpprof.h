/*
 * ulpprof: every public header in one.  A program may include this alone,
 * or only the headers of the libraries it links (find_package(ulpprof)):
 *   ulpprof::capture   capture.h, capture_device.h (the CUDA collector)
 *   ulpprof::analyzer  snapshot.h, diff.h, ladder.h, kernels.h, sites.h,
 *                      format.h, dtype.h
 *   ulpprof::reports   report.h
 *   ulpprof::plots     plot.h
 *   ulpprof::contract  contract.h (numeric contracts)
 * and status.h, export.h, shared by all; refmodel.h is the reference
 * model of the workload/ library.
 */
#ifndef ULPPROF_ULPPROF_H
#define ULPPROF_ULPPROF_H

#include "ulpprof/capture.h"
#include "ulpprof/capture_device.h"
#include "ulpprof/contract.h"
#include "ulpprof/diff.h"
#include "ulpprof/dtype.h"
#include "ulpprof/export.h"
#include "ulpprof/format.h"
#include "ulpprof/kernels.h"
#include "ulpprof/ladder.h"
#include "ulpprof/plot.h"
#include "ulpprof/refmodel.h"
#include "ulpprof/report.h"
#include "ulpprof/sites.h"
#include "ulpprof/snapshot.h"
#include "ulpprof/status.h"

#endif /* ULPPROF_ULPPROF_H */

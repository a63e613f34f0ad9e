/*
 * Captures inside CUDA graphs ("taps"), written against the ops table so
 * that tests drive it with a fake driver.
 *
 * A mark on a stream that is capturing a graph does not copy anything now:
 * it enqueues cuMemcpyDtoHAsync from the tensor into a pinned slot of its
 * own, which stream capture turns into a copy node of the graph.  Every
 * replay of the graph then rewrites the slot.  The collector follows the
 * graph's life through CUPTI callbacks (end of capture -> CUgraph,
 * instantiation -> CUgraphExec, launches, destruction), and after each
 * launch of an executable with taps it harvests the slots in capture order:
 * one capture per tap and replay, with the replay's index and step.
 *
 * Memory: slots are pinned host memory, one per tap, held while a graph or
 * an executable made from it lives, and bounded in total (`bound_bytes`);
 * a tap past the bound is refused and counted.  No device memory is used.
 *
 * The gate: a replay may not rewrite slots the collector has not yet read.
 * Launching an executable again waits, on the host, until the previous
 * replay of that executable is harvested (the harvest waits for that replay
 * to finish on the GPU).  Engines that read their results every step (the
 * sampled token) wait for that anyway.
 *
 * Driver calls that stream capture calls "potentially unsafe" (allocating
 * and freeing pinned memory) are made with the thread's capture mode
 * exchanged to RELAXED and restored afterwards, so that the application's
 * capture, in any mode, is not invalidated by the collector.
 */
#ifndef ULPPROF_CUDA_GRAPHCAP_H
#define ULPPROF_CUDA_GRAPHCAP_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_ops.h"
#include "format/capture_desc.h"
#include "ulpprof/capture.h"

typedef struct ulp__graphcap ulp__graphcap;

typedef struct ulp__graph_tap {
    struct ulp__graph_tap *next;
    ulp__desc d; /* name and shape point into this tap; data NULL;
                           gemms: the GEMM calls made while capturing */
    char *name;
    int64_t shape[ULP_MAX_RANK];
    void *slot;    /* pinned; the graph's copy node writes it */
    size_t nbytes; /* bytes of the tensor */
} ulp__graph_tap;

/* One launch of an executable with taps, to harvest after it finished. */
typedef struct ulp__graph_replay {
    const ulp__graph_tap *taps; /* in capture order */
    uint64_t graph_id;          /* the stream-capture id that made the graph */
    uint64_t index;             /* launches of this executable before this one */
    void *exec_entry;           /* private */
} ulp__graph_replay;

typedef struct ulp__graphcap_stats {
    uint64_t taps;       /* copy nodes added to graphs */
    uint64_t over_bound; /* marks refused: the slots would pass the bound */
    uint64_t tap_failed; /* a driver call failed while tapping */
    uint64_t discarded;  /* taps of captures that ended in error */
    uint64_t replays;    /* launches harvested (or being harvested) */
    uint64_t nested;     /* launches into another capture: not harvested */
    uint64_t slot_bytes; /* pinned bytes held now */
} ulp__graphcap_stats;

/* Sets the calling thread's capture mode to RELAXED; returns the previous
 * one for ulp__cuda_mode_restore.  *ok is 0 when the driver lacks it. */
CUstreamCaptureMode ulp__cuda_mode_relax(const ulp__cuda_ops *ops, int *ok);
void ulp__cuda_mode_restore(const ulp__cuda_ops *ops, CUstreamCaptureMode m, int ok);

/* 1 when `ops` has what taps need (capture info and mode exchange). */
int ulp__graphcap_supported(const ulp__cuda_ops *ops);

ulp_status ulp__graphcap_create(const ulp__cuda_ops *ops, size_t bound_bytes, ulp__graphcap **out);

/* Frees every slot and record.  NULL is accepted. */
void ulp__graphcap_free(ulp__graphcap *g);

/*
 * Adds the copy node of one tap to the capture `capture_id` that `stream`
 * is part of.  Returns ULP_OK, ULP_ERANGE past the bound, ULP_EIO when a
 * driver call failed (the capture may then be invalidated by the driver;
 * the tap is not kept).  `gemms` may be NULL.
 */
ulp_status ulp__graphcap_tap(ulp__graphcap *g, const ulp__desc *d, uint64_t ptr, size_t nbytes,
                             CUstream stream, uint64_t capture_id, const int64_t *gemms);

/* The capture `capture_id` ended: made `graph`, or failed (graph NULL). */
void ulp__graphcap_capture_ended(ulp__graphcap *g, uint64_t capture_id, CUgraph graph);
void ulp__graphcap_graph_cloned(ulp__graphcap *g, CUgraph original, CUgraph clone);
void ulp__graphcap_graph_destroyed(ulp__graphcap *g, CUgraph graph);
void ulp__graphcap_exec_created(ulp__graphcap *g, CUgraph graph, CUgraphExec exec);
void ulp__graphcap_exec_destroyed(ulp__graphcap *g, CUgraphExec exec);

/* Before a launch of `exec`: waits until its previous replay is harvested. */
void ulp__graphcap_launch_wait(ulp__graphcap *g, CUgraphExec exec);

/*
 * After a successful launch of `exec`: a replay to harvest once the launch
 * finished, or NULL when the executable has no taps.  The caller hands it
 * back with ulp__graphcap_replay_done() on every path.
 */
ulp__graph_replay *ulp__graphcap_launched(ulp__graphcap *g, CUgraphExec exec);

/* The slots of `r` were read (or given up): the next launch may go. */
void ulp__graphcap_replay_done(ulp__graphcap *g, ulp__graph_replay *r);

/* A launch into another stream capture: counted, not harvested. */
void ulp__graphcap_count_nested(ulp__graphcap *g);

void ulp__graphcap_get_stats(ulp__graphcap *g, ulp__graphcap_stats *out);

#endif /* ULPPROF_CUDA_GRAPHCAP_H */

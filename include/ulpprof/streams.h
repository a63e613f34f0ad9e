/*
 * ulpprof streams: the generations of many runs (FORMAT.md "Produced
 * tokens"): per request, the distinct completions and how many runs gave
 * each, and where each parts from the most common one (step, tokens, the
 * top-2 margins there).
 */
#ifndef ULPPROF_STREAMS_H
#define ULPPROF_STREAMS_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/export.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One distinct completion of a request. */
typedef struct ulp_streams_group {
    size_t n_runs;
    size_t *runs; /* run indices, ascending; runs[0] speaks for the group  */
    size_t n_tokens;
    const int64_t *tokens;        /* the produced tokens, step 0 first                 */
    const double *margins;        /* top-1 minus top-2 at each step (runs[0]'s)         */
    int common;                   /* the most common completion (ties: lowest run)      */
    int64_t part_step;            /* first step where it differs from the common one,
                                     or where one of them ends; -1 for the common one    */
    int64_t token, token_common;  /* the tokens at part_step (-1: past the end)    */
    double margin, margin_common; /* their margins there (NaN past the end)       */
    const int64_t *positions;     /* the position of each step's logits (runs[0]'s)    */
} ulp_streams_group;

typedef struct ulp_streams_request {
    int64_t request;
    size_t n_runs; /* runs that produced tokens for it                       */
    size_t n_groups;
    ulp_streams_group *groups; /* by count, descending (ties: lowest run)     */
    size_t n_hist;
    size_t *hist; /* hist[s]: runs parting from the common completion at step s */
    /* Which request it is in each run that gave tokens for it (by_prompt: the numbers may
     * differ run to run; `request` is the first run's), runs ascending: */
    size_t *present_runs;
    int64_t *present_requests;
    size_t n_missing;
    size_t *missing_runs; /* the runs that gave no tokens for it, ascending  */
} ulp_streams_request;

typedef struct ulp_streams_result {
    size_t n_runs;
    char **paths; /* the file read for each run                            */
    size_t n_requests;
    ulp_streams_request *requests; /* by first run, then its request id    */
    int by_prompt;                 /* 1: requests identified across runs by their prompt
                                      tokens; 0: by their number (no run records token ids) */
    char *ids_name;                /* by_prompt: the fed token ids' name (the first run's)  */
} ulp_streams_result;

/*
 * Reads the produced tokens of each snapshot file and groups them.  A file
 * that cannot be read, or that records no produced tokens, is an error
 * naming it.  When the runs record fed token ids (FORMAT.md "Produced
 * tokens": "Requests across runs"), a request is identified across runs by
 * its prompt: the tokens fed up to the position of its first produced
 * token; two requests of one run with the same prompt stay apart, paired
 * across runs in the order they appear.  Some runs with token ids and
 * others without, or a request with produced tokens and no fed token
 * there, is an error naming the file.  Else requests are identified by
 * their number.
 */
ULP_API ulp_status ulp_streams_group_runs(const char *const *paths, size_t n,
                                          ulp_streams_result **out, ulp_error *err);
ULP_API void ulp_streams_result_free(ulp_streams_result *r);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_STREAMS_H */

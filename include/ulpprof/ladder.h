/*
 * ulpprof ladder: compares every pair of N runs and says, rung by rung of
 * the determinism ladder (0 repeat, 1 batch size, 2 cache, 3 block size /
 * chunking, 4 parallelism, 5 quantization, 6 engine, 7 vendor/device), which
 * knob breaks bit-equality and where.
 *
 * A run is one snapshot file, or a directory of per-rank files of one
 * multi-process run (their /env `rank`, else their order by file name).
 * Two runs are compared rank by rank, over the ranks both have, with
 * ulp_diff_run() -- the compare `ulpprof diff` does.  A pair is identical
 * when every compared rank pair is and both runs have the same ranks; a
 * rank only one run has is listed, not compared, and makes the pair differ
 * (as a capture only one file has does).
 *
 * The pair's /run keys whose values differ (diff.h's ladder) name the
 * rungs it tests.  A pair decides a rung when that is the only rung among
 * its differing keys and every other differing key is ignored (options);
 * a pair with no differing key at all decides rung 0 (a repeat).  When
 * several keys of that rung differ (cache and split), the pair decides it
 * only if the runs differ: identical runs may come from changes that
 * cancel, so a rung holds only from pairs that vary one key.  A rung
 * holds when every pair deciding it is identical, breaks when one is not,
 * and is untested when no pair decides it.  An identical pair that
 * compared no element (every capture empty) decides nothing.  Pairs that differ in several
 * rungs, or in a key without a rung, are reported and decide nothing.
 */
#ifndef ULPPROF_LADDER_H
#define ULPPROF_LADDER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ulpprof/diff.h"
#include "ulpprof/digest.h"
#include "ulpprof/export.h"
#include "ulpprof/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ULP_LADDER_RUNGS      8  /* rungs 0..7                                  */
#define ULP_LADDER_MAX_IGNORE 32 /* ignored /run keys                           */

typedef enum ulp_ladder_verdict {
    ULP_LADDER_UNTESTED = 0, /* no pair decides the rung                      */
    ULP_LADDER_HOLDS,        /* every deciding pair is bitwise identical      */
    ULP_LADDER_BREAKS        /* some deciding pair differs                    */
} ulp_ladder_verdict;

/* "untested", "holds", "breaks". */
ULP_API const char *ulp_ladder_verdict_name(ulp_ladder_verdict v);

/*
 * Sized as ulpprof/capture.h says (struct_size, set by _init()); the first
 * version ends at `diff`.  The per-pair options are a pointer, not a copy,
 * so that each of the two structs grows by its own struct_size.
 */
typedef struct ulp_ladder_options {
    size_t struct_size;                        /* sizeof(ulp_ladder_options), set by _init()      */
    const ulp_diff_options *diff;              /* per pair, read by its own struct_size; NULL:
                                                  ulp_diff_options_init()'s with threads 1
                                                  (the first version ends here)               */
    const char *ignore[ULP_LADDER_MAX_IGNORE]; /* /run keys that describe a run
                                                  rather than set a condition   */
    int n_ignore;
    int jobs;     /* pairs compared at once; 0: online CPUs, at most 16 */
    int progress; /* 1: progress on stderr                               */
    /* Added in the second version.  `open`, when set, opens every file of
     * every run in place of ulp_snapshot_open(), each file once and in run
     * order, on the calling thread (a program's guard against a damaged
     * file, its warnings).  `left_out`, when set, is told each run that
     * cannot be read (a file that does not open, a directory without
     * snapshots, two files of one rank: `err` names it) and the ladder goes
     * on without it; the result's runs are the others, in order, and fewer
     * than 2 of them is an error.  NULL: such a run fails the ladder. */
    ulp_status (*open)(void *user, const char *path, ulp_snapshot **s, ulp_error *err);
    void (*left_out)(void *user, const char *path, const ulp_error *err);
    void *user; /* passed to open and left_out                         */
} ulp_ladder_options;

/*
 * Fills the caller's `opts` of `size` bytes (its sizeof) with the defaults
 * above; ULP_EINVAL below the first version's size.  The macro passes
 * sizeof *opts.
 */
ULP_API ulp_status ulp_ladder_options_init_sized(ulp_ladder_options *opts, size_t size);
#define ulp_ladder_options_init(opts) ((void)ulp_ladder_options_init_sized((opts), sizeof *(opts)))

/* One file of a run. */
typedef struct ulp_ladder_file {
    char *path;
    int rank; /* /env rank; else its index by file name          */
} ulp_ladder_file;

typedef struct ulp_ladder_run {
    char *path;  /* as given                                        */
    char *label; /* the first file's label                          */
    size_t n_files;
    ulp_ladder_file *files; /* by rank                                         */
    size_t n_run;
    ulp_kv *run;  /* /run of the first file, sorted by key           */
    size_t group; /* index of its group of bitwise-identical runs   */
} ulp_ladder_run;

/* Where a pair first diverges. */
typedef struct ulp_ladder_divergence {
    char *capture;      /* capture name                                    */
    int64_t occurrence; /* -1: found by row digests (a digest-only side): the
                           digest keys span occurrences, and `differing` counts
                           rows, `elements` rows compared, no ULP numbers     */
    int32_t layer;      /* -1 when absent                                  */
    int rank;           /* the rank pair it was found in                   */
    ulp_diff_status status;
    uint64_t differing, elements;
    uint64_t max_ulp;
    int64_t row;      /* the row of the first differing element, along axis 0 (over
                         the row axes when A's capture has positions); -1 for an
                         aligned row (both sides have positions: the diff pairs
                         rows by token, see `position`), a shape or dtype
                         mismatch, or a scalar                               */
    int64_t request;  /* the first differing (request, position) key of an aligned
                         row (the diff's); else the request and position of  */
    int64_t position; /* `row` in A when A records them; -1 when unknown      */
} ulp_ladder_divergence;

typedef struct ulp_ladder_pair {
    size_t a, b; /* run indices, a < b                              */
    int identical;
    size_t n_keys;
    ulp_diff_run_key *keys; /* /run keys whose values differ, sorted           */
    unsigned rungs;         /* bit L: a key of rung L differs (ignored keys not) */
    int uncontrolled;       /* a key without a rung, not ignored, differs      */
    int rung;               /* the rung the pair decides, or ULP_DIFF_LADDER_NONE */
    size_t n_ranks;         /* rank pairs compared                             */
    size_t ranks_only_a, ranks_only_b;
    size_t rows, differing_rows; /* over the rank pairs                         */
    int has_first;
    ulp_ladder_divergence first;
    uint64_t argmax_flips; /* over logits captures and rank pairs            */
    uint64_t logits_rows;
    uint64_t elements_compared; /* over the rank pairs (ulp_diff_result's); an
                                   identical pair with 0 decides no rung       */
    int verdict;                /* ulp_verdict_kind (ulpprof/verdict.h) over the rank pairs:
                                   defect when one is, else rounding or unknown; 0 identical */
    int cache_witness;          /* ulp_cache_witness: taken when a rank pair's side took
                                   positions from its cache; none when a pair on the cache
                                   rung shows neither did: it decides nothing            */
    char *contract_word;        /* with a contract (ulp_contract_judge_ladder()): "bug", "kept"
                                   or "not promised"; NULL without one                       */
    char *contract_text;        /* what the word rests on; NULL without a contract           */
    /* A pair compared by digest (a side digest-only) whose token streams part: the
     * rows of a request at and after its parting position were fed other tokens, so
     * they are not compared (not in `rows`/`differing_rows`, nor the first divergence,
     * which is then the first activation difference before the parting). */
    int streams_part;         /* 1: some request's fed tokens differ                 */
    size_t parted_requests;   /* requests whose streams part (over the rank pairs)   */
    ulp_digest_part part;     /* the first of them (the lowest-numbered request of the
                                 first rank pair where one parts); valid when
                                 streams_part                                        */
    int part_rank;            /* the rank pair `part` was found in                   */
    uint64_t rows_after_part; /* A's digest rows at or after a parting: not compared */
} ulp_ladder_pair;

typedef struct ulp_ladder_rung {
    int level;
    const char *name; /* "repeat", "batch size", ...                     */
    size_t n_keys;
    char **keys; /* keys of this rung whose values vary, sorted     */
    int varied;  /* some pair tests this rung (alone or not)        */
    ulp_ladder_verdict verdict;
    size_t n_deciding, n_breaking, n_mixed; /* pairs: deciding it, of them not identical,
                                               testing it with another rung or key */
    int has_first_break;
    size_t first_break;   /* pair index: of the breaking pairs, the one that
                             diverges at the lowest layer (then the first)   */
    size_t n_empty;       /* identical pairs testing it that compared no
                             element (every capture empty): they decide nothing */
    size_t n_unwitnessed; /* rung 2: pairs whose cache witness is none (neither
                             side took a position from its cache): they decide
                             nothing                                         */
} ulp_ladder_rung;

/* The compares behind a result's pairs (the library's, opaque). */
struct ulp__ladder_store;

typedef struct ulp_ladder_result {
    size_t n_runs;
    ulp_ladder_run *runs;
    size_t n_pairs;         /* n_runs (n_runs - 1) / 2                         */
    ulp_ladder_pair *pairs; /* (0,1), (0,2), ..., (1,2), ...: a < b.  NULL after
                               ulp_ladder_compare(), which keeps one summary per
                               compare, not per pair: read pair j with
                               ulp_ladder_result_pair(); ulp_ladder_result_expand()
                               fills this array (n_pairs entries)               */
    size_t n_groups;        /* groups of bitwise-identical runs               */
    ulp_ladder_rung rungs[ULP_LADDER_RUNGS];
    char *ignore[ULP_LADDER_MAX_IGNORE];
    int n_ignore;
    double seconds;
    struct ulp__ladder_store *store;      /* NULL in a result built by hand          */
    size_t rung_parted[ULP_LADDER_RUNGS]; /* of rung L's breaking pairs, those whose
                                             token streams part (found by tokens)     */
} ulp_ladder_result;

/* Index of pair (a, b), a != b, in result->pairs. */
ULP_API size_t ulp_ladder_pair_index(size_t n_runs, size_t a, size_t b);

/*
 * Pair j (0 <= j < n_pairs) of a result: &r->pairs[j] when the array is
 * there, else built from the compare of the pair's classes (bitwise-
 * identical runs compare alike) with the pair's own runs, /run keys and
 * rung, into storage of r's: the pointer is valid until the next call
 * with r, which must not run concurrently with another.  A ladder of N
 * runs in K classes keeps O(N + K^2) summaries, not N^2/2 pairs.  NULL
 * when j is out of range.
 */
ULP_API const ulp_ladder_pair *ulp_ladder_result_pair(const ulp_ladder_result *r, size_t j);

/*
 * Fills r->pairs with every pair (each owning its keys and strings), as a
 * contract judge needs to write a word on each: memory then grows with
 * n_pairs.  A no-op when r->pairs is there already.
 */
ULP_API ulp_status ulp_ladder_result_expand(ulp_ladder_result *r, ulp_error *err);

/*
 * Opens the runs (`paths`: snapshot files or directories of per-rank files;
 * at least 2), compares every pair and decides each rung.  On success *out
 * owns a new result (ulp_ladder_result_free()).  A file that cannot be
 * read, a directory without snapshots, two files of one rank, or a pair
 * with nothing to compare (no capture in either, or none selected) is an
 * error, with `err` naming the file or the pair.
 */
ULP_API ulp_status ulp_ladder_compare(const char *const *paths, size_t n,
                                      const ulp_ladder_options *opts, ulp_ladder_result **out,
                                      ulp_error *err);

/*
 * The runs in `dir`, in name order: every `*.h5` file is a run of one
 * process, every subdirectory holding `*.h5` files a multi-rank run.
 * *paths (an array of `*n` strings) is the caller's: free each, then it.
 */
ULP_API ulp_status ulp_ladder_list_dir(const char *dir, char ***paths, size_t *n, ulp_error *err);

/*
 * The files of one run: a snapshot file, or a directory of per-rank files
 * ordered by rank (see above).  *files ([*n], each path malloc'd) is the
 * caller's; release with ulp_ladder_files_free().
 */
ULP_API ulp_status ulp_ladder_run_files(const char *path, ulp_ladder_file **files, size_t *n,
                                        ulp_error *err);
ULP_API void ulp_ladder_files_free(ulp_ladder_file *files, size_t n);

/* Frees a result.  NULL is accepted. */
ULP_API void ulp_ladder_result_free(ulp_ladder_result *r);

#ifdef __cplusplus
}
#endif

#endif /* ULPPROF_LADDER_H */

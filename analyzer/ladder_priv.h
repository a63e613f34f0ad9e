/* Internals of `ulpprof ladder` (ladder_compare.c drives ladder_classes.c,
 * ladder_pairs.c and ladder_verdict.c). */
#ifndef ULPPROF_LADDER_PRIV_H
#define ULPPROF_LADDER_PRIV_H

#include "ulpprof/ladder.h"

/*
 * The runs being compared.  snaps[run][file] (rank order) is open only while
 * the run is needed: a class's first run stays open for the compares between
 * classes, every other run is opened to be hashed and checked against its
 * class's first run, then closed (NULL), so that memory grows with the
 * classes, not the runs.
 */
typedef struct ulp__ladder_ctx {
    ulp_ladder_result *r;
    ulp_snapshot ***snaps;
    /* digest[run][file]: 1 when that file holds row digests only
     * (ulp_digest_only()), asked once per file when the run is opened */
    unsigned char **digest;
    const ulp_ladder_options *opts;
    const ulp_diff_options *diff; /* opts->diff read by its size, or the default */
} ulp__ladder_ctx;

/*
 * Compares runs p->a and p->b (either order) rank by rank and fills p's
 * summary and keys (ladder_pairs.c).
 */
ulp_status ulp__ladder_compare_pair(const ulp__ladder_ctx *c, ulp_ladder_pair *p, ulp_error *err);

/*
 * Which compares the pairs need (ladder_classes.c), kept in the result as
 * its store (ladder.h).  Runs whose contents hash alike and that a compare
 * finds bitwise identical form a class; only one member of each class is
 * compared with each other class (`tasks`), and every pair is read as its
 * classes' task, or as the compare of its second run with its class's
 * first (`join`), with its own runs and /run keys (ladder_view.c).
 */
typedef struct ulp__ladder_store {
    size_t n_runs, n_classes;
    size_t *cls;           /* [n_runs] class of each run                    */
    size_t *rep;           /* [n_runs] first run of each class (n_classes)  */
    ulp_ladder_pair *join; /* [n_runs] run i against its class's first run  */
    size_t n_tasks;
    ulp_ladder_pair *tasks; /* rep of X (as A) against rep of Y              */
    size_t *task_of;        /* [n_classes^2] X*n+Y -> task index, or SIZE_MAX */
    ulp_ladder_pair view;   /* the pair ulp_ladder_result_pair() last built  */
    ulp_diff_run_key *keys; /* the view's keys: room for any two runs' /run  */
    uint64_t *hash;         /* [n_runs] while the classes are sorted out      */
    unsigned char *buf;     /* the hash's read buffer, as long               */
} ulp__ladder_store;
typedef ulp__ladder_store ulp__ladder_plan;

/*
 * The plan is made in three steps, so that each run is opened once: init
 * for n runs, then each run in order while it is open (its files in
 * c->snaps, which add closes unless the run is its class's first), then
 * build, once every run's /run is known: the compares between classes.
 */
ulp_status ulp__ladder_plan_init(ulp__ladder_plan *plan, size_t n, ulp_error *err);
ulp_status ulp__ladder_plan_add(const ulp__ladder_ctx *c, ulp__ladder_plan *plan, size_t run,
                                ulp_error *err);
ulp_status ulp__ladder_plan_build(const ulp__ladder_ctx *c, ulp__ladder_plan *plan, ulp_error *err);
void ulp__ladder_plan_release(ulp__ladder_plan *plan);

/*
 * Pair (a, b), a < b, of r into r's store's view: its classes' summary,
 * its runs, /run keys and rung.  `raw`: the rung as the keys give it,
 * before a pair that compared nothing or lacks a cache witness is taken
 * off it (ulp__ladder_decide() counts those apart).  Needs r->store.
 */
const ulp_ladder_pair *ulp__ladder_view(const ulp_ladder_result *r, size_t a, size_t b, int raw);
/* (a, b) of pair index j of n runs. */
void ulp__ladder_pair_runs(size_t n, size_t j, size_t *a, size_t *b);

/*
 * A pair's /run keys as one block (ladder_keys.c): copies of src[0..n).
 */
ulp_status ulp__ladder_keys_set(ulp_ladder_pair *p, const ulp_diff_run_key *src, size_t n,
                                ulp_error *err);
/* How a ladder opens a file: `open` (the options'), else ulp_snapshot_open(). */
typedef struct ulp__ladder_opener {
    ulp_status (*open)(void *user, const char *path, ulp_snapshot **s, ulp_error *err);
    void *user;
} ulp__ladder_opener;
/*
 * ulp_ladder_run_files(path) (ladder_runs.c); with `snaps`, every file is
 * also opened once through `o` and *snaps[0..n) holds them in the files'
 * (rank) order, the caller's to close.  Nothing is left open on error.
 */
ulp_status ulp__ladder_run_open(const char *path, const ulp__ladder_opener *o,
                                ulp_ladder_file **files, ulp_snapshot ***snaps, size_t *n,
                                ulp_error *err);
/* Closes run `run`'s files and sets snaps[run] to NULL (ladder_open.c). */
void ulp__ladder_close_run(const ulp__ladder_ctx *c, size_t run);
/* Frees what a pair owns: keys, first divergence name, contract word (ladder_keys.c). */
void ulp__ladder_pair_release(ulp_ladder_pair *p);

/*
 * Once every compare is done: the groups of bitwise-identical runs and
 * the verdict of each rung (ladder.h), over every pair's view.
 */
ulp_status ulp__ladder_decide(ulp_ladder_result *r, ulp_error *err);

#endif /* ULPPROF_LADDER_PRIV_H */

/*
 * The prompts of one run's requests, from its fed token ids (FORMAT.md
 * "Produced tokens", "Parted token streams"): what `ulpprof streams`
 * identifies a request by across runs (gen_prompts.c).
 */
#ifndef ULPPROF_GEN_PROMPTS_H
#define ULPPROF_GEN_PROMPTS_H

#include <stddef.h>
#include <stdint.h>

#include "ulpprof/snapshot.h"
#include "ulpprof/status.h"

/* One fed token of a request: the first capture (lowest seq) that feeds its position. */
typedef struct ulp__fed {
    int64_t request, position, token, seq;
    uint64_t row;
    int64_t step; /* that capture's `step`, -1 when it has none */
} ulp__fed;

typedef struct ulp__prompts {
    const char *name; /* the ids' name (into the snapshot), NULL: none recorded */
    ulp__fed *v;      /* by (request, position), one per key                   */
    size_t n;
} ulp__prompts;

/* A request's prompt: its fed tokens at positions up to `upto`, by position. */
typedef struct ulp__prompt {
    const ulp__fed *v;
    size_t n;
    int64_t seq; /* where it appears first: (seq, row) of its first fed token */
    uint64_t row;
} ulp__prompt;

/* The name of the run's fed token ids (into the snapshot), NULL when it records none. */
const char *ulp__prompts_name(const ulp_snapshot *s);
/* Whether every capture of `name`, at least one, holds fed token ids. */
int ulp__prompts_named(const ulp_snapshot *s, const char *name);

/* Reads the run's fed token ids; p->name NULL when it records none. */
ulp_status ulp__prompts_read(const ulp_snapshot *s, ulp__prompts *p, ulp_error *err);
/* As ulp__prompts_read, of the ids named `name`; p->name NULL when !ulp__prompts_named(). */
ulp_status ulp__prompts_read_named(const ulp_snapshot *s, const char *name, ulp__prompts *p,
                                   ulp_error *err);
void ulp__prompts_free(ulp__prompts *p);

/* The prompt of `request` up to position `upto` (n 0 when none is fed there). */
ulp__prompt ulp__prompts_get(const ulp__prompts *p, int64_t request, int64_t upto);

/* 2: the same (position, token) rows; 1: the same last position and the same token at every
 * position both feed; 0: another prompt. */
int ulp__prompts_match(const ulp__prompt *x, const ulp__prompt *y);

#endif /* ULPPROF_GEN_PROMPTS_H */

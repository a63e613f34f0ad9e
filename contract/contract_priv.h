/*
 * The contract library's shared pieces: the schema's field table, the
 * contract object, one run's observation, and the value helpers the
 * check and compare use.  docs/contract.md is the schema in words.
 */
#ifndef ULPPROF_CONTRACT_PRIV_H
#define ULPPROF_CONTRACT_PRIV_H

#include <jansson.h>
#include <stddef.h>

#include "ulpprof/contract.h"
#include "ulpprof/snapshot.h"

#define ULP__NO_RUNG 99 /* a field compare does not weigh (a description of the runs) */

/* One field of a group (identity, reduction, ...), or of a GEMM site (group "gemm"). */
typedef struct ulp__cfield {
    const char *group, *name;
    int rung;         /* lowest rung a difference between two producers breaks;
                         -1: not one producer's numerics at all (another model) */
    int digest;       /* 1: part of numerical_policy                           */
    const char *keys; /* where a snapshot shows it: "run:K", "env:K", "observed:K",
                         space-separated; "" none (besides "<group>.<name>")    */
} ulp__cfield;

extern const ulp__cfield ulp__cfields[]; /* the plain groups' fields       */
extern const size_t ulp__n_cfields;
extern const ulp__cfield ulp__csite[]; /* the fields of one GEMM site    */
extern const size_t ulp__n_csite;
extern const char *const ulp__cgroups[]; /* the plain groups, in order     */
extern const size_t ulp__n_cgroups;

struct ulp_contract {
    json_t *root;    /* normalized: every field an object {source, value[, declared]} */
    char digest[72]; /* "sha256:" + 64 hex                                           */
};

/* `v` without its const: jansson's iterators and setters take json_t *. */
static inline json_t *ulp__mut(const json_t *v)
{
    union {
        const json_t *c;
        json_t *m;
    } u = {v};
    return u.m;
}

/* A new contract owning `root` (validated, normalized), with its digest made. */
ulp_contract *ulp__contract_wrap(json_t *root);
/* Validates and normalizes `root` in place; `what` names it in messages. */
ulp_status ulp__contract_validate(json_t *root, const char *what, ulp_error *err);
/* The canonical text (sorted keys, compact, ASCII) of `v`; free() it. */
char *ulp__canonical(const json_t *v);

/* A field's own table row, or NULL.  `group` "gemm" looks in the site table. */
const ulp__cfield *ulp__cfield_find(const char *group, const char *name);
/* "source" of a field object ("observed", "declared", "unobservable"). */
const char *ulp__field_source(const json_t *field);
/* What the field promises: its "declared", else its value; NULL when unobservable. */
const json_t *ulp__field_promise(const json_t *field);
/* Equality of two values, a string "16" equal to the number 16 and "true" to true. */
int ulp__value_equal(const json_t *a, const json_t *b);
/* `v` as short text for a report line (a string unquoted); free() it. */
char *ulp__value_text(const json_t *v);

/*
 * What one run shows: {"label": L, "run": {/run keys}, "identity": {...},
 * ..., "gemm": {site: {a_type, ..., configs: [...]}}}, values only.  A
 * directory of per-rank files is observed through every file (GEMM rows of
 * each; keys of the first).
 */
ulp_status ulp__contract_observe(const char *run, json_t **out, ulp_error *err);
/* Sorts an array in place: configurations by M, then everything by its canonical text. */
void ulp__sort_values(json_t *arr);
/* The observed value of "group.name" (or "gemm.SITE.name") in an observation, or NULL. */
const json_t *ulp__observed_at(const json_t *obs, const char *path);

/* One GEMM configuration as words: "M=15 small-M 16x64 split-K 4". */
char *ulp__config_text(const json_t *config);
/* The configuration without its shape (m, n, k, batch): what tile-invariance compares. */
/* 1 when two configurations are of one GEMM shape but for M: the same n, k
 * and batch (a key both lack counts as the same). */
int ulp__config_same_shape(const json_t *a, const json_t *b);
json_t *ulp__config_scheme(const json_t *config);

/* Whether run `obs` is within `claim` (scope, domain, requires); if not, `why` says
 * which condition.  check and the diff's verdict (contract_judge.c) use it. */
int ulp__contract_in_claim(const json_t *claim, const json_t *obs, char *why, size_t len);

/* The claims part of check (contract_claims.c): prints, returns 1 broken, 2 untested, 0 kept. */
ulp_status ulp__contract_check_claims(const json_t *root, const char *const *runs, size_t n,
                                      json_t *const *obs, FILE *out, int *worst, ulp_error *err);

/* Whether the claim admits a difference at all: its own tolerance, or a `tolerances`
 * entry of its rung (contract_tolerance.c). */
int ulp__contract_has_tolerance(const json_t *root, const json_t *claim);
/* Weighs a pair that differs against the claim's tolerance: the runs' files
 * rank by rank (files_a[i] against files_b[i]).  *within 1 when every differing
 * capture is admitted; `text` says "kept within tolerance: ..." or "beyond
 * tolerance: ...".  Errors are read failures. */
ulp_status ulp__contract_tolerance(const json_t *root, const json_t *claim,
                                   const char *const *files_a, const char *const *files_b,
                                   size_t n_files, int *within, char *text, size_t len,
                                   ulp_error *err);

#endif /* ULPPROF_CONTRACT_PRIV_H */

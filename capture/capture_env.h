/*
 * The environment side of a capture session, as pure functions (no I/O, no
 * global state; fuzzable): ULPPROF_OUTPUT pattern expansion, ULPPROF_ATTR
 * parsing, the rank, and the environment facts recorded in /env.
 * Internal to the collector.
 */
#ifndef ULPPROF_CAPTURE_CAPTURE_ENV_H
#define ULPPROF_CAPTURE_CAPTURE_ENV_H

#include <stddef.h>

#include "ulpprof/status.h"

/* Longest expanded output path, terminator included. */
#define ULP__PATH_MAX 4096

/* A list of owned key/value strings, in insertion order, keys unique. */
typedef struct ulp__kv_item {
    char *key;
    char *value;
} ulp__kv_item;

typedef struct ulp__kvlist {
    ulp__kv_item *items;
    size_t count;
    size_t cap;
} ulp__kvlist;

void ulp__kvlist_init(ulp__kvlist *l);
/* Frees the strings and the array.  NULL is accepted. */
void ulp__kvlist_release(ulp__kvlist *l);
/* Adds `key` or replaces its value (copies both).  ULP_ENOMEM on failure. */
ulp_status ulp__kvlist_set(ulp__kvlist *l, const char *key, const char *value);
/* The value of `key`, or NULL. */
const char *ulp__kvlist_get(const ulp__kvlist *l, const char *key);

/* What the % expansions of ULPPROF_OUTPUT stand for; NULL expands to "". */
typedef struct ulp__expand_vars {
    const char *pid;   /* %p */
    const char *rank;  /* %r */
    const char *host;  /* %h */
    const char *label; /* %l */
} ulp__expand_vars;

/*
 * Expands %p %r %h %l and %% of `pattern` into `out` (`size` bytes,
 * NUL-terminated).  ULP_EINVAL for an empty pattern, an unknown %x or a
 * trailing '%'; ULP_ERANGE when the result does not fit.  `err` says which.
 */
ulp_status ulp__output_expand(const char *pattern, const ulp__expand_vars *v, char *out,
                              size_t size, ulp_error *err);

/*
 * Parses "k=v,k=v" into `out` (appending; a repeated key keeps its last
 * value).  A backslash makes the next ',', '=' or '\' literal; before any
 * other character, or at the end, it is itself literal.  Blanks around
 * keys and values are trimmed.  Empty (or all-blank) items are ignored.
 * ULP_EINVAL for an item without '=' or with an empty key.
 */
ulp_status ulp__attr_parse(const char *spec, ulp__kvlist *out, ulp_error *err);

/* An environment lookup: the value of `name`, or NULL (getenv with a context). */
typedef const char *(*ulp__getenv_fn)(const char *name, void *ctx);

/* A lookup function over the process environment (ctx unused). */
const char *ulp__getenv_process(const char *name, void *ctx);

/*
 * The rank: the first non-empty of RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK,
 * else "0".  The returned string belongs to the environment (or is static).
 */
const char *ulp__env_rank(ulp__getenv_fn get, void *ctx);

/* NULL-terminated list of the numerics-relevant variables recorded in /env. */
extern const char *const ulp__env_numerics[];

/*
 * Fills `out` with the /env facts: `hostname`, `pid`, `rank`, and
 * `env:NAME` for each variable of ulp__env_numerics that is set.
 */
ulp_status ulp__env_collect(ulp__getenv_fn get, void *ctx, const char *host, const char *pid,
                            const char *rank, ulp__kvlist *out);

#endif /* ULPPROF_CAPTURE_CAPTURE_ENV_H */

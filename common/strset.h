/*
 * Distinct strings, each copied once, so that equal strings share one
 * pointer: the names and roles of a diff result, and those a snapshot
 * reads from its capture index.  Internal; not thread-safe.
 */
#ifndef ULPPROF_COMMON_STRSET_H
#define ULPPROF_COMMON_STRSET_H

#include <stddef.h>

#include "strmap.h"

typedef struct ulp__strset {
    ulp__strmap map; /* string -> its number in v */
    char **v;        /* [n] the copies            */
    size_t n, cap;
} ulp__strset;

void ulp__strset_init(ulp__strset *t);

/* t's copy of `str`, and its number in t->v (*k, if not NULL); NULL when out of memory. */
const char *ulp__strset_add(ulp__strset *t, const char *str, size_t *k);

/* Frees the set, and the copies with `free_strings` (else their new owner frees them). */
void ulp__strset_release(ulp__strset *t, int free_strings);

#endif /* ULPPROF_COMMON_STRSET_H */

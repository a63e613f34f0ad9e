/*
 * A string -> int64 map (open addressing, FNV-1a): the writer's per-name
 * occurrence counters and kernel-name interning, the analyzer's kernel
 * alignment.  Internal; not thread-safe (each user owns its map).
 */
#ifndef ULPPROF_COMMON_STRMAP_H
#define ULPPROF_COMMON_STRMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct ulp__strmap {
    char **keys;     /* cap slots, NULL when empty; owned copies */
    int64_t *values; /* cap slots                                 */
    size_t cap;      /* power of two, or 0                        */
    size_t count;    /* keys held                                 */
} ulp__strmap;

void ulp__strmap_init(ulp__strmap *m);
/* Frees the keys and tables.  NULL is accepted. */
void ulp__strmap_release(ulp__strmap *m);

/*
 * The value slot of `key`, inserting it with value `init` when absent
 * (*inserted, if not NULL, says which).  NULL when out of memory.  The
 * pointer stays valid until the next insertion.
 */
int64_t *ulp__strmap_upsert(ulp__strmap *m, const char *key, int64_t init, int *inserted);

/* The value slot of `key`, or NULL when absent. */
int64_t *ulp__strmap_find(const ulp__strmap *m, const char *key);

#endif /* ULPPROF_COMMON_STRMAP_H */

/* Distinct strings, each copied once (strset.h). */
#include "strset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

void ulp__strset_init(ulp__strset *t)
{
    memset(t, 0, sizeof *t);
    ulp__strmap_init(&t->map);
}

const char *ulp__strset_add(ulp__strset *t, const char *str, size_t *k)
{
    int inserted = 0;
    int64_t *v = ulp__strmap_upsert(&t->map, str, (int64_t)t->n, &inserted);
    if (v == NULL)
        return NULL;
    if (inserted) {
        char *copy = ULP__GROW(t->v, t->cap, t->n + 1) == 0 ? strdup(str) : NULL;
        if (copy == NULL) {
            *v = -1; /* the string stays refused */
            return NULL;
        }
        t->v[t->n++] = copy;
    }
    if (*v < 0)
        return NULL;
    if (k != NULL)
        *k = (size_t)*v;
    return t->v[*v];
}

void ulp__strset_release(ulp__strset *t, int free_strings)
{
    for (size_t i = 0; free_strings && i < t->n; i++)
        free(t->v[i]);
    free(t->v);
    ulp__strmap_release(&t->map);
    memset(t, 0, sizeof *t);
}

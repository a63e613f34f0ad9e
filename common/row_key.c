/* Repeated (request, position) keys among a capture's rows. */
#include <stdlib.h>

#include "row_key.h"

typedef struct key {
    int64_t request, position;
} key;

static int key_cmp(const void *pa, const void *pb)
{
    const key *a = pa, *b = pb;
    if (a->request != b->request)
        return a->request < b->request ? -1 : 1;
    return a->position < b->position ? -1 : a->position > b->position;
}

int ulp__row_key_repeat(const int64_t *requests, const int64_t *positions, uint64_t rows,
                        int64_t *request, int64_t *position)
{
    key *k = malloc((rows ? rows : 1) * sizeof *k);
    if (k == NULL)
        return -1;
    for (uint64_t i = 0; i < rows; i++) {
        k[i].request = requests != NULL ? requests[i] : 0;
        k[i].position = positions[i];
    }
    qsort(k, rows, sizeof *k, key_cmp);
    int found = 0;
    for (uint64_t i = 1; i < rows && !found; i++) {
        if (key_cmp(&k[i - 1], &k[i]) == 0) {
            *request = k[i].request;
            *position = k[i].position;
            found = 1;
        }
    }
    free(k);
    return found;
}

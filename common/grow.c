#include "grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int ulp__grow(void *pp, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap < 16 ? 16 : *cap;
    while (n < need) {
        if (n > SIZE_MAX / 2)
            return -1;
        n *= 2;
    }
    if (size != 0 && n > SIZE_MAX / size)
        return -1;
    /* The pointer is read and written as bytes: pp is a T **, not a void **. */
    void *old;
    memcpy(&old, pp, sizeof old);
    void *p = realloc(old, n * size);
    if (p == NULL)
        return -1;
    memcpy(pp, &p, sizeof p);
    *cap = n;
    return 0;
}

/* Large arrays in huge pages (bigalloc.h). */
#include "bigalloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_PAGE ((size_t)2 << 20)

void *ulp__big_alloc(size_t bytes, int zero)
{
#ifdef MADV_HUGEPAGE
    size_t whole = bytes & ~(HUGE_PAGE - 1), up = whole == bytes ? bytes : whole + HUGE_PAGE;
    /* From one huge page up, the last one is whole too: its 4 KiB tail
     * pages faulted one by one (the table of 10,000 captures' last 0.9 MB,
     * the records' last 0.5) cost more than zeroing the rest. */
    size_t advise = bytes >= HUGE_PAGE || up - bytes <= bytes / 4 ? up : whole;
    if (advise > 0) {
        void *p = NULL;
        /* The whole of the last huge page must be ours, or it cannot be one. */
        if (posix_memalign(&p, HUGE_PAGE, advise > bytes ? advise : bytes) != 0)
            return NULL;
        /* Before the first touch: the pages are then made huge as they fault. */
        madvise(p, advise, MADV_HUGEPAGE);
        if (zero)
            memset(p, 0, bytes);
        return p;
    }
#endif
    return zero ? calloc(1, bytes ? bytes : 1) : malloc(bytes ? bytes : 1);
}

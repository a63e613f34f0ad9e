/*
 * What a snapshot owns and how much it may believe: the strings kept until
 * close, and the bound on the bytes a dataset may declare.  Every other
 * part of the reader uses these; they use nothing of it.
 */
#include <stdlib.h>

#include "common/grow.h"
#include "snapshot_priv.h"

/*
 * A tensor that declares more than this many times the file's size (plus
 * MAX_DECLARED_SLACK) is an absurd shape: no layout (deflate tops out
 * near 1032:1) stores that much, and a diff would stream terabytes of fill
 * value out of a few kilobytes of unallocated or sparse storage.
 */
#define MAX_EXPANSION      ((uint64_t)4096)
#define MAX_DECLARED_SLACK ((uint64_t)64 << 20)

int ulp__snapshot_absurd_bytes(const ulp_snapshot *s, uint64_t declared)
{
    return declared > MAX_DECLARED_SLACK && declared / MAX_EXPANSION > s->file_size;
}

char *ulp__snap_keep(ulp_snapshot *s, char *p)
{
    if (p == NULL)
        return NULL;
    if (ULP__GROW(s->strs, s->cap_strs, s->nstrs + 1) != 0) {
        free(p);
        return NULL;
    }
    s->strs[s->nstrs++] = p;
    return p;
}

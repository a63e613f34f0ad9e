/*
 * Lost allocations in JSON documents.  jansson answers an allocation that
 * fails with NULL, and json_object_set_new() and json_array_append_new()
 * with -1 -- which nobody checks for each of a report's thousand fields:
 * a document built under memory pressure would be printed with fields
 * missing or null, and exit 0.  Instead jansson allocates through
 * json_alloc() here, which counts its failures per thread (so do
 * ulp_json_str() and ulp_json_set() for their own buffers), and the
 * printers refuse a document built while the count moved.
 *
 * Installed when the program starts, unless the program set allocators of
 * its own for jansson already (then they stay, and the count only sees the
 * failures of this library's own buffers).
 */
#include <jansson.h>
#include <stdlib.h>

#include "report_priv.h"

static _Thread_local unsigned long t_lost;

static void *json_alloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL)
        t_lost++;
    return p;
}

__attribute__((constructor)) static void json_alloc_install(void)
{
    json_malloc_t m = NULL;
    json_free_t f = NULL;
    json_get_alloc_funcs(&m, &f);
    if (m == malloc && f == free)
        json_set_alloc_funcs(json_alloc, free);
}

unsigned long ulp__json_lost(void)
{
    return t_lost;
}

void ulp__json_lose(void)
{
    t_lost++;
}

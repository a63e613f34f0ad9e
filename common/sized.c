/* Structs the caller fills, read by the size they were compiled with (sized.h). */
#include "sized.h"

#include <stdio.h>
#include <string.h>

#include "error.h"

ulp_status ulp__sized_init(void *p, size_t size, const void *defaults, size_t full, size_t min,
                           const char *what)
{
    if (p == NULL || size < min) {
        fprintf(stderr, "ulpprof: %s: %s of %zu bytes, below the %zu of its first version\n", what,
                p == NULL ? "NULL struct" : "a struct", size, min);
        return ULP_EINVAL;
    }
    memset(p, 0, size);
    memcpy(p, defaults, size < full ? size : full);
    memcpy(p, &size, sizeof size);
    return ULP_OK;
}

ulp_status ulp__sized_read(void *out, const void *defaults, size_t full, size_t min, const void *in,
                           const char *what, ulp_error *err)
{
    size_t size = 0;
    memcpy(&size, in, sizeof size);
    const char *why = NULL;
    if (size == 0)
        why = "struct_size is 0: fill the struct with its _init() first";
    else if (size < min)
        why = "struct_size is below its first version's size";
    for (size_t i = full; why == NULL && i < size; i++)
        if (((const unsigned char *)in)[i] != 0)
            why = "a field past what this library knows is set: it needs a newer libulpprof";
    if (why != NULL) {
        fprintf(stderr, "ulpprof: %s (struct_size %zu, this library's %zu): %s\n", what, size, full,
                why);
        return ulp__error(err, ULP_EINVAL, "%s (struct_size %zu, this library's %zu): %s", what,
                          size, full, why);
    }
    memcpy(out, defaults, full);
    memcpy(out, in, size < full ? size : full);
    memcpy(out, &full, sizeof full);
    return ULP_OK;
}

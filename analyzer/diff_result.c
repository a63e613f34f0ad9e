/*
 * What a result owns: its interned strings (the rows' names and roles are
 * kept once per distinct string: 10,000 rows of 100 names had made 20,000
 * copies) and each row's buffers.  diff.c allocates and frees results;
 * the pairing, the streams and the kept rows store into them through
 * here, and this file calls none of them.
 */
#include <stdint.h>
#include <stdlib.h>

#include "diff_priv.h"

const char *ulp__diff_str(ulp_diff_result *r, const char *s)
{
    return ulp__strset_add(&((ulp__result_priv *)(void *)r)->strs, s, NULL);
}

static void free_kernels(ulp_diff_kernel *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free((char *)(uintptr_t)k[i].name);
    free(k);
}

void ulp__diff_row_release(ulp_diff_row *row)
{
    free_kernels(row->kernels_a, row->n_kernels_a);
    free_kernels(row->kernels_b, row->n_kernels_b);
    free(row->keys);
    for (size_t k = 0; k < row->n_inputs; k++)
        free((char *)(uintptr_t)row->inputs[k]);
    free(row->inputs);
    free((char *)(uintptr_t)row->hint);
    free(row->gemms_a);
    free(row->gemms_b);
}

/*
 * The GEMM calls behind a capture in the reports: one sentence for the
 * table and Markdown summaries ("gemms at layer 0: A ran M=127 ... split-K
 * 1 tile 128x128; B ran M=15 ... split-K 4 tile 64x64") (the JSON objects of
 * `gemms_a` / `gemms_b` are report_json_row.c's).
 */
#include <inttypes.h>
#include <string.h>

#include "report_priv.h"

void ulp_gemm_format(const ulp_gemm_info *g, char *buf, size_t n)
{
    char sk[24] = "", tile[40] = "", stages[40] = "", red[40] = "";
    if (g->splitk > 0)
        snprintf(sk, sizeof sk, " split-K %d", (int)g->splitk);
    if (g->tile[0] != '\0')
        snprintf(tile, sizeof tile, " tile %s", g->tile);
    if (g->stages[0] != '\0')
        snprintf(stages, sizeof stages, " stages %s", g->stages);
    if (g->reduction[0] != '\0' && strcmp(g->reduction, "none") != 0)
        snprintf(red, sizeof red, ", reduction %s", g->reduction);
    const char *how = strcmp(g->algo, "given") == 0 ? "" : " (algorithm chosen inside cuBLAS)";
    snprintf(buf, n,
             "M=%" PRId64 " N=%" PRId64 " K=%" PRId64 "%s%s%s [%s %s%s %s %s->%s, %s%s%s]%s", g->m,
             g->n, g->k, sk, tile, stages, g->api, g->transa, g->transb, g->a_type, g->b_type,
             g->d_type, g->compute, g->batch > 1 ? ", batched" : "", red, how);
}

/* Whether two calls computed the same thing the same way. */
static int same_gemm(const ulp_gemm_info *x, const ulp_gemm_info *y)
{
    ulp_gemm_info a = *x, b = *y;
    /* Not part of how the call computed: order, stream, timing ids, status. */
    a.seq = b.seq = 0;
    a.stream = b.stream = 0;
    a.corr_first = b.corr_first = a.corr_last = b.corr_last = 0;
    a.status = b.status = 0;
    return memcmp(&a, &b, sizeof a) == 0;
}

void ulp__report_summary_gemms(const ulp_diff_row *row, FILE *f, const char *bullet,
                               const char *code, const char *where)
{
    char ga[400], gb[400];
    if (!row->has_gemms_a && !row->has_gemms_b)
        return;
    size_t n = row->n_gemms_a < row->n_gemms_b ? row->n_gemms_a : row->n_gemms_b;
    size_t k = 0;
    while (k < n && same_gemm(&row->gemms_a[k], &row->gemms_b[k]))
        k++;
    if (k == n && row->n_gemms_a == row->n_gemms_b) {
        fprintf(f, "%sgemms at %s: the same in A and B (%zu)\n", bullet, where, n);
        return;
    }
    if (k < n) {
        ulp_gemm_format(&row->gemms_a[k], ga, sizeof ga);
        ulp_gemm_format(&row->gemms_b[k], gb, sizeof gb);
        fprintf(f, "%sgemms at %s: A ran %s%s%s; B ran %s%s%s", bullet, where, code, ga, code, code,
                gb, code);
        if (n > 1 || row->n_gemms_a != row->n_gemms_b)
            fprintf(f, " (GEMM %zu of %zu in A, %zu in B)", k + 1, row->n_gemms_a, row->n_gemms_b);
        fputc('\n', f);
        return;
    }
    fprintf(f, "%sgemms at %s: A made %zu GEMM calls, B made %zu (the first %zu are the same)\n",
            bullet, where, row->n_gemms_a, row->n_gemms_b, n);
}

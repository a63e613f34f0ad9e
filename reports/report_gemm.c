/*
 * The GEMM calls behind a capture in the reports: one sentence for the
 * table and Markdown summaries ("gemms at layer 0: A ran M=127 ... split-K
 * 1 tile 128x128; B ran M=15 ... split-K 4 tile 64x64") and the JSON
 * objects of `gemms_a` / `gemms_b` (FORMAT.md).
 */
#include <inttypes.h>
#include <jansson.h>
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

static json_t *jstr(const char *s)
{
    json_t *v = ulp_json_str(s);
    return v != NULL ? v : json_null();
}

json_t *ulp__report_json_gemms(const ulp_gemm_info *g, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "seq", json_integer((json_int_t)g[i].seq));
        json_object_set_new(o, "api", jstr(g[i].api));
        json_object_set_new(o, "m", json_integer(g[i].m));
        json_object_set_new(o, "n", json_integer(g[i].n));
        json_object_set_new(o, "k", json_integer(g[i].k));
        json_object_set_new(o, "batch", json_integer(g[i].batch));
        json_object_set_new(o, "transa", jstr(g[i].transa));
        json_object_set_new(o, "transb", jstr(g[i].transb));
        json_object_set_new(o, "a_type", jstr(g[i].a_type));
        json_object_set_new(o, "b_type", jstr(g[i].b_type));
        json_object_set_new(o, "c_type", jstr(g[i].c_type));
        json_object_set_new(o, "d_type", jstr(g[i].d_type));
        json_object_set_new(o, "compute", jstr(g[i].compute));
        json_object_set_new(o, "algo", jstr(g[i].algo));
        json_object_set_new(o, "algo_id", json_integer(g[i].algo_id));
        json_object_set_new(o, "tile", jstr(g[i].tile));
        json_object_set_new(o, "stages", jstr(g[i].stages));
        json_object_set_new(o, "splitk", json_integer(g[i].splitk));
        json_object_set_new(o, "reduction", jstr(g[i].reduction));
        json_object_set_new(o, "cluster", jstr(g[i].cluster));
        json_object_set_new(o, "workspace", json_integer((json_int_t)g[i].workspace));
        json_object_set_new(o, "status", json_integer(g[i].status));
        json_array_append_new(a, o);
    }
    return a;
}

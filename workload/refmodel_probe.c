/*
 * Which GEMMs of the model give different bits for the same rows when M
 * changes?  For every GEMM shape of the preset, computes the suffix rows
 * once inside the miss GEMM (M = N, rows [C, N)), once alone as a hit does
 * (M = N - C), and once inside a batch of 4 prompts (the batch mode's M and
 * row offset), on random bf16-valued inputs, and counts the differing fp32
 * outputs.  This measures the backend alone, without the model around it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "refmodel_priv.h"

typedef struct probe_shape {
    const char *name;
    int k, n;
} probe_shape;

/* fp32 ULP distance through the ordered-integer map. */
static uint64_t ulp_dist(float a, float b)
{
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    int64_t oa = ia < 0 ? -(int64_t)(ia & 0x7fffffff) : ia;
    int64_t ob = ib < 0 ? -(int64_t)(ib & 0x7fffffff) : ib;
    return (uint64_t)(oa > ob ? oa - ob : ob - oa);
}

static void compare(const float *x, const float *y, size_t n, uint64_t *diff, uint64_t *maxu)
{
    *diff = 0;
    *maxu = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&x[i], &y[i], 4) != 0) {
            (*diff)++;
            uint64_t u = ulp_dist(x[i], y[i]);
            if (u > *maxu)
                *maxu = u;
        }
    }
}

ulp_status ulp_refmodel_probe(const ulp_refmodel_options *opts, FILE *out, ulp_error *err)
{
    ulp_refmodel_options oo;
    if (ulp__refmodel_options_read(&oo, opts, err) != ULP_OK)
        return ULP_EINVAL;
    const ulp_refmodel_options *o = &oo;
    const ulp_refmodel_dims *d = &o->dims;
    const int bs = ULP_REFMODEL_BLOCK_SIZE, n = o->prompt_len;
    int cached = o->cached_tokens >= 0 ? o->cached_tokens : n - n % bs;
    if (n < 2 || cached % bs || cached <= 0 || cached >= n)
        return ulp__error(err, ULP_EINVAL,
                          "cached prefix of %d tokens must be a positive multiple "
                          "of %d below the prompt length %d",
                          cached, bs, n);
    if (o->gemm == ULP_REFMODEL_GEMM_BLAS) {
        ulp_status blas_st = ulp__rm_blas_load(err);
        if (blas_st != ULP_OK)
            return blas_st;
    }
    ulp__rm_blas_threads(o->threads);
    int s = n - cached, qd = d->heads * d->head_dim, kvd = d->kv_heads * d->head_dim;
    /* The batch mode's layout: prompts of N+3, N+6, N+9 tokens, then this one. */
    int boff = (n + 3) + (n + 6) + (n + 9), bm = boff + n;
    const probe_shape shapes[] = {
        {"q_proj", d->hidden, qd},        {"k_proj/v_proj", d->hidden, kvd},
        {"o_proj", qd, d->hidden},        {"gate/up_proj", d->hidden, d->mlp},
        {"down_proj", d->mlp, d->hidden}, {"attn Q.K^T", d->head_dim, n},
        {"attn P.V", n, d->head_dim},     {"lm_head", d->hidden, d->vocab},
    };
    size_t maxk = 0, maxn = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        if ((size_t)shapes[i].k > maxk)
            maxk = (size_t)shapes[i].k;
        if ((size_t)shapes[i].n > maxn)
            maxn = (size_t)shapes[i].n;
    }
    float *a = malloc((size_t)bm * maxk * sizeof(float));
    float *b = malloc(maxk * maxn * sizeof(float));
    float *c_miss = malloc((size_t)bm * maxn * sizeof(float));
    float *c_hit = malloc((size_t)s * maxn * sizeof(float));
    float *c_batch = malloc((size_t)bm * maxn * sizeof(float));
    if (!a || !b || !c_miss || !c_hit || !c_batch) {
        free(a), free(b), free(c_miss), free(c_hit), free(c_batch);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < (size_t)bm * maxk; i++)
        a[i] = ulp__rm_round_bf16(ulp__rm_uniform(o->seed, 7000, i));
    for (size_t i = 0; i < maxk * maxn; i++)
        b[i] = ulp__rm_round_bf16(ulp__rm_uniform(o->seed, 7001, i) * 0.1f);

    fprintf(out, "gemm %s%s%s: rows [%d, %d) of the prompt, fp32 outputs compared bitwise\n",
            ulp_refmodel_gemm_name(o->gemm), o->gemm == ULP_REFMODEL_GEMM_BLAS ? ", " : "",
            o->gemm == ULP_REFMODEL_GEMM_BLAS ? ulp_refmodel_blas_info() : "", cached, n);
    fprintf(out,
            "  miss: M=%d (rows at offset %d); hit: M=%d (offset 0); batch=4: M=%d (offset %d)\n",
            n, cached, s, bm, boff + cached);
    fprintf(out, "%-14s %6s %7s %9s | %-26s | %-26s\n", "gemm", "K", "N", "elements", "miss vs hit",
            "miss vs batch=4");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        int k = shapes[i].k, nn = shapes[i].n;
        /* The batch GEMM holds this prompt's rows after the other prompts' rows. */
        const float *a_prompt = a + (size_t)boff * (size_t)k;
        ulp__rm_gemm(o->gemm, n, nn, k, a_prompt, k, b, nn, c_miss, nn);
        ulp__rm_gemm(o->gemm, s, nn, k, a_prompt + (size_t)cached * (size_t)k, k, b, nn, c_hit, nn);
        ulp__rm_gemm(o->gemm, bm, nn, k, a, k, b, nn, c_batch, nn);
        uint64_t dh, uh, db, ub;
        size_t cnt = (size_t)s * (size_t)nn;
        compare(c_miss + (size_t)cached * (size_t)nn, c_hit, cnt, &dh, &uh);
        compare(c_miss + (size_t)cached * (size_t)nn,
                c_batch + (size_t)(boff + cached) * (size_t)nn, cnt, &db, &ub);
        char hbuf[48], bbuf[48];
        snprintf(hbuf, sizeof hbuf, "%llu differ, max %llu ulp", (unsigned long long)dh,
                 (unsigned long long)uh);
        snprintf(bbuf, sizeof bbuf, "%llu differ, max %llu ulp", (unsigned long long)db,
                 (unsigned long long)ub);
        fprintf(out, "%-14s %6d %7d %9zu | %-26s | %-26s\n", shapes[i].name, k, nn, cnt,
                dh ? hbuf : "identical", db ? bbuf : "identical");
    }
    free(a), free(b), free(c_miss), free(c_hit), free(c_batch);
    return ULP_OK;
}

/*
 * The reference transformer's prefill step over a paged KV cache.
 *
 * A step takes several sequences, concatenates the rows (tokens) each one
 * computes now -- as vLLM's varlen prefill does -- and runs every projection
 * as one GEMM with M = all rows of the step.  Attention runs per sequence
 * and head over the keys and values gathered from the sequence's cache
 * blocks, as two GEMMs (Q K^T and P V) with M = that sequence's rows.
 *
 * Numerics, as in a bf16 inference engine: weights, activations, the
 * residual stream, the KV cache and the attention probabilities are stored
 * as bf16 (rounded with ulp_f32_to_bf16, RNE); GEMMs, norms and softmax
 * compute in fp32.  Every operation other than a GEMM is row-local and the
 * same code for every M, so two runs can differ only through the GEMM
 * backend's choices.  exp() is taken in double and rounded to float, so
 * that the bits depend as little as possible on the libm's expf.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "refmodel_priv.h"
#include "ulpprof/dtype.h"

float ulp__rm_round_bf16(float x)
{
    return ulp_bf16_to_f32(ulp_f32_to_bf16(x));
}

static void widen(float *dst, const uint16_t *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = ulp_bf16_to_f32(src[i]);
}

static void round_all(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = ulp__rm_round_bf16(x[i]);
}

/* --- Paged KV cache ---------------------------------------------------------- */

ulp_status ulp__rm_kvcache_init(ulp__rm_kvcache *c, const ulp_refmodel_dims *d, int n_blocks,
                                ulp_error *err)
{
    memset(c, 0, sizeof *c);
    c->block_size = ULP_REFMODEL_BLOCK_SIZE;
    c->n_blocks = n_blocks;
    c->layers = d->layers;
    c->kv_dim = d->kv_heads * d->head_dim;
    size_t n = (size_t)n_blocks * (size_t)c->layers * (size_t)c->block_size * (size_t)c->kv_dim;
    c->k = calloc(n, sizeof(uint16_t));
    c->v = calloc(n, sizeof(uint16_t));
    c->hash = calloc((size_t)n_blocks, sizeof(uint64_t));
    if (!c->k || !c->v || !c->hash) {
        ulp__rm_kvcache_release(c);
        return ulp__error(err, ULP_ENOMEM, "cannot allocate a KV cache of %d blocks", n_blocks);
    }
    return ULP_OK;
}

void ulp__rm_kvcache_release(ulp__rm_kvcache *c)
{
    if (!c)
        return;
    free(c->k);
    free(c->v);
    free(c->hash);
    memset(c, 0, sizeof *c);
}

static size_t kv_index(const ulp__rm_kvcache *c, int block, int layer, int slot)
{
    return (((size_t)block * (size_t)c->layers + (size_t)layer) * (size_t)c->block_size +
            (size_t)slot) *
           (size_t)c->kv_dim;
}

/* Hash of a full block chained to its parent's, as vLLM's prefix cache keys blocks. */
static uint64_t block_hash(uint64_t parent, const int32_t *tokens, int n)
{
    uint64_t h = parent ^ 0x243f6a8885a308d3ull;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)tokens[i];
        h *= 0x100000001b3ull;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

/*
 * The defect a test injects (docs/demo.md, "An injected defect"):
 * ULPPROF_REFMODEL_STALE_KV=B makes a prefix-cache hit serve block B of
 * the reused chain from a fresh block nobody wrote, holding what an
 * uninitialized buffer (torch.empty) holds: leftover bits, here finite
 * bf16 values of every exponent from 2^-20 to 2^20, a pure function of
 * the slot.  -1 when unset or not a block number.
 */
static int stale_block(void)
{
    const char *e = getenv("ULPPROF_REFMODEL_STALE_KV");
    if (e == NULL || *e < '0' || *e > '9')
        return -1;
    return atoi(e);
}

static void fill_garbage(ulp__rm_kvcache *c, int block)
{
    size_t n = (size_t)c->layers * (size_t)c->block_size * (size_t)c->kv_dim;
    size_t at = kv_index(c, block, 0, 0);
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (uint64_t)(at + i) * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e5ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        uint16_t sign = (uint16_t)((z >> 20) & 0x8000u), mant = (uint16_t)(z & 0x7fu);
        uint16_t exp = (uint16_t)(127 - 20 + (int)((z >> 32) % 41));
        c->k[at + i] = (uint16_t)(sign | (uint16_t)(exp << 7) | mant);
        c->v[at + i] = (uint16_t)((sign ^ 0x8000u) | (uint16_t)(exp << 7) | (mant ^ 0x55u));
    }
}

ulp_status ulp__rm_seq_init(ulp__rm_seq *s, ulp__rm_kvcache *c, const int32_t *tokens, int n,
                            int reuse, int max_reuse, ulp_error *err)
{
    memset(s, 0, sizeof *s);
    int bs = c->block_size, nb = (n + bs - 1) / bs;
    s->tokens = tokens;
    s->n_tokens = n;
    s->block_table = malloc((size_t)(nb > 0 ? nb : 1) * sizeof(int));
    if (!s->block_table)
        return ulp__error(err, ULP_ENOMEM, "cannot allocate a block table");
    int b = 0;
    uint64_t parent = 0;
    if (reuse) {
        for (; (b + 1) * bs <= n && (b + 1) * bs <= max_reuse; b++) {
            uint64_t h = block_hash(parent, tokens + b * bs, bs);
            int found = -1;
            for (int i = 0; i < c->used && found < 0; i++)
                if (c->hash[i] == h)
                    found = i;
            if (found < 0)
                break;
            s->block_table[b] = found;
            s->computed = (b + 1) * bs;
            parent = h;
        }
        int stale = stale_block();
        if (stale >= 0 && stale < b) {
            if (c->used >= c->n_blocks) {
                ulp__rm_seq_release(s);
                return ulp__error(err, ULP_ERANGE, "KV cache full (%d blocks)", c->n_blocks);
            }
            s->block_table[stale] = c->used++;
            fill_garbage(c, s->block_table[stale]);
        }
    }
    for (; b < nb; b++) {
        if (c->used >= c->n_blocks) {
            ulp__rm_seq_release(s);
            return ulp__error(err, ULP_ERANGE, "KV cache full (%d blocks)", c->n_blocks);
        }
        s->block_table[b] = c->used++;
    }
    return ULP_OK;
}

void ulp__rm_seq_release(ulp__rm_seq *s)
{
    if (!s)
        return;
    free(s->block_table);
    memset(s, 0, sizeof *s);
}

void ulp__rm_seq_publish(ulp__rm_seq *s, ulp__rm_kvcache *c)
{
    int bs = c->block_size;
    uint64_t parent = 0;
    for (int b = 0; (b + 1) * bs <= s->computed; b++) {
        parent = block_hash(parent, s->tokens + b * bs, bs);
        if (c->hash[s->block_table[b]] == 0)
            c->hash[s->block_table[b]] = parent;
    }
}

/* --- Operations ------------------------------------------------------------------ */

static void rmsnorm(const float *x, float *y, int rows, int n, const uint16_t *w, float eps)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * (size_t)n;
        float *yr = y + (size_t)r * (size_t)n;
        float ss = 0.0f;
        for (int i = 0; i < n; i++)
            ss += xr[i] * xr[i];
        float inv = 1.0f / sqrtf(ss / (float)n + eps);
        for (int i = 0; i < n; i++)
            yr[i] = ulp__rm_round_bf16(xr[i] * inv * ulp_bf16_to_f32(w[i]));
    }
}

/*
 * A row-parallel linear (attention output, MLP down) as `tp` ranks compute
 * it, EMULATED: rank r holds rows [r*in/tp, (r+1)*in/tp) of W and the same
 * columns of x, computes its partial product and rounds it to bf16 (its
 * output tensor); the all-reduce sums the partials in rank order in fp32,
 * and the sum is rounded to bf16 once.  With tp = 1 this is linear()
 * without a bias.  `part` holds rows*out floats.
 */
static void linear_row_parallel(ulp_refmodel_gemm g, int tp, const float *x, int rows, int in,
                                int out, const uint16_t *w, float *wbuf, float *part, float *y)
{
    size_t n = (size_t)rows * (size_t)out;
    widen(wbuf, w, (size_t)in * (size_t)out);
    int shard = in / tp;
    for (int r = 0; r < tp; r++) {
        ulp__rm_gemm(g, rows, out, shard, x + (size_t)r * (size_t)shard, in,
                     wbuf + (size_t)r * (size_t)shard * (size_t)out, out, part, out);
        for (size_t i = 0; i < n; i++) {
            float v = ulp__rm_round_bf16(part[i]);
            y[i] = r == 0 ? v : y[i] + v;
        }
    }
    for (size_t i = 0; i < n; i++)
        y[i] = ulp__rm_round_bf16(y[i]);
}

/* y[rows x out] = bf16(x[rows x in] W + bias); `wbuf` holds in*out floats. */
static void linear(ulp_refmodel_gemm g, const float *x, int rows, int in, int out,
                   const uint16_t *w, const uint16_t *bias, float *wbuf, float *y)
{
    widen(wbuf, w, (size_t)in * (size_t)out);
    ulp__rm_gemm(g, rows, out, in, x, in, wbuf, out, y, out);
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * (size_t)out;
        for (int j = 0; j < out; j++)
            yr[j] = ulp__rm_round_bf16(bias ? yr[j] + ulp_bf16_to_f32(bias[j]) : yr[j]);
    }
}

/* Rotary embedding (rotate-half form) of `nh` heads of one row at `pos`. */
static void rope(float *row, int nh, int hd, int pos, double theta)
{
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        double ang = (double)pos * pow(theta, -2.0 * (double)i / (double)hd);
        float cs = (float)cos(ang), sn = (float)sin(ang);
        for (int h = 0; h < nh; h++) {
            float *v = row + (size_t)h * (size_t)hd;
            float x1 = v[i], x2 = v[i + half];
            v[i] = ulp__rm_round_bf16(x1 * cs - x2 * sn);
            v[i + half] = ulp__rm_round_bf16(x2 * cs + x1 * sn);
        }
    }
}

typedef struct step_bufs {
    float *x, *xn, *q, *k, *v, *ctx, *o, *gate, *up;
    float *wbuf;    /* widened weight of the current projection */
    float *kt, *vv; /* [kv_heads][head_dim][T], [kv_heads][T][head_dim] */
    float *scores;  /* [rows of one sequence][T] */
    float *part;    /* [rows][hidden]: a rank's partial product (tp > 1) */
} step_bufs;

static void bufs_free(step_bufs *b)
{
    float **all[] = {&b->x,    &b->xn, &b->q,    &b->k,  &b->v,  &b->ctx,    &b->o,
                     &b->gate, &b->up, &b->wbuf, &b->kt, &b->vv, &b->scores, &b->part};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
}

/* Causal softmax of one score row over keys [0, pos], probabilities stored as bf16. */
static void softmax_row(float *s, int t_all, int pos, float scale)
{
    float mx = -INFINITY;
    for (int t = 0; t <= pos; t++) {
        s[t] *= scale;
        if (s[t] > mx)
            mx = s[t];
    }
    float sum = 0.0f;
    for (int t = 0; t <= pos; t++) {
        s[t] = (float)exp((double)(s[t] - mx));
        sum += s[t];
    }
    for (int t = 0; t <= pos; t++)
        s[t] = ulp__rm_round_bf16(s[t] / sum);
    for (int t = pos + 1; t < t_all; t++)
        s[t] = 0.0f;
}

static void attention(const ulp__rm_model *m, ulp__rm_kvcache *c, ulp_refmodel_gemm g, int layer,
                      const ulp__rm_seq *s, int count, int row0, step_bufs *b)
{
    const ulp_refmodel_dims *d = &m->d;
    int hd = d->head_dim, qd = d->heads * hd, kvd = c->kv_dim, bs = c->block_size;
    int t_all = s->computed + count;
    int group = d->heads / d->kv_heads;
    const float scale = 1.0f / sqrtf((float)hd);

    /* Gather this sequence's keys (transposed) and values from its blocks. */
    for (int t = 0; t < t_all; t++) {
        size_t at = kv_index(c, s->block_table[t / bs], layer, t % bs);
        for (int kh = 0; kh < d->kv_heads; kh++) {
            for (int e = 0; e < hd; e++) {
                int col = kh * hd + e;
                b->kt[((size_t)kh * (size_t)hd + (size_t)e) * (size_t)t_all + (size_t)t] =
                    ulp_bf16_to_f32(c->k[at + (size_t)col]);
                b->vv[((size_t)kh * (size_t)t_all + (size_t)t) * (size_t)hd + (size_t)e] =
                    ulp_bf16_to_f32(c->v[at + (size_t)col]);
            }
        }
    }
    (void)kvd;
    for (int h = 0; h < d->heads; h++) {
        int kh = h / group;
        const float *qh = b->q + (size_t)row0 * (size_t)qd + (size_t)h * (size_t)hd;
        ulp__rm_gemm(g, count, t_all, hd, qh, qd, b->kt + (size_t)kh * (size_t)hd * (size_t)t_all,
                     t_all, b->scores, t_all);
        for (int r = 0; r < count; r++)
            softmax_row(b->scores + (size_t)r * (size_t)t_all, t_all, s->computed + r, scale);
        float *ch = b->ctx + (size_t)row0 * (size_t)qd + (size_t)h * (size_t)hd;
        ulp__rm_gemm(g, count, hd, t_all, b->scores, t_all,
                     b->vv + (size_t)kh * (size_t)t_all * (size_t)hd, hd, ch, qd);
    }
}

ulp_status ulp__rm_forward(const ulp__rm_model *m, ulp__rm_kvcache *c, ulp_refmodel_gemm g,
                           ulp__rm_seq *seqs, const int *count, int nseq, const ulp__rm_tap *tap,
                           ulp_error *err)
{
    const ulp_refmodel_dims *d = &m->d;
    int h = d->hidden, hd = d->head_dim, qd = d->heads * hd, kvd = c->kv_dim, f = d->mlp;
    int rows = 0, t_max = 0, c_max = 0;
    for (int i = 0; i < nseq; i++) {
        if (count[i] < 1 || seqs[i].computed + count[i] > seqs[i].n_tokens)
            return ulp__error(err, ULP_EINVAL, "bad step: sequence %d computes %d tokens", i,
                              count[i]);
        rows += count[i];
        if (seqs[i].computed + count[i] > t_max)
            t_max = seqs[i].computed + count[i];
        if (count[i] > c_max)
            c_max = count[i];
    }

    /* Where the tapped rows sit in this step: those of [lo, hi) it computes. */
    int tap_row = -1, tap_n = 0, tap_pos = 0, tap_last = 0;
    if (tap && tap->seq >= 0 && tap->seq < nseq) {
        const ulp__rm_seq *ts = &seqs[tap->seq];
        int lo = tap->lo > ts->computed ? tap->lo : ts->computed;
        int hi =
            tap->hi < ts->computed + count[tap->seq] ? tap->hi : ts->computed + count[tap->seq];
        if (hi > lo) {
            tap_row = lo - ts->computed;
            for (int i = 0; i < tap->seq; i++)
                tap_row += count[i];
            tap_n = hi - lo;
            tap_pos = lo;
            tap_last = hi == tap->hi;
        }
    }

    size_t wmax = (size_t)h * (size_t)(qd > f ? qd : f);
    size_t R = (size_t)rows;
    step_bufs b = {0};
    b.x = malloc(R * (size_t)h * sizeof(float));
    b.xn = malloc(R * (size_t)h * sizeof(float));
    b.q = malloc(R * (size_t)qd * sizeof(float));
    b.k = malloc(R * (size_t)kvd * sizeof(float));
    b.v = malloc(R * (size_t)kvd * sizeof(float));
    b.ctx = malloc(R * (size_t)qd * sizeof(float));
    b.o = malloc(R * (size_t)h * sizeof(float));
    b.gate = malloc(R * (size_t)f * sizeof(float));
    b.up = malloc(R * (size_t)f * sizeof(float));
    b.wbuf = malloc(wmax * sizeof(float));
    b.kt = malloc((size_t)kvd * (size_t)t_max * sizeof(float));
    b.vv = malloc((size_t)kvd * (size_t)t_max * sizeof(float));
    b.scores = malloc((size_t)c_max * (size_t)t_max * sizeof(float));
    b.part = m->tp > 1 ? malloc(R * (size_t)h * sizeof(float)) : NULL;
    if ((m->tp > 1 && !b.part) || !b.x || !b.xn || !b.q || !b.k || !b.v || !b.ctx || !b.o ||
        !b.gate || !b.up || !b.wbuf || !b.kt || !b.vv || !b.scores) {
        bufs_free(&b);
        return ulp__error(err, ULP_ENOMEM, "cannot allocate a step of %d rows", rows);
    }

    /* The GEMMs of a step with tapped rows go to the tap's log, for its captures. */
    ulp__rm_gemm_log_set(tap_n && tap->gemms ? tap->gemms : NULL);

    /* Embedding lookup. */
    for (int i = 0, r = 0; i < nseq; i++)
        for (int j = 0; j < count[i]; j++, r++)
            widen(b.x + (size_t)r * (size_t)h,
                  m->embed + (size_t)seqs[i].tokens[seqs[i].computed + j] * (size_t)h, (size_t)h);
    if (tap_n)
        tap->fn(tap->ctx, "embed", -1, 0, b.x + (size_t)tap_row * (size_t)h, tap_n, h, tap_pos);

    for (int l = 0; l < d->layers; l++) {
        const ulp__rm_layer *L = &m->layers[l];
        rmsnorm(b.x, b.xn, rows, h, L->attn_norm, (float)d->norm_eps);
        linear(g, b.xn, rows, h, qd, L->wq, L->bq, b.wbuf, b.q);
        linear(g, b.xn, rows, h, kvd, L->wk, L->bk, b.wbuf, b.k);
        linear(g, b.xn, rows, h, kvd, L->wv, L->bv, b.wbuf, b.v);

        /* Rotary positions, then K/V into the cache blocks. */
        for (int i = 0, r = 0; i < nseq; i++) {
            for (int j = 0; j < count[i]; j++, r++) {
                int pos = seqs[i].computed + j;
                rope(b.q + (size_t)r * (size_t)qd, d->heads, hd, pos, d->rope_theta);
                rope(b.k + (size_t)r * (size_t)kvd, d->kv_heads, hd, pos, d->rope_theta);
                size_t at =
                    kv_index(c, seqs[i].block_table[pos / c->block_size], l, pos % c->block_size);
                for (int e = 0; e < kvd; e++) {
                    c->k[at + (size_t)e] =
                        ulp_f32_to_bf16(b.k[(size_t)r * (size_t)kvd + (size_t)e]);
                    c->v[at + (size_t)e] =
                        ulp_f32_to_bf16(b.v[(size_t)r * (size_t)kvd + (size_t)e]);
                }
            }
        }
        for (int i = 0, r = 0; i < nseq; r += count[i], i++)
            attention(m, c, g, l, &seqs[i], count[i], r, &b);
        round_all(b.ctx, R * (size_t)qd);

        if (m->tp > 1)
            linear_row_parallel(g, m->tp, b.ctx, rows, qd, h, L->wo, b.wbuf, b.part, b.o);
        else
            linear(g, b.ctx, rows, qd, h, L->wo, NULL, b.wbuf, b.o);
        if (tap_n)
            tap->fn(tap->ctx, "attn_out", l, 0, b.o + (size_t)tap_row * (size_t)h, tap_n, h,
                    tap_pos);
        for (size_t i = 0; i < R * (size_t)h; i++)
            b.x[i] = ulp__rm_round_bf16(b.x[i] + b.o[i]);

        rmsnorm(b.x, b.xn, rows, h, L->mlp_norm, (float)d->norm_eps);
        linear(g, b.xn, rows, h, f, L->wg, NULL, b.wbuf, b.gate);
        linear(g, b.xn, rows, h, f, L->wu, NULL, b.wbuf, b.up);
        for (size_t i = 0; i < R * (size_t)f; i++) {
            float gv = b.gate[i];
            b.gate[i] = ulp__rm_round_bf16(gv / (1.0f + (float)exp(-(double)gv)) * b.up[i]);
        }
        if (m->tp > 1)
            linear_row_parallel(g, m->tp, b.gate, rows, f, h, L->wd, b.wbuf, b.part, b.o);
        else
            linear(g, b.gate, rows, f, h, L->wd, NULL, b.wbuf, b.o);
        if (tap_n)
            tap->fn(tap->ctx, "mlp_out", l, 0, b.o + (size_t)tap_row * (size_t)h, tap_n, h,
                    tap_pos);
        for (size_t i = 0; i < R * (size_t)h; i++)
            b.x[i] = ulp__rm_round_bf16(b.x[i] + b.o[i]);
        if (tap_n)
            tap->fn(tap->ctx, "out", l, 0, b.x + (size_t)tap_row * (size_t)h, tap_n, h, tap_pos);
    }

    ulp_status st = ULP_OK;
    if (tap_n && tap_last) {
        /* Logits of the last `logits_rows` tapped rows only, as an engine computes them. */
        int lr = tap->logits_rows > 0 && tap->logits_rows < tap_n ? tap->logits_rows : tap_n;
        int first = tap_row + tap_n - lr;
        float *wl = malloc((size_t)h * (size_t)d->vocab * sizeof(float));
        float *logits = malloc((size_t)lr * (size_t)d->vocab * sizeof(float));
        if (!wl || !logits) {
            st = ulp__error(err, ULP_ENOMEM, "cannot allocate the logits of %d rows", lr);
        } else {
            rmsnorm(b.x + (size_t)first * (size_t)h, b.xn, lr, h, m->final_norm,
                    (float)d->norm_eps);
            widen(wl, m->lm_head, (size_t)h * (size_t)d->vocab);
            ulp__rm_gemm(g, lr, d->vocab, h, b.xn, h, wl, d->vocab, logits, d->vocab);
            tap->fn(tap->ctx, "logits", -1, 1, logits, lr, d->vocab, tap_pos + tap_n - lr);
        }
        free(wl);
        free(logits);
    }
    ulp__rm_gemm_log_set(NULL);
    for (int i = 0; i < nseq; i++)
        seqs[i].computed += count[i];
    bufs_free(&b);
    return st;
}

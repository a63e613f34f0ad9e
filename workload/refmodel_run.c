/*
 * One run of the reference workload: builds the model, runs the prefill the
 * mode asks for and captures the suffix rows through the host capture API.
 *
 * The four modes compute the same prompt; only how its rows are grouped
 * into GEMMs differs:
 *   miss   one request, all N tokens in one step (M = N);
 *   hit    a first request computes the prefix (M = C) and publishes its
 *          blocks; the request with the full prompt finds them by block
 *          hash and computes only the suffix (M = N - C);
 *   split  one request, cache empty, computed as a prefix step (M = C) then
 *          a suffix step (M = N - C): the GEMMs of a hit, without the cache;
 *   batch  B-1 other prompts and this one (last) in one step (M = sum).
 * C, the cached prefix, is N - N mod 16 unless given.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/sized.h"
#include "refmodel_priv.h"
#include "ulpprof/capture.h"
#include "ulpprof/capture_device.h"

/* The presets, a row each: name, hidden, layers, heads, kv_heads, head_dim,
 * mlp, vocab, rope_theta, norm_eps. */
static const ulp_refmodel_dims presets[] = {
    {"tiny", 256, 12, 8, 2, 32, 768, 8192, 10000.0, 1e-6},
    /* The shapes of Qwen2.5-1.5B; the weights stay synthetic. */
    {"qwen1.5b", 1536, 28, 12, 2, 128, 8960, 151936, 1000000.0, 1e-6},
};

ulp_status ulp_refmodel_preset(const char *name, ulp_refmodel_dims *dims)
{
    memset(dims, 0, sizeof *dims);
    for (size_t i = 0; name && i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) {
            *dims = presets[i];
            return ULP_OK;
        }
    return ULP_EINVAL;
}

int ulp_refmodel_mode_parse(const char *s, ulp_refmodel_mode *mode, int *batch)
{
    *batch = 1;
    if (strcmp(s, "miss") == 0)
        *mode = ULP_REFMODEL_MISS;
    else if (strcmp(s, "hit") == 0)
        *mode = ULP_REFMODEL_HIT;
    else if (strcmp(s, "split") == 0)
        *mode = ULP_REFMODEL_SPLIT;
    else if (strncmp(s, "batch=", 6) == 0) {
        char *end;
        long b = strtol(s + 6, &end, 10);
        if (end == s + 6 || *end || b < 1 || b > 1024)
            return -1;
        *mode = ULP_REFMODEL_BATCH;
        *batch = (int)b;
    } else
        return -1;
    return 0;
}

int ulp_refmodel_gemm_parse(const char *s, ulp_refmodel_gemm *gemm)
{
    if (strcmp(s, "tiled") == 0)
        *gemm = ULP_REFMODEL_GEMM_TILED;
    else if (strcmp(s, "blas") == 0)
        *gemm = ULP_REFMODEL_GEMM_BLAS;
    else if (strcmp(s, "exact") == 0)
        *gemm = ULP_REFMODEL_GEMM_EXACT;
    else
        return -1;
    return 0;
}

const char *ulp_refmodel_gemm_name(ulp_refmodel_gemm gemm)
{
    switch (gemm) {
    case ULP_REFMODEL_GEMM_TILED:
        return "tiled";
    case ULP_REFMODEL_GEMM_BLAS:
        return "blas";
    case ULP_REFMODEL_GEMM_EXACT:
        return "exact";
    }
    return "invalid";
}

const char *ulp_refmodel_mode_name(ulp_refmodel_mode mode)
{
    switch (mode) {
    case ULP_REFMODEL_MISS:
        return "miss";
    case ULP_REFMODEL_HIT:
        return "hit";
    case ULP_REFMODEL_SPLIT:
        return "split";
    case ULP_REFMODEL_BATCH:
        return "batch";
    }
    return "invalid";
}

#define OPTIONS_MIN ULP__SIZE_THROUGH(ulp_refmodel_options, dims) /* the first version */

static void options_defaults(ulp_refmodel_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    ulp_refmodel_preset("tiny", &opts->dims);
    opts->mode = ULP_REFMODEL_MISS;
    opts->batch = 1;
    opts->gemm = ULP_REFMODEL_GEMM_TILED;
    opts->seed = ULP_REFMODEL_DEFAULT_SEED;
    opts->prompt_len = ULP_REFMODEL_DEFAULT_PROMPT_LEN;
    opts->cached_tokens = -1;
    opts->threads = 1;
}

ulp_status ulp_refmodel_options_init_sized(ulp_refmodel_options *opts, size_t size)
{
    ulp_refmodel_options def;
    options_defaults(&def);
    return ulp__sized_init(opts, size, &def, sizeof def, OPTIONS_MIN, "ulp_refmodel_options");
}

ulp_status ulp__refmodel_options_read(ulp_refmodel_options *out, const ulp_refmodel_options *in,
                                      ulp_error *err)
{
    ulp_refmodel_options def;
    options_defaults(&def);
    if (in == NULL)
        return ulp__error(err, ULP_EINVAL, "no options given");
    return ulp__sized_read(out, &def, sizeof def, OPTIONS_MIN, in, "ulp_refmodel_options", err);
}

/* --- Captures ------------------------------------------------------------------ */

typedef struct tap_ctx {
    ulp_session *s;
    ulp_status st;  /* first capture error */
    uint16_t *bits; /* bf16 staging */
    size_t cap_bits;
    int64_t *pos; /* positions staging */
    size_t cap_pos;
    int layers;             /* of the model, for the logits' input */
    int suffix_only;        /* the suffix rows only: no inputs, no embedding */
    ulp__rm_gemm_log gemms; /* the GEMMs since the last capture */
} tap_ctx;

/* The captures a tap's tensor was computed from (FORMAT.md `inputs`). */
static int tap_inputs(const tap_ctx *t, const char *what, int layer, int is_logits,
                      char names[3][96])
{
    char prev[96];
    if (layer <= 0)
        snprintf(prev, sizeof prev, "model.embed_tokens");
    else
        snprintf(prev, sizeof prev, "model.layers.%d.out", layer - 1);
    if (is_logits) {
        snprintf(names[0], 96, "model.layers.%d.out", t->layers - 1);
        return 1;
    }
    if (strcmp(what, "embed") == 0)
        return 0;
    if (strcmp(what, "attn_out") == 0) {
        snprintf(names[0], 96, "%s", prev);
        return 1;
    }
    snprintf(names[0], 96, "model.layers.%d.attn_out", layer);
    snprintf(names[1], 96, "%s", prev);
    if (strcmp(what, "mlp_out") == 0)
        return 2;
    snprintf(names[2], 96, "model.layers.%d.mlp_out", layer);
    return 3;
}

static int stage(void **buf, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap)
        return 0;
    void *p = realloc(*buf, n * size);
    if (!p)
        return -1;
    *buf = p;
    *cap = n;
    return 0;
}

static void on_tap(void *vctx, const char *what, int layer, int is_logits, const float *rows,
                   int nrows, int ncols, int first_pos)
{
    tap_ctx *t = vctx;
    int is_embed = strcmp(what, "embed") == 0;
    if (t->st != ULP_OK || (is_embed && t->suffix_only))
        return;
    char name[96], in[3][96];
    const char *inputs[3] = {in[0], in[1], in[2]};
    int64_t shape[2] = {nrows, ncols};
    ulp_capture_desc d;
    ulp_capture_desc_init(&d);
    d.name = name;
    d.ndim = 2;
    d.shape = shape;
    size_t n = (size_t)nrows * (size_t)ncols;
    /* Every row's token position; with all positions, the inputs too. */
    if (stage((void **)&t->pos, &t->cap_pos, (size_t)nrows, sizeof *t->pos) < 0) {
        t->st = ULP_ENOMEM;
        return;
    }
    for (int i = 0; i < nrows; i++)
        t->pos[i] = first_pos + i;
    d.positions = t->pos;
    d.row_rank = 1;
    if (!t->suffix_only) {
        d.inputs = inputs;
        d.n_inputs = tap_inputs(t, what, layer, is_logits, in);
    }
    if (is_logits) {
        snprintf(name, sizeof name, "lm_head.logits");
        d.data = rows;
        d.dtype = ULP_DTYPE_F32;
        d.role = ULP_ROLE_LOGITS;
    } else {
        if (is_embed)
            snprintf(name, sizeof name, "model.embed_tokens");
        else
            snprintf(name, sizeof name, "model.layers.%d.%s", layer, what);
        if (stage((void **)&t->bits, &t->cap_bits, n, sizeof *t->bits) < 0) {
            t->st = ULP_ENOMEM;
            return;
        }
        /* The values are bf16 already; this only takes their bits. */
        for (size_t i = 0; i < n; i++)
            t->bits[i] = ulp_f32_to_bf16(rows[i]);
        d.data = t->bits;
        d.dtype = ULP_DTYPE_BF16;
        d.layer = is_embed ? ULP_LAYER_NONE : layer;
        d.role = ULP_ROLE_ACTIVATION;
    }
    /* The GEMMs since the previous capture computed this one: /trace/gemms
     * rows [traced, traced + n), the capture's `gemms` range. */
    if (t->gemms.out_of_mem) {
        t->st = ULP_ENOMEM;
        return;
    }
    ulp_capture_device_ext x;
    ulp_capture_device_ext_init(&x);
    if (t->gemms.n > 0) {
        x.has_gemms = 1;
        x.gemms[0] = t->gemms.traced;
        x.gemms[1] = t->gemms.traced + (int64_t)t->gemms.n;
        if ((t->st = ulp_session_trace_gemms(t->s, t->gemms.rows, t->gemms.n)) != ULP_OK)
            return;
        t->gemms.traced += (int64_t)t->gemms.n;
        t->gemms.n = 0;
    }
    t->st = ulp_session_capture_ext(t->s, &d, &x);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void set_run(ulp_session *s, const char *key, const char *fmt, ...) ULP__PRINTF(3, 4);
static void set_run(ulp_session *s, const char *key, const char *fmt, ...)
{
    char v[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    ulp_session_set_run(s, key, v);
}

/* What the GEMM backend does with the M rows the suffix goes through. */
static void describe_gemm(ulp_refmodel_gemm g, int m, char *buf, size_t len)
{
    if (g == ULP_REFMODEL_GEMM_TILED) {
        ulp__rm_tile t;
        ulp__rm_tile_for(m, 0, &t);
        snprintf(buf, len, "M=%d: %s (emulated)", m, t.name);
    } else if (g == ULP_REFMODEL_GEMM_BLAS) {
        snprintf(buf, len, "M=%d: cblas_sgemm", m);
    } else {
        snprintf(buf, len, "M=%d: fp64 accumulation, fixed order", m);
    }
}

ulp_status ulp_refmodel_run(const ulp_refmodel_options *opts, ulp_error *err)
{
    ulp_refmodel_options oo;
    if (ulp__refmodel_options_read(&oo, opts, err) != ULP_OK)
        return ULP_EINVAL;
    const ulp_refmodel_options *o = &oo;
    const ulp_refmodel_dims *d = &o->dims;
    const int bs = ULP_REFMODEL_BLOCK_SIZE, n = o->prompt_len;
    if (!o->out || !*o->out)
        return ulp__error(err, ULP_EINVAL, "no output file given");
    if (d->hidden <= 0 || d->layers <= 0 || d->heads <= 0 || d->kv_heads <= 0 ||
        d->heads % d->kv_heads || d->head_dim % 2 || d->vocab <= 0 || d->mlp <= 0)
        return ulp__error(err, ULP_EINVAL, "invalid model shape");
    if (n < 2 || n > 65536)
        return ulp__error(err, ULP_EINVAL, "prompt length %d out of range [2, 65536]", n);
    int cached = o->cached_tokens >= 0 ? o->cached_tokens : n - n % bs;
    if (cached % bs || cached <= 0 || cached >= n)
        return ulp__error(err, ULP_EINVAL,
                          "cached prefix of %d tokens must be a positive multiple of %d below "
                          "the prompt length %d",
                          cached, bs, n);
    int tp = o->tp > 1 ? o->tp : 1;
    if (tp > 64 || (d->heads * d->head_dim) % tp || d->mlp % tp)
        return ulp__error(err, ULP_EINVAL,
                          "tensor-parallel degree %d must divide the attention width %d and the "
                          "MLP size %d",
                          o->tp, d->heads * d->head_dim, d->mlp);
    int chunk = o->prefill_chunk > 0 ? o->prefill_chunk : 0;
    if (chunk && (o->mode != ULP_REFMODEL_MISS || cached / chunk != (n - 1) / chunk))
        return ulp__error(err, ULP_EINVAL,
                          "a prefill chunk of %d tokens needs the miss mode and must not cut the "
                          "captured suffix [%d, %d)",
                          chunk, cached, n);
    int batch = o->mode == ULP_REFMODEL_BATCH ? o->batch : 1;
    if (batch < 1)
        return ulp__error(err, ULP_EINVAL, "batch size %d must be at least 1", batch);
    if (o->gemm == ULP_REFMODEL_GEMM_BLAS) {
        ulp_status blas_st = ulp__rm_blas_load(err);
        if (blas_st != ULP_OK)
            return blas_st;
    }
    int threads = o->threads > 0 ? o->threads : 1;
    ulp__rm_blas_threads(threads);

    ulp_status st;
    ulp__rm_model model = {0};
    ulp__rm_kvcache cache = {0};
    ulp__rm_seq *seqs = calloc((size_t)batch + 1, sizeof *seqs);
    int32_t **tokens = calloc((size_t)batch, sizeof *tokens);
    int *lens = calloc((size_t)batch, sizeof *lens);
    int *count = calloc((size_t)batch, sizeof *count);
    ulp_session *s = NULL;
    tap_ctx tc = {0};
    double t0 = now_s();
    if (!seqs || !tokens || !lens || !count) {
        st = ulp__error(err, ULP_ENOMEM, "out of memory");
        goto cleanup;
    }

    /* The target prompt is prompt 0; a batch puts B-1 other prompts, of other lengths, first. */
    int blocks = cached / bs;
    for (int i = 0; i < batch; i++) {
        int which = i == batch - 1 ? 0 : i + 1;
        lens[i] = which == 0 ? n : n + 3 * which;
        tokens[i] = malloc((size_t)lens[i] * sizeof(int32_t));
        if (!tokens[i]) {
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            goto cleanup;
        }
        ulp__rm_prompt(o->seed, which, lens[i], d->vocab, tokens[i]);
        blocks += (lens[i] + bs - 1) / bs;
    }
    if ((st = ulp__rm_model_init(&model, d, o->seed, err)) != ULP_OK)
        goto cleanup;
    model.tp = tp;
    if ((st = ulp__rm_kvcache_init(&cache, d, blocks, err)) != ULP_OK)
        goto cleanup;
    double t_model = now_s();
    if (o->verbose)
        fprintf(stderr, "ulpprof-refmodel: %s model from seed %llu in %.2f s\n", d->name,
                (unsigned long long)o->seed, t_model - t0);

    ulp_session_options so;
    ulp_session_options_init(&so);
    so.path = o->out;
    so.label = o->label
                   ? o->label
                   : (o->mode == ULP_REFMODEL_BATCH ? "batch" : ulp_refmodel_mode_name(o->mode));
    so.writer = "ulpprof-refmodel " ULP_VERSION_STRING;
    so.record_env = 1;
    if ((st = ulp_session_open(&so, &s, err)) != ULP_OK)
        goto cleanup;

    int suffix_m = o->mode == ULP_REFMODEL_MISS    ? (chunk ? n - cached / chunk * chunk : n)
                   : o->mode == ULP_REFMODEL_BATCH ? 0
                                                   : n - cached;
    if (o->mode == ULP_REFMODEL_BATCH)
        for (int i = 0; i < batch; i++)
            suffix_m += lens[i];
    char gdesc[128];
    describe_gemm(o->gemm, suffix_m, gdesc, sizeof gdesc);
    set_run(s, "model", "%s", d->name);
    set_run(s, "model_shape",
            "hidden=%d layers=%d heads=%d kv_heads=%d head_dim=%d mlp=%d vocab=%d", d->hidden,
            d->layers, d->heads, d->kv_heads, d->head_dim, d->mlp, d->vocab);
    set_run(s, "dtype", "bf16 weights and activations, fp32 accumulation");
    set_run(s, "cache", "%s", o->mode == ULP_REFMODEL_HIT ? "hit" : "miss");
    set_run(s, "batch_size", "%d", batch);
    set_run(s, "block_size", "%d", bs);
    set_run(s, "gemm", "%s", ulp_refmodel_gemm_name(o->gemm));
    set_run(s, "blas", "%s", o->gemm == ULP_REFMODEL_GEMM_BLAS ? ulp_refmodel_blas_info() : "none");
    set_run(s, "threads", "%d", o->gemm == ULP_REFMODEL_GEMM_BLAS ? threads : 1);
    set_run(s, "seed", "%llu", (unsigned long long)o->seed);
    set_run(s, "prompt_len", "%d", n);
    set_run(s, "prefix_len", "%d", cached);
    set_run(s, "suffix_rows", "%d", n - cached);
    set_run(s, "split", "%s", o->mode == ULP_REFMODEL_SPLIT ? "at prefix_len" : "none");
    /* What the conditions made the GEMMs do: observed, no condition of its own. */
    ulp_session_set_observed(s, "suffix_gemm", gdesc);
    set_run(s, "tp", "%d", tp);
    if (chunk)
        set_run(s, "prefill_chunk", "%d", chunk);
    else
        set_run(s, "prefill_chunk", "none");

    tc.s = s;
    tc.layers = d->layers;
    tc.suffix_only = o->suffix_only;
    ulp__rm_tap tap = {.seq = batch - 1,
                       .lo = o->suffix_only ? cached : 0,
                       .hi = n,
                       .logits_rows = o->logits_rows > 0 ? o->logits_rows : n - cached,
                       .fn = on_tap,
                       .ctx = &tc,
                       .gemms = &tc.gemms};
    ulp__rm_seq *tgt = &seqs[batch - 1];
    switch (o->mode) {
    case ULP_REFMODEL_MISS:
        if (chunk) {
            /* Chunked prefill: steps of `chunk` tokens; the one that holds the suffix taps it. */
            if ((st = ulp__rm_seq_init(tgt, &cache, tokens[0], n, 0, 0, err)) != ULP_OK)
                goto cleanup;
            tap.seq = 0;
            while (st == ULP_OK && tgt->computed < n) {
                count[0] = n - tgt->computed < chunk ? n - tgt->computed : chunk;
                st = ulp__rm_forward(&model, &cache, o->gemm, tgt, count, 1, &tap, err);
            }
            break;
        }
        /* fall through */
    case ULP_REFMODEL_BATCH:
        for (int i = 0; i < batch; i++) {
            if ((st = ulp__rm_seq_init(&seqs[i], &cache, tokens[i], lens[i], 0, 0, err)) != ULP_OK)
                goto cleanup;
            count[i] = lens[i];
        }
        st = ulp__rm_forward(&model, &cache, o->gemm, seqs, count, batch, &tap, err);
        break;
    case ULP_REFMODEL_HIT: {
        /* An earlier request whose prompt is the prefix fills and publishes the blocks. */
        ulp__rm_seq *prev = &seqs[batch];
        if ((st = ulp__rm_seq_init(prev, &cache, tokens[0], cached, 0, 0, err)) != ULP_OK)
            goto cleanup;
        int c0 = cached;
        /* Its rows are the cached prefix of this prompt: tapped as positions 0..C-1. */
        tap.seq = 0;
        if ((st = ulp__rm_forward(&model, &cache, o->gemm, prev, &c0, 1, &tap, err)) != ULP_OK)
            goto cleanup;
        ulp__rm_seq_publish(prev, &cache);
        if ((st = ulp__rm_seq_init(tgt, &cache, tokens[0], n, 1, cached, err)) != ULP_OK)
            goto cleanup;
        if (tgt->computed != cached) {
            st = ulp__error(err, ULP_EINVAL, "prefix cache returned %d tokens, expected %d",
                            tgt->computed, cached);
            goto cleanup;
        }
        count[0] = n - cached;
        tap.seq = 0;
        st = ulp__rm_forward(&model, &cache, o->gemm, tgt, count, 1, &tap, err);
        break;
    }
    case ULP_REFMODEL_SPLIT:
        if ((st = ulp__rm_seq_init(tgt, &cache, tokens[0], n, 0, 0, err)) != ULP_OK)
            goto cleanup;
        count[0] = cached;
        tap.seq = 0;
        if ((st = ulp__rm_forward(&model, &cache, o->gemm, tgt, count, 1, &tap, err)) != ULP_OK)
            goto cleanup;
        count[0] = n - cached;
        tap.seq = 0;
        st = ulp__rm_forward(&model, &cache, o->gemm, tgt, count, 1, &tap, err);
        break;
    }
    if (st == ULP_OK && tc.st != ULP_OK)
        st = ulp__error(err, tc.st, "cannot capture into '%s': %s", o->out, ulp_status_str(tc.st));
    if (o->verbose && st == ULP_OK)
        fprintf(stderr,
                "ulpprof-refmodel: %s prefill of %d tokens (%d suffix rows, gemm %s) in %.2f s\n",
                so.label, n, n - cached, ulp_refmodel_gemm_name(o->gemm), now_s() - t_model);

cleanup:
    if (s) {
        ulp_status cst = ulp_session_close(s);
        if (st == ULP_OK && cst != ULP_OK)
            st = ulp__error(err, cst, "cannot write '%s': %s", o->out, ulp_status_str(cst));
    }
    if (seqs)
        for (int i = 0; i <= batch; i++)
            ulp__rm_seq_release(&seqs[i]);
    if (tokens)
        for (int i = 0; i < batch; i++)
            free(tokens[i]);
    free(seqs);
    free(tokens);
    free(lens);
    free(count);
    free(tc.bits);
    free(tc.pos);
    ulp__rm_gemm_log_release(&tc.gemms);
    ulp__rm_kvcache_release(&cache);
    ulp__rm_model_release(&model);
    return st;
}

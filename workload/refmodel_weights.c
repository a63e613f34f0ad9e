/*
 * Synthetic weights and prompts from a seed.
 *
 * Every value is a pure function of (seed, tensor, index) -- a counter-based
 * generator (the splitmix64 finalizer over a keyed counter), so the weights
 * are the same bits on every machine, in any order of generation, and need
 * no file.  Values are uniform with the variance of the usual 1/fan_in
 * initialisation and are stored as bf16.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "refmodel_priv.h"
#include "ulpprof/dtype.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t stream_key(uint64_t seed, uint64_t stream)
{
    return mix64(mix64(seed ^ 0x5851f42d4c957f2dull) + 0x9e3779b97f4a7c15ull * (stream + 1));
}

static float uniform_keyed(uint64_t key, uint64_t index)
{
    uint64_t z = mix64(key ^ (index * 0xd1b54a32d192ed03ull + 0x632be59bd9b4e019ull));
    /* 24 random bits -> a float in [-1, 1), exactly. */
    return (float)((int32_t)(z >> 40) - (1 << 23)) * 0x1p-23f;
}

float ulp__rm_uniform(uint64_t seed, uint64_t stream, uint64_t index)
{
    return uniform_keyed(stream_key(seed, stream), index);
}

void ulp__rm_prompt(uint64_t seed, int which, int n, int vocab, int32_t *tokens)
{
    uint64_t key = stream_key(seed, 1000000u + (uint64_t)which);
    for (int i = 0; i < n; i++)
        tokens[i] = (int32_t)(mix64(key ^ (uint64_t)i) % (uint64_t)vocab);
}

/* Fills `n` bf16 values: offset + scale * uniform. */
static void fill(uint16_t *dst, size_t n, uint64_t seed, uint64_t stream, float offset, float scale)
{
    uint64_t key = stream_key(seed, stream);
    for (size_t i = 0; i < n; i++)
        dst[i] = ulp_f32_to_bf16(offset + scale * uniform_keyed(key, i));
}

ulp_status ulp__rm_model_init(ulp__rm_model *m, const ulp_refmodel_dims *d, uint64_t seed,
                              ulp_error *err)
{
    memset(m, 0, sizeof *m);
    m->d = *d;
    size_t h = (size_t)d->hidden, qd = (size_t)d->heads * (size_t)d->head_dim;
    size_t kvd = (size_t)d->kv_heads * (size_t)d->head_dim, f = (size_t)d->mlp;
    size_t v = (size_t)d->vocab;
    size_t per_layer = 2 * h + h * qd + 2 * h * kvd + qd * h + qd + 2 * kvd + 3 * h * f;
    size_t total = v * h + h + h * v + (size_t)d->layers * per_layer;

    m->arena = malloc(total * sizeof(uint16_t));
    m->layers = calloc((size_t)d->layers, sizeof *m->layers);
    if (!m->arena || !m->layers) {
        ulp__rm_model_release(m);
        return ulp__error(err, ULP_ENOMEM, "cannot allocate the %s model (%zu MiB of bf16 weights)",
                          d->name, total * 2 >> 20);
    }
    uint16_t *p = m->arena;
#define TAKE(ptr, count) ((ptr) = p, p += (count), (ptr))
    /* Uniform in [-a, a) has variance a^2 / 3: a = sqrt(3 / fan_in) gives 1 / fan_in. */
    const float sh = sqrtf(3.0f / (float)h), sq = sqrtf(3.0f / (float)qd),
                sf = sqrtf(3.0f / (float)f);
    uint64_t t = 0;
    fill(TAKE(m->embed, v * h), v * h, seed, t++, 0.0f, 1.0f);
    fill(TAKE(m->final_norm, h), h, seed, t++, 1.0f, 0.1f);
    fill(TAKE(m->lm_head, h * v), h * v, seed, t++, 0.0f, sh);
    for (int l = 0; l < d->layers; l++) {
        ulp__rm_layer *L = &m->layers[l];
        t = 16 + 16 * (uint64_t)l;
        fill(TAKE(L->attn_norm, h), h, seed, t++, 1.0f, 0.1f);
        fill(TAKE(L->wq, h * qd), h * qd, seed, t++, 0.0f, sh);
        fill(TAKE(L->wk, h * kvd), h * kvd, seed, t++, 0.0f, sh);
        fill(TAKE(L->wv, h * kvd), h * kvd, seed, t++, 0.0f, sh);
        fill(TAKE(L->bq, qd), qd, seed, t++, 0.0f, 0.1f);
        fill(TAKE(L->bk, kvd), kvd, seed, t++, 0.0f, 0.1f);
        fill(TAKE(L->bv, kvd), kvd, seed, t++, 0.0f, 0.1f);
        fill(TAKE(L->wo, qd * h), qd * h, seed, t++, 0.0f, sq);
        fill(TAKE(L->mlp_norm, h), h, seed, t++, 1.0f, 0.1f);
        fill(TAKE(L->wg, h * f), h * f, seed, t++, 0.0f, sh);
        fill(TAKE(L->wu, h * f), h * f, seed, t++, 0.0f, sh);
        fill(TAKE(L->wd, f * h), f * h, seed, t++, 0.0f, sf);
    }
#undef TAKE
    return ULP_OK;
}

void ulp__rm_model_release(ulp__rm_model *m)
{
    if (!m)
        return;
    free(m->arena);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

/*
 * The determinism ladder (FORMAT.md /run): the /run keys whose values
 * differ between the two snapshots name the rung the pair tests --
 * repeat (0), batch size (1), cache (2, and `split`, the prefix-cache fix
 * that cuts a miss at the cached prefix), block size and chunked prefill
 * (3: `block_size`, `prefill_chunk`), parallelism (4), quantization (5),
 * engine (6), vendor/device (7).
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"

static const struct {
    const char *key;
    int level;
} rung_keys[] = {
    {"repeat", 0},        {"batch_size", 1}, {"cache", 2},  {"split", 2}, {"block_size", 3},
    {"prefill_chunk", 3}, {"tp", 4},         {"dp", 4},     {"ep", 4},    {"quant", 5},
    {"engine", 6},        {"vendor", 7},     {"device", 7}, {"blas", 7},
};

static const char *const rung_names[] = {
    "repeat",      "batch size",   "cache",  "block size",
    "parallelism", "quantization", "engine", "vendor/device",
};

const char *ulp_diff_ladder_name(int level)
{
    if (level < 0 || level >= (int)(sizeof rung_names / sizeof rung_names[0]))
        return NULL;
    return rung_names[level];
}

int ulp_diff_ladder_level(const char *key)
{
    for (size_t i = 0; i < sizeof rung_keys / sizeof rung_keys[0]; i++)
        if (strcmp(rung_keys[i].key, key) == 0)
            return rung_keys[i].level;
    return ULP_DIFF_LADDER_NONE;
}

static int add_key(ulp_diff_ladder *l, const char *key, const char *va, const char *vb)
{
    ulp_diff_run_key *k = &l->keys[l->n_keys];
    k->key = strdup(key);
    k->value_a = va ? strdup(va) : NULL;
    k->value_b = vb ? strdup(vb) : NULL;
    k->level = ulp_diff_ladder_level(key);
    l->n_keys++;
    return k->key && (!va || k->value_a) && (!vb || k->value_b);
}

ulp_status ulp__ladder_run(const ulp_snapshot *a, const ulp_snapshot *b, ulp_diff_ladder *l,
                           ulp_error *err)
{
    size_t na = ulp_snapshot_run_count(a), nb = ulp_snapshot_run_count(b);
    memset(l, 0, sizeof *l);
    l->keys = calloc(na + nb + 1, sizeof *l->keys);
    if (l->keys == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    /* Both lists are sorted by key: merge them. */
    size_t i = 0, k = 0;
    int ok = 1;
    while (ok && (i < na || k < nb)) {
        const ulp_kv *x = i < na ? ulp_snapshot_run(a, i) : NULL;
        const ulp_kv *y = k < nb ? ulp_snapshot_run(b, k) : NULL;
        int c = !x ? 1 : !y ? -1 : strcmp(x->key, y->key);
        if (c < 0) {
            ok = add_key(l, x->key, x->value, NULL);
            i++;
        } else if (c > 0) {
            ok = add_key(l, y->key, NULL, y->value);
            k++;
        } else {
            if (strcmp(x->value, y->value) != 0)
                ok = add_key(l, x->key, x->value, y->value);
            i++;
            k++;
        }
    }
    if (!ok)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    l->level = ULP_DIFF_LADDER_NONE;
    for (size_t q = 0; q < l->n_keys; q++)
        if (l->keys[q].level > l->level)
            l->level = l->keys[q].level;
    /* Nothing differs: the pair is a repeat, if the runs describe themselves at all. */
    if (l->n_keys == 0 && (na > 0 || nb > 0))
        l->level = 0;
    l->level_name = ulp_diff_ladder_name(l->level);
    return ULP_OK;
}

void ulp__ladder_free(ulp_diff_ladder *l)
{
    for (size_t q = 0; q < l->n_keys; q++) {
        free((char *)(uintptr_t)l->keys[q].key);
        free((char *)(uintptr_t)l->keys[q].value_a);
        free((char *)(uintptr_t)l->keys[q].value_b);
    }
    free(l->keys);
    memset(l, 0, sizeof *l);
}

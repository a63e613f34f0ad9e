/*
 * A ladder pair's /run keys (ladder.h), kept in one allocation: the key
 * array followed by the strings it points to.  A ladder of N runs has
 * N(N-1)/2 pairs, so each pair's keys cost one block rather than an array
 * and three strings; ulp__ladder_pair_release() frees the block.
 */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "diff_priv.h"
#include "ladder_priv.h"

static size_t str_size(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

static const char *put(char **at, const char *s)
{
    if (s == NULL)
        return NULL;
    size_t n = strlen(s) + 1;
    memcpy(*at, s, n);
    const char *out = *at;
    *at += n;
    return out;
}

ulp_status ulp__ladder_keys_set(ulp_ladder_pair *p, const ulp_diff_run_key *src, size_t n,
                                ulp_error *err)
{
    size_t bytes = (n + 1) * sizeof *p->keys;
    for (size_t i = 0; i < n; i++)
        bytes += str_size(src[i].key) + str_size(src[i].value_a) + str_size(src[i].value_b);
    ulp_diff_run_key *keys = calloc(1, bytes);
    if (keys == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    char *at = (char *)(keys + n + 1);
    for (size_t i = 0; i < n; i++) {
        keys[i].key = put(&at, src[i].key);
        keys[i].value_a = put(&at, src[i].value_a);
        keys[i].value_b = put(&at, src[i].value_b);
        keys[i].level = src[i].level;
    }
    free(p->keys);
    p->keys = keys;
    p->n_keys = n;
    return ULP_OK;
}

ulp_status ulp__ladder_keys_of_runs(ulp_ladder_pair *p, const ulp_ladder_run *a,
                                    const ulp_ladder_run *b, ulp_error *err)
{
    /* Both lists are sorted by key (as the snapshot gives them): merge them. */
    ulp_diff_run_key *tmp = calloc(a->n_run + b->n_run + 1, sizeof *tmp);
    if (tmp == NULL)
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    size_t i = 0, k = 0, n = 0;
    while (i < a->n_run || k < b->n_run) {
        const ulp_kv *x = i < a->n_run ? &a->run[i] : NULL;
        const ulp_kv *y = k < b->n_run ? &b->run[k] : NULL;
        int c = !x ? 1 : !y ? -1 : strcmp(x->key, y->key);
        if (c < 0) {
            tmp[n++] = (ulp_diff_run_key){x->key, x->value, NULL, 0};
            i++;
        } else if (c > 0) {
            tmp[n++] = (ulp_diff_run_key){y->key, NULL, y->value, 0};
            k++;
        } else {
            if (strcmp(x->value, y->value) != 0)
                tmp[n++] = (ulp_diff_run_key){x->key, x->value, y->value, 0};
            i++;
            k++;
        }
    }
    for (size_t q = 0; q < n; q++)
        tmp[q].level = ulp_diff_ladder_level(tmp[q].key);
    ulp_status st = ulp__ladder_keys_set(p, tmp, n, err);
    free(tmp);
    return st;
}

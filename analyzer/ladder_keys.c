/*
 * A ladder pair's /run keys (ladder.h), kept in one allocation: the key
 * array followed by the strings it points to.  A ladder of N runs has
 * N(N-1)/2 pairs, so each pair's keys cost one block rather than an array
 * and three strings; ulp__ladder_pair_release() frees the block and the
 * rest a pair owns.
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

void ulp__ladder_pair_release(ulp_ladder_pair *p)
{
    free(p->keys); /* one block with its strings (ladder_keys.c) */
    free(p->first.capture);
    free(p->contract_word);
    free(p->contract_text);
    free(p->part.source);
    p->part.source = NULL;
    p->contract_word = p->contract_text = NULL;
    p->keys = NULL;
    p->n_keys = 0;
    p->first.capture = NULL;
}

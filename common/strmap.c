/* String -> int64 map with open addressing and linear probing. */
#include <stdlib.h>
#include <string.h>

#include "strmap.h"

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3u;
    }
    return h;
}

void ulp__strmap_init(ulp__strmap *m)
{
    memset(m, 0, sizeof(*m));
}

void ulp__strmap_release(ulp__strmap *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof(*m));
}

static size_t slot_of(const ulp__strmap *m, const char *key)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)hash_str(key) & mask;
    while (m->keys[i] != NULL && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & mask;
    return i;
}

static int grow(ulp__strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    char **keys = calloc(cap, sizeof(*keys));
    int64_t *values = calloc(cap, sizeof(*values));
    if (keys == NULL || values == NULL) {
        free(keys);
        free(values);
        return -1;
    }
    ulp__strmap old = *m;
    m->keys = keys;
    m->values = values;
    m->cap = cap;
    for (size_t i = 0; i < old.cap; i++) {
        if (old.keys[i] == NULL)
            continue;
        size_t j = slot_of(m, old.keys[i]);
        m->keys[j] = old.keys[i];
        m->values[j] = old.values[i];
    }
    free(old.keys);
    free(old.values);
    return 0;
}

int64_t *ulp__strmap_find(const ulp__strmap *m, const char *key)
{
    if (m->cap == 0)
        return NULL;
    size_t i = slot_of(m, key);
    return m->keys[i] != NULL ? &m->values[i] : NULL;
}

int64_t *ulp__strmap_upsert(ulp__strmap *m, const char *key, int64_t init, int *inserted)
{
    if (inserted != NULL)
        *inserted = 0;
    /* Keep the load factor at or below 1/2 so that probes stay short. */
    if ((m->count + 1) * 2 > m->cap && grow(m) < 0)
        return NULL;
    size_t i = slot_of(m, key);
    if (m->keys[i] == NULL) {
        char *k = strdup(key);
        if (k == NULL)
            return NULL;
        m->keys[i] = k;
        m->values[i] = init;
        m->count++;
        if (inserted != NULL)
            *inserted = 1;
    }
    return &m->values[i];
}

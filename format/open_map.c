/* The open map's codec (open_map.h). */
#include "open_map.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/le.h"
#include "journal.h"

/* Strings longer than this are no map's (an HDF5 attribute holds less). */
#define STR_MAX ((uint64_t)1 << 30)

static size_t str_bytes(const char *s)
{
    return 4 + strlen(s) + 1;
}

static unsigned char *put_str(unsigned char *p, const char *s)
{
    size_t n = strlen(s);
    ulp__le32_put(p, (uint32_t)n);
    memcpy(p + 4, s, n + 1);
    return p + 4 + n + 1;
}

int ulp__map_encode(const ulp__open_map *m, uint64_t seal_off, unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    const char *fixed[3] = {m->format, m->label, m->writer};
    uint64_t body = ULP__MAP_FIXED;
    if (m->nruns > (SIZE_MAX - body) / 16)
        return -1;
    body += 16 * m->nruns;
    for (int i = 0; i < 3; i++) {
        if (fixed[i] == NULL || strlen(fixed[i]) > STR_MAX)
            return -1;
        body += str_bytes(fixed[i]);
    }
    int has_obs = (m->flags & ULP__MAP_HAS_OBSERVED) != 0;
    if (has_obs)
        body += 4;
    for (int g = 0; g < 2 + has_obs; g++) {
        const ulp__map_kv *kv = g == 0 ? m->run : g == 1 ? m->env : m->observed;
        uint32_t n = g == 0 ? m->nrun : g == 1 ? m->nenv : m->nobserved;
        for (uint32_t i = 0; i < n; i++) {
            if (strlen(kv[i].key) > STR_MAX || strlen(kv[i].value) > STR_MAX)
                return -1;
            body += str_bytes(kv[i].key) + str_bytes(kv[i].value);
        }
    }
    if (body > SIZE_MAX - ULP__MAP_FOOTER_BYTES)
        return -1;
    unsigned char *b = malloc((size_t)body + ULP__MAP_FOOTER_BYTES);
    if (b == NULL)
        return -1;
    ulp__le32_put(b, ULP__MAP_VERSION);
    ulp__le32_put(b + 4, m->flags);
    ulp__le64_put(b + 8, m->journal);
    ulp__le64_put(b + 16, (uint64_t)m->format_version);
    ulp__le64_put(b + 24, (uint64_t)m->created_unix_ns);
    ulp__le32_put(b + 32, m->nrun);
    ulp__le32_put(b + 36, m->nenv);
    ulp__le64_put(b + 40, m->nruns);
    unsigned char *p = b + ULP__MAP_FIXED;
    for (uint64_t i = 0; i < m->nruns; i++, p += 16) {
        ulp__le64_put(p, m->runs[i].off);
        ulp__le64_put(p + 8, m->runs[i].len);
    }
    for (int i = 0; i < 3; i++)
        p = put_str(p, fixed[i]);
    for (int g = 0; g < 2 + has_obs; g++) {
        const ulp__map_kv *kv = g == 0 ? m->run : g == 1 ? m->env : m->observed;
        uint32_t n = g == 0 ? m->nrun : g == 1 ? m->nenv : m->nobserved;
        if (g == 2) {
            ulp__le32_put(p, n);
            p += 4;
        }
        for (uint32_t i = 0; i < n; i++) {
            p = put_str(p, kv[i].key);
            p = put_str(p, kv[i].value);
        }
    }
    memcpy(p, ULP__MAP_MAGIC, 8);
    ulp__le64_put(p + 8, body);
    ulp__le64_put(p + 16, seal_off);
    ulp__le32_put(p + 24, ulp__crc32(b, (size_t)body));
    ulp__le32_put(p + 28, 0);
    *out = b;
    *len = (size_t)body + ULP__MAP_FOOTER_BYTES;
    return 0;
}

int ulp__map_footer(const unsigned char f[ULP__MAP_FOOTER_BYTES], uint64_t file_size,
                    uint64_t *body_off, uint64_t *body_len, uint64_t *seal_off, uint32_t *crc)
{
    if (memcmp(f, ULP__MAP_MAGIC, 8) != 0 || ulp__le32_get(f + 28) != 0 ||
        file_size < ULP__MAP_FOOTER_BYTES)
        return -1;
    uint64_t len = ulp__le64_get(f + 8);
    if (len < ULP__MAP_FIXED || len > file_size - ULP__MAP_FOOTER_BYTES)
        return -1;
    *body_len = len;
    *body_off = file_size - ULP__MAP_FOOTER_BYTES - len;
    *seal_off = ulp__le64_get(f + 16);
    *crc = ulp__le32_get(f + 24);
    return 0;
}

/* The string at *pos in body[0, len): *out, *pos past it; 0, or -1. */
static int get_str(const unsigned char *body, size_t len, size_t *pos, const char **out)
{
    if (len - *pos < 4)
        return -1;
    uint32_t n = ulp__le32_get(body + *pos);
    if ((uint64_t)n + 1 > len - *pos - 4)
        return -1;
    const char *s = (const char *)body + *pos + 4;
    if (s[n] != '\0' || memchr(s, '\0', n) != NULL)
        return -1;
    *out = s;
    *pos += 4 + (size_t)n + 1;
    return 0;
}

static int get_kvs(const unsigned char *body, size_t len, size_t *pos, uint32_t n,
                   const ulp__map_kv **out)
{
    /* Each pair takes at least 10 bytes: no count can ask for more pairs than that. */
    if (n > (len - *pos) / 10)
        return -1;
    ulp__map_kv *kv = calloc(n ? n : 1, sizeof *kv);
    if (kv == NULL)
        return -1;
    *out = kv;
    for (uint32_t i = 0; i < n; i++)
        if (get_str(body, len, pos, &kv[i].key) != 0 || get_str(body, len, pos, &kv[i].value) != 0)
            return -1;
    return 0;
}

/* With ULP__MAP_HAS_OBSERVED: the count and pairs of /observed after /env's. */
static int get_observed(const unsigned char *body, size_t len, size_t *pos, ulp__open_map *m)
{
    if ((m->flags & ULP__MAP_HAS_OBSERVED) == 0)
        return 0;
    if (len - *pos < 4)
        return -1;
    m->nobserved = ulp__le32_get(body + *pos);
    *pos += 4;
    return get_kvs(body, len, pos, m->nobserved, &m->observed);
}

int ulp__map_decode(const unsigned char *body, size_t len, uint32_t crc, ulp__open_map *m)
{
    memset(m, 0, sizeof *m);
    if (len < ULP__MAP_FIXED || ulp__crc32(body, len) != crc ||
        ulp__le32_get(body) != ULP__MAP_VERSION)
        return -1;
    m->flags = ulp__le32_get(body + 4);
    m->journal = ulp__le64_get(body + 8);
    m->format_version = (int64_t)ulp__le64_get(body + 16);
    m->created_unix_ns = (int64_t)ulp__le64_get(body + 24);
    m->nrun = ulp__le32_get(body + 32);
    m->nenv = ulp__le32_get(body + 36);
    m->nruns = ulp__le64_get(body + 40);
    if (m->nruns > (len - ULP__MAP_FIXED) / 16)
        return -1;
    ulp__index_mem *runs = calloc(m->nruns ? (size_t)m->nruns : 1, sizeof *runs);
    if (runs == NULL)
        return -1;
    m->runs = runs;
    size_t pos = ULP__MAP_FIXED;
    for (uint64_t i = 0; i < m->nruns; i++, pos += 16)
        runs[i] = (ulp__index_mem){ulp__le64_get(body + pos), ulp__le64_get(body + pos + 8), NULL};
    if (get_str(body, len, &pos, &m->format) != 0 || get_str(body, len, &pos, &m->label) != 0 ||
        get_str(body, len, &pos, &m->writer) != 0 ||
        get_kvs(body, len, &pos, m->nrun, &m->run) != 0 ||
        get_kvs(body, len, &pos, m->nenv, &m->env) != 0 || get_observed(body, len, &pos, m) != 0 ||
        pos != len) {
        ulp__map_release(m);
        return -1;
    }
    return 0;
}

void ulp__map_release(ulp__open_map *m)
{
    free((void *)(uintptr_t)m->run);
    free((void *)(uintptr_t)m->env);
    free((void *)(uintptr_t)m->observed);
    free((void *)(uintptr_t)m->runs);
    m->run = m->env = m->observed = NULL;
    m->runs = NULL;
}

int ulp__map_append(int fd, const unsigned char *map, size_t len)
{
    struct stat sb;
    if (map == NULL || fstat(fd, &sb) != 0 || sb.st_size <= 0)
        return -1;
    return ulp__journal_pwrite(fd, map, len, (uint64_t)sb.st_size) < 0 ? -1 : 0;
}

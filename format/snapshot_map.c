/*
 * Opening a snapshot from its open map (format/open_map.h), without HDF5:
 * the root's attributes, /run and /env from the map, the captures from the
 * sealed index at the runs it names -- what the HDF5 way reads of a file
 * whose seal is trusted without a hash, the same values in the same order.
 * Anything the map cannot vouch for (no map, a damaged one, a seal or a
 * journal that does not match, a /trace, a flag or version this build does
 * not know) leaves the file to the HDF5 way, which says what is wrong.
 * ULPPROF_OPEN_MAP=0 never uses the map; =1 makes a file that cannot be
 * opened from it an error (tests).
 */
#include <stdlib.h>
#include <string.h>

#include "h5types.h"
#include "journal.h"
#include "open_map.h"
#include "snapshot_priv.h"

/* The file's tail read at once: the footer and, in the files seen, the whole body. */
#define TAIL_BYTES ((uint64_t)64 << 10)

static int kv_cmp(const void *a, const void *b)
{
    return strcmp(((const ulp_kv *)a)->key, ((const ulp_kv *)b)->key);
}

/* /run or /env from the map's `n` pairs, sorted by key as the HDF5 way sorts them. */
static int set_kv(ulp_snapshot *s, const ulp__map_kv *in, uint32_t n, ulp_kv **out, size_t *nout)
{
    ulp_kv *kv = calloc(n ? n : 1, sizeof *kv);
    if (kv == NULL)
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        kv[i].key = ulp__snap_keep(s, strdup(in[i].key));
        kv[i].value = ulp__snap_keep(s, strdup(in[i].value));
        if (kv[i].key == NULL || kv[i].value == NULL) {
            free(kv);
            return -1;
        }
    }
    if (n > 1)
        qsort(kv, n, sizeof *kv, kv_cmp);
    if (n == 0) {
        free(kv);
        kv = NULL;
    }
    *out = kv;
    *nout = n;
    return 0;
}

/* The map's body into *body (malloc'd) and *m; 0, or -1 when the file has no valid map
 * or its seal is not one trusted without a hash. */
static int read_map(const ulp_snapshot *s, unsigned char **body, ulp__open_map *m,
                    uint64_t *seal_off)
{
    *body = NULL;
    if (s->file_size < ULP__MAP_FOOTER_BYTES + ULP__MAP_FIXED)
        return -1;
    uint64_t tail = s->file_size < TAIL_BYTES ? s->file_size : TAIL_BYTES;
    unsigned char *buf = malloc((size_t)tail);
    uint64_t boff, blen;
    uint32_t crc;
    if (buf == NULL || ulp__journal_pread(s->fd, buf, (size_t)tail, s->file_size - tail) != 0 ||
        ulp__map_footer(buf + tail - ULP__MAP_FOOTER_BYTES, s->file_size, &boff, &blen, seal_off,
                        &crc) != 0 ||
        !ulp__index_stamped_at(s, *seal_off)) {
        /* Nothing of a body is read before the seal is trusted: its length
         * is the footer's word, up to the whole file. */
        free(buf);
        return -1;
    }
    if (boff >= s->file_size - tail) {
        /* In the tail already: moved to the buffer's start. */
        memmove(buf, buf + (boff - (s->file_size - tail)), (size_t)blen);
    } else {
        free(buf);
        if (blen > SIZE_MAX || (buf = malloc((size_t)blen)) == NULL ||
            ulp__journal_pread(s->fd, buf, (size_t)blen, boff) != 0) {
            free(buf);
            return -1;
        }
    }
    if (ulp__map_decode(buf, (size_t)blen, crc, m) != 0) {
        free(buf);
        return -1;
    }
    *body = buf;
    return 0;
}

int ulp__snapshot_open_map(ulp_snapshot *s)
{
    const char *env = getenv("ULPPROF_OPEN_MAP");
    if (env != NULL && strcmp(env, "0") == 0)
        return 0;
    unsigned char *body = NULL;
    ulp__open_map m;
    uint64_t seal_off = 0;
    if (read_map(s, &body, &m, &seal_off) != 0)
        return 0;
    int rc = 0;
    /* What this build reads as the HDF5 way would; the rest goes that way
     * (which also says why a version is not supported). */
    /* A copy (ulp_snapshot_copy) has no journal: its trusted seal, written
     * after its close, is what says it was written whole. */
    if ((m.flags & ~(uint32_t)ULP__MAP_HAS_OBSERVED) != 0 ||
        strcmp(m.format, ULP__FORMAT_NAME) != 0 || m.format_version < 1 ||
        m.format_version > ULP_FORMAT_VERSION ||
        (m.journal != ULP__INDEX_NO_JOURNAL && !ulp__journal_closed_at(s, m.journal)))
        goto done;
    rc = ulp__index_read_at(s, seal_off, m.runs, (size_t)m.nruns);
    if (rc != 1)
        goto done;
    s->format_version = (int32_t)m.format_version;
    s->created_unix_ns = m.created_unix_ns;
    s->label = strdup(m.label);
    s->writer = strdup(m.writer);
    if (s->label == NULL || s->writer == NULL || set_kv(s, m.run, m.nrun, &s->run, &s->nrun) != 0 ||
        set_kv(s, m.env, m.nenv, &s->env, &s->nenv) != 0 ||
        set_kv(s, m.observed, m.nobserved, &s->observed, &s->nobserved) != 0)
        rc = -1;
done:
    ulp__map_release(&m);
    free(body);
    return rc;
}

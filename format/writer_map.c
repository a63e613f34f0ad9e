/*
 * The writer's open map (format/open_map.h): it keeps what it wrote to the
 * root, /run and /env, and at close repeats it, with where the index's
 * records and seal lie, after the end of the HDF5 file -- so that a reader
 * opens the file without HDF5.  The values are the writer's strings as
 * HDF5 stored them; a reader of the groups reads the same.  Whatever the
 * writer cannot vouch for (an attribute whose write failed half-way, no
 * memory, records HDF5 placed where pread(2) cannot read them) leaves the
 * file without a map, and its readers use HDF5 as before.
 */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "index_write.h"
#include "open_map.h"
#include "writer_internal.h"

static void map_off(ulp__writer *w)
{
    w->map_off = 1;
}

void ulp__writer_map_root(ulp__writer *w, const char *label, const char *writer_name,
                          int64_t created_unix_ns)
{
    w->map_label = strdup(label);
    w->map_writer = strdup(writer_name);
    w->map_created = created_unix_ns;
    if (w->map_label == NULL || w->map_writer == NULL)
        map_off(w);
}

void ulp__writer_map_attr(ulp__writer *w, ulp__writer_group group, const char *key,
                          const char *value, int ok)
{
    if (w->map_off)
        return;
    if (!ok) {
        map_off(w);
        return;
    }
    int g = (int)group;
    ulp__map_kv *kv = w->map_kv[g];
    uint32_t i = 0;
    while (i < w->map_n[g] && strcmp(kv[i].key, key) != 0)
        i++;
    char *v = strdup(value), *k = i == w->map_n[g] ? strdup(key) : NULL;
    if (v == NULL || (i == w->map_n[g] && (k == NULL || ULP__GROW(w->map_kv[g], w->map_cap[g],
                                                                  (size_t)w->map_n[g] + 1) != 0))) {
        free(v);
        free(k);
        map_off(w);
        return;
    }
    kv = w->map_kv[g];
    if (i == w->map_n[g]) {
        kv[i].key = k;
        w->map_n[g]++;
    } else {
        free((void *)(uintptr_t)kv[i].value);
    }
    kv[i].value = v;
}

void ulp__writer_map_finish(ulp__writer *w, ulp__index_seal_job *job)
{
    job->map = NULL;
    job->map_len = 0;
    if (w->map_off)
        return;
    ulp__open_map m = {
        .flags = (w->trace >= 0 || w->trace_broken ? ULP__MAP_HAS_TRACE : 0) |
                 (w->groups[ULP__WRITER_OBSERVED] >= 0 ? ULP__MAP_HAS_OBSERVED : 0) |
                 (w->kept_any ? ULP__MAP_HAS_KEPT : 0),
        .journal = w->jfirst,
        .format_version = ULP_FORMAT_VERSION,
        .created_unix_ns = w->map_created,
        .format = ULP__FORMAT_NAME,
        .label = w->map_label,
        .writer = w->map_writer,
        .run = w->map_kv[0],
        .env = w->map_kv[1],
        .nrun = w->map_n[0],
        .nenv = w->map_n[1],
        .observed = w->map_kv[2],
        .nobserved = w->map_n[2],
    };
    ulp__index_writer_map(&w->index, &m, job);
}

void ulp__writer_map_release(ulp__writer *w)
{
    for (int g = 0; g < ULP__WRITER_NGROUPS; g++) {
        for (uint32_t i = 0; i < w->map_n[g]; i++) {
            free((void *)(uintptr_t)w->map_kv[g][i].key);
            free((void *)(uintptr_t)w->map_kv[g][i].value);
        }
        free(w->map_kv[g]);
        w->map_kv[g] = NULL;
        w->map_n[g] = w->map_cap[g] = 0;
    }
    free(w->map_label);
    free(w->map_writer);
    w->map_label = w->map_writer = NULL;
}

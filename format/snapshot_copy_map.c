/*
 * The open map of a clean copy (ulp_snapshot_copy, `ulpprof repair`;
 * FORMAT.md, "Open map"): the copy's root attributes, /run and /env as the
 * reader rendered them from the original (the copy holds the same
 * attributes, H5Ocopy'd), and the one run of its contiguous
 * /index/records, so that the copy too opens without HDF5.  A copy has no
 * journal: its map says so (ULP__INDEX_NO_JOURNAL), and its seal, written
 * after H5Fclose with the map before it, is what says it was written whole.
 */
#include <stdlib.h>
#include <string.h>

#include "h5types.h"
#include "index_runs.h"
#include "open_map.h"
#include "snapshot_priv.h"

/* s's key/value pairs as the map's; NULL when out of memory (n > 0). */
static ulp__map_kv *map_kvs(const ulp_kv *kv, size_t n)
{
    ulp__map_kv *m = malloc((n ? n : 1) * sizeof *m);
    for (size_t i = 0; m != NULL && i < n; i++) {
        m[i].key = kv[i].key;
        m[i].value = kv[i].value;
    }
    return m;
}

int ulp__copy_map_make(const ulp_snapshot *s, hid_t out, uint64_t records_bytes,
                       ulp__copy_seal *job)
{
    ulp__index_mem *runs = NULL;
    size_t nruns = 0;
    if (records_bytes > 0) {
        hid_t ds = H5Dopen2(out, ULP__INDEX_RECORDS, H5P_DEFAULT);
        int rc = ds >= 0 ? ulp__index_runs(ds, records_bytes, UINT64_MAX, &runs, &nruns) : -1;
        if (ds >= 0)
            H5Dclose(ds);
        if (rc != 0)
            return -1;
    }
    ulp__map_kv *run = map_kvs(s->run, s->nrun), *env = map_kvs(s->env, s->nenv);
    ulp__map_kv *obs = map_kvs(s->observed, s->nobserved);
    int rc = -1;
    if (run != NULL && env != NULL && obs != NULL && s->nrun <= UINT32_MAX &&
        s->nenv <= UINT32_MAX && s->nobserved <= UINT32_MAX) {
        ulp__open_map m = {
            /* ulp_snapshot_copy copies /trace when the reader read kernels. */
            .flags = (s->nkernels > 0 ? ULP__MAP_HAS_TRACE : 0) |
                     (s->nobserved > 0 ? ULP__MAP_HAS_OBSERVED : 0),
            .journal = ULP__INDEX_NO_JOURNAL,
            .format_version = s->format_version,
            .created_unix_ns = s->created_unix_ns,
            .format = ULP__FORMAT_NAME,
            .label = s->label != NULL ? s->label : "",
            .writer = s->writer != NULL ? s->writer : "",
            .run = run,
            .env = env,
            .nrun = (uint32_t)s->nrun,
            .nenv = (uint32_t)s->nenv,
            .observed = obs,
            .nobserved = (uint32_t)s->nobserved,
            .runs = runs,
            .nruns = nruns,
        };
        rc = ulp__map_encode(&m, job->seal_off, &job->map, &job->map_len);
    }
    free(run);
    free(env);
    free(obs);
    free(runs);
    return rc;
}

/*
 * Captures made durable and linked into their groups in batches (FORMAT.md
 * "Crash safety").  A capture of a name that has a group is written as an
 * anonymous dataset and waits; a batch is flushed once (every dataset's
 * bytes and header on disk), named in the capture journal in seq order,
 * linked into its groups and flushed again.  A batch is made when
 * `link_batch` captures wait or they hold ULP__WRITER_LINK_BYTES of data,
 * when the session asks (ulp__writer_sync: a flush request, the writer
 * thread idle for a while) and at close.
 *
 * Why: every flush walks HDF5's whole metadata cache, and a group of many
 * occurrences keeps its link names in a fractal heap whose current direct
 * block grows to 64 KiB, checksummed and written whole by every flush that
 * follows an insert, plus the v2 B-tree nodes above it.  Two flushes per
 * capture made that the writer's main cost, growing with the occurrence
 * count: 37, 48 and 93 us of CPU per capture at 10k, 100k and 1M
 * occurrences of one name.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "writer_internal.h"

struct ulp__writer_unlinked {
    hid_t ds;   /* the anonymous dataset, held open until linked */
    char *name; /* its capture name                              */
    int64_t occurrence, seq;
    uint64_t oaddr; /* its object header                         */
    int journaled;
};

/*
 * The group of a name that has one: kept open after its first capture, for
 * up to ULP__WRITER_GROUPS_OPEN names (opening it by name searches
 * /captures for every capture: 9% of the writer's time per small capture).
 * *kept says whether the id stays open after the capture.
 */
hid_t ulp__writer_open_group(ulp__writer *w, const char *name, int *kept)
{
    int64_t *id = ulp__strmap_find(&w->groups_open, name);
    if (id != NULL) {
        *kept = 1;
        return (hid_t)*id;
    }
    *kept = 0;
    return H5Gopen2(w->captures, name, H5P_DEFAULT);
}

void ulp__writer_group_done(ulp__writer *w, const char *name, hid_t g, int kept, int linked)
{
    if (kept)
        return;
    int inserted = 0;
    int64_t *id = linked && w->groups_open.count < ULP__WRITER_GROUPS_OPEN
                      ? ulp__strmap_upsert(&w->groups_open, name, (int64_t)g, &inserted)
                      : NULL;
    if (id == NULL || !inserted)
        H5Gclose(g);
}

ulp_status ulp__writer_link_later(ulp__writer *w, hid_t ds, const char *name, int64_t occurrence,
                                  int64_t seq, uint64_t oaddr, size_t nbytes, ulp_error *err)
{
    char *copy =
        ULP__GROW(w->unlinked, w->unlinked_cap, w->nunlinked + 1) == 0 ? strdup(name) : NULL;
    if (copy == NULL)
        return ulp__error(err, ULP_ENOMEM, "capture '%s': out of memory", name);
    w->unlinked[w->nunlinked++] = (ulp__writer_unlinked){ds, copy, occurrence, seq, oaddr, 0};
    w->unlinked_bytes += nbytes;
    return ULP_OK;
}

/* Links one waiting capture into its group; 0, or -1 (HDF5's error stack says why). */
static int link_one(ulp__writer *w, const ulp__writer_unlinked *u)
{
    char dsname[32];
    snprintf(dsname, sizeof(dsname), "%" PRId64, u->occurrence);
    int kept = 0;
    hid_t g = ulp__writer_open_group(w, u->name, &kept);
    if (g < 0)
        return -1;
    int rc = H5Olink(u->ds, g, dsname, H5P_DEFAULT, H5P_DEFAULT) < 0 ? -1 : 0;
    ulp__writer_group_done(w, u->name, g, kept, 1);
    return rc;
}

static int by_name(const void *a, const void *b)
{
    const ulp__writer_unlinked *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c != 0 ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

ulp_status ulp__writer_flush(ulp__writer *w, ulp_error *err)
{
    /* The digests waiting in memory, appended; flushed with the batch, or
     * alone when no capture waits. */
    if (ulp__writer_digests_pending(w) > 0) {
        ulp_status st = ulp__writer_digests_write(w, 0, err);
        if (st == ULP_OK && w->nunlinked == 0) {
            ulp__h5_quiet q;
            ulp__h5_quiet_begin(&q);
            if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
                st = ulp__writer_h5_fail(err, w, "flush");
            ulp__h5_quiet_end(&q);
        }
        if (st != ULP_OK)
            return st;
    }
    return ulp__writer_sync(w, err);
}

ulp_status ulp__writer_sync(ulp__writer *w, ulp_error *err)
{
    if (w->nunlinked == 0)
        return ULP_OK;
    ulp__h5_quiet q;
    ulp__h5_quiet_begin(&q);
    /* The batch's bytes and headers on disk, then named in the journal
     * (in seq order: a kill leaves a prefix), then linked. */
    ulp_status st = ULP_OK;
    if (H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
        st = ulp__writer_h5_fail(err, w, "flush");
    for (size_t i = 0; st == ULP_OK && i < w->nunlinked; i++) {
        const ulp__writer_unlinked *u = &w->unlinked[i];
        ulp__journal_record jr = {.kind = ULP__JOURNAL_CAPTURE,
                                  .seq = u->seq,
                                  .occurrence = u->occurrence,
                                  .addr = u->oaddr,
                                  .name = u->name,
                                  .name_len = strlen(u->name)};
        st = ulp__writer_journal_append(w, &jr, err);
        w->unlinked[i].journaled = st == ULP_OK;
    }
    /* Linked name by name: the links of one group follow each other, in
     * occurrence order, while its heap and B-tree blocks are in the
     * cache, and the group is flushed before the next one changes, so
     * that a kill finds at most one group half-written (HDF5 can crash
     * reading a torn group: h5py did on 4 of 8 files killed at random
     * while one flush wrote a whole batch's groups, 1 of 8 before). */
    if (st == ULP_OK)
        qsort(w->unlinked, w->nunlinked, sizeof(*w->unlinked), by_name);
    for (size_t i = 0; i < w->nunlinked; i++) {
        ulp__writer_unlinked *u = &w->unlinked[i];
        int linked = 0;
        if (st == ULP_OK) {
            if (link_one(w, u) < 0)
                st = ulp__writer_h5_fail(err, w, "link a dataset");
            else
                linked = 1;
        }
        int group_end = i + 1 == w->nunlinked || strcmp(u->name, w->unlinked[i + 1].name) != 0;
        if (st == ULP_OK && group_end && H5Fflush(w->file, H5F_SCOPE_GLOBAL) < 0)
            st = ulp__writer_h5_fail(err, w, "flush");
        /* Named by the journal: the object must outlive its id. */
        if (!linked && u->journaled)
            H5Oincr_refcount(u->ds);
        /* Linked, the dataset lives on after its id is closed.  Not (a
         * failure), it is lost, or named by the journal alone, which the
         * reader then uses: the file keeps no closed mark (link_failed). */
        H5Dclose(u->ds);
        free(u->name);
    }
    w->nunlinked = 0;
    w->unlinked_bytes = 0;
    if (st != ULP_OK) {
        w->link_failed = 1;
        ulp__writer_index_off(w);
    }
    ulp__h5_quiet_end(&q);
    return st;
}

int ulp__writer_link_due(const ulp__writer *w)
{
    return w->nunlinked >= w->link_batch || w->unlinked_bytes >= ULP__WRITER_LINK_BYTES;
}

size_t ulp__writer_unlinked_count(const ulp__writer *w)
{
    return w->nunlinked;
}

void ulp__writer_set_link_batch(ulp__writer *w, size_t n)
{
    w->link_batch = n > 0 ? n : 1;
}

void ulp__writer_link_release(ulp__writer *w)
{
    for (size_t i = 0; i < w->nunlinked; i++) {
        H5Dclose(w->unlinked[i].ds);
        free(w->unlinked[i].name);
    }
    free(w->unlinked);
    w->unlinked = NULL;
    w->nunlinked = w->unlinked_cap = 0;
    w->unlinked_bytes = 0;
}

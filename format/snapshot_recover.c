/*
 * The capture index: the /captures groups of a closed file, the capture
 * journal (FORMAT.md "Capture journal") of a file whose writer was killed,
 * each the fallback of the other, and the checks that the captures found
 * are one consistent set (seq unique) before they are installed in the
 * snapshot.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "index.h"
#include "journal.h"
#include "snapshot_priv.h"

/* --- Recovery through the capture journal ------------------------------------------- */

typedef struct journal_ctx {
    ulp_snapshot *s;
    ulp__cap_vec *cv;
    size_t skipped;  /* records whose dataset could not be read */
    ulp_error first; /* why the first of them could not         */
    int truncated;   /* ... and one because the file is cut short */
    int oom;
} journal_ctx;

static int journal_visit(void *data, const ulp__journal_record *r)
{
    journal_ctx *jc = data;
    ulp_snapshot *s = jc->s;
    if (r->kind != ULP__JOURNAL_CAPTURE)
        return 0; /* a kept capture: snapshot_kept_journal.c reads those */
    char occ[24];
    snprintf(occ, sizeof occ, "%" PRId64, r->occurrence);
    char *name = malloc(r->name_len + 1);
    if (name == NULL)
        return -1;
    memcpy(name, r->name, r->name_len);
    name[r->name_len] = '\0';
    if (strlen(name) != r->name_len || r->occurrence < 0) {
        free(name);
        return 1; /* not a record this writer could have written: stop */
    }
    ulp_error why;
    ulp_error_clear(&why);
    ulp_status st = ULP_OK;
    hid_t d = -1;
    if (r->addr >= s->file_size)
        st = ulp__cap_error(s, &why, ULP_ETRUNC, name, occ,
                            "file is truncated: its header is at byte %" PRIu64
                            " but the file has %" PRIu64 " bytes (journal)",
                            r->addr, s->file_size);
    else if ((d = H5Oopen_by_addr(s->file, (haddr_t)r->addr)) < 0 || H5Iget_type(d) != H5I_DATASET)
        st = ulp__error(&why, ULP_EFORMAT,
                        "'%s': capture '%s/%s' (journal: object at byte %" PRIu64
                        ") cannot be opened",
                        s->path, name, occ, r->addr);
    else if (ulp__cap_vec_push(jc->cv) < 0)
        st = ULP_ENOMEM;
    else if ((st = ulp__capture_read(s, d, name, occ, &jc->cv->v[jc->cv->n - 1], &why)) != ULP_OK)
        jc->cv->n--;
    else if (jc->cv->v[jc->cv->n - 1].info.seq != r->seq) {
        st = ulp__error(&why, ULP_EFORMAT,
                        "'%s': capture '%s/%s' has seq %" PRId64
                        " but its journal record says %" PRId64,
                        s->path, name, occ, jc->cv->v[jc->cv->n - 1].info.seq, r->seq);
        jc->cv->n--;
    }
    if (d >= 0)
        H5Oclose(d);
    if (st == ULP_ENOMEM) {
        free(name);
        return -1;
    }
    if (st != ULP_OK) {
        if (st == ULP_ETRUNC && !jc->truncated) {
            jc->truncated = 1;
            jc->first = why;
        } else if (jc->skipped == 0 && !jc->truncated) {
            jc->first = why;
        }
        jc->skipped++;
        free(name);
        return 0;
    }
    ulp__cap_entry *e = &jc->cv->v[jc->cv->n - 1];
    if ((e->info.name = ulp__snap_keep(s, name)) == NULL) {
        jc->cv->n--;
        return -1;
    }
    e->src.h5path = NULL;
    e->src.oaddr = r->addr;
    return 0;
}

/* Reads the captures the journal names into `cv` (emptied first).  ULP_ETRUNC
 * when one of them lies past the end of the file. */
static ulp_status read_journal(ulp_snapshot *s, ulp__journal_state *js, ulp__cap_vec *cv,
                               journal_ctx *jc, ulp_error *err)
{
    memset(jc, 0, sizeof *jc);
    jc->s = s;
    jc->cv = cv;
    cv->n = 0;
    ulp_error werr;
    if (ulp__journal_walk(s, js, journal_visit, jc, &werr) != ULP_OK || jc->oom)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    /* A capture past the end of the file: the file was cut, not torn. */
    if (jc->truncated) {
        if (err != NULL)
            *err = jc->first;
        return ULP_ETRUNC;
    }
    return ULP_OK;
}

/*
 * Whether two captures the journal names share a seq or a (name,
 * occurrence): 1 yes, 0 no, -1 out of memory.  Groups cannot hold two
 * datasets under one name; a journal that names two is not to be trusted.
 */
static int journal_duplicates(const ulp__cap_vec *cv)
{
    if (cv->n < 2)
        return 0;
    const ulp_capture_info **v = malloc(cv->n * sizeof *v);
    if (v == NULL)
        return -1;
    int dup = 0;
    for (size_t i = 1; i < cv->n && !dup; i++)
        dup = cv->v[i].info.seq <= cv->v[i - 1].info.seq; /* the writer's order is seq order */
    for (size_t i = 0; i < cv->n; i++)
        v[i] = &cv->v[i].info;
    qsort(v, cv->n, sizeof *v, ulp__cap_name_cmp);
    for (size_t i = 1; i < cv->n && !dup; i++)
        dup = ulp__cap_name_cmp(&v[i - 1], &v[i]) == 0;
    free(v);
    return dup;
}

/* Sets s->warning to "<what>: <n> captures read through the capture journal". */
static ulp_status journal_warning(ulp_snapshot *s, const journal_ctx *jc, const char *what,
                                  ulp_error *err)
{
    char msg[2 * ULP_ERROR_MSG_MAX];
    /* Those of /captures and those kept in /digests that the journal held. */
    size_t n = jc->cv->n + s->kept_journaled;
    snprintf(msg, sizeof msg, "%s: %zu capture%s read through the capture journal", what, n,
             n == 1 ? "" : "s");
    if ((s->warning = ulp__snap_keep(s, strdup(msg))) == NULL)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    return ULP_OK;
}

/*
 * Reads every capture, checks seq, and fills s->caps, s->srcs, s->by_name.
 *
 * Which index is read: a file our writer closed has its closed mark, and
 * its groups are read.  A file it did not close (killed) is read through
 * the journal alone: a kill may have torn a group, and HDF5 can loop
 * forever walking a torn B-tree.  The groups are the fallback when that
 * journal is incomplete (a close that freed its later blocks was cut
 * short), and the journal is the fallback when the groups fail.  Files of
 * other writers have no journal: their groups are the index.
 */
ulp_status ulp__snapshot_read_captures(ulp_snapshot *s, const ulp__journal_state *jsp,
                                       const ulp__h5_err_info *sticky, ulp_error *err)
{
    ulp__cap_vec cv = {0};
    const ulp_capture_info **order = NULL;
    ulp__journal_state js = *jsp;
    journal_ctx jc;
    ulp_status st;

    /* A file our writer closed may carry a sealed index of its captures, and
     * so may a file without a journal (`ulpprof repair`'s copies). */
    if (!js.found || js.closed) {
        int rc = ulp__index_read(s, js.found ? js.first : ULP__INDEX_NO_JOURNAL);
        if (rc < 0)
            return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
        if (rc > 0)
            return ULP_OK; /* installed: seq order and name order checked */
    }
    if (js.found && !js.closed) {
        if ((st = read_journal(s, &js, &cv, &jc, err)) != ULP_OK)
            goto cleanup;
        int dup = journal_duplicates(&cv);
        if (dup < 0) {
            st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
            goto cleanup;
        }
        if (!js.chain_broken && jc.skipped == 0 && !dup) {
            st = journal_warning(s, &jc, "its writer did not close it (killed?)", err);
            goto install;
        }
    }
    cv.n = 0;
    st = ulp__capture_read_groups(s, &cv, err);
    /* A file cut short is refused, not read around: what it lost is gone. */
    if (st != ULP_OK && st != ULP_ENOMEM && st != ULP_ETRUNC && !sticky->truncated && js.found) {
        char what[ULP_ERROR_MSG_MAX + 64];
        snprintf(what, sizeof what, "the capture index is damaged (%s)",
                 ulp__snap_without_path(s, err));
        ulp_status damage = st;
        /* On ULP_ETRUNC, err now names the cause where the groups gave a symptom. */
        if ((st = read_journal(s, &js, &cv, &jc, err)) != ULP_OK)
            goto cleanup;
        /* Every record follows its capture to the disk: a capture it names
         * that cannot be read means damage the journal cannot read around. */
        if (cv.n == 0 || jc.skipped > 0 || sticky->truncated || journal_duplicates(&cv) != 0) {
            st = damage; /* err still says why the groups failed */
            goto cleanup;
        }
        ulp_error_clear(err);
        st = journal_warning(s, &jc, what, err);
    }
install:
    if (st != ULP_OK)
        goto cleanup;
    if (cv.n > 1)
        qsort(cv.v, cv.n, sizeof *cv.v, ulp__cap_seq_cmp);
    for (size_t i = 1; i < cv.n; i++) {
        if (cv.v[i].info.seq == cv.v[i - 1].info.seq) {
            st = ulp__error(err, ULP_EDUPSEQ,
                            "'%s': captures '%s/%" PRId64 "' and '%s/%" PRId64
                            "' both have seq %" PRId64,
                            s->path, cv.v[i - 1].info.name, cv.v[i - 1].info.occurrence,
                            cv.v[i].info.name, cv.v[i].info.occurrence, cv.v[i].info.seq);
            goto cleanup;
        }
    }

    s->ncaps = cv.n;
    s->caps = calloc(cv.n ? cv.n : 1, sizeof *s->caps);
    s->srcs = calloc(cv.n ? cv.n : 1, sizeof *s->srcs);
    s->by_name = calloc(cv.n ? cv.n : 1, sizeof *s->by_name);
    order = calloc(cv.n ? cv.n : 1, sizeof *order);
    if (s->caps == NULL || s->srcs == NULL || s->by_name == NULL || order == NULL) {
        s->ncaps = 0;
        st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
        goto cleanup;
    }
    for (size_t i = 0; i < cv.n; i++) {
        s->caps[i] = cv.v[i].info;
        s->srcs[i] = cv.v[i].src;
        order[i] = &s->caps[i];
    }
    if (cv.n > 1)
        qsort(order, cv.n, sizeof *order, ulp__cap_name_cmp);
    for (size_t i = 1; i < cv.n; i++) {
        /* A group lists each occurrence once; two alike come from a damaged group. */
        if (ulp__cap_name_cmp(&order[i - 1], &order[i]) == 0) {
            st = ulp__error(err, ULP_EIO,
                            "'%s': capture '%s' has occurrence %" PRId64 " twice (a damaged group)",
                            s->path, order[i]->name, order[i]->occurrence);
            goto cleanup;
        }
    }
    for (size_t i = 0; i < cv.n; i++)
        s->by_name[i] = (size_t)(order[i] - s->caps);
cleanup:
    free(order);
    free(cv.v);
    return st;
}

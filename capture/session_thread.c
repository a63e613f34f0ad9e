/*
 * The writer thread: it creates the file, writes queued items in order
 * until the session closes, and closes the file.  A write error fails the
 * session; a deferred capture whose bytes never arrive is dropped alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session_internal.h"

/* Gives a deferred item's buffer back to its producer.  Outside the lock. */
static void item_release(ulp__item *it)
{
    if (it->kind == ITEM_DEFERRED && it->release != NULL)
        it->release(it->ctx, it->buf);
    it->release = NULL;
}

static ulp_status item_write(ulp_session *s, ulp__item *it, ulp_error *err, int *fatal)
{
    *fatal = 1;
    switch (it->kind) {
    case ITEM_CAPTURE:
        return ulp__writer_add(s->writer, &it->desc, it->data, it->nbytes, NULL, err);
    case ITEM_DEFERRED:
        /* ready() ran before, outside the HDF5 lock (it may block long). */
        return ulp__writer_add(s->writer, &it->desc, it->buf, it->nbytes, NULL, err);
    case ITEM_ATTR:
        return ulp__writer_set_attr(s->writer, it->group, it->key, it->value, err);
    case ITEM_KERNELS:
        return ulp__writer_append_kernels(s->writer, it->rows, it->names, it->nrows, err);
    case ITEM_GEMMS:
        return ulp__writer_append_gemms(s->writer, it->gemms, it->nrows, err);
    case ITEM_DIGESTS:
        return ulp__writer_add_digests(s->writer, &it->desc, it->data, it->nbytes / 8, err);
    case ITEM_KEPT:
        return ulp__writer_add_kept(s->writer, &it->desc, it->data, (it->nbytes - it->kept) / 8,
                                    (const char *)it->data + (it->nbytes - it->kept), it->kept,
                                    err);
    }
    return ULP_EINVAL;
}

static void drain(ulp_session *s);

/*
 * The writer thread owns every write to the file: it creates it, drains
 * the queue, and closes it.  It runs with every signal blocked, so the
 * signals a write can raise (SIGXFSZ past a file-size limit) stay away from
 * the host's threads, whose default action would kill the program.
 */
void *ulp__session_writer_main(void *arg)
{
    ulp_session *s = arg;
    ulp_status st = ulp__session_file_open(s, s->open);
    pthread_mutex_lock(&s->mu);
    s->open_status = st;
    s->opened = 1;
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->mu);
    if (st != ULP_OK)
        return NULL;

    drain(s);

    ulp_error err;
    ulp_error_clear(&err);
    st = ulp__session_file_close(s, &err);
    pthread_mutex_lock(&s->mu);
    s->close_status = st;
    s->synced = s->completed; /* nothing is left to link */
    pthread_cond_broadcast(&s->done);
    memcpy(s->close_msg, err.msg, sizeof(s->close_msg));
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Records a failed item or link batch.  s->mu held. */
static void note_error(ulp_session *s, ulp_status st, int fatal, const ulp_error *err)
{
    int report = fatal ? !s->failed : !s->drop_reported;
    if (fatal) {
        s->failed = 1;
        s->fail_status = st == ULP_ENOSPC ? ULP_ENOSPC : ULP_EIO;
        /* Waiters for room must see the failure. */
        pthread_cond_broadcast(&s->room);
    } else {
        s->drop_reported = 1;
    }
    if (s->first_error == ULP_OK)
        s->first_error = fatal ? s->fail_status : st;
    if (report)
        fprintf(stderr, "ulpprof: capture to '%s' failed: %s\n", s->path, err->msg);
}

/*
 * Links the captures that wait for their groups (ulp__writer_sync) and
 * wakes the flushers; for a flush (ulp__writer_flush) also writes out the
 * digests that wait in memory.  s->mu held; released during the write.
 */
static void sync_links(ulp_session *s, int flush)
{
    uint64_t upto = s->completed;
    int failed = s->failed;
    pthread_mutex_unlock(&s->mu);
    ulp_error err;
    ulp_error_clear(&err);
    ulp_status st = ULP_OK;
    if (!failed) {
        ulp__session_h5_lock();
        st = flush ? ulp__writer_flush(s->writer, &err) : ulp__writer_sync(s->writer, &err);
        ulp__session_h5_unlock();
    }
    pthread_mutex_lock(&s->mu);
    if (st != ULP_OK)
        note_error(s, st, 1, &err);
    /* An idle link leaves the digests waiting in memory: not synced yet. */
    if (s->synced < upto && (flush || failed || ulp__writer_digests_pending(s->writer) == 0))
        s->synced = upto;
    pthread_cond_broadcast(&s->done);
}

/* CLOCK_MONOTONIC in ns: the clock of s->work's timed wait (session.c). */
static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Waits (s->mu held) for s->work: until `link_by` (monotonic_ns; 0: no
 * limit), and while *nap, which says that an item was written since the
 * last nap ran out, at most s->nap_ns (ULP__SESSION_NAP_NS), during which
 * appends do not wake it (session_internal.h).  A nap that runs out with the queue
 * still empty clears *nap: the next wait is for good.
 */
static void wait_work(ulp_session *s, int64_t link_by, int *nap)
{
    int64_t until = link_by, nap_end = 0;
    if (*nap) {
        nap_end = monotonic_ns() + s->nap_ns;
        if (until == 0 || nap_end < until)
            until = nap_end;
    }
    if (until == 0) {
        s->sleeping = 1;
        pthread_cond_wait(&s->work, &s->mu);
        s->sleeping = 0;
        return;
    }
    struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    s->napping = *nap;
    s->sleeping = !*nap;
    pthread_cond_timedwait(&s->work, &s->mu, &ts);
    s->napping = s->sleeping = 0;
    if (*nap && s->head == NULL && monotonic_ns() >= nap_end)
        *nap = 0;
}

/*
 * Waits for an item, for the end, or for the links that wait to be due:
 * when a flush asks for them, or, with the queue empty, link_by
 * (monotonic_ns; 0 when none wait).  *nap as wait_work's.  Returns the
 * item to write, or NULL at the end; s->mu held either way.
 */
static ulp__item *next_item(ulp_session *s, int64_t *link_by, int *nap)
{
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int idle = s->head == NULL;
        if (idle && s->closing && s->pending == 0)
            return NULL; /* the close links the rest */
        /* A flush asks whether or not captures wait: digests may wait alone. */
        int flush = s->sync_want > s->synced && s->completed >= s->sync_want;
        if (flush || (*link_by != 0 && idle && monotonic_ns() >= *link_by)) {
            sync_links(s, flush);
            *link_by = 0;
            continue;
        }
        if (!idle)
            break;
        wait_work(s, *link_by, nap);
    }
    ulp__item *it = s->head;
    s->head = it->next;
    if (s->head == NULL)
        s->tail = NULL;
    return it;
}

/* Writes queued items until the session closes and the queue is empty. */
static void drain(ulp_session *s)
{
    int64_t link_by = 0;
    int nap = 0;
    for (;;) {
        ulp__item *it = next_item(s, &link_by, &nap);
        if (it == NULL) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        int failed = s->failed;
        pthread_mutex_unlock(&s->mu);

        ulp_error err;
        ulp_error_clear(&err);
        ulp_status st = ULP_OK;
        int fatal = 0;
        if (!failed) {
            if (it->kind == ITEM_DEFERRED && it->ready != NULL && it->ready(it->ctx) != 0) {
                /* The producer could not deliver the bytes: drop this
                 * capture, keep the file and the session. */
                it->ready = NULL;
                st = ulp__error(&err, ULP_EIO, "capture '%s' dropped: its bytes never became ready",
                                it->desc.name);
            } else {
                it->ready = NULL;
                ulp__session_h5_lock();
                st = item_write(s, it, &err, &fatal);
                ulp__session_h5_unlock();
            }
        } else if (it->kind == ITEM_DEFERRED && it->ready != NULL) {
            /* Dropped, but the producer's copy must be finished before its
             * buffer is released. */
            it->ready(it->ctx);
            it->ready = NULL;
        }

        item_release(it);
        pthread_mutex_lock(&s->mu);
        if (st != ULP_OK)
            note_error(s, st, fatal, &err);
        s->held -= it->charge;
        s->completed++;
        nap = 1;
        /* Nothing waits for a link (or nothing more will be written): the
         * groups name every capture written so far. */
        if (s->failed || (ulp__writer_unlinked_count(s->writer) == 0 &&
                          ulp__writer_digests_pending(s->writer) == 0)) {
            s->synced = s->completed;
            link_by = 0;
        } else if (link_by == 0 && ulp__writer_unlinked_count(s->writer) > 0) {
            link_by = monotonic_ns() + ULP__SESSION_LINK_WAIT_NS;
        }
        int kept = ulp__staging_give(s, it);
        pthread_cond_broadcast(&s->room);
        pthread_cond_broadcast(&s->done);
        pthread_mutex_unlock(&s->mu);
        if (!kept)
            free(it);
    }
}

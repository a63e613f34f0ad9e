/*
 * The writer thread: it creates the file, writes queued items in order
 * until the session closes, and closes the file.  A write error fails the
 * session; a deferred capture whose bytes never arrive is dropped alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    memcpy(s->close_msg, err.msg, sizeof(s->close_msg));
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Writes queued items until the session closes and the queue is empty. */
static void drain(ulp_session *s)
{
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (s->head == NULL && !(s->closing && s->pending == 0))
            pthread_cond_wait(&s->work, &s->mu);
        ulp__item *it = s->head;
        if (it == NULL) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        s->head = it->next;
        if (s->head == NULL)
            s->tail = NULL;
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
        if (st != ULP_OK) {
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
                fprintf(stderr, "ulpprof: capture to '%s' failed: %s\n", s->path, err.msg);
        }
        s->held -= it->charge;
        s->completed++;
        int kept = ulp__staging_give(s, it);
        pthread_cond_broadcast(&s->room);
        pthread_cond_broadcast(&s->done);
        pthread_mutex_unlock(&s->mu);
        if (!kept)
            free(it);
    }
}

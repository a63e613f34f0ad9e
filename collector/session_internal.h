/*
 * The inside of a capture session, shared by the files that implement it:
 *   session.c          open, close, flush and the small getters;
 *   session_request.c  requests (captures, attributes, kernel batches) made into items;
 *   session_queue.c    the bounded FIFO: admission, staging blocks, the pool;
 *   session_thread.c   the writer thread that drains the queue into the file;
 *   session_fork.c     what a fork child inherits, and the locks that make it safe.
 * session.h says how a session behaves; this header is internal to those files.
 */
#ifndef ULPPROF_COLLECTOR_SESSION_INTERNAL_H
#define ULPPROF_COLLECTOR_SESSION_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "capture_env.h"
#include "common/error.h"
#include "session.h"
#include "writer.h"

typedef enum ulp__item_kind {
    ITEM_CAPTURE,  /* bytes copied into the item                       */
    ITEM_DEFERRED, /* bytes in a producer's buffer, valid after ready() */
    ITEM_ATTR,     /* a /run or /env attribute                          */
    ITEM_KERNELS,  /* a batch of /trace/kernels rows                    */
    ITEM_GEMMS     /* a batch of /trace/gemms rows                      */
} ulp__item_kind;

typedef struct ulp__item {
    struct ulp__item *next;
    ulp__item_kind kind;
    size_t charge; /* bytes counted against the bound */
    size_t cap;    /* bytes allocated for the item    */

    /* ITEM_CAPTURE, ITEM_DEFERRED */
    ulp_capture_desc desc; /* name and shape point inside     */
    int64_t shape[ULP_MAX_RANK];
    const void *data;
    size_t nbytes;
    void *buf; /* ITEM_DEFERRED                   */
    int (*ready)(void *ctx);
    void (*release)(void *ctx, void *buf);
    void *ctx;

    /* ITEM_ATTR */
    ulp__writer_group group;
    const char *key, *value;

    /* ITEM_GEMMS (nrows of them) */
    ulp__gemm_row *gemms;

    /* ITEM_KERNELS */
    ulp__kernel_row *rows;
    const char **names;
    size_t nrows;
} ulp__item;

struct ulp_session {
    char *path;
    ulp__writer *writer; /* touched by the writer thread only */
    pthread_t thread;
    size_t bound; /* bytes                            */

    pthread_mutex_t mu;  /* guards everything below          */
    pthread_cond_t room; /* admission: bytes freed / ticket   */
    pthread_cond_t work; /* writer: an item or close          */
    pthread_cond_t done; /* flushers: items completed         */
    ulp__item *head, *tail;
    size_t held; /* bytes charged to admitted items   */
    uint64_t ticket_next, ticket_serving;
    uint64_t appended, completed; /* items queued / written or dropped */
    unsigned pending;             /* admitted, not yet appended        */
    int closing;
    int failed;             /* a write error: refuse requests    */
    ulp_status fail_status; /* ... with this status (EIO, ENOSPC) */
    int drop_reported;
    ulp_status first_error;
    int has_step;
    int64_t step;
    ulp__item *spares; /* staging blocks kept for reuse     */
    size_t spare_bytes;
    unsigned spare_count;

    /* Opening and closing, done by the writer thread (see writer_main). */
    const struct ulp__open_args *open; /* set while ulp_session_open waits  */
    int opened;                        /* the thread finished opening       */
    ulp_status open_status;
    ulp_status close_status;
    char close_msg[ULP_ERROR_MSG_MAX];

    /* Fork handling (g_registry_mu). */
    struct ulp_session *registry_next;
    int fd;     /* HDF5's descriptor of the file     */
    int forked; /* this is a fork child's dead copy  */
};

static inline int64_t ulp__now_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- the queue (session_queue.c) ----------------------------------------------------- */

/* Fills an item in place; `mem` holds at least the size given to ulp__session_enqueue(). */
typedef void (*ulp__item_builder)(ulp__item *mem, void *arg);

/*
 * Admits `charge` bytes, gets a block of `size` bytes (a kept one, or new),
 * builds the item outside the lock -- so that threads copy in parallel --
 * and appends it.
 */
ulp_status ulp__session_enqueue(ulp_session *s, size_t charge, size_t size, ulp__item_builder build,
                                void *arg);

/* Keeps a written block for reuse when it fits; 1 if kept.  s->mu held. */
int ulp__session_pool_keep(ulp_session *s, ulp__item *it);

/* Frees a list of blocks linked by `next`. */
void ulp__item_list_free(ulp__item *it);

/* --- the writer thread (session_thread.c) -------------------------------------------- */

/* What the writer thread needs to create the file. */
typedef struct ulp__open_args {
    const char *label, *writer_name;
    const ulp__kvlist *run, *env;
    ulp_error *err;
} ulp__open_args;

/* The writer thread's body; `arg` is the session, whose `open` is set. */
void *ulp__session_writer_main(void *arg);

/* --- fork handling (session_fork.c) -------------------------------------------------- */

/* Installs the fork handlers, once per process. */
void ulp__session_fork_watch(void);

/* A session used in a fork child: say so once, then answer ECLOSED. */
ulp_status ulp__session_forked_refusal(void);

/*
 * Creates the file, fills /run and /env, and registers the session for the
 * fork handler in one step (no fork sees the file open but unregistered).
 */
ulp_status ulp__session_file_open(ulp_session *s, const ulp__open_args *a);

/*
 * Closes the file and takes the session out of the fork registry in one
 * step (same lock order as the fork handler: registry, then HDF5).
 */
ulp_status ulp__session_file_close(ulp_session *s, ulp_error *err);

/* Held around every HDF5 call the sessions make, so that no fork happens inside HDF5. */
void ulp__session_h5_lock(void);
void ulp__session_h5_unlock(void);

#endif /* ULPPROF_COLLECTOR_SESSION_INTERNAL_H */

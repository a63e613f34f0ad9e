/*
 * The inside of a capture session, shared by the files that implement it:
 *   session.c          open, close, flush and the small getters;
 *   session_request.c  requests (captures, attributes, kernel batches) made into items;
 *   session_queue.c    the bounded FIFO: admission and staging blocks;
 *   session_staging.c  the ring the blocks come from, populated ahead of use;
 *   session_thread.c   the writer thread that drains the queue into the file;
 *   session_fork.c     what a fork child inherits, and the locks that make it safe.
 * session.h says how a session behaves; this header is internal to those files.
 */
#ifndef ULPPROF_CAPTURE_SESSION_INTERNAL_H
#define ULPPROF_CAPTURE_SESSION_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "capture_env.h"
#include "common/error.h"
#include "format/writer.h"
#include "session.h"

typedef enum ulp__item_kind {
    ITEM_CAPTURE,  /* bytes copied into the item                       */
    ITEM_DEFERRED, /* bytes in a producer's buffer, valid after ready() */
    ITEM_ATTR,     /* a /run or /env attribute                          */
    ITEM_KERNELS,  /* a batch of /trace/kernels rows                    */
    ITEM_GEMMS,    /* a batch of /trace/gemms rows                      */
    ITEM_DIGESTS,  /* a capture's row digests: `data` holds nbytes/8    */
    ITEM_KEPT      /* digests, then the capture's bytes: `kept` of them */
} ulp__item_kind;

typedef struct ulp__item {
    struct ulp__item *next;
    ulp__item_kind kind;
    size_t charge; /* bytes counted against the bound */
    size_t cap;    /* bytes allocated for the item    */

    /* ITEM_CAPTURE, ITEM_DEFERRED */
    ulp__desc desc; /* name and shape point inside     */
    int64_t shape[ULP_MAX_RANK];
    const void *data;
    size_t nbytes;
    size_t kept; /* ITEM_KEPT: the last `kept` of nbytes */
    void *buf;   /* ITEM_DEFERRED                   */
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

/*
 * The staging ring (session_staging.c); fields under the session's mutex.
 * Used: [tail, head) on the first lap (wrap == 0); [tail, wrap) and
 * [0, head) once a block did not fit at the end and went to the start.
 */
typedef struct ulp__staging {
    char *base; /* NULL: no ring, every block from malloc */
    char *map;
    size_t map_bytes, cap;
    size_t head, tail, wrap;
    size_t live;         /* blocks handed out, not given back        */
    size_t hwm;          /* the furthest a block ever ended          */
    size_t touched;      /* [0, touched) is populated, or being so   */
    size_t target;       /* the prefault thread populates up to here */
    size_t populated;    /* bytes the prefault thread populated      */
    size_t populate_end; /* the cap, in whole pages                  */
    size_t reserve;      /* [0, reserve) populated from the open    */
    int busy;            /* it is populating (outside the lock)      */
    int ready;           /* the reserve is populated, or never will be */
    int stop, has_thread;
    pthread_cond_t wake; /* the prefault thread: target or stop     */
    pthread_t thread;
} ulp__staging;

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
    uint64_t sync_want, synced;   /* groups name every capture of the first
                                     `synced` items; a flush wants sync_want */
    unsigned pending;             /* admitted, not yet appended        */
    int napping;                  /* the writer looks again within nap_ns:
                                     an append need not wake it          */
    int sleeping;                 /* the writer waits, not napping      */
    int64_t nap_ns;               /* ULP__SESSION_NAP_NS (tests set it) */
    uint64_t wakes;               /* appends that woke a sleeping writer */
    int closing;
    int failed;             /* a write error: refuse requests    */
    ulp_status fail_status; /* ... with this status (EIO, ENOSPC) */
    int drop_reported;
    ulp_status first_error;
    int has_step;
    int64_t step;
    ulp__staging staging;

    /* Digests and the selection (session_select.c). */
    ulp_capture_mode mode;
    struct ulp__select *sel;
    size_t nsel, sel_cap;

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

/*
 * The writer thread lets captures wait for their batch's flush, journal
 * records and links (writer_link.c): up to this many (and 1 MiB of data),
 * until the queue has been empty for ULP__SESSION_LINK_WAIT_NS since the
 * first one waited, or until a flush asks.  512 rather than 64: the links
 * of a batch are made name by name, so that 100 names get a few links
 * each per batch instead of one (writer CPU per capture at 1M captures of
 * 100 names: 61 us instead of 105).
 */
#define ULP__SESSION_LINK_BATCH   512
#define ULP__SESSION_LINK_WAIT_NS 100000000 /* 0.1 s */

/*
 * Wakeups are coalesced.  A writer that wrote something naps (a timed
 * wait of ULP__SESSION_NAP_NS) before it sleeps for good, and an append
 * during its nap does not wake it: waking a thread that waits on another
 * CPU costs the producer a futex call and an interprocessor interrupt
 * (tens of microseconds on a virtual machine), per capture, on the
 * host's own thread.  A decode step's dozen small captures now cost the
 * writer one timed wakeup instead of a dozen.  An append still wakes it
 * at once when it would sleep for good, for an item of
 * ULP__SESSION_WAKE_BYTES or more (whose copy is worth starting now),
 * for a deferred item (its producer waits for its buffer back), or when
 * the queue holds a quarter of the bound; a flush, a close and a producer
 * that waits for room wake it too.
 */
#define ULP__SESSION_NAP_NS     10000000 /* 10 ms */
#define ULP__SESSION_WAKE_BYTES (256u << 10)

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
 * Admits `charge` bytes, gets a block of `size` bytes (the ring's, or new),
 * builds the item outside the lock -- so that threads copy in parallel --
 * and appends it.
 */
ulp_status ulp__session_enqueue(ulp_session *s, size_t charge, size_t size, ulp__item_builder build,
                                void *arg);

/* --- the staging ring (session_staging.c) ------------------------------------------- */

/* A huge page: the ring and the large blocks outside it are aligned to it. */
#define ULP__HUGE_BYTES ((size_t)2 << 20)

/* Maps the ring and starts its prefault thread; without them blocks come from malloc. */
void ulp__staging_start(ulp_session *s);

/*
 * Waits (on s->done, s->mu held) until the reserve is populated, or the
 * prefault thread gave up: the session's first captures then copy into
 * pages that exist instead of clearing them on the calling thread.
 */
void ulp__staging_wait_ready(ulp_session *s);

/*
 * Stops the prefault thread; every block given back.  From the process's
 * second closed ring on, the ring is kept for its next session of the same
 * bound (one ring at most; its pages left for the kernel to take back,
 * MADV_FREE), else unmapped.
 */
void ulp__staging_stop(ulp_session *s);

/* Unmaps the kept ring, if any; the next ring closed is then a first one (tests). */
void ulp__staging_release_kept(void);

/* 1 if a closed session's ring is kept (tests). */
int ulp__staging_kept(void);

/* fork(2): the kept ring is held across it (prepare/parent) and is not in the child. */
void ulp__staging_fork_prepare(void);
void ulp__staging_fork_parent(void);
void ulp__staging_fork_child(void);

/* 1 if a block of `size` bytes comes from the ring (now or once it drains).  s->mu held. */
int ulp__staging_holds(const ulp_session *s, size_t size);

/* A ring block of `size` bytes or more, its `cap` set; NULL while there is no room.  s->mu held. */
ulp__item *ulp__staging_take(ulp_session *s, size_t size);

/* Gives a written block back to the ring; 0 if it is not the ring's (free() it).  s->mu held. */
int ulp__staging_give(ulp_session *s, ulp__item *it);

/* --- digests and the selection (session_select.c) ------------------------------------ */

typedef struct ulp__select {
    char *name;
    int64_t request, first, last;
} ulp__select;

/*
 * What one capture writes under the session's mode and selection: the
 * digests (*digests, *rows; malloc'd, NULL when the mode has none), kept
 * in full beside them in digest mode (*kept 1: the capture's `nbytes`
 * copied after the *rows digests) and the data
 * (*want_data; *sub is `d`, or a descriptor of the selected rows whose
 * buffers *owned holds, to be freed).  ULP_ENOMEM when out of memory.
 */
ulp_status ulp__session_plan(ulp_session *s, const ulp__desc *d, size_t nbytes, uint64_t **digests,
                             uint64_t *rows, int *kept, int *want_data, ulp__desc *sub,
                             size_t *sub_bytes, void **owned);

/* Frees the selection (close). */
void ulp__session_select_free(ulp_session *s);

/*
 * The capture mode a session opens with: `given` (the options'), else
 * ULPPROF_CAPTURE_MODE, else data; ULP_EINVAL for a name that is none.
 */
ulp_status ulp__session_mode_at_open(const char *given, ulp_capture_mode *mode, ulp_error *err);
/* Applies ULPPROF_SELECT to a new session. */
ulp_status ulp__session_select_env(ulp_session *s, ulp_error *err);

/* --- the writer thread (session_thread.c) -------------------------------------------- */

/* What the writer thread needs to create the file. */
typedef struct ulp__open_args {
    const char *label, *writer_name;
    unsigned writer_flags; /* ulp__writer_create_as() */
    const ulp__kvlist *run, *env, *observed;
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

#endif /* ULPPROF_CAPTURE_SESSION_INTERNAL_H */

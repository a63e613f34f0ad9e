/*
 * The process-wide default session behind ulp_capture_host() and friends:
 * opened at the first capture from the environment (or explicitly by
 * ulp_capture_open()), closed by ulp_capture_close() or at exit.
 *
 * A read-write lock guards the session pointer: captures hold it shared
 * for their whole call (so they run in parallel and the session cannot be
 * freed under them), open and close hold it exclusively.
 */
#include <hdf5.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/writer.h"
#include "session.h"

typedef enum state {
    STATE_UNTRIED = 0, /* nothing opened yet: the first capture tries the environment */
    STATE_OPEN,        /* g_session is live                                            */
    STATE_OFF,         /* opening failed or was disabled: g_status says which           */
    STATE_CLOSED       /* closed by ulp_capture_close() or at exit                      */
} state;

static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static state g_state = STATE_UNTRIED;
static ulp_session *g_session;
static ulp_status g_status = ULP_OK;
static pthread_once_t g_atexit_once = PTHREAD_ONCE_INIT;
static ulp_session *g_forked; /* a fork child's dead copy, kept reachable */
/*
 * Set while ulp_capture_close() runs: new calls are refused before they
 * take the lock.  Without it, threads that capture without pause keep the
 * lock shared forever (readers are preferred), and close -- or exit(),
 * which calls it -- waits forever.
 */
static atomic_int g_closing;
/* This thread holds the lock shared: a signal handler that interrupted it
 * and calls in again is refused (ULP_EBUSY) instead of deadlocking. */
static __thread int t_holding;

/*
 * In a fork child the default session is the parent's (session_fork.c turns the
 * child's copy into a dead one).  Captures there return ULP_EDISABLED: a
 * child reopening from the environment could truncate the parent's file
 * when ULPPROF_OUTPUT has no %p.  ulp_capture_open() works in the child.
 * The lock may have been held by a thread that does not exist in the child.
 */
static void atfork_child(void)
{
    static const pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
    memcpy(&g_lock, &fresh, sizeof(g_lock));
    if (g_state == STATE_OPEN) {
        g_forked = g_session;
        g_session = NULL;
        g_state = STATE_OFF;
        g_status = ULP_EDISABLED;
    }
}

static void close_at_exit(void)
{
    ulp_capture_close();
}

static void register_atexit(void)
{
    /*
     * Exit handlers run in reverse order of registration, and HDF5 registers
     * its own (which closes every open id) when it initializes.  Initialize
     * it first, so that our handler runs before it and can still drain the
     * queue into the file.
     */
    H5open();
    ulp__writer_exit_guard(); /* runs after close_at_exit, before HDF5's handler */
    pthread_atfork(NULL, NULL, atfork_child);
    if (atexit(close_at_exit) != 0)
        fprintf(stderr, "ulpprof: cannot register the exit handler: the default session "
                        "must be closed with ulp_capture_close()\n");
}

/* Opens the default session.  The write lock is held. */
static ulp_status open_locked(const ulp_session_options *opts)
{
    pthread_once(&g_atexit_once, register_atexit);
    ulp_session *s = NULL;
    ulp_status st = ulp_session_open(opts, &s, NULL);
    if (st == ULP_OK) {
        g_session = s;
        g_state = STATE_OPEN;
    } else {
        g_state = STATE_OFF;
    }
    g_status = st;
    return st;
}

/* Ends what acquire() began. */
static void release(void)
{
    t_holding = 0;
    pthread_rwlock_unlock(&g_lock);
}

/*
 * Takes the lock shared with a live session in *out, opening the session
 * from the environment on the first call.  On ULP_OK the caller releases
 * the lock; otherwise it is already released.
 */
static ulp_status acquire(ulp_session **out)
{
    if (t_holding)
        return ULP_EBUSY;
    if (atomic_load(&g_closing))
        return ULP_ECLOSED;
    pthread_rwlock_rdlock(&g_lock);
    if (g_state == STATE_UNTRIED) {
        pthread_rwlock_unlock(&g_lock);
        pthread_rwlock_wrlock(&g_lock);
        if (g_state == STATE_UNTRIED)
            open_locked(NULL);
        pthread_rwlock_unlock(&g_lock);
        pthread_rwlock_rdlock(&g_lock);
    }
    ulp_status st;
    switch (g_state) {
    case STATE_OPEN:
        *out = g_session;
        t_holding = 1;
        return ULP_OK;
    case STATE_OFF:
        /* Reported (or silently disabled) when the open was tried. */
        st = g_status;
        break;
    default:
        st = ULP_ECLOSED;
        break;
    }
    pthread_rwlock_unlock(&g_lock);
    return st;
}

ulp_status ulp_capture_open(const char *path, const char *label)
{
    ulp_session_options opts;
    ulp_session_options_init(&opts);
    opts.path = path;
    opts.label = label;
    pthread_rwlock_wrlock(&g_lock);
    ulp_status st;
    if (g_state == STATE_OPEN) {
        fprintf(stderr,
                "ulpprof: cannot open the default capture session: '%s' is open; "
                "close it first\n",
                ulp_session_path(g_session));
        st = ULP_EINVAL;
    } else {
        st = open_locked(&opts);
    }
    pthread_rwlock_unlock(&g_lock);
    return st;
}

ulp_status ulp_capture_host(const char *name, const void *ptr, ulp_dtype dtype, int ndim,
                            const int64_t *shape, int32_t layer, ulp_role role)
{
    ulp_session *s = NULL;
    ulp_status st = acquire(&s);
    if (st != ULP_OK)
        return st;
    ulp__desc d = ulp__capture_desc_make(name, ptr, dtype, ndim, shape, layer, role);
    st = ulp__session_capture(s, &d);
    release();
    return st;
}

ulp_status ulp_capture_set_run(const char *key, const char *value)
{
    ulp_session *s = NULL;
    ulp_status st = acquire(&s);
    if (st != ULP_OK)
        return st;
    st = ulp_session_set_run(s, key, value);
    release();
    return st;
}

ulp_status ulp_capture_set_observed(const char *key, const char *value)
{
    ulp_session *s = NULL;
    ulp_status st = acquire(&s);
    if (st != ULP_OK)
        return st;
    st = ulp_session_set_observed(s, key, value);
    release();
    return st;
}

ulp_status ulp_capture_set_step(int64_t step)
{
    ulp_session *s = NULL;
    ulp_status st = acquire(&s);
    if (st != ULP_OK)
        return st;
    st = ulp_session_set_step(s, step);
    release();
    return st;
}

ulp_status ulp_capture_flush(void)
{
    ulp_session *s = NULL;
    ulp_status st = acquire(&s);
    if (st != ULP_OK)
        return st;
    st = ulp_session_flush(s);
    release();
    return st;
}

ulp_status ulp_capture_close(void)
{
    if (t_holding)
        return ULP_EBUSY;
    atomic_store(&g_closing, 1);
    pthread_rwlock_wrlock(&g_lock);
    ulp_status st = ULP_OK;
    if (g_state == STATE_OPEN) {
        st = ulp_session_close(g_session);
        g_session = NULL;
    }
    /* Later captures must not reopen (and truncate) the file. */
    if (g_state != STATE_UNTRIED)
        g_state = STATE_CLOSED;
    atomic_store(&g_closing, 0);
    pthread_rwlock_unlock(&g_lock);
    return st;
}

ulp_session *ulp_capture_session(void)
{
    pthread_rwlock_rdlock(&g_lock);
    ulp_session *s = g_state == STATE_OPEN ? g_session : NULL;
    pthread_rwlock_unlock(&g_lock);
    return s;
}

/*
 * Fork handling: the locks held around HDF5 and the registry of open
 * sessions, so that a child forked from a capturing process inherits dead
 * copies that cannot touch the parent's file.
 */
#define _GNU_SOURCE /* O_TMPFILE */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "session_internal.h"

/* --- fork --------------------------------------------------------------------------
 *
 * A child forked from a capturing process inherits the session without its
 * writer thread (closing it would join a thread that does not exist: the
 * child would hang at exit), possibly with locks held by threads that do
 * not exist in it, and with HDF5's handle of the parent's file, which
 * HDF5's own exit handler closes, writing out the child's copy of its
 * metadata.  So:
 *   - prepare: no thread of ours is inside HDF5 at the fork (g_h5_mu is
 *     held around every HDF5 call the sessions make), so the child's copy
 *     of HDF5's state is consistent and clean;
 *   - child: each session becomes a dead copy (every call returns at once,
 *     nothing is freed or joined), and HDF5's descriptor of the file is
 *     pointed at an anonymous temporary file, so that nothing the child's
 *     HDF5 writes can reach the parent's file.
 */
static pthread_mutex_t g_h5_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static ulp_session *g_registry;
static pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

static void atfork_prepare(void)
{
    pthread_mutex_lock(&g_registry_mu);
    pthread_mutex_lock(&g_h5_mu);
    ulp__staging_fork_prepare();
}

static void atfork_parent(void)
{
    ulp__staging_fork_parent();
    pthread_mutex_unlock(&g_h5_mu);
    pthread_mutex_unlock(&g_registry_mu);
}

static void atfork_child(void)
{
    /* The dead copies stay in the registry: nothing frees them, and they
     * stay reachable (leak checkers), marked so that a later fork skips them. */
    for (ulp_session *s = g_registry; s != NULL; s = s->registry_next) {
        if (s->forked)
            continue;
        s->forked = 1;
        if (s->fd < 0)
            continue;
        int t = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (t < 0)
            t = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (t >= 0) {
            dup2(t, s->fd);
            close(t);
        }
        s->fd = -1;
    }
    ulp__staging_fork_child();
    /* The forking thread held both in atfork_prepare; it is this thread now. */
    pthread_mutex_unlock(&g_h5_mu);
    pthread_mutex_unlock(&g_registry_mu);
}

static void atfork_register(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* A session used in a fork child: say so once, then answer ECLOSED. */
ulp_status ulp__session_forked_refusal(void)
{
    static int said;
    if (!said) {
        said = 1;
        fprintf(stderr,
                "ulpprof: capture is off in process %ld, forked from a capturing "
                "process: open a new session there\n",
                (long)getpid());
    }
    return ULP_ECLOSED;
}

/* Fills the new file's /run, /env and /observed. */
static ulp_status write_groups(ulp__writer *w, const ulp__kvlist *run, const ulp__kvlist *env,
                               const ulp__kvlist *obs, ulp_error *err)
{
    ulp_status st = ULP_OK;
    for (size_t i = 0; st == ULP_OK && obs && i < obs->count; i++)
        st = ulp__writer_set_attr(w, ULP__WRITER_OBSERVED, obs->items[i].key, obs->items[i].value,
                                  err);
    for (size_t i = 0; st == ULP_OK && i < run->count; i++)
        st = ulp__writer_set_attr(w, ULP__WRITER_RUN, run->items[i].key, run->items[i].value, err);
    for (size_t i = 0; st == ULP_OK && i < env->count; i++)
        st = ulp__writer_set_attr(w, ULP__WRITER_ENV, env->items[i].key, env->items[i].value, err);
    return st;
}

/*
 * Creates the file, fills /run and /env, and registers the session for the
 * fork handler in one step (no fork sees the file open but unregistered).
 */
ulp_status ulp__session_file_open(ulp_session *s, const ulp__open_args *a)
{
    ulp__writer *w = NULL;
    pthread_mutex_lock(&g_registry_mu);
    pthread_mutex_lock(&g_h5_mu);
    ulp_status st = ulp__writer_create_as(s->path, a->label, a->writer_name, ulp__now_unix_ns(),
                                          a->writer_flags, &w, a->err);
    if (st == ULP_OK)
        st = write_groups(w, a->run, a->env, a->observed, a->err);
    if (st == ULP_OK) {
        ulp__writer_set_link_batch(w, ULP__SESSION_LINK_BATCH);
        s->writer = w;
        s->fd = ulp__writer_fd(w);
        s->registry_next = g_registry;
        g_registry = s;
    } else if (w != NULL) {
        ulp__writer_close(w, NULL);
    }
    pthread_mutex_unlock(&g_h5_mu);
    pthread_mutex_unlock(&g_registry_mu);
    return st;
}

/*
 * Closes the file and takes the session out of the fork registry in one
 * step (same lock order as the fork handler: registry, then HDF5).
 */
ulp_status ulp__session_file_close(ulp_session *s, ulp_error *err)
{
    pthread_mutex_lock(&g_registry_mu);
    pthread_mutex_lock(&g_h5_mu);
    ulp_status st = ulp__writer_close(s->writer, err);
    s->writer = NULL;
    s->fd = -1;
    for (ulp_session **pp = &g_registry; *pp != NULL; pp = &(*pp)->registry_next) {
        if (*pp == s) {
            *pp = s->registry_next;
            break;
        }
    }
    pthread_mutex_unlock(&g_h5_mu);
    pthread_mutex_unlock(&g_registry_mu);
    return st;
}

void ulp__session_fork_watch(void)
{
    pthread_once(&g_atfork_once, atfork_register);
}

void ulp__session_h5_lock(void)
{
    pthread_mutex_lock(&g_h5_mu);
}

void ulp__session_h5_unlock(void)
{
    pthread_mutex_unlock(&g_h5_mu);
}

/* ulp_session: a bounded FIFO of capture requests and the thread that writes them. */
#define _GNU_SOURCE /* O_TMPFILE */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "capture_env.h"
#include "common/error.h"
#include "session.h"

/* --- small public helpers ------------------------------------------------------ */

void ulp_session_options_init(ulp_session_options *opts)
{
    if (opts == NULL)
        return;
    memset(opts, 0, sizeof(*opts));
    opts->record_env = 1;
}

void ulp_capture_desc_init(ulp_capture_desc *d)
{
    if (d == NULL)
        return;
    memset(d, 0, sizeof(*d));
    d->dtype = ULP_DTYPE_INVALID;
    d->layer = ULP_LAYER_NONE;
    d->role = ULP_ROLE_ACTIVATION;
    d->step = ULP_STEP_NONE;
}

ulp_capture_desc ulp__capture_desc_make(const char *name, const void *data, ulp_dtype dtype,
                                        int ndim, const int64_t *shape, int32_t layer,
                                        ulp_role role)
{
    ulp_capture_desc d;
    ulp_capture_desc_init(&d);
    d.name = name;
    d.data = data;
    d.dtype = dtype;
    d.ndim = ndim;
    d.shape = shape;
    d.layer = layer;
    d.role = role;
    return d;
}

/* --- the queue -------------------------------------------------------------------- */

typedef enum item_kind {
    ITEM_CAPTURE,  /* bytes copied into the item                       */
    ITEM_DEFERRED, /* bytes in a producer's buffer, valid after ready() */
    ITEM_ATTR,     /* a /run or /env attribute                          */
    ITEM_KERNELS   /* a batch of /trace/kernels rows                    */
} item_kind;

typedef struct item {
    struct item *next;
    item_kind kind;
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

    /* ITEM_KERNELS */
    ulp__kernel_row *rows;
    const char **names;
    size_t nrows;
} item;

struct ulp_session {
    char *path;
    ulp__writer *writer; /* touched by the writer thread only */
    pthread_t thread;
    size_t bound; /* bytes                            */

    pthread_mutex_t mu;  /* guards everything below          */
    pthread_cond_t room; /* admission: bytes freed / ticket   */
    pthread_cond_t work; /* writer: an item or close          */
    pthread_cond_t done; /* flushers: items completed         */
    item *head, *tail;
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
    item *spares; /* staging blocks kept for reuse     */
    size_t spare_bytes;
    unsigned spare_count;

    /* Opening and closing, done by the writer thread (see writer_main). */
    const struct open_args *open; /* set while ulp_session_open waits  */
    int opened;                   /* the thread finished opening       */
    ulp_status open_status;
    ulp_status close_status;
    char close_msg[ULP_ERROR_MSG_MAX];

    /* Fork handling (g_registry_mu). */
    struct ulp_session *registry_next;
    int fd;     /* HDF5's descriptor of the file     */
    int forked; /* this is a fork child's dead copy  */
};

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
}

static void atfork_parent(void)
{
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
    /* The forking thread held both in atfork_prepare; it is this thread now. */
    pthread_mutex_unlock(&g_h5_mu);
    pthread_mutex_unlock(&g_registry_mu);
}

static void atfork_register(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static ulp_status writer_close_registered(ulp_session *s, ulp_error *err);

/* A session used in a fork child: say so once, then answer ECLOSED. */
static ulp_status forked_refusal(void)
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

/*
 * Staging blocks of at least POOL_MIN bytes are kept for reuse after they
 * are written, as long as the queued bytes plus the kept ones stay within
 * the bound: fresh memory costs a page fault per 4 KiB (several times a
 * memcpy of the same bytes), memory used before costs nothing.
 */
#define POOL_MIN        ((size_t)64 << 10)
#define POOL_MAX_BLOCKS 64

static int64_t now_unix_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * Waits for this request's turn and for room for `charge` bytes, then
 * charges them.  Called with s->mu held.  A terminal state (closing or
 * failed) ends every wait; later tickets then never need serving.
 */
static ulp_status admit(ulp_session *s, size_t charge)
{
    if (s->closing)
        return ULP_ECLOSED;
    if (s->failed)
        return s->fail_status;
    uint64_t ticket = s->ticket_next++;
    for (;;) {
        /* An item larger than the bound goes alone, into an empty queue. */
        int fits = s->held == 0 || (s->held <= s->bound && charge <= s->bound - s->held);
        if (s->ticket_serving == ticket && fits)
            break;
        if (s->closing)
            return ULP_ECLOSED;
        if (s->failed)
            return s->fail_status;
        pthread_cond_wait(&s->room, &s->mu);
    }
    s->ticket_serving++;
    s->held += charge;
    s->pending++;
    /* The next ticket may fit as well. */
    pthread_cond_broadcast(&s->room);
    return ULP_OK;
}

/* Gives back an admission whose item could not be built.  s->mu held. */
static void unadmit(ulp_session *s, size_t charge)
{
    s->held -= charge;
    s->pending--;
    pthread_cond_broadcast(&s->room);
    pthread_cond_broadcast(&s->work);
}

static void append(ulp_session *s, item *it)
{
    it->next = NULL;
    if (s->tail != NULL)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    s->appended++;
    s->pending--;
    pthread_cond_signal(&s->work);
}

/*
 * A kept block for `size` bytes (not much larger, so that a big block does
 * not serve a small request), unlinked from the spares, or NULL.  Then the
 * spares that no longer fit beside the queued bytes are detached into
 * *evict for the caller to free outside the lock.  s->mu held.
 */
static item *pool_take(ulp_session *s, size_t size, item **evict)
{
    item *got = NULL;
    if (size >= POOL_MIN) {
        for (item **pp = &s->spares; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->cap >= size && (*pp)->cap - size <= size / 4) {
                got = *pp;
                *pp = got->next;
                s->spare_bytes -= got->cap;
                s->spare_count--;
                break;
            }
        }
    }
    *evict = NULL;
    while (s->spares != NULL && s->held + s->spare_bytes > s->bound) {
        item *e = s->spares;
        s->spares = e->next;
        s->spare_bytes -= e->cap;
        s->spare_count--;
        e->next = *evict;
        *evict = e;
    }
    return got;
}

/*
 * A new block.  Large ones are 2 MiB-aligned and asked to be backed by huge
 * pages: the copy into a fresh block otherwise takes a page fault every
 * 4 KiB, which costs the capturing thread as much as the copy itself.
 */
#define HUGE_BYTES ((size_t)2 << 20)
static item *block_alloc(size_t size)
{
    if (size < HUGE_BYTES)
        return malloc(size);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_BYTES, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, size & ~(HUGE_BYTES - 1), MADV_HUGEPAGE);
#endif
    return p;
}

static void free_list(item *it)
{
    while (it != NULL) {
        item *next = it->next;
        free(it);
        it = next;
    }
}

/* Fills an item in place; `mem` holds at least the size given to enqueue(). */
typedef void (*item_builder)(item *mem, void *arg);

/*
 * Admits `charge` bytes, gets a block of `size` bytes (a kept one, or new),
 * builds the item outside the lock -- so that threads copy in parallel --
 * and appends it.
 */
static ulp_status enqueue(ulp_session *s, size_t charge, size_t size, item_builder build, void *arg)
{
    item *evict = NULL, *it = NULL;
    if (s->forked)
        return forked_refusal();
    pthread_mutex_lock(&s->mu);
    ulp_status st = admit(s, charge);
    if (st == ULP_OK)
        it = pool_take(s, size, &evict);
    pthread_mutex_unlock(&s->mu);
    free_list(evict);
    if (st != ULP_OK)
        return st;
    if (it == NULL) {
        it = block_alloc(size);
        if (it != NULL)
            it->cap = size;
    }
    if (it != NULL) {
        size_t cap = it->cap;
        build(it, arg);
        it->cap = cap;
        it->charge = charge;
    }
    pthread_mutex_lock(&s->mu);
    if (it == NULL) {
        unadmit(s, charge);
        st = ULP_ENOMEM;
    } else {
        append(s, it);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/* --- the writer thread -------------------------------------------------------------- */

/* Gives a deferred item's buffer back to its producer.  Outside the lock. */
static void item_release(item *it)
{
    if (it->kind == ITEM_DEFERRED && it->release != NULL)
        it->release(it->ctx, it->buf);
    it->release = NULL;
}

/* Keeps a written block for reuse when it fits; 1 if kept.  s->mu held. */
static int pool_keep(ulp_session *s, item *it)
{
    if (it->cap < POOL_MIN || s->spare_count >= POOL_MAX_BLOCKS || s->closing ||
        s->held + s->spare_bytes > s->bound || it->cap > s->bound - s->held - s->spare_bytes)
        return 0;
    it->next = s->spares;
    s->spares = it;
    s->spare_bytes += it->cap;
    s->spare_count++;
    return 1;
}

static ulp_status item_write(ulp_session *s, item *it, ulp_error *err, int *fatal)
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
    }
    return ULP_EINVAL;
}

/* What the writer thread needs to create the file. */
typedef struct open_args {
    const char *label, *writer_name;
    const ulp__kvlist *run, *env;
    ulp_error *err;
} open_args;

static ulp_status write_groups(ulp__writer *w, const ulp__kvlist *run, const ulp__kvlist *env,
                               ulp_error *err);

/*
 * Creates the file, fills /run and /env, and registers the session for the
 * fork handler in one step (no fork sees the file open but unregistered).
 */
static ulp_status open_file(ulp_session *s, const open_args *a)
{
    ulp__writer *w = NULL;
    pthread_mutex_lock(&g_registry_mu);
    pthread_mutex_lock(&g_h5_mu);
    ulp_status st =
        ulp__writer_create(s->path, a->label, a->writer_name, now_unix_ns(), &w, a->err);
    if (st == ULP_OK)
        st = write_groups(w, a->run, a->env, a->err);
    if (st == ULP_OK) {
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

static void drain(ulp_session *s);

/*
 * The writer thread owns every write to the file: it creates it, drains
 * the queue, and closes it.  It runs with every signal blocked, so the
 * signals a write can raise (SIGXFSZ past a file-size limit) stay away from
 * the host's threads, whose default action would kill the program.
 */
static void *writer_main(void *arg)
{
    ulp_session *s = arg;
    ulp_status st = open_file(s, s->open);
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
    st = writer_close_registered(s, &err);
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
        item *it = s->head;
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
                pthread_mutex_lock(&g_h5_mu);
                st = item_write(s, it, &err, &fatal);
                pthread_mutex_unlock(&g_h5_mu);
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
        int kept = pool_keep(s, it);
        pthread_cond_broadcast(&s->room);
        pthread_cond_broadcast(&s->done);
        pthread_mutex_unlock(&s->mu);
        if (!kept)
            free(it);
    }
}

/* --- open / close ------------------------------------------------------------------ */

static void session_free(ulp_session *s)
{
    free_list(s->spares);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->room);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->done);
    free(s->path);
    free(s);
}

static ulp_status parse_queue_mb(const char *text, size_t *bytes, ulp_error *err)
{
    char *end = NULL;
    errno = 0;
    unsigned long long mb = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || end == text || *end != '\0' || errno != 0 || mb == 0 ||
        mb > (SIZE_MAX >> 20))
        return ulp__error(err, ULP_EINVAL, "ULPPROF_QUEUE_MB='%s' is not a positive number of MiB",
                          text);
    *bytes = (size_t)mb << 20;
    return ULP_OK;
}

/* Fills the writer's /run and /env before the thread starts. */
static ulp_status write_groups(ulp__writer *w, const ulp__kvlist *run, const ulp__kvlist *env,
                               ulp_error *err)
{
    ulp_status st = ULP_OK;
    for (size_t i = 0; st == ULP_OK && i < run->count; i++)
        st = ulp__writer_set_attr(w, ULP__WRITER_RUN, run->items[i].key, run->items[i].value, err);
    for (size_t i = 0; st == ULP_OK && i < env->count; i++)
        st = ulp__writer_set_attr(w, ULP__WRITER_ENV, env->items[i].key, env->items[i].value, err);
    return st;
}

static ulp_status session_open(const ulp_session_options *opts, ulp_session **out, ulp_error *err)
{
    ulp_session_options defaults;
    if (opts == NULL) {
        ulp_session_options_init(&defaults);
        opts = &defaults;
    }
    const char *pattern = opts->path != NULL ? opts->path : getenv("ULPPROF_OUTPUT");
    if (pattern == NULL || pattern[0] == '\0')
        return ulp__error(err, ULP_EDISABLED, "capture is disabled: ULPPROF_OUTPUT is not set");
    const char *label = opts->label != NULL ? opts->label : getenv("ULPPROF_LABEL");
    if (label == NULL || label[0] == '\0')
        label = "run";
    const char *attrs = opts->attrs != NULL ? opts->attrs : getenv("ULPPROF_ATTR");
    size_t bound = opts->queue_bytes;
    ulp_status st = ULP_OK;
    if (bound == 0) {
        const char *mb = getenv("ULPPROF_QUEUE_MB");
        bound = ULP_DEFAULT_QUEUE_BYTES;
        if (mb != NULL && mb[0] != '\0' && (st = parse_queue_mb(mb, &bound, err)) != ULP_OK)
            return st;
    }

    char host[256] = "";
    if (gethostname(host, sizeof(host) - 1) != 0)
        host[0] = '\0';
    char pid[32];
    snprintf(pid, sizeof(pid), "%ld", (long)getpid());
    const char *rank = ulp__env_rank(ulp__getenv_process, NULL);
    ulp__expand_vars vars = {pid, rank, host, label};
    char path[ULP__PATH_MAX];
    if ((st = ulp__output_expand(pattern, &vars, path, sizeof(path), err)) != ULP_OK)
        return st;

    ulp__kvlist run, env;
    ulp__kvlist_init(&run);
    ulp__kvlist_init(&env);
    ulp_session *s = NULL;
    if ((st = ulp__attr_parse(attrs, &run, err)) != ULP_OK)
        goto cleanup;
    if (opts->record_env &&
        (st = ulp__env_collect(ulp__getenv_process, NULL, host, pid, rank, &env)) != ULP_OK) {
        st = ulp__error(err, st, "cannot record the environment: %s", ulp_status_str(st));
        goto cleanup;
    }
    char writer_name[64];
    snprintf(writer_name, sizeof(writer_name), "ulpprof-capture %s", ULP_VERSION_STRING);
    s = calloc(1, sizeof(*s));
    if (s == NULL || (s->path = strdup(path)) == NULL) {
        st = ulp__error(err, ULP_ENOMEM, "cannot open '%s': out of memory", path);
        goto cleanup;
    }
    s->bound = bound;
    s->fd = -1;
    if (pthread_mutex_init(&s->mu, NULL) != 0 || pthread_cond_init(&s->room, NULL) != 0 ||
        pthread_cond_init(&s->work, NULL) != 0 || pthread_cond_init(&s->done, NULL) != 0) {
        st = ulp__error(err, ULP_ETHREAD, "cannot open '%s': cannot create a mutex", path);
        goto cleanup;
    }
    pthread_once(&g_atfork_once, atfork_register);
    open_args args = {label, opts->writer != NULL ? opts->writer : writer_name, &run, &env, err};
    s->open = &args;

    /* The writer thread takes no signals: they belong to the host's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, writer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        st = ulp__error(err, ULP_ETHREAD, "cannot open '%s': cannot start the writer thread: %s",
                        path, strerror(rc));
        goto cleanup;
    }
    pthread_mutex_lock(&s->mu);
    while (!s->opened)
        pthread_cond_wait(&s->done, &s->mu);
    st = s->open_status;
    s->open = NULL;
    pthread_mutex_unlock(&s->mu);
    if (st != ULP_OK) {
        pthread_join(s->thread, NULL);
        goto cleanup;
    }
    *out = s;
    s = NULL;

cleanup:
    if (s != NULL) {
        /* Mutexes that failed to initialize are zeroed memory; destroying
         * them is harmless in glibc, and this path is out of memory anyway. */
        session_free(s);
    }
    ulp__kvlist_release(&run);
    ulp__kvlist_release(&env);
    return st;
}

ulp_status ulp_session_open(const ulp_session_options *opts, ulp_session **out, ulp_error *err)
{
    ulp_error local;
    if (err == NULL)
        err = &local;
    ulp_error_clear(err);
    if (out == NULL) {
        ulp__error(err, ULP_EINVAL, "ulp_session_open: no output pointer");
        fprintf(stderr, "ulpprof: %s\n", err->msg);
        return ULP_EINVAL;
    }
    *out = NULL;
    ulp_status st = session_open(opts, out, err);
    /* Disabled is a choice, not an error: stay silent. */
    if (st != ULP_OK && st != ULP_EDISABLED)
        fprintf(stderr, "ulpprof: %s\n", err->msg);
    return st;
}

/*
 * Closes the file and takes the session out of the fork registry in one
 * step (same lock order as the fork handler: registry, then HDF5).
 */
static ulp_status writer_close_registered(ulp_session *s, ulp_error *err)
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

ulp_status ulp_session_close(ulp_session *s)
{
    if (s == NULL)
        return ULP_OK;
    /* A fork child's copy: its thread and file belong to the parent. */
    if (s->forked)
        return ULP_OK;
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    pthread_cond_broadcast(&s->work);
    pthread_cond_broadcast(&s->room);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);

    ulp_status st = s->first_error;
    if (s->close_status != ULP_OK) {
        /* A failed session said why once already; one line is enough. */
        if (!s->failed)
            fprintf(stderr, "ulpprof: %s\n", s->close_msg);
        if (st == ULP_OK)
            st = s->close_status;
    }
    session_free(s);
    return st;
}

const char *ulp_session_path(const ulp_session *s)
{
    return s != NULL ? s->path : NULL;
}

size_t ulp__session_queue_bound(const ulp_session *s)
{
    return s->bound;
}

size_t ulp__session_queued_bytes(ulp_session *s)
{
    if (s->forked)
        return 0;
    pthread_mutex_lock(&s->mu);
    size_t held = s->held;
    pthread_mutex_unlock(&s->mu);
    return held;
}

int ulp__session_failed(ulp_session *s)
{
    if (s->forked)
        return 1;
    pthread_mutex_lock(&s->mu);
    int failed = s->failed;
    pthread_mutex_unlock(&s->mu);
    return failed;
}

ulp_status ulp_session_flush(ulp_session *s)
{
    if (s == NULL)
        return ULP_EINVAL;
    if (s->forked)
        return forked_refusal();
    pthread_mutex_lock(&s->mu);
    /* Everything appended so far; the writer flushes after each item. */
    uint64_t target = s->appended;
    while (s->completed < target)
        pthread_cond_wait(&s->done, &s->mu);
    ulp_status st = s->first_error;
    pthread_mutex_unlock(&s->mu);
    return st;
}

ulp_status ulp_session_set_step(ulp_session *s, int64_t step)
{
    if (s == NULL)
        return ULP_EINVAL;
    if (s->forked)
        return forked_refusal();
    pthread_mutex_lock(&s->mu);
    s->step = step;
    s->has_step = step != ULP_STEP_NONE;
    pthread_mutex_unlock(&s->mu);
    return ULP_OK;
}

/* --- requests ---------------------------------------------------------------------- */

/* Prints one line for a refused request and returns its status. */
static ulp_status refuse(ulp_status st, const char *fmt, ...) ULP__PRINTF(2, 3);

static ulp_status refuse(ulp_status st, const char *fmt, ...)
{
    char msg[ULP_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "ulpprof: %s: %s\n", msg, ulp_status_str(st));
    return st;
}

/*
 * The line for a request the queue did not take.  A failed session said
 * why once already (the "capture to ... failed" line): stay quiet then.
 */
static ulp_status refused_by_queue(const ulp_session *s, ulp_status st, const char *what,
                                   const char *name)
{
    if (st == ULP_OK || st == ULP_EIO || st == ULP_ENOSPC || s->forked)
        return st;
    return refuse(st, "%s '%.200s' refused by '%s'", what, name, s->path);
}

typedef struct attr_arg {
    ulp__writer_group group;
    const char *key, *value;
} attr_arg;

static void build_attr(item *it, void *arg)
{
    const attr_arg *a = arg;
    size_t nk = strlen(a->key) + 1, nv = strlen(a->value) + 1;
    memset(it, 0, sizeof(*it));
    char *p = (char *)(it + 1);
    memcpy(p, a->key, nk);
    memcpy(p + nk, a->value, nv);
    it->kind = ITEM_ATTR;
    it->group = a->group;
    it->key = p;
    it->value = p + nk;
}

static ulp_status set_attr(ulp_session *s, ulp__writer_group group, const char *key,
                           const char *value)
{
    const char *what = group == ULP__WRITER_RUN ? "/run attribute" : "/env attribute";
    if (s == NULL || key == NULL || key[0] == '\0' || value == NULL)
        return refuse(ULP_EINVAL, "cannot set a %s without a session, key and value", what);
    attr_arg a = {group, key, value};
    size_t text = strlen(key) + strlen(value) + 2;
    return refused_by_queue(
        s, enqueue(s, ULP__SESSION_ITEM_OVERHEAD + text, sizeof(item) + text, build_attr, &a), what,
        key);
}

ulp_status ulp_session_set_run(ulp_session *s, const char *key, const char *value)
{
    return set_attr(s, ULP__WRITER_RUN, key, value);
}

ulp_status ulp_session_set_env(ulp_session *s, const char *key, const char *value)
{
    return set_attr(s, ULP__WRITER_ENV, key, value);
}

/*
 * Checks a descriptor and computes its byte size.  On error fills `why`
 * (for the one stderr line) and returns ULP_EINVAL.
 */
static ulp_status desc_check(const ulp_capture_desc *d, size_t *nbytes, char *why, size_t n)
{
    if (d == NULL) {
        snprintf(why, n, "capture without a descriptor");
        return ULP_EINVAL;
    }
    if (d->name == NULL) {
        snprintf(why, n, "capture without a name");
        return ULP_EINVAL;
    }
    if (!ulp__capture_name_ok(d->name)) {
        snprintf(why, n,
                 "capture name '%.200s' is empty, '.', '..', holds '/' or a control "
                 "character, or is not UTF-8",
                 d->name);
        return ULP_EINVAL;
    }
    size_t esize = ulp_dtype_size(d->dtype);
    if (esize == 0) {
        snprintf(why, n, "capture '%.200s': unknown dtype %d", d->name, (int)d->dtype);
        return ULP_EINVAL;
    }
    if (d->ndim < 0 || d->ndim > ULP_MAX_RANK) {
        snprintf(why, n, "capture '%.200s': rank %d is not in 0..%d", d->name, d->ndim,
                 ULP_MAX_RANK);
        return ULP_EINVAL;
    }
    if (d->ndim > 0 && d->shape == NULL) {
        snprintf(why, n, "capture '%.200s': rank %d without a shape", d->name, d->ndim);
        return ULP_EINVAL;
    }
    if (ulp_role_name(d->role) == NULL) {
        snprintf(why, n, "capture '%.200s': unknown role %d", d->name, (int)d->role);
        return ULP_EINVAL;
    }
    uint64_t elements = 1;
    for (int i = 0; i < d->ndim; i++) {
        if (d->shape[i] < 0) {
            snprintf(why, n, "capture '%.200s': extent %" PRId64 " of axis %d is negative", d->name,
                     d->shape[i], i);
            return ULP_EINVAL;
        }
        uint64_t e = (uint64_t)d->shape[i];
        if (e != 0 && elements > UINT64_MAX / e) {
            snprintf(why, n, "capture '%.200s': shape overflows", d->name);
            return ULP_EINVAL;
        }
        elements *= e;
    }
    /* The charge adds an overhead, so keep clear of SIZE_MAX. */
    if (elements > (SIZE_MAX / 2) / esize) {
        snprintf(why, n, "capture '%.200s': %" PRIu64 " elements are too many", d->name, elements);
        return ULP_EINVAL;
    }
    *nbytes = (size_t)elements * esize;
    return ULP_OK;
}

typedef struct capture_arg {
    ulp_session *s;
    const ulp_capture_desc *d;
    size_t nbytes;
    item_kind kind;
    void *buf;
    int (*ready)(void *ctx);
    void (*release)(void *ctx, void *buf);
    void *ctx;
} capture_arg;

/* Payload offset inside an item allocation, aligned for any element type. */
static size_t payload_offset(size_t name_len)
{
    return (sizeof(item) + name_len + 1 + 63) & ~(size_t)63;
}

/*
 * Bytes a capture counts against the bound: its whole block (header, name,
 * payload), at least the item overhead, so that the bound is the memory the
 * queue holds.  Counting the payload alone let a flood of tiny captures
 * (512 B payload in a ~900 B block) hold twice the bound.
 */
static size_t capture_charge(size_t nbytes)
{
    return nbytes > ULP__SESSION_ITEM_OVERHEAD ? nbytes : ULP__SESSION_ITEM_OVERHEAD;
}

/* Bytes of the block for a capture item. */
static size_t capture_size(const capture_arg *a)
{
    return payload_offset(strlen(a->d->name)) + (a->kind == ITEM_CAPTURE ? a->nbytes : 0);
}

static void build_capture(item *it, void *arg)
{
    const capture_arg *a = arg;
    const ulp_capture_desc *d = a->d;
    size_t name_len = strlen(d->name);
    size_t off = payload_offset(name_len);
    memset(it, 0, sizeof(*it));
    char *name = (char *)(it + 1);
    memcpy(name, d->name, name_len + 1);
    it->kind = a->kind;
    it->desc = *d;
    it->desc.name = name;
    it->desc.data = NULL;
    if (d->ndim > 0)
        memcpy(it->shape, d->shape, (size_t)d->ndim * sizeof(int64_t));
    it->desc.shape = it->shape;
    it->nbytes = a->nbytes;
    if (a->kind == ITEM_CAPTURE) {
        if (a->nbytes > 0)
            memcpy((char *)it + off, d->data, a->nbytes);
        it->data = (char *)it + off;
    } else {
        it->buf = a->buf;
        it->ready = a->ready;
        it->release = a->release;
        it->ctx = a->ctx;
    }
    /* The step and the time are the session's at the moment of the call. */
    if (it->desc.time_ns == 0)
        it->desc.time_ns = now_unix_ns();
    if (it->desc.step == ULP_STEP_NONE) {
        pthread_mutex_lock(&a->s->mu);
        if (a->s->has_step)
            it->desc.step = a->s->step;
        pthread_mutex_unlock(&a->s->mu);
    }
}

ulp_status ulp_session_capture(ulp_session *s, const ulp_capture_desc *d)
{
    char why[400];
    size_t nbytes = 0;
    if (s == NULL)
        return refuse(ULP_EINVAL, "capture without a session");
    if (desc_check(d, &nbytes, why, sizeof(why)) != ULP_OK)
        return refuse(ULP_EINVAL, "%s", why);
    if (nbytes > 0 && d->data == NULL)
        return refuse(ULP_EINVAL, "capture '%.200s': NULL data for %zu bytes", d->name, nbytes);
    capture_arg a = {s, d, nbytes, ITEM_CAPTURE, NULL, NULL, NULL, NULL};
    ulp_status st =
        enqueue(s, capture_charge(capture_size(&a)), capture_size(&a), build_capture, &a);
    return refused_by_queue(s, st, "capture", d->name);
}

ulp_status ulp__session_capture_deferred(ulp_session *s, const ulp_capture_desc *d, void *buf,
                                         size_t nbytes, int (*ready)(void *ctx),
                                         void (*release)(void *ctx, void *buf), void *ctx)
{
    char why[400];
    size_t want = 0;
    ulp_status st = ULP_OK;
    if (s == NULL) {
        st = refuse(ULP_EINVAL, "deferred capture without a session");
    } else if (desc_check(d, &want, why, sizeof(why)) != ULP_OK) {
        st = refuse(ULP_EINVAL, "%s", why);
    } else if (want != nbytes) {
        st = refuse(ULP_EINVAL, "capture '%.200s': %zu bytes given, the shape needs %zu", d->name,
                    nbytes, want);
    } else if (nbytes > 0 && buf == NULL) {
        st = refuse(ULP_EINVAL, "capture '%.200s': NULL buffer for %zu bytes", d->name, nbytes);
    } else {
        capture_arg a = {s, d, nbytes, ITEM_DEFERRED, buf, ready, release, ctx};
        st = enqueue(s, capture_charge(capture_size(&a)), capture_size(&a), build_capture, &a);
        if (st == ULP_OK)
            return ULP_OK;
        refused_by_queue(s, st, "capture", d->name);
    }
    /* Not queued: the callbacks still run once each, here. */
    if (ready != NULL)
        ready(ctx);
    if (release != NULL)
        release(ctx, buf);
    return st;
}

typedef struct kernels_arg {
    const ulp__kernel_row *rows;
    const char *const *names;
    size_t n;
    size_t names_bytes;
} kernels_arg;

/* Layout of a kernel batch block: item, rows, name pointers, name text. */
static size_t kernels_rows_off(void)
{
    return (sizeof(item) + 15) & ~(size_t)15;
}

static size_t kernels_size(const kernels_arg *a)
{
    return kernels_rows_off() + a->n * (sizeof(ulp__kernel_row) + sizeof(char *)) + a->names_bytes;
}

static void build_kernels(item *it, void *arg)
{
    const kernels_arg *a = arg;
    size_t rows_off = kernels_rows_off();
    size_t names_off = rows_off + a->n * sizeof(ulp__kernel_row);
    size_t text_off = names_off + a->n * sizeof(char *);
    memset(it, 0, sizeof(*it));
    it->kind = ITEM_KERNELS;
    it->rows = (ulp__kernel_row *)((char *)it + rows_off);
    it->names = (const char **)(void *)((char *)it + names_off);
    it->nrows = a->n;
    memcpy(it->rows, a->rows, a->n * sizeof(ulp__kernel_row));
    char *text = (char *)it + text_off;
    for (size_t i = 0; i < a->n; i++) {
        const char *name = a->names[i] != NULL ? a->names[i] : "";
        size_t len = strlen(name) + 1;
        memcpy(text, name, len);
        it->names[i] = text;
        text += len;
    }
}

ulp_status ulp__session_trace_kernels(ulp_session *s, const ulp__kernel_row *rows,
                                      const char *const *names, size_t n)
{
    if (s == NULL)
        return refuse(ULP_EINVAL, "kernel trace without a session");
    if (n == 0)
        return ULP_OK;
    if (rows == NULL || names == NULL)
        return refuse(ULP_EINVAL, "kernel trace of %zu rows without rows or names", n);
    if (n > (SIZE_MAX / 4) / (sizeof(ulp__kernel_row) + sizeof(char *)))
        return refuse(ULP_EINVAL, "kernel trace of %zu rows is too large", n);
    kernels_arg a = {rows, names, n, 0};
    for (size_t i = 0; i < n; i++)
        a.names_bytes += (names[i] != NULL ? strlen(names[i]) : 0) + 1;
    size_t charge =
        ULP__SESSION_ITEM_OVERHEAD + n * (sizeof(ulp__kernel_row) + sizeof(char *)) + a.names_bytes;
    return refused_by_queue(s, enqueue(s, charge, kernels_size(&a), build_kernels, &a),
                            "kernel batch starting with", names[0] != NULL ? names[0] : "");
}

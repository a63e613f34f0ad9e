/*
 * ulp_session: a bounded FIFO of capture requests and the thread that
 * writes them -- opening, closing, flushing (session_internal.h maps the
 * other files).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/sized.h"
#include "session_internal.h"
#include "ulpprof/capture_device.h"

/* --- small public helpers ------------------------------------------------------ */

/* The first versions: ulp_session_options up to `path`, the descriptor up
 * to `role`, the device extension up to `kernels` (capture.h). */
#define OPTIONS_MIN ULP__SIZE_THROUGH(ulp_session_options, path)
#define DESC_MIN    ULP__SIZE_THROUGH(ulp_capture_desc, role)
#define EXT_MIN     ULP__SIZE_THROUGH(ulp_capture_device_ext, kernels)

static void options_defaults(ulp_session_options *o)
{
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->record_env = 1;
}

static void desc_defaults(ulp_capture_desc *d)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->dtype = ULP_DTYPE_INVALID;
    d->layer = ULP_LAYER_NONE;
    d->role = ULP_ROLE_ACTIVATION;
    d->step = ULP_STEP_NONE;
}

static void ext_defaults(ulp_capture_device_ext *x)
{
    memset(x, 0, sizeof *x);
    x->struct_size = sizeof *x;
}

ulp_status ulp_session_options_init_sized(ulp_session_options *opts, size_t size)
{
    ulp_session_options def;
    options_defaults(&def);
    return ulp__sized_init(opts, size, &def, sizeof def, OPTIONS_MIN, "ulp_session_options");
}

ulp_status ulp_capture_desc_init_sized(ulp_capture_desc *d, size_t size)
{
    ulp_capture_desc def;
    desc_defaults(&def);
    return ulp__sized_init(d, size, &def, sizeof def, DESC_MIN, "ulp_capture_desc");
}

ulp_status ulp_capture_device_ext_init_sized(ulp_capture_device_ext *x, size_t size)
{
    ulp_capture_device_ext def;
    ext_defaults(&def);
    return ulp__sized_init(x, size, &def, sizeof def, EXT_MIN, "ulp_capture_device_ext");
}

size_t ulp_capture_desc_size(void)
{
    return sizeof(ulp_capture_desc);
}

size_t ulp_session_options_size(void)
{
    return sizeof(ulp_session_options);
}

size_t ulp_capture_device_ext_size(void)
{
    return sizeof(ulp_capture_device_ext);
}

ulp_status ulp__desc_from(ulp__desc *out, const ulp_capture_desc *d,
                          const ulp_capture_device_ext *x)
{
    ulp_capture_desc c, cdef;
    ulp_capture_device_ext e;
    desc_defaults(&cdef);
    ext_defaults(&e);
    if (ulp__sized_read(&c, &cdef, sizeof c, DESC_MIN, d, "ulp_capture_desc", NULL) != ULP_OK)
        return ULP_EINVAL;
    if (x != NULL) {
        ulp_capture_device_ext edef = e;
        if (ulp__sized_read(&e, &edef, sizeof e, EXT_MIN, x, "ulp_capture_device_ext", NULL) !=
            ULP_OK)
            return ULP_EINVAL;
    }
    ulp__desc_init(out);
    out->name = c.name;
    out->data = c.data;
    out->dtype = c.dtype;
    out->ndim = c.ndim;
    out->shape = c.shape;
    out->layer = c.layer;
    out->role = c.role;
    out->step = c.step;
    out->time_ns = c.time_ns;
    out->positions = c.positions;
    out->requests = c.requests;
    out->row_rank = c.row_rank;
    out->n_inputs = c.n_inputs;
    out->inputs = c.inputs;
    out->has_kernels = e.has_kernels;
    memcpy(out->kernels, e.kernels, sizeof out->kernels);
    out->device_ptr = e.device_ptr;
    out->stream = e.stream;
    out->has_gemms = e.has_gemms;
    memcpy(out->gemms, e.gemms, sizeof out->gemms);
    out->has_graph_replay = e.has_graph_replay;
    memcpy(out->graph_replay, e.graph_replay, sizeof out->graph_replay);
    return ULP_OK;
}

ulp__desc ulp__capture_desc_make(const char *name, const void *data, ulp_dtype dtype, int ndim,
                                 const int64_t *shape, int32_t layer, ulp_role role)
{
    ulp__desc d;
    ulp__desc_init(&d);
    d.name = name;
    d.data = data;
    d.dtype = dtype;
    d.ndim = ndim;
    d.shape = shape;
    d.layer = layer;
    d.role = role;
    return d;
}

/* --- open / close ------------------------------------------------------------------ */

static void session_free(ulp_session *s)
{
    ulp__staging_stop(s);
    ulp__session_select_free(s);
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

static ulp_status session_open(const ulp_session_options *opts, ulp_session **out, ulp_error *err)
{
    ulp_session_options o;
    options_defaults(&o);
    if (opts != NULL)
        o = *opts; /* read by its size in ulp_session_open() */
    opts = &o;
    const char *pattern = opts->path != NULL ? opts->path : getenv("ULPPROF_OUTPUT");
    if (pattern == NULL || pattern[0] == '\0')
        return ulp__error(err, ULP_EDISABLED, "capture is disabled: ULPPROF_OUTPUT is not set");
    const char *label = opts->label != NULL ? opts->label : getenv("ULPPROF_LABEL");
    if (label == NULL || label[0] == '\0')
        label = "run";
    const char *attrs = opts->attrs != NULL ? opts->attrs : getenv("ULPPROF_ATTR");
    const char *observed = opts->observed != NULL ? opts->observed : getenv("ULPPROF_OBSERVED");
    size_t bound = opts->queue_bytes;
    ulp_capture_mode mode = ULP_CAPTURE_DATA;
    ulp_status st = ulp__session_mode_at_open(opts->capture_mode, &mode, err);
    if (st != ULP_OK)
        return st;
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

    ulp__kvlist run, env, obs;
    ulp__kvlist_init(&run);
    ulp__kvlist_init(&env);
    ulp__kvlist_init(&obs);
    ulp_session *s = NULL;
    if ((st = ulp__attr_parse(attrs, &run, err)) != ULP_OK)
        goto cleanup;
    if ((st = ulp__attr_parse(observed, &obs, err)) != ULP_OK)
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
    s->mode = mode;
    s->nap_ns = ULP__SESSION_NAP_NS;
    s->fd = -1;
    /* The writer's timed wait (the links' idle deadline) runs on the
     * monotonic clock: a wall clock stepped back would stretch it. */
    pthread_condattr_t mono;
    int mono_ok = pthread_condattr_init(&mono) == 0;
    if (mono_ok && pthread_condattr_setclock(&mono, CLOCK_MONOTONIC) != 0) {
        pthread_condattr_destroy(&mono);
        mono_ok = 0;
    }
    int init_ok = mono_ok && pthread_mutex_init(&s->mu, NULL) == 0 &&
                  pthread_cond_init(&s->room, NULL) == 0 &&
                  pthread_cond_init(&s->work, &mono) == 0 && pthread_cond_init(&s->done, NULL) == 0;
    if (mono_ok)
        pthread_condattr_destroy(&mono);
    if (!init_ok) {
        st = ulp__error(err, ULP_ETHREAD, "cannot open '%s': cannot create a mutex", path);
        goto cleanup;
    }
    ulp__session_fork_watch();
    /* Populating the staging ring overlaps with creating the file. */
    ulp__staging_start(s);
    ulp__open_args args = {label,
                           opts->writer != NULL ? opts->writer : writer_name,
                           mode == ULP_CAPTURE_DIGEST ? ULP__WRITER_DIGEST_FILE : 0u,
                           &run,
                           &env,
                           &obs,
                           err};
    s->open = &args;

    /* The writer thread takes no signals: they belong to the host's threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, ulp__session_writer_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        st = ulp__error(err, ULP_ETHREAD, "cannot open '%s': cannot start the writer thread: %s",
                        path, strerror(rc));
        goto cleanup;
    }
    pthread_mutex_lock(&s->mu);
    while (!s->opened)
        pthread_cond_wait(&s->done, &s->mu);
    if (s->open_status == ULP_OK)
        ulp__staging_wait_ready(s);
    st = s->open_status;
    s->open = NULL;
    pthread_mutex_unlock(&s->mu);
    if (st != ULP_OK) {
        pthread_join(s->thread, NULL);
        goto cleanup;
    }
    if ((st = ulp__session_select_env(s, err)) != ULP_OK) {
        ulp_session_close(s);
        s = NULL;
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
    ulp__kvlist_release(&obs);
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
    ulp_session_options o, def;
    options_defaults(&def);
    if (opts != NULL) {
        /* a bad size: the one line went to stderr */
        if (ulp__sized_read(&o, &def, sizeof o, OPTIONS_MIN, opts, "ulp_session_options", err) !=
            ULP_OK)
            return ULP_EINVAL;
        opts = &o;
    }
    ulp_status st = session_open(opts, out, err);
    /* Disabled is a choice, not an error: stay silent. */
    if (st != ULP_OK && st != ULP_EDISABLED)
        fprintf(stderr, "ulpprof: %s\n", err->msg);
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
        return ulp__session_forked_refusal();
    pthread_mutex_lock(&s->mu);
    /* Everything appended so far, named by the groups: the writer flushes
     * after each item, and links captures that wait when asked. */
    uint64_t target = s->appended;
    if (s->completed < target)
        pthread_cond_signal(&s->work); /* it may be napping */
    while (s->completed < target)
        pthread_cond_wait(&s->done, &s->mu);
    if (s->synced < target) {
        if (s->sync_want < target)
            s->sync_want = target;
        pthread_cond_signal(&s->work);
        while (s->synced < target)
            pthread_cond_wait(&s->done, &s->mu);
    }
    ulp_status st = s->first_error;
    pthread_mutex_unlock(&s->mu);
    return st;
}

ulp_status ulp_session_set_step(ulp_session *s, int64_t step)
{
    if (s == NULL)
        return ULP_EINVAL;
    if (s->forked)
        return ulp__session_forked_refusal();
    pthread_mutex_lock(&s->mu);
    s->step = step;
    s->has_step = step != ULP_STEP_NONE;
    pthread_mutex_unlock(&s->mu);
    return ULP_OK;
}

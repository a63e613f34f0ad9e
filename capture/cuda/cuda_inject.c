/*
 * The process-wide collector of libulpprof_cuda.so (cuda_inject.h).
 *
 * Everything starts lazily and degrades instead of failing: no
 * ULPPROF_OUTPUT -> nothing at all; no driver -> device marks are counted
 * and dropped with one warning, host marks still work; no CUPTI (or another
 * profiler owns it) -> captures without kernel trace, with one warning.
 * Injected code never aborts and never exits.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capture/session.h"
#include "cuda_cupti.h"
#include "cuda_devcap.h"
#include "cuda_driver.h"
#include "cuda_gemm.h"
#include "cuda_inject.h"
#include "cuda_mark.h"
#include "cuda_trace.h"
#include "ulpprof/capture_device.h"

#define DEFAULT_PINNED_MB 1024
#define DEFAULT_GRAPH_MB  256

typedef enum sess_state { SESS_UNTRIED = 0, SESS_OPEN, SESS_OFF, SESS_CLOSED } sess_state;

static pthread_mutex_t g_init = PTHREAD_MUTEX_INITIALIZER;
/* Held shared while the session is used, exclusively to retire it at exit. */
static pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
static sess_state g_state;
static ulp_session *g_session;
static ulp__cuda_trace *g_trace;
static int g_driver_state; /* 0 untried, 1 bound, 2 unavailable */
static ulp__cuda_ops g_ops;
static ulp__devcap *g_devcap;
static ulp__gemm_log *g_gemms; /* created at the first GEMM call */
static int g_env_device_done, g_env_libs_done;
static atomic_int g_forked;
/* The step of the last `ev=step` mark: graph replays' captures get it. */
static _Atomic int64_t g_step = ULP_STEP_NONE;

static atomic_uint_least64_t g_malformed, g_no_driver, g_host_failed;
static char g_first_malformed[768];

/* --- logging ----------------------------------------------------------- */

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "ulpprof: %s\n", line);
}

/* Once per `flag`: the warning of a feature that just disabled itself. */
static void warn_once(atomic_int *flag, const char *msg)
{
    if (atomic_exchange(flag, 1) == 0)
        warn("%s", msg);
}

/* cuda_cublas.c's answer to whether its GEMM entry points are the process's (set at load). */
static int (*g_interposing)(void);

void ulp__inject_gemm_source(int (*interposing)(void))
{
    g_interposing = interposing;
}

int ulp__inject_enabled(void)
{
    const char *o = getenv("ULPPROF_OUTPUT");
    return o != NULL && *o != '\0' && !atomic_load(&g_forked);
}

/* --- /env facts -------------------------------------------------------- */

static void set_env(const char *key, const char *value)
{
    if (g_session != NULL && value != NULL && *value != '\0')
        ulp_session_set_env(g_session, key, value);
}

static void set_env_version(const char *key, int v)
{
    /* CUDA encodes 13.0 as 13000, 12.4 as 12040. */
    char buf[32];
    snprintf(buf, sizeof(buf), "%d.%d", v / 1000, (v % 1000) / 10);
    set_env(key, buf);
}

/* Variables that change CUDA numerics, beyond the session's own list. */
static const char *const cuda_env_vars[] = {"CUBLAS_WORKSPACE_CONFIG",
                                            "NVIDIA_TF32_OVERRIDE",
                                            "CUBLASLT_WORKSPACE_SIZE",
                                            "CUBLAS_EMULATE_SINGLE_PRECISION",
                                            "CUBLAS_EMULATION_STRATEGY",
                                            "CUBLASLT_LOG_LEVEL",
                                            "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
                                            "TORCH_BLAS_PREFER_CUBLASLT",
                                            "CUDA_LAUNCH_BLOCKING",
                                            "CUDA_VISIBLE_DEVICES",
                                            "CUDA_DEVICE_MAX_CONNECTIONS",
                                            "CUDA_MODULE_LOADING",
                                            "NCCL_ALGO",
                                            "NCCL_PROTO",
                                            "VLLM_BATCH_INVARIANT",
                                            NULL};

static void *noload(const char *const *names)
{
    for (; *names; names++) {
        void *h = dlopen(*names, RTLD_NOW | RTLD_NOLOAD);
        if (h != NULL)
            return h;
    }
    return NULL;
}

/* Versions of the libraries the program loaded (never loads them). */
static void record_lib_versions(void)
{
    static const char *const cudart[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                         NULL};
    static const char *const cublas[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11",
                                         NULL};
    void *h = noload(cudart);
    void *sym = dlsym(h != NULL ? h : RTLD_DEFAULT, "cudaRuntimeGetVersion");
    if (sym != NULL) {
        int (*fn)(int *);
        memcpy(&fn, &sym, sizeof(sym));
        int v = 0;
        if (fn(&v) == 0 && v > 0)
            set_env_version("cuda_runtime_version", v);
    }
    if (h != NULL)
        dlclose(h);
    h = noload(cublas);
    if (h != NULL) {
        sym = dlsym(h, "cublasGetProperty");
        if (sym != NULL) {
            int (*fn)(int, int *);
            memcpy(&fn, &sym, sizeof(sym));
            int v[3] = {0, 0, 0};
            /* libraryPropertyType: MAJOR_VERSION 0, MINOR 1, PATCH_LEVEL 2. */
            if (fn(0, &v[0]) == 0 && fn(1, &v[1]) == 0 && fn(2, &v[2]) == 0) {
                char buf[48];
                snprintf(buf, sizeof(buf), "%d.%d.%d", v[0], v[1], v[2]);
                set_env("cublas_version", buf);
                g_env_libs_done = 1;
            }
        }
        dlclose(h);
    }
}

static void record_driver_facts(void)
{
    int v = 0;
    if (g_ops.driver_get_version != NULL && g_ops.driver_get_version(&v) == CUDA_SUCCESS)
        set_env_version("driver_cuda_version", v);
    /* The kernel module's release ("580.65.06") is what people call the
     * driver version. */
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    char line[256], release[64] = "";
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) != NULL) {
            const char *p = strstr(line, "Kernel Module");
            if (p != NULL && sscanf(p + strlen("Kernel Module"), " %63s", release) != 1)
                release[0] = '\0';
        }
        fclose(f);
    }
    set_env("driver_version", release);
    CUdevice dev;
    char name[256];
    if (g_ops.ctx_get_device != NULL && g_ops.device_get_name != NULL &&
        g_ops.ctx_get_device(&dev) == CUDA_SUCCESS &&
        g_ops.device_get_name(name, (int)sizeof(name), dev) == CUDA_SUCCESS) {
        name[sizeof(name) - 1] = '\0';
        set_env("device_name", name);
    }
}

static void record_static_env(void)
{
    for (const char *const *v = cuda_env_vars; *v; v++) {
        const char *val = getenv(*v);
        if (val != NULL) {
            char key[96];
            snprintf(key, sizeof(key), "env:%s", *v);
            set_env(key, val);
        }
    }
    uint32_t cv = ulp__cupti_version();
    if (cv != 0) {
        char buf[16];
        snprintf(buf, sizeof(buf), "%u", cv);
        set_env("cupti_version", buf);
    }
}

/* --- the session ------------------------------------------------------- */

static void at_exit(void);

/* Opens the default session on first use.  g_init is held. */
static void session_open_locked(void)
{
    if (g_state != SESS_UNTRIED)
        return;
    ulp_status st = ulp_capture_open(NULL, NULL);
    if (st != ULP_OK) {
        g_state = SESS_OFF; /* the session printed why, or was disabled */
        return;
    }
    g_session = ulp_capture_session();
    g_state = g_session != NULL ? SESS_OPEN : SESS_OFF;
    if (g_state != SESS_OPEN)
        return;
    /* Registered after the session's own exit handler and after HDF5's
     * (the file now exists), so it runs before both: pending device copies
     * and kernel records reach the file, which is then closed. */
    atexit(at_exit);
    record_static_env();
}

/* Takes the session shared; NULL (lock released) when there is none. */
static ulp_session *session_acquire(void)
{
    pthread_rwlock_rdlock(&g_lock);
    if (g_state == SESS_UNTRIED) {
        pthread_rwlock_unlock(&g_lock);
        pthread_mutex_lock(&g_init);
        pthread_rwlock_wrlock(&g_lock);
        session_open_locked();
        pthread_rwlock_unlock(&g_lock);
        pthread_mutex_unlock(&g_init);
        pthread_rwlock_rdlock(&g_lock);
    }
    if (g_state == SESS_OPEN && !atomic_load(&g_forked))
        return g_session;
    pthread_rwlock_unlock(&g_lock);
    return NULL;
}

static void session_release(void)
{
    pthread_rwlock_unlock(&g_lock);
}

/* --- sinks ------------------------------------------------------------- */

static int64_t sink_step_now(void *ctx)
{
    (void)ctx;
    return atomic_load(&g_step);
}

static ulp_status sink_capture(void *ctx, const ulp__desc *d, void *buf, size_t nbytes,
                               void (*release)(void *rctx, void *buf), void *rctx)
{
    (void)ctx;
    ulp_session *s = session_acquire();
    if (s == NULL) {
        if (release != NULL)
            release(rctx, buf);
        return ULP_ECLOSED;
    }
    ulp_status st = ulp__session_capture_deferred(s, d, buf, nbytes, NULL, release, rctx);
    session_release();
    return st;
}

static ulp_status sink_kernels(void *ctx, const ulp__cuda_kernel *k, size_t n, uint64_t first_row)
{
    (void)ctx;
    ulp_session *s = session_acquire();
    if (s == NULL)
        return ULP_ECLOSED;
    ulp__kernel_row *rows = calloc(n, sizeof(*rows));
    const char **names = calloc(n, sizeof(*names));
    ulp_status st = ULP_ENOMEM;
    if (rows != NULL && names != NULL) {
        for (size_t i = 0; i < n; i++) {
            rows[i].seq = first_row + i;
            rows[i].correlation_id = k[i].correlation_id;
            memcpy(rows[i].grid, k[i].grid, sizeof(rows[i].grid));
            memcpy(rows[i].block, k[i].block, sizeof(rows[i].block));
            rows[i].shared_static = k[i].shared_static;
            rows[i].shared_dynamic = k[i].shared_dynamic;
            rows[i].registers = k[i].registers;
            rows[i].device = k[i].device;
            rows[i].stream = k[i].stream_id;
            rows[i].start_ns = k[i].start_ns;
            rows[i].end_ns = k[i].end_ns;
            names[i] = k[i].name;
        }
        st = ulp__session_trace_kernels(s, rows, names, n);
    }
    session_release();
    free(rows);
    free(names);
    return st;
}

static ulp_status sink_gemm_rows(void *ctx, const ulp__gemm_row *rows, size_t n)
{
    (void)ctx;
    ulp_session *s = session_acquire();
    if (s == NULL)
        return ULP_ECLOSED;
    ulp_status st = ulp__session_trace_gemms(s, rows, n);
    session_release();
    return st;
}

static int gemms_wanted(void)
{
    const char *v = getenv("ULPPROF_GEMMS");
    return v == NULL || strcmp(v, "0") != 0;
}

static ulp__gemm_log *gemm_log(int create)
{
    pthread_mutex_lock(&g_init);
    if (g_gemms == NULL && create) {
        ulp__gemm_sink sink = {NULL, sink_gemm_rows};
        if (ulp__gemm_log_create(&sink, &g_gemms) != ULP_OK)
            g_gemms = NULL;
    }
    ulp__gemm_log *log = g_gemms;
    pthread_mutex_unlock(&g_init);
    return log;
}

void ulp__inject_gemm(struct ulp__gemm_row *row)
{
    if (!gemms_wanted())
        return;
    ulp_session *s = session_acquire();
    if (s == NULL)
        return;
    session_release();
    ulp__gemm_log *log = gemm_log(1);
    if (log != NULL)
        ulp__gemm_log_add(log, row);
}

/* The GEMM rows a capture follows (devcap's sink.gemms, host marks). */
static int take_gemms(void *ctx, int any_stream, CUstream stream, int64_t range[2])
{
    (void)ctx;
    ulp__gemm_log *log = gemm_log(0);
    return log != NULL && ulp__gemm_log_take(log, any_stream, (uint64_t)(uintptr_t)stream, range);
}

/* --- start-up ---------------------------------------------------------- */

static void trace_create_locked(void)
{
    if (g_trace != NULL)
        return;
    ulp__cuda_trace_sink sink = {NULL, sink_kernels};
    if (ulp__cuda_trace_create(&sink, &g_trace) != ULP_OK)
        g_trace = NULL;
}

static void at_fork_child(void)
{
    /* The child has none of the parent's threads: stop here rather than
     * queue work nobody will write.  Marks in the child are ignored. */
    atomic_store(&g_forked, 1);
    /* Graph callbacks would take the graph taps' lock, which a parent
     * thread may have held at the fork. */
    ulp__cupti_set_devcap(NULL);
    if (g_devcap != NULL)
        ulp__devcap_forget(g_devcap);
}

static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void register_fork(void)
{
    pthread_atfork(NULL, NULL, at_fork_child);
}

ULP_API int InitializeInjection(void);

ULP_API int InitializeInjection(void)
{
    /* Called by libcuda inside the first cuInit: CUPTI set-up only, no
     * driver work.  Always "success": failing here would fail cuInit. */
    if (!ulp__inject_enabled())
        return 1;
    pthread_once(&g_fork_once, register_fork);
    pthread_mutex_lock(&g_init);
    trace_create_locked();
    ulp_error err;
    ulp_error_clear(&err);
    int traced = ulp__cupti_active();
    if (g_trace != NULL && !traced) {
        traced =
            ulp__cupti_start(g_trace, gemms_wanted() && g_interposing != NULL && g_interposing(),
                             &err) == ULP_OK;
        if (!traced)
            warn("%s; recording captures without the kernel trace", err.msg);
    }
    pthread_mutex_unlock(&g_init);
    /* With a trace, open the snapshot now (no CUDA work involved): the exit
     * handler registered with it flushes CUPTI, so a program that captures
     * nothing still gets its kernel trace. */
    if (traced && session_acquire() != NULL)
        session_release();
    return 1;
}

/* The device-capture engine, created at the first device capture. */
static ulp__devcap *devcap_get(void)
{
    static atomic_int warned_driver, warned_devcap;
    pthread_mutex_lock(&g_init);
    if (g_driver_state == 0) {
        ulp_error err;
        ulp_error_clear(&err);
        g_driver_state = ulp__cuda_driver_bind(&g_ops, 0, &err) == ULP_OK ? 1 : 2;
        if (g_driver_state == 2) {
            char msg[600];
            snprintf(msg, sizeof(msg), "%s; device captures are dropped", err.msg);
            pthread_mutex_unlock(&g_init);
            warn_once(&warned_driver, msg);
            pthread_mutex_lock(&g_init);
        }
    }
    if (g_driver_state == 1 && g_devcap == NULL) {
        const char *mb = getenv("ULPPROF_PINNED_MB");
        long pinned = mb != NULL ? strtol(mb, NULL, 10) : DEFAULT_PINNED_MB;
        if (pinned <= 0)
            pinned = DEFAULT_PINNED_MB;
        const char *gmb = getenv("ULPPROF_GRAPH_MB");
        long graph = gmb != NULL ? strtol(gmb, NULL, 10) : DEFAULT_GRAPH_MB;
        if (graph < 0)
            graph = DEFAULT_GRAPH_MB;
        const char *attr = getenv("ULPPROF_KERNEL_ATTRIBUTION");
        int attribute = attr == NULL || strcmp(attr, "0") != 0;
        ulp__devcap_config cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.ops = &g_ops;
        ulp__cupti_hooks(&cfg.hooks);
        cfg.sink.capture = sink_capture;
        cfg.sink.step_now = sink_step_now;
        cfg.sink.gemms = take_gemms;
        cfg.trace = attribute && ulp__cupti_active() ? g_trace : NULL;
        cfg.pool_bytes = (size_t)pinned << 20;
        cfg.graph_bytes = (size_t)graph << 20;
        if (ulp__devcap_create(&cfg, &g_devcap) != ULP_OK) {
            g_devcap = NULL;
            g_driver_state = 2;
            pthread_mutex_unlock(&g_init);
            warn_once(&warned_devcap, "cannot start device capture: out of memory");
            return NULL;
        }
        ulp__cupti_set_devcap(g_devcap);
    }
    ulp__devcap *dc = g_devcap;
    pthread_mutex_unlock(&g_init);
    return dc;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The common path of marks and the C API for device memory. */
static ulp_status capture_device(const ulp__desc *d, uint64_t ptr, size_t nbytes, int has_stream,
                                 CUstream stream)
{
    static atomic_int warned_skip;
    ulp_session *s = session_acquire();
    if (s == NULL)
        return ULP_EDISABLED;
    session_release();
    ulp__devcap *dc = devcap_get();
    if (dc == NULL) {
        atomic_fetch_add(&g_no_driver, 1);
        return ULP_EIO;
    }
    pthread_mutex_lock(&g_init);
    int first = !g_env_device_done;
    g_env_device_done = 1;
    pthread_mutex_unlock(&g_init);
    if (first || !g_env_libs_done) {
        pthread_rwlock_rdlock(&g_lock);
        if (g_state == SESS_OPEN) {
            if (first)
                record_driver_facts();
            if (!g_env_libs_done)
                record_lib_versions();
        }
        pthread_rwlock_unlock(&g_lock);
    }
    ulp__desc dd = *d;
    if (dd.time_ns == 0)
        dd.time_ns = now_ns();
    ulp_status st = ulp__devcap_capture(dc, &dd, ptr, nbytes, has_stream, stream);
    if (st == ULP_EUNSUPPORTED)
        warn_once(&warned_skip,
                  "a capture was requested during CUDA graph capture: skipped (no "
                  "synchronization is issued while capturing); counted in the exit report");
    return st;
}

/* --- NVTX marks -------------------------------------------------------- */

static void count_malformed(const char *msg, const char *why)
{
    if (atomic_fetch_add(&g_malformed, 1) == 0) {
        snprintf(g_first_malformed, sizeof(g_first_malformed), "'%.160s': %.500s", msg, why);
        warn("ignoring malformed NVTX mark %s (further ones are counted)", g_first_malformed);
    }
}

/* Captures a parsed mark's tensor: host bytes at once, device bytes through devcap. */
static void mark_capture(const ulp__mark *m, ulp__desc *d)
{
    if (m->mem == ULP__MARK_MEM_HOST) {
        d->data = (const void *)(uintptr_t)m->ptr;
        d->has_gemms = take_gemms(NULL, 1, NULL, d->gemms);
        ulp_session *s = session_acquire();
        if (s == NULL)
            return;
        if (ulp__session_capture(s, d) != ULP_OK)
            atomic_fetch_add(&g_host_failed, 1);
        session_release();
        return;
    }
    d->stream = m->has_stream ? m->stream : 0;
    capture_device(d, m->ptr, (size_t)m->nbytes, m->has_stream, (CUstream)(uintptr_t)m->stream);
}

/* A mark's pos=/req=/in= as descriptor fields; `keys` (malloc'd, or NULL) holds the integers. */
static int mark_tokens(const ulp__mark *m, ulp__desc *d, int64_t **keys, char *inbuf, size_t inlen,
                       const char **inputs)
{
    *keys = NULL;
    if (m->row_rank > 0) {
        *keys = malloc((size_t)m->rows * 2 * sizeof(int64_t) + 1);
        if (*keys == NULL)
            return -1;
        ulp__mark_list_expand(m->pos, *keys, m->rows);
        d->positions = *keys;
        d->row_rank = m->row_rank;
        if (m->req[0] != '\0') {
            ulp__mark_list_expand(m->req, *keys + m->rows, m->rows);
            d->requests = *keys + m->rows;
        }
    }
    if (m->n_inputs > 0) {
        snprintf(inbuf, inlen, "%s", m->inputs);
        char *tok = inbuf;
        for (int i = 0; i < m->n_inputs && tok != NULL; i++) {
            char *next = strchr(tok, ',');
            if (next != NULL)
                *next++ = '\0';
            inputs[d->n_inputs++] = tok;
            tok = next;
        }
        d->inputs = inputs;
    }
    return 0;
}

void ulp__inject_mark(const char *msg)
{
    /* Most marks in a real program are not ours: cheapest test first. */
    if (msg == NULL || msg[0] != 'u' || msg[1] != 'l' || msg[2] != 'p')
        return;
    ulp__mark m;
    ulp_error err;
    ulp_error_clear(&err);
    if (ulp__mark_parse(msg, &m, &err) != ULP_OK) {
        count_malformed(msg, err.msg);
        return;
    }
    if (m.kind == ULP__MARK_NOT_OURS || !ulp__inject_enabled())
        return;
    if (m.kind == ULP__MARK_STEP) {
        atomic_store(&g_step, m.step);
        ulp_session *s = session_acquire();
        if (s != NULL) {
            ulp_session_set_step(s, m.step);
            session_release();
        }
        return;
    }
    ulp__desc d;
    ulp__desc_init(&d);
    d.name = m.name;
    d.dtype = m.dtype;
    d.ndim = m.ndim;
    d.shape = m.shape;
    d.layer = m.layer;
    d.role = m.role;
    d.step = m.step;
    d.device_ptr = m.ptr;
    /* Token metadata: the capture copies it at the call. */
    int64_t *keys = NULL;
    char inbuf[ULP__MARK_NAME_MAX];
    const char *inputs[ULP__MARK_MAX_INPUTS];
    if (mark_tokens(&m, &d, &keys, inbuf, sizeof inbuf, inputs) != 0) {
        atomic_fetch_add(&g_host_failed, 1);
        return;
    }
    mark_capture(&m, &d);
    free(keys);
}

/* --- the C API --------------------------------------------------------- */

static ulp_status device_desc(const ulp__desc *d, void *stream)
{
    if (d == NULL || d->name == NULL || ulp_dtype_size(d->dtype) == 0 || d->ndim < 0 ||
        d->ndim > ULP_MAX_RANK || (d->ndim > 0 && d->shape == NULL))
        return ULP_EINVAL;
    uint64_t elements = 1;
    for (int i = 0; i < d->ndim; i++) {
        if (d->shape[i] < 0)
            return ULP_EINVAL;
        uint64_t e = (uint64_t)d->shape[i];
        if (e != 0 && elements > (UINT64_MAX >> 1) / e)
            return ULP_EINVAL;
        elements *= e;
    }
    uint64_t nbytes = elements * ulp_dtype_size(d->dtype);
    if (nbytes > SIZE_MAX / 2 || (nbytes > 0 && d->data == NULL))
        return ULP_EINVAL;
    if (!ulp__inject_enabled())
        return ULP_EDISABLED;
    int has_stream = stream != ULP_STREAM_UNKNOWN;
    ulp__desc dd = *d;
    dd.stream = has_stream ? (uint64_t)(uintptr_t)stream : 0;
    return capture_device(&dd, (uint64_t)(uintptr_t)d->data, (size_t)nbytes, has_stream,
                          has_stream ? (CUstream)stream : NULL);
}

ulp_status ulp_capture_device_desc(const ulp_capture_desc *d, void *stream)
{
    ulp__desc full;
    if (d == NULL || ulp__desc_from(&full, d, NULL) != ULP_OK)
        return ULP_EINVAL;
    return device_desc(&full, stream);
}

ulp_status ulp_capture_device(const char *name, const void *device_ptr, ulp_dtype dtype, int ndim,
                              const int64_t *shape, int32_t layer, ulp_role role, void *stream)
{
    ulp__desc d = ulp__capture_desc_make(name, device_ptr, dtype, ndim, shape, layer, role);
    return device_desc(&d, stream);
}

ulp_status ulp_capture_device_flush(void)
{
    pthread_mutex_lock(&g_init);
    ulp__devcap *dc = g_devcap;
    pthread_mutex_unlock(&g_init);
    if (dc != NULL)
        ulp__devcap_flush(dc);
    ulp_session *s = session_acquire();
    if (s == NULL)
        return ULP_EDISABLED;
    ulp_status st = ulp_session_flush(s);
    session_release();
    return st;
}

/* --- exit -------------------------------------------------------------- */

static void at_exit(void)
{
    if (atomic_load(&g_forked))
        return;
    pthread_mutex_lock(&g_init);
    ulp__devcap *dc = g_devcap;
    pthread_mutex_unlock(&g_init);
    ulp__devcap_stats ds;
    memset(&ds, 0, sizeof(ds));
    if (dc != NULL) {
        ulp__devcap_shutdown(dc); /* delivers what is queued */
        ulp__devcap_get_stats(dc, &ds);
    }
    /* Kernel records still in CUPTI's buffers.  No synchronization here:
     * the context may already be gone, and kernels still running would
     * come back incomplete anyway. */
    ulp__cupti_flush(1);
    ulp__gemm_log *gl = gemm_log(0);
    if (gl != NULL)
        ulp__gemm_log_flush(gl);
    pthread_rwlock_rdlock(&g_lock);
    if (g_state == SESS_OPEN && g_env_device_done && !g_env_libs_done)
        record_lib_versions();
    pthread_rwlock_unlock(&g_lock);
    pthread_rwlock_wrlock(&g_lock);
    int was_open = g_state == SESS_OPEN;
    g_state = SESS_CLOSED; /* later CUPTI buffers are dropped, not written */
    g_session = NULL;
    pthread_rwlock_unlock(&g_lock);
    /* Close here, not in the session's own exit handler: HDF5 registers its
     * library shutdown when the file is created, after that handler, so it
     * would run first and leave the writer with dead identifiers.  Ours was
     * registered after the file was created, so HDF5 is still up. */
    if (was_open)
        ulp_capture_close();

    uint64_t malformed = atomic_load(&g_malformed);
    if (malformed > 0)
        warn("%llu malformed NVTX mark%s ignored (first: %s)", (unsigned long long)malformed,
             malformed == 1 ? "" : "s", g_first_malformed);
    if (ds.skipped_graph > 0)
        warn("%llu device capture%s skipped during CUDA graph capture (unknown stream, invalidated "
             "capture, or no driver support)",
             (unsigned long long)ds.skipped_graph, ds.skipped_graph == 1 ? "" : "s");
    if (ds.graph_bound > 0)
        warn("%llu device capture%s inside CUDA graphs refused: graph slots at their bound "
             "(ULPPROF_GRAPH_MB)",
             (unsigned long long)ds.graph_bound, ds.graph_bound == 1 ? "" : "s");
    if (ds.too_large > 0)
        warn("%llu device capture%s larger than the staging pool (ULPPROF_PINNED_MB) dropped",
             (unsigned long long)ds.too_large, ds.too_large == 1 ? "" : "s");
    uint64_t failed = ds.failed + atomic_load(&g_no_driver) + atomic_load(&g_host_failed);
    if (failed > 0)
        warn("%llu capture%s failed and were dropped", (unsigned long long)failed,
             failed == 1 ? "" : "s");
    uint64_t dropped = ulp__cupti_dropped();
    if (dropped > 0)
        warn("%llu kernel record%s dropped", (unsigned long long)dropped, dropped == 1 ? "" : "s");
}

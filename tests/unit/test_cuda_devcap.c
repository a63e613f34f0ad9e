/*
 * Device capture (capture/cuda/cuda_devcap.c) replayed through a fake
 * driver: a CUdeviceptr is a host address, every call is logged, and the
 * stream-capture state, failures and event readiness are scripted.  Checks
 * the call order on each path, the bytes and descriptor that reach the
 * sink, skips during graph capture, the staging pool's bound, and kernel
 * attribution against hand-computed rows.  The last case writes through
 * the real session and reads the HDF5 file back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifdef ULP_HAVE_CUDA_CORE
#include <hdf5.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture/session.h"
#include "cuda_devcap.h"
#include "cuda_trace.h"

/* --- the fake driver ---------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char call_log[8192];
/* The calls made on the test's own thread (the application's), apart from
 * the completion thread's: what it does while the other runs is a race. */
static char app_log[8192];
static pthread_t app_thread;
static int alloc_count, sync_count, ctx_sync_count;
static CUstreamCaptureStatus capture_status;
static CUresult capturing_result, memcpy_result;
static int no_context;
static int query_not_ready_first; /* event_query says NOT_READY once per event */

typedef struct fake_event {
    int recorded, queried;
} fake_event;

static void logc(const char *what)
{
    pthread_mutex_lock(&log_lock);
    size_t n = strlen(call_log);
    snprintf(call_log + n, sizeof(call_log) - n, "%s%s", n ? " " : "", what);
    if (pthread_equal(pthread_self(), app_thread)) {
        n = strlen(app_log);
        snprintf(app_log + n, sizeof(app_log) - n, "%s%s", n ? " " : "", what);
    }
    pthread_mutex_unlock(&log_lock);
}

static CUresult f_ctx_get_current(CUcontext *c)
{
    logc("ctx_get_current");
    *c = no_context ? NULL : (CUcontext)(uintptr_t)0xc0;
    return CUDA_SUCCESS;
}
static CUresult f_ctx_set_current(CUcontext c)
{
    (void)c;
    logc("ctx_set_current");
    return CUDA_SUCCESS;
}
static CUresult f_ctx_synchronize(void)
{
    logc("ctx_synchronize");
    ctx_sync_count++;
    return CUDA_SUCCESS;
}
static CUresult f_stream_is_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    (void)s;
    logc("is_capturing");
    *st = capture_status;
    return capturing_result;
}
static CUresult f_stream_synchronize(CUstream s)
{
    (void)s;
    logc("stream_synchronize");
    return CUDA_SUCCESS;
}
static CUresult f_mem_host_alloc(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    logc("alloc");
    pthread_mutex_lock(&log_lock);
    alloc_count++;
    pthread_mutex_unlock(&log_lock);
    *p = malloc(n);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult f_mem_free_host(void *p)
{
    free(p);
    return CUDA_SUCCESS;
}
static CUresult f_event_create(CUevent *ev, unsigned int flags)
{
    assert_true(flags & CU_EVENT_DISABLE_TIMING);
    logc("event_create");
    *ev = (CUevent)(void *)calloc(1, sizeof(fake_event));
    return CUDA_SUCCESS;
}
static CUresult f_event_destroy(CUevent ev)
{
    free((void *)ev);
    return CUDA_SUCCESS;
}
static CUresult f_event_record(CUevent ev, CUstream s)
{
    (void)s;
    logc("event_record");
    ((fake_event *)(void *)ev)->recorded = 1;
    ((fake_event *)(void *)ev)->queried = 0;
    return CUDA_SUCCESS;
}
static CUresult f_event_query(CUevent ev)
{
    fake_event *e = (fake_event *)(void *)ev;
    assert_true(e->recorded);
    if (query_not_ready_first && e->queried++ == 0)
        return CUDA_ERROR_NOT_READY;
    return CUDA_SUCCESS;
}
static CUresult f_event_synchronize(CUevent ev)
{
    assert_true(((fake_event *)(void *)ev)->recorded);
    logc("event_synchronize");
    pthread_mutex_lock(&log_lock);
    sync_count++;
    pthread_mutex_unlock(&log_lock);
    return CUDA_SUCCESS;
}
static CUresult f_memcpy_async(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    (void)s;
    logc("memcpy_async");
    if (memcpy_result == CUDA_SUCCESS)
        memcpy(dst, (const void *)(uintptr_t)src, n);
    return memcpy_result;
}
static CUresult f_memcpy(void *dst, CUdeviceptr src, size_t n)
{
    logc("memcpy");
    if (memcpy_result == CUDA_SUCCESS)
        memcpy(dst, (const void *)(uintptr_t)src, n);
    return memcpy_result;
}

static const ulp__cuda_ops fake_ops = {
    .ctx_get_current = f_ctx_get_current,
    .ctx_set_current = f_ctx_set_current,
    .ctx_synchronize = f_ctx_synchronize,
    .stream_is_capturing = f_stream_is_capturing,
    .stream_synchronize = f_stream_synchronize,
    .mem_host_alloc = f_mem_host_alloc,
    .mem_free_host = f_mem_free_host,
    .event_create = f_event_create,
    .event_destroy = f_event_destroy,
    .event_record = f_event_record,
    .event_query = f_event_query,
    .event_synchronize = f_event_synchronize,
    .memcpy_dtoh_async = f_memcpy_async,
    .memcpy_dtoh = f_memcpy,
};

/* --- a sink that keeps what it receives -------------------------------- */

#define MAX_GOT 64
typedef struct got {
    char name[64];
    ulp__desc d;
    int64_t shape[ULP_MAX_RANK];
    unsigned char bytes[512 << 10];
    size_t nbytes;
    void (*release)(void *, void *);
    void *rctx;
    void *buf;
    int64_t positions[8], requests[8]; /* the first rows' token metadata */
    char input0[64];
} got;
static got *gots;
static int ngot;
static int hold_buffers; /* keep buffers until the test releases them */

static ulp_status fake_sink(void *ctx, const ulp__desc *d, void *buf, size_t n,
                            void (*release)(void *, void *), void *rctx)
{
    (void)ctx;
    pthread_mutex_lock(&log_lock);
    got *g = &gots[ngot++];
    pthread_mutex_unlock(&log_lock);
    snprintf(g->name, sizeof(g->name), "%s", d->name);
    g->d = *d;
    memcpy(g->shape, d->shape, (size_t)d->ndim * sizeof(int64_t));
    g->d.shape = g->shape;
    g->d.name = g->name;
    /* The token metadata is valid during the call only: keep the first rows. */
    for (int i = 0; i < 8 && d->positions != NULL && i < d->shape[0]; i++) {
        g->positions[i] = d->positions[i];
        g->requests[i] = d->requests != NULL ? d->requests[i] : -1;
    }
    if (d->n_inputs > 0)
        snprintf(g->input0, sizeof g->input0, "%s", d->inputs[0]);
    g->d.positions = g->d.requests = NULL;
    g->d.inputs = NULL;
    assert_true(n <= sizeof(g->bytes));
    if (n)
        memcpy(g->bytes, buf, n);
    g->nbytes = n;
    logc("sink");
    if (hold_buffers) {
        g->release = release;
        g->rctx = rctx;
        g->buf = buf;
    } else if (release) {
        release(rctx, buf);
    }
    return ULP_OK;
}

static int reset(void **state)
{
    (void)state;
    call_log[0] = '\0';
    app_log[0] = '\0';
    app_thread = pthread_self();
    alloc_count = sync_count = ctx_sync_count = 0;
    capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
    capturing_result = CUDA_SUCCESS;
    memcpy_result = CUDA_SUCCESS;
    no_context = 0;
    query_not_ready_first = 0;
    hold_buffers = 0;
    ngot = 0;
    if (gots == NULL)
        gots = calloc(MAX_GOT, sizeof(*gots));
    return gots ? 0 : -1;
}

static ulp__devcap *make(size_t pool, const ulp__cuda_hooks *hooks, ulp__cuda_trace *trace)
{
    ulp__devcap_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ops = &fake_ops;
    if (hooks)
        cfg.hooks = *hooks;
    cfg.sink.capture = fake_sink;
    cfg.trace = trace;
    cfg.pool_bytes = pool;
    ulp__devcap *dc = NULL;
    assert_int_equal(ulp__devcap_create(&cfg, &dc), ULP_OK);
    return dc;
}

static ulp__desc desc(const char *name, ulp_dtype dt, int nd, const int64_t *shape)
{
    ulp__desc d;
    ulp__desc_init(&d);
    d.name = name;
    d.dtype = dt;
    d.ndim = nd;
    d.shape = shape;
    return d;
}

#define STREAM ((CUstream)(uintptr_t)0x5a)

static void test_cuda_devcap__known_stream(void **state)
{
    (void)state;
    ulp__devcap *dc = make(1 << 20, NULL, NULL);
    float src[6] = {1.5f, -2.0f, 3.25f, 0.0f, -0.0f, 1e-30f};
    int64_t shape[2] = {2, 3};
    ulp__desc d = desc("layer.0", ULP_DTYPE_F32, 2, shape);
    d.layer = 0;
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, sizeof(src), 1, STREAM),
                     ULP_OK);
    /* The application thread issued the copy and returned; it never waits
     * (the completion thread may already be at work: the full log is
     * checked after the flush). */
    pthread_mutex_lock(&log_lock);
    char app[sizeof app_log];
    memcpy(app, app_log, sizeof app);
    pthread_mutex_unlock(&log_lock);
    assert_string_equal(app, "ctx_get_current is_capturing alloc event_create "
                             "memcpy_async event_record");
    assert_int_equal(ulp__devcap_flush(dc), ULP_OK);
    assert_string_equal(call_log, "ctx_get_current is_capturing alloc event_create "
                                  "memcpy_async event_record ctx_set_current "
                                  "event_synchronize sink");
    assert_int_equal(ngot, 1);
    assert_string_equal(gots[0].name, "layer.0");
    assert_int_equal(gots[0].nbytes, sizeof(src));
    assert_memory_equal(gots[0].bytes, src, sizeof(src));
    assert_int_equal(gots[0].d.ndim, 2);
    assert_true(gots[0].shape[0] == 2 && gots[0].shape[1] == 3);
    assert_int_equal(gots[0].d.dtype, ULP_DTYPE_F32);
    assert_int_equal(gots[0].d.layer, 0);
    assert_true(gots[0].d.device_ptr == (uint64_t)(uintptr_t)src);
    assert_true(gots[0].d.stream == 0x5a);
    assert_int_equal(gots[0].d.has_kernels, 0); /* no trace: no attribution */
    ulp__devcap_stats st;
    ulp__devcap_get_stats(dc, &st);
    assert_true(st.captured == 1 && st.synced == 0 && st.failed == 0);
    ulp__devcap_free(dc);
}

/* Positions, requests and inputs are copied at the call: the caller may reuse them at once. */
static void test_cuda_devcap__token_metadata_copied(void **state)
{
    (void)state;
    ulp__devcap *dc = make(1 << 20, NULL, NULL);
    float src[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {3, 2};
    int64_t pos[3] = {96, 97, 98}, req[3] = {7, 7, 7};
    char in0[16] = "layers.0.out";
    const char *inputs[1] = {in0};
    ulp__desc d = desc("layers.1.out", ULP_DTYPE_F32, 2, shape);
    d.positions = pos;
    d.requests = req;
    d.row_rank = 1;
    d.inputs = inputs;
    d.n_inputs = 1;
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, sizeof(src), 1, STREAM),
                     ULP_OK);
    pos[0] = pos[1] = pos[2] = -5;
    req[0] = 0;
    memcpy(in0, "overwritten!", 13);
    assert_int_equal(ulp__devcap_flush(dc), ULP_OK);
    assert_int_equal(ngot, 1);
    assert_true(gots[0].positions[0] == 96 && gots[0].positions[1] == 97 &&
                gots[0].positions[2] == 98);
    assert_true(gots[0].requests[0] == 7 && gots[0].requests[2] == 7);
    assert_string_equal(gots[0].input0, "layers.0.out");
    /* A repeated key is refused at the call, not delivered. */
    int64_t rep[3] = {1, 1, 2};
    d.positions = rep;
    d.requests = NULL;
    assert_true(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, sizeof(src), 1, STREAM) !=
                ULP_OK);
    assert_int_equal(ulp__devcap_flush(dc), ULP_OK);
    assert_int_equal(ngot, 1);
    ulp__devcap_free(dc);
}

static void test_cuda_devcap__unknown_stream_syncs(void **state)
{
    (void)state;
    ulp__devcap *dc = make(1 << 20, NULL, NULL);
    uint16_t src[4] = {0x3f80, 0xbf80, 0x7fc0, 0x0001};
    int64_t shape[1] = {4};
    ulp__desc d = desc("x", ULP_DTYPE_BF16, 1, shape);
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, sizeof(src), 0, NULL),
                     ULP_OK);
    ulp__devcap_flush(dc);
    /* Legacy stream checked for capture, then a full sync and a plain copy;
     * no event, and the worker has nothing to wait for. */
    assert_string_equal(call_log, "ctx_get_current is_capturing alloc ctx_synchronize memcpy sink");
    assert_memory_equal(gots[0].bytes, src, sizeof(src));
    assert_true(gots[0].d.stream == 0);
    ulp__devcap_stats st;
    ulp__devcap_get_stats(dc, &st);
    assert_true(st.synced == 1 && st.captured == 1);
    ulp__devcap_free(dc);
}

static int capture_active_flag;
static int h_capture_active(void *ctx)
{
    (void)ctx;
    return capture_active_flag;
}

static void test_cuda_devcap__graph_capture_skips(void **state)
{
    (void)state;
    ulp__cuda_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.capture_active = h_capture_active;
    ulp__devcap *dc = make(1 << 20, &hooks, NULL);
    float src[2] = {1, 2};
    int64_t shape[1] = {2};
    ulp__desc d = desc("g", ULP_DTYPE_F32, 1, shape);

    /* The stream itself is capturing. */
    capture_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, 8, 1, STREAM),
                     ULP_EUNSUPPORTED);
    /* The query itself refuses (legacy stream while another captures). */
    capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
    capturing_result = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, 8, 1, STREAM),
                     ULP_EUNSUPPORTED);
    capturing_result = CUDA_SUCCESS;
    /* Unknown stream while CUPTI saw a capture begin somewhere: no sync. */
    capture_active_flag = 1;
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, 8, 0, NULL),
                     ULP_EUNSUPPORTED);
    capture_active_flag = 0;
    ulp__devcap_flush(dc);
    /* Nothing but queries: no allocation, copy, event or synchronization. */
    assert_string_equal(call_log, "ctx_get_current is_capturing ctx_get_current is_capturing "
                                  "ctx_get_current");
    assert_int_equal(ngot, 0);
    ulp__devcap_stats st;
    ulp__devcap_get_stats(dc, &st);
    assert_true(st.skipped_graph == 3 && st.captured == 0 && st.failed == 0);
    /* Once the capture ends, the same request goes through. */
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, 8, 0, NULL), ULP_OK);
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 1);
    ulp__devcap_free(dc);
}

static void test_cuda_devcap__failures(void **state)
{
    (void)state;
    ulp__devcap *dc = make(1 << 20, NULL, NULL);
    float src[2] = {1, 2};
    int64_t shape[1] = {2};
    ulp__desc d = desc("f", ULP_DTYPE_F32, 1, shape);
    no_context = 1;
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, 8, 1, STREAM), ULP_EIO);
    no_context = 0;
    memcpy_result = CUDA_ERROR_ILLEGAL_ADDRESS;
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, 8, 1, STREAM), ULP_EIO);
    memcpy_result = CUDA_SUCCESS;
    /* The failed copy's buffer went back to the pool: no new allocation. */
    assert_int_equal(alloc_count, 1);
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, 8, 1, STREAM), ULP_OK);
    ulp__devcap_flush(dc);
    assert_int_equal(alloc_count, 1);
    assert_int_equal(ngot, 1);
    ulp__devcap_stats st;
    ulp__devcap_get_stats(dc, &st);
    assert_true(st.failed == 2 && st.captured == 1);
    /* Larger than the whole pool. */
    ulp__devcap_free(dc);
    dc = make(64 << 10, NULL, NULL);
    assert_int_equal(
        ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, (64 << 10) + 1, 1, STREAM),
        ULP_ERANGE);
    ulp__devcap_get_stats(dc, &st);
    assert_true(st.too_large == 1);
    ulp__devcap_free(dc);
}

typedef struct capture_arg {
    ulp__devcap *dc;
    const void *src;
    size_t n;
    volatile int done;
} capture_arg;

static void *capture_thread(void *p)
{
    capture_arg *a = p;
    int64_t shape[1] = {(int64_t)a->n};
    ulp__desc d = desc("second", ULP_DTYPE_U8, 1, shape);
    assert_int_equal(ulp__devcap_capture(a->dc, &d, (uint64_t)(uintptr_t)a->src, a->n, 1, STREAM),
                     ULP_OK);
    a->done = 1;
    return NULL;
}

static void test_cuda_devcap__pool_bound(void **state)
{
    (void)state;
    /* A 128 KiB pool holds one 100 KB tensor at a time: the second capture
     * waits until the sink gives the first buffer back, and reuses it. */
    ulp__devcap *dc = make(128 << 10, NULL, NULL);
    size_t n = 100000;
    unsigned char *a = malloc(n), *b = malloc(n);
    for (size_t i = 0; i < n; i++) {
        a[i] = (unsigned char)(i * 31);
        b[i] = (unsigned char)(i * 17 + 5);
    }
    hold_buffers = 1;
    int64_t shape[1] = {(int64_t)n};
    ulp__desc d = desc("first", ULP_DTYPE_U8, 1, shape);
    assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)a, n, 1, STREAM), ULP_OK);
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 1);
    capture_arg arg = {dc, b, n, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, capture_thread, &arg), 0);
    usleep(100000);
    assert_int_equal(arg.done, 0); /* back-pressure: still waiting for room */
    gots[0].release(gots[0].rctx, gots[0].buf);
    pthread_join(t, NULL);
    assert_int_equal(arg.done, 1);
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 2);
    assert_int_equal(alloc_count, 1);
    assert_memory_equal(gots[0].bytes, a, n);
    assert_memory_equal(gots[1].bytes, b, n);
    gots[1].release(gots[1].rctx, gots[1].buf);
    ulp__devcap_free(dc);
    free(a);
    free(b);
}

static void test_cuda_devcap__order_and_batching(void **state)
{
    (void)state;
    ulp__devcap *dc = make(4 << 20, NULL, NULL);
    query_not_ready_first = 1;
    int32_t src[20][8];
    char names[20][16];
    int64_t shape[1] = {8};
    for (int i = 0; i < 20; i++) {
        for (int k = 0; k < 8; k++)
            src[i][k] = i * 100 + k;
        snprintf(names[i], sizeof(names[i]), "t%d", i);
        ulp__desc d = desc(names[i], ULP_DTYPE_I32, 1, shape);
        assert_int_equal(ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src[i], 32, 1, STREAM),
                         ULP_OK);
    }
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 20);
    for (int i = 0; i < 20; i++) {
        assert_string_equal(gots[i].name, names[i]);
        assert_memory_equal(gots[i].bytes, src[i], 32);
    }
    ulp__devcap_free(dc);
}

/* --- kernel attribution ------------------------------------------------- */

typedef struct row_log {
    uint32_t corr[64];
    uint32_t stream[64];
    uint64_t n;
    int fail;
} row_log;
static row_log rows;

static ulp_status rows_sink(void *ctx, const ulp__cuda_kernel *k, size_t n, uint64_t first)
{
    (void)ctx;
    if (rows.fail)
        return ULP_EIO;
    assert_true(first == rows.n); /* rows arrive in row order, numbered densely */
    for (size_t i = 0; i < n; i++) {
        rows.corr[rows.n] = k[i].correlation_id;
        rows.stream[rows.n] = k[i].stream_id;
        rows.n++;
    }
    return ULP_OK;
}

/* What CUPTI would deliver at the next flush, and the copy correlation ids. */
static ulp__cuda_trace *g_trace;
static uint32_t pending_corr[16], pending_stream[16];
static int npending;
static uint32_t next_copy_corr;
static int flush_count;

static void deliver(const uint32_t *corr, const uint32_t *stream, int n)
{
    ulp__cuda_kernel k[16];
    memset(k, 0, sizeof(k));
    for (int i = 0; i < n; i++) {
        k[i].correlation_id = corr[i];
        k[i].stream_id = stream[i];
        k[i].name = NULL;
    }
    ulp__cuda_trace_add(g_trace, k, (size_t)n);
}

static int h_stream_id(void *ctx, CUcontext c, CUstream s, uint32_t *id)
{
    (void)ctx;
    (void)c;
    *id = (uint32_t)(uintptr_t)s;
    return 0;
}
static void h_copy_begin(void *ctx)
{
    (void)ctx;
}
static uint32_t h_copy_end(void *ctx)
{
    (void)ctx;
    return next_copy_corr;
}
static void h_flush(void *ctx)
{
    (void)ctx;
    flush_count++;
    deliver(pending_corr, pending_stream, npending);
    npending = 0;
}

static void capture_on(ulp__devcap *dc, const char *name, int has_stream, uintptr_t stream,
                       uint32_t corr, const float *src)
{
    int64_t shape[1] = {1};
    ulp__desc d = desc(name, ULP_DTYPE_F32, 1, shape);
    next_copy_corr = corr;
    assert_int_equal(
        ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)src, 4, has_stream, (CUstream)stream),
        ULP_OK);
    ulp__devcap_flush(dc);
}

static void expect_range(int i, int64_t first, int64_t last)
{
    assert_int_equal(gots[i].d.has_kernels, 1);
    if (gots[i].d.kernels[0] != first || gots[i].d.kernels[1] != last)
        fail_msg("%s: kernels [%lld, %lld), expected [%lld, %lld)", gots[i].name,
                 (long long)gots[i].d.kernels[0], (long long)gots[i].d.kernels[1], (long long)first,
                 (long long)last);
}

static void test_cuda_devcap__attribution(void **state)
{
    (void)state;
    memset(&rows, 0, sizeof(rows));
    ulp__cuda_trace_sink sink = {NULL, rows_sink};
    assert_int_equal(ulp__cuda_trace_create(&sink, &g_trace), ULP_OK);
    ulp__cuda_hooks hooks = {NULL, h_stream_id, h_copy_begin, h_copy_end, NULL, h_flush};
    ulp__devcap *dc = make(1 << 20, &hooks, g_trace);
    float x = 1.0f;

    /* Launch order (correlation ids): k1 s1, k2 s2, k3 s1, copy A on s1 (4).
     * CUPTI delivers k3 before k1 (two per-thread buffers); rows follow
     * delivery, sorted by correlation id within a batch:
     * batch 1 = {k3} -> row 0; batch 2 (at the flush) = {k1, k2} -> rows 1, 2. */
    deliver((uint32_t[]){3}, (uint32_t[]){1}, 1);
    pending_corr[0] = 2, pending_stream[0] = 2;
    pending_corr[1] = 1, pending_stream[1] = 1;
    npending = 2;
    capture_on(dc, "A", 1, 1, 4, &x);
    /* A on s1 takes k3 (row 0) and k1 (row 1): [0, 2). */
    expect_range(0, 0, 2);
    assert_true(rows.corr[0] == 3 && rows.corr[1] == 1 && rows.corr[2] == 2);

    /* k5 s1, k6 s2, then copy B on s1 (7); k9 s1 was launched after B's
     * copy (9 > 7) but is delivered in the same flush. */
    pending_corr[0] = 5, pending_stream[0] = 1;
    pending_corr[1] = 6, pending_stream[1] = 2;
    pending_corr[2] = 9, pending_stream[2] = 1;
    npending = 3;
    capture_on(dc, "B", 1, 1, 7, &x);
    /* rows 3 (k5), 4 (k6), 5 (k9): B takes k5 only. */
    expect_range(1, 3, 4);

    /* C on s2 (corr 8): k2 (row 2) and k6 (row 4), k9 is s1's. */
    capture_on(dc, "C", 1, 2, 8, &x);
    expect_range(2, 2, 5);

    /* D, unknown stream (corr 10): whatever is left anywhere: k9 (row 5). */
    capture_on(dc, "D", 0, 0, 10, &x);
    expect_range(3, 5, 6);

    /* E on s1 with nothing new: an empty range at the end, [6, 6). */
    capture_on(dc, "E", 1, 1, 11, &x);
    expect_range(4, 6, 6);

    /* No correlation id (CUPTI saw no copy): no attribution at all. */
    capture_on(dc, "F", 1, 1, 0, &x);
    assert_int_equal(gots[5].d.has_kernels, 0);

    /* Once the file refuses rows, attribution stops rather than lie. */
    rows.fail = 1;
    pending_corr[0] = 12, pending_stream[0] = 1;
    npending = 1;
    capture_on(dc, "G", 1, 1, 13, &x);
    assert_int_equal(gots[6].d.has_kernels, 0);
    assert_true(flush_count >= 6);

    ulp__devcap_free(dc);
    ulp__cuda_trace_free(g_trace);
    g_trace = NULL;
}

/* --- through the real session into HDF5 ---------------------------------- */

static ulp_session *real_session;

static ulp_status session_sink(void *ctx, const ulp__desc *d, void *buf, size_t n,
                               void (*release)(void *, void *), void *rctx)
{
    (void)ctx;
    return ulp__session_capture_deferred(real_session, d, buf, n, NULL, release, rctx);
}

static ulp_status session_rows(void *ctx, const ulp__cuda_kernel *k, size_t n, uint64_t first)
{
    (void)ctx;
    ulp__kernel_row r[16];
    const char *names[16];
    memset(r, 0, sizeof(r));
    for (size_t i = 0; i < n; i++) {
        r[i].seq = first + i;
        r[i].correlation_id = k[i].correlation_id;
        r[i].stream = k[i].stream_id;
        r[i].grid[0] = (int32_t)k[i].correlation_id;
        names[i] = k[i].name;
    }
    return ulp__session_trace_kernels(real_session, r, names, n);
}

static void test_cuda_devcap__session_file(void **state)
{
    (void)state;
    const char *tmp = getenv("ULPPROF_TEST_TMP");
    char dir[512], path[600];
    snprintf(dir, sizeof(dir), "%s", tmp ? tmp : "/tmp");
    mkdir(dir, 0777);
    snprintf(path, sizeof(path), "%s/test_cuda_devcap_%d.h5", dir, (int)getpid());
    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = path;
    o.label = "devcap";
    o.record_env = 0;
    assert_int_equal(ulp_session_open(&o, &real_session, NULL), ULP_OK);

    ulp__cuda_trace_sink sink = {NULL, session_rows};
    assert_int_equal(ulp__cuda_trace_create(&sink, &g_trace), ULP_OK);
    ulp__cuda_hooks hooks = {NULL, h_stream_id, h_copy_begin, h_copy_end, NULL, h_flush};
    ulp__devcap_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ops = &fake_ops;
    cfg.hooks = hooks;
    cfg.sink.capture = session_sink;
    cfg.trace = g_trace;
    cfg.pool_bytes = 1 << 20;
    ulp__devcap *dc = NULL;
    assert_int_equal(ulp__devcap_create(&cfg, &dc), ULP_OK);

    /* Two kernels on stream 7 before the copy (corr 3). */
    pending_corr[0] = 1, pending_stream[0] = 7;
    pending_corr[1] = 2, pending_stream[1] = 7;
    npending = 2;
    uint16_t bf[6] = {0x3f80, 0x4000, 0xc040, 0x0000, 0x8000, 0x7f80};
    int64_t shape[2] = {3, 2};
    ulp__desc d = desc("model.layers.0.out", ULP_DTYPE_BF16, 2, shape);
    d.layer = 0;
    next_copy_corr = 3;
    assert_int_equal(
        ulp__devcap_capture(dc, &d, (uint64_t)(uintptr_t)bf, sizeof(bf), 1, (CUstream)(uintptr_t)7),
        ULP_OK);
    ulp__devcap_flush(dc);
    /* The session returns the staging buffers as it writes them: let it
     * finish before the device-capture object (their owner) goes away. */
    assert_int_equal(ulp_session_flush(real_session), ULP_OK);
    ulp__devcap_free(dc);
    assert_int_equal(ulp_session_close(real_session), ULP_OK);
    ulp__cuda_trace_free(g_trace);
    g_trace = NULL;

    /* Read it back with HDF5 alone. */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t ds = H5Dopen2(f, "/captures/model.layers.0.out/0", H5P_DEFAULT);
    assert_true(ds >= 0);
    uint16_t back[6];
    /* Raw bits: memory type = file type, so HDF5 converts nothing. */
    hid_t ft = H5Dget_type(ds);
    assert_true(H5Tget_size(ft) == 2);
    assert_true(H5Dread(ds, ft, H5S_ALL, H5S_ALL, H5P_DEFAULT, back) >= 0);
    H5Tclose(ft);
    assert_memory_equal(back, bf, sizeof(bf));
    hid_t a = H5Aopen(ds, "kernels", H5P_DEFAULT);
    assert_true(a >= 0);
    int64_t kr[2];
    assert_true(H5Aread(a, H5T_NATIVE_INT64, kr) >= 0);
    assert_true(kr[0] == 0 && kr[1] == 2);
    H5Aclose(a);
    a = H5Aopen(ds, "stream", H5P_DEFAULT);
    uint64_t sv = 0;
    assert_true(a >= 0 && H5Aread(a, H5T_NATIVE_UINT64, &sv) >= 0);
    assert_true(sv == 7);
    H5Aclose(a);
    H5Dclose(ds);
    hid_t kd = H5Dopen2(f, "/trace/kernels", H5P_DEFAULT);
    assert_true(kd >= 0);
    hid_t sp = H5Dget_space(kd);
    hsize_t nrows = 0;
    H5Sget_simple_extent_dims(sp, &nrows, NULL);
    assert_true(nrows == 2);
    H5Sclose(sp);
    H5Dclose(kd);
    H5Fclose(f);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cuda_devcap__known_stream, reset),
        cmocka_unit_test_setup(test_cuda_devcap__token_metadata_copied, reset),
        cmocka_unit_test_setup(test_cuda_devcap__unknown_stream_syncs, reset),
        cmocka_unit_test_setup(test_cuda_devcap__graph_capture_skips, reset),
        cmocka_unit_test_setup(test_cuda_devcap__failures, reset),
        cmocka_unit_test_setup(test_cuda_devcap__pool_bound, reset),
        cmocka_unit_test_setup(test_cuda_devcap__order_and_batching, reset),
        cmocka_unit_test_setup(test_cuda_devcap__attribution, reset),
        cmocka_unit_test_setup(test_cuda_devcap__session_file, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
    printf("SKIPPED: test_cuda_devcap needs the CUDA collector core (ULPPROF_WITH_CUDA=ON)\n");
    return 0;
}
#endif

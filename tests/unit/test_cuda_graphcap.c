/*
 * Captures inside CUDA graphs (capture/cuda/cuda_graphcap.c, the graph
 * paths of cuda_devcap.c, the CUPTI callbacks of cuda_graphcb.c), replayed
 * through a fake driver that models stream capture as cuda.h describes it:
 * a copy on a capturing stream becomes a node of that capture's graph
 * instead of running; launching an executable runs its nodes; each thread
 * has a capture interaction mode, and a "potentially unsafe" call
 * (allocating or freeing pinned memory, waiting on an event) made where
 * that mode forbids it fails and invalidates the capture, as the driver
 * does.  The graph's life reaches the collector as CUPTI callback data
 * (CUpti_CallbackData, CUpti_ResourceData) built here.
 *
 * Expected values are written here from the test's own tensors: what each
 * replay must yield is the tensor as it was when that replay ran.
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
#include "cuda_graphcap.h"
#include "cuda_graphcb.h"

/* --- the fake driver: streams, captures, graphs ----------------------- */

#define MAX_NODES   32
#define MAX_STREAMS 4

typedef struct node {
    void *dst;
    const void *src;
    size_t n;
} node;

typedef struct fake_graph {
    node nodes[MAX_NODES];
    int nnodes;
} fake_graph;

typedef struct capture {
    CUstream stream;
    int active;
    CUstreamCaptureStatus status;
    CUstreamCaptureMode mode; /* given to cuStreamBeginCapture */
    pthread_t owner;
    cuuint64_t id;
    fake_graph *graph;
} capture;

static pthread_mutex_t drv = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t drv_cond = PTHREAD_COND_INITIALIZER;
static capture caps[MAX_STREAMS];
static cuuint64_t next_id = 100;
static __thread CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static int unsafe_refused; /* calls the fake refused */
static int host_allocs, host_frees;
static uint32_t next_corr = 1000;
/* The gate check: an event recorded after launch k completes only once
 * launch k+1 has entered (or the test says no launch follows). */
static int gate_check, launches_entered, no_more_launches;

typedef struct fake_event {
    int wait_for; /* launches_entered needed; 0: none */
} fake_event;

static capture *cap_of(CUstream s)
{
    for (int i = 0; i < MAX_STREAMS; i++)
        if (caps[i].active && caps[i].stream == s)
            return &caps[i];
    return NULL;
}

/* cuThreadExchangeStreamCaptureMode's rules.  Locked. */
static int prohibited_locked(void)
{
    if (t_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    int hit = 0;
    for (int i = 0; i < MAX_STREAMS; i++) {
        capture *c = &caps[i];
        if (!c->active)
            continue;
        int mine = pthread_equal(c->owner, pthread_self());
        if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!mine && t_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
             c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            c->status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
            hit = 1;
        }
    }
    if (hit)
        unsafe_refused++;
    return hit;
}

static CUresult unsafe_call(void)
{
    pthread_mutex_lock(&drv);
    int p = prohibited_locked();
    pthread_mutex_unlock(&drv);
    return p ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

static CUresult f_ctx_get_current(CUcontext *c)
{
    *c = (CUcontext)(uintptr_t)0xc0;
    return CUDA_SUCCESS;
}
static CUresult f_ctx_set_current(CUcontext c)
{
    (void)c;
    return CUDA_SUCCESS;
}
static CUresult f_ctx_synchronize(void)
{
    return unsafe_call();
}
static CUresult f_stream_is_capturing(CUstream s, CUstreamCaptureStatus *st)
{
    pthread_mutex_lock(&drv);
    capture *c = cap_of(s);
    *st = c ? c->status : CU_STREAM_CAPTURE_STATUS_NONE;
    pthread_mutex_unlock(&drv);
    return CUDA_SUCCESS;
}
static CUresult f_stream_get_capture_info(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id,
                                          CUgraph *g, const CUgraphNode **deps,
                                          const CUgraphEdgeData **edges, size_t *nd)
{
    assert_null(g); /* the collector asks for no more than it needs */
    assert_null(deps);
    assert_null(edges);
    assert_null(nd);
    pthread_mutex_lock(&drv);
    capture *c = cap_of(s);
    *st = c ? c->status : CU_STREAM_CAPTURE_STATUS_NONE;
    if (id)
        *id = c ? c->id : 0;
    pthread_mutex_unlock(&drv);
    return CUDA_SUCCESS;
}
static CUresult f_exchange_mode(CUstreamCaptureMode *m)
{
    CUstreamCaptureMode old = t_mode;
    t_mode = *m;
    *m = old;
    return CUDA_SUCCESS;
}
static CUresult f_stream_synchronize(CUstream s)
{
    (void)s;
    return unsafe_call();
}
static CUresult f_mem_host_alloc(void **p, size_t n, unsigned int flags)
{
    (void)flags;
    CUresult r = unsafe_call();
    if (r != CUDA_SUCCESS)
        return r;
    *p = malloc(n ? n : 1);
    pthread_mutex_lock(&drv);
    host_allocs++;
    pthread_mutex_unlock(&drv);
    return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
static CUresult f_mem_free_host(void *p)
{
    CUresult r = unsafe_call();
    if (r != CUDA_SUCCESS)
        return r;
    free(p);
    pthread_mutex_lock(&drv);
    host_frees++;
    pthread_mutex_unlock(&drv);
    return CUDA_SUCCESS;
}
static CUresult f_event_create(CUevent *ev, unsigned int flags)
{
    (void)flags;
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
    pthread_mutex_lock(&drv);
    assert_null(cap_of(s)); /* never recorded into a capture */
    ((fake_event *)(void *)ev)->wait_for = gate_check ? launches_entered + 1 : 0;
    pthread_mutex_unlock(&drv);
    return CUDA_SUCCESS;
}
static CUresult f_event_query(CUevent ev)
{
    (void)ev;
    CUresult r = unsafe_call();
    if (r != CUDA_SUCCESS)
        return r;
    return gate_check ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}
static CUresult f_event_synchronize(CUevent ev)
{
    CUresult r = unsafe_call();
    if (r != CUDA_SUCCESS)
        return r;
    fake_event *e = (fake_event *)(void *)ev;
    pthread_mutex_lock(&drv);
    while (e->wait_for != 0 && launches_entered < e->wait_for && !no_more_launches)
        pthread_cond_wait(&drv_cond, &drv);
    pthread_mutex_unlock(&drv);
    return CUDA_SUCCESS;
}
static CUresult f_memcpy_async(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    pthread_mutex_lock(&drv);
    capture *c = cap_of(s);
    CUresult r = CUDA_SUCCESS;
    if (c != NULL && c->status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else if (c != NULL) {
        assert_true(c->graph->nnodes < MAX_NODES);
        c->graph->nodes[c->graph->nnodes++] = (node){dst, (const void *)(uintptr_t)src, n};
    } else {
        memcpy(dst, (const void *)(uintptr_t)src, n);
    }
    pthread_mutex_unlock(&drv);
    return r;
}
static CUresult f_memcpy(void *dst, CUdeviceptr src, size_t n)
{
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
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
    .stream_get_capture_info = f_stream_get_capture_info,
    .thread_exchange_capture_mode = f_exchange_mode,
};

/* --- the application: capture, instantiate, launch, through CUPTI ------ */

static ulp__devcap *g_dc;

static void driver_cb(CUpti_CallbackId cbid, CUpti_ApiCallbackSite site, void *params,
                      CUresult *ret, uint32_t corr)
{
    CUpti_CallbackData cb;
    memset(&cb, 0, sizeof(cb));
    cb.callbackSite = site;
    cb.functionParams = params;
    cb.functionReturnValue = ret;
    cb.correlationId = corr;
    assert_int_equal(ulp__graphcb_handle(g_dc, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb),
                     g_dc != NULL);
}

static void resource_cb(CUpti_CallbackId cbid, CUgraph graph, CUgraph original, CUgraphExec exec)
{
    CUpti_GraphData gd;
    memset(&gd, 0, sizeof(gd));
    gd.graph = graph;
    gd.originalGraph = original;
    gd.graphExec = exec;
    CUpti_ResourceData rd;
    memset(&rd, 0, sizeof(rd));
    rd.resourceDescriptor = &gd;
    assert_int_equal(ulp__graphcb_handle(g_dc, CUPTI_CB_DOMAIN_RESOURCE, cbid, &rd), g_dc != NULL);
}

static void begin_capture(CUstream s, CUstreamCaptureMode mode)
{
    pthread_mutex_lock(&drv);
    for (int i = 0; i < MAX_STREAMS; i++) {
        if (!caps[i].active) {
            caps[i] = (capture){s,
                                1,
                                CU_STREAM_CAPTURE_STATUS_ACTIVE,
                                mode,
                                pthread_self(),
                                next_id++,
                                calloc(1, sizeof(fake_graph))};
            pthread_mutex_unlock(&drv);
            return;
        }
    }
    fail_msg("too many captures");
}

/* cuStreamEndCapture: the graph, or NULL when the capture was invalidated. */
static fake_graph *end_capture(CUstream s)
{
    CUgraph out = NULL;
    cuStreamEndCapture_params p = {s, &out};
    CUresult ret = CUDA_SUCCESS;
    driver_cb(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, CUPTI_API_ENTER, &p, &ret, next_corr++);
    pthread_mutex_lock(&drv);
    capture *c = cap_of(s);
    assert_non_null(c);
    fake_graph *g = c->graph;
    if (c->status == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        out = (CUgraph)(void *)g;
    } else {
        ret = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        free(g);
        g = NULL;
    }
    c->active = 0;
    pthread_mutex_unlock(&drv);
    driver_cb(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, CUPTI_API_EXIT, &p, &ret, next_corr - 1);
    return g;
}

static fake_graph *instantiate(fake_graph *g)
{
    fake_graph *x = malloc(sizeof(*x));
    *x = *g;
    resource_cb(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, (CUgraph)(void *)g, NULL,
                (CUgraphExec)(void *)x);
    return x;
}

static void destroy_graph(fake_graph *g)
{
    resource_cb(CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, (CUgraph)(void *)g, NULL, NULL);
    free(g);
}

static void destroy_exec(fake_graph *x)
{
    resource_cb(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, NULL, NULL, (CUgraphExec)(void *)x);
    free(x);
}

/* cuGraphLaunch: the gate at entry, the nodes run, the harvest at exit. */
static void launch(fake_graph *x, CUstream s)
{
    cuGraphLaunch_params p = {(CUgraphExec)(void *)x, s};
    CUresult ret = CUDA_SUCCESS;
    uint32_t corr = next_corr++;
    pthread_mutex_lock(&drv);
    launches_entered++;
    pthread_cond_broadcast(&drv_cond);
    pthread_mutex_unlock(&drv);
    driver_cb(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_API_ENTER, &p, &ret, corr);
    pthread_mutex_lock(&drv);
    capture *c = cap_of(s);
    pthread_mutex_unlock(&drv);
    if (c == NULL) /* into another capture: a child graph, nothing runs */
        for (int i = 0; i < x->nnodes; i++)
            memcpy(x->nodes[i].dst, x->nodes[i].src, x->nodes[i].n);
    driver_cb(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_API_EXIT, &p, &ret, corr);
}

/* --- the sink ------------------------------------------------------------ */

#define MAX_GOT 64
typedef struct got {
    char name[64];
    ulp__desc d;
    float v[16];
    size_t nbytes;
} got;
static got gots[MAX_GOT];
static int ngot;
static int64_t step_now_value;

static ulp_status sink(void *ctx, const ulp__desc *d, void *buf, size_t n,
                       void (*release)(void *, void *), void *rctx)
{
    (void)ctx;
    pthread_mutex_lock(&drv);
    assert_true(ngot < MAX_GOT && n <= sizeof(gots[0].v));
    got *g = &gots[ngot++];
    pthread_mutex_unlock(&drv);
    snprintf(g->name, sizeof(g->name), "%s", d->name);
    g->d = *d;
    memcpy(g->v, buf, n);
    g->nbytes = n;
    if (release)
        release(rctx, buf);
    return ULP_OK;
}

static int64_t step_now(void *ctx)
{
    (void)ctx;
    return step_now_value;
}

static int reset(void **state)
{
    (void)state;
    memset(caps, 0, sizeof(caps));
    t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    unsafe_refused = host_allocs = host_frees = 0;
    gate_check = launches_entered = no_more_launches = 0;
    ngot = 0;
    step_now_value = ULP_STEP_NONE;
    g_dc = NULL; /* each case makes its own */
    return 0;
}

static ulp__devcap *make(size_t pool, size_t graph_bytes)
{
    ulp__devcap_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ops = &fake_ops;
    cfg.sink.capture = sink;
    cfg.sink.step_now = step_now;
    cfg.pool_bytes = pool;
    cfg.graph_bytes = graph_bytes;
    ulp__devcap *dc = NULL;
    assert_int_equal(ulp__devcap_create(&cfg, &dc), ULP_OK);
    g_dc = dc;
    return dc;
}

#define S1 ((CUstream)(uintptr_t)0x51)
#define S2 ((CUstream)(uintptr_t)0x52)

static ulp_status mark(CUstream s, const char *name, const float *src, int n)
{
    int64_t shape[1] = {n};
    ulp__desc d;
    ulp__desc_init(&d);
    d.name = name;
    d.dtype = ULP_DTYPE_F32;
    d.ndim = 1;
    d.shape = shape;
    d.layer = name[0] == 'l' ? name[1] - '0' : ULP_LAYER_NONE;
    return ulp__devcap_capture(g_dc, &d, (uint64_t)(uintptr_t)src, (size_t)n * sizeof(float), 1, s);
}

static void fill(float *v, int n, float base)
{
    for (int i = 0; i < n; i++)
        v[i] = base + 0.25f * (float)i;
}

static void expect_got(int i, const char *name, float base, int n, int64_t step, uint64_t replay)
{
    assert_string_equal(gots[i].name, name);
    assert_int_equal(gots[i].nbytes, (size_t)n * sizeof(float));
    float want[16];
    fill(want, n, base);
    if (memcmp(gots[i].v, want, (size_t)n * sizeof(float)) != 0)
        fail_msg("capture %d (%s): v[0] %g, expected %g", i, name, (double)gots[i].v[0],
                 (double)base);
    assert_true(gots[i].d.step == step);
    assert_int_equal(gots[i].d.has_graph_replay, 1);
    assert_true(gots[i].d.graph_replay[1] == (int64_t)replay);
}

/* --- the cases ----------------------------------------------------------- */

/* Three marks in a captured graph; the graph is destroyed after
 * instantiation (as PyTorch does) and the executable replayed three times
 * with new values each time: nine captures, in order, with their step. */
static void test_cuda_graphcap__replays(void **state)
{
    (void)state;
    ulp__devcap *dc = make(1 << 20, 256 << 10);
    float a[4], b[8], c[2];
    begin_capture(S1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    assert_int_equal(mark(S1, "l0", a, 4), ULP_OK);
    assert_int_equal(mark(S1, "l1", b, 8), ULP_OK);
    assert_int_equal(mark(S1, "logits", c, 2), ULP_OK);
    fake_graph *g = end_capture(S1);
    assert_non_null(g);
    assert_int_equal(g->nnodes, 3); /* one copy node per mark, nothing copied yet */
    assert_int_equal(unsafe_refused, 0);
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 0);
    fake_graph *x = instantiate(g);
    destroy_graph(g);
    for (int r = 0; r < 3; r++) {
        fill(a, 4, 10.0f * (float)r);
        fill(b, 8, 10.0f * (float)r + 1);
        fill(c, 2, 10.0f * (float)r + 2);
        step_now_value = 40 + r;
        launch(x, S1);
    }
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 9);
    for (int r = 0; r < 3; r++) {
        expect_got(3 * r, "l0", 10.0f * (float)r, 4, 40 + r, (uint64_t)r);
        expect_got(3 * r + 1, "l1", 10.0f * (float)r + 1, 8, 40 + r, (uint64_t)r);
        expect_got(3 * r + 2, "logits", 10.0f * (float)r + 2, 2, 40 + r, (uint64_t)r);
        assert_int_equal(gots[3 * r + 1].d.layer, 1);
        assert_true(gots[3 * r].d.device_ptr == (uint64_t)(uintptr_t)a);
    }
    ulp__devcap_stats st;
    ulp__devcap_get_stats(dc, &st);
    assert_true(st.graph_taps == 3 && st.graph_harvested == 9 && st.failed == 0);
    /* An eager capture after the replays comes after them, not tapped. */
    fill(a, 4, 99);
    assert_int_equal(mark(S1, "l0", a, 4), ULP_OK);
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 10);
    assert_int_equal(gots[9].d.has_graph_replay, 0);
    assert_true(gots[9].v[0] == 99.0f);
    /* The executable gone, its slots are freed (3 slots: the staging pool
     * still holds its own buffers). */
    ulp__graphcap_stats gs;
    ulp__graphcap_get_stats(ulp__devcap_graphcap(dc), &gs);
    assert_int_equal(gs.slot_bytes, (4 + 8 + 2) * sizeof(float));
    destroy_exec(x);
    ulp__graphcap_get_stats(ulp__devcap_graphcap(dc), &gs);
    assert_int_equal(gs.slot_bytes, 0);
    assert_int_equal(unsafe_refused, 0);
    ulp__devcap_free(dc);
    assert_int_equal(host_allocs, host_frees);
}

typedef struct capture_arg {
    CUstream s;
    CUstreamCaptureMode mode;
    pthread_mutex_t m;
    pthread_cond_t cv;
    int phase; /* 1: capturing, 2: may end */
    fake_graph *g;
} capture_arg;

static void *other_capture(void *p)
{
    capture_arg *a = p;
    begin_capture(a->s, a->mode);
    pthread_mutex_lock(&a->m);
    a->phase = 1;
    pthread_cond_broadcast(&a->cv);
    while (a->phase != 2)
        pthread_cond_wait(&a->cv, &a->m);
    pthread_mutex_unlock(&a->m);
    a->g = end_capture(a->s);
    return NULL;
}

/* Taps in every capture mode, with the application's own thread mode kept,
 * two captures at once (one inside the other), and work of the collector
 * (a new staging buffer, the harvest's event wait) while another thread
 * captures in GLOBAL mode: no capture is invalidated. */
static void test_cuda_graphcap__modes(void **state)
{
    (void)state;
    /* The fake enforces the rules: an unsafe call in GLOBAL mode fails and
     * invalidates the capture. */
    begin_capture(S1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    void *p = NULL;
    assert_int_equal(f_mem_host_alloc(&p, 8, 0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_null(end_capture(S1));
    reset(NULL);

    static const CUstreamCaptureMode modes[3] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                 CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                 CU_STREAM_CAPTURE_MODE_RELAXED};
    for (int bm = 0; bm < 3; bm++) {
        for (int tm = 0; tm < 2; tm++) {
            reset(NULL);
            ulp__devcap *dc = make(1 << 20, 256 << 10);
            t_mode = modes[tm]; /* the application's own thread mode */
            float a[4], b[4];
            begin_capture(S1, modes[bm]);
            assert_int_equal(mark(S1, "l0", a, 4), ULP_OK);
            /* A second capture begins inside the first (another stream). */
            begin_capture(S2, modes[2 - bm]);
            assert_int_equal(mark(S2, "l1", b, 4), ULP_OK);
            assert_int_equal(mark(S1, "logits", a, 2), ULP_OK);
            fake_graph *g2 = end_capture(S2);
            fake_graph *g1 = end_capture(S1);
            assert_true(t_mode == modes[tm]); /* restored */
            assert_int_equal(unsafe_refused, 0);
            assert_non_null(g1);
            assert_non_null(g2);
            assert_int_equal(g1->nnodes, 2); /* each tap in its own graph */
            assert_int_equal(g2->nnodes, 1);
            fake_graph *x1 = instantiate(g1), *x2 = instantiate(g2);
            fill(a, 4, 1);
            fill(b, 4, 2);
            launch(x2, S2);
            launch(x1, S1);
            ulp__devcap_flush(dc);
            assert_int_equal(ngot, 3);
            expect_got(0, "l1", 2, 4, ULP_STEP_NONE, 0);
            expect_got(1, "l0", 1, 4, ULP_STEP_NONE, 0);
            expect_got(2, "logits", 1, 2, ULP_STEP_NONE, 0);
            assert_true(gots[0].d.graph_replay[0] != gots[1].d.graph_replay[0]);
            destroy_exec(x1);
            destroy_exec(x2);
            destroy_graph(g1);
            destroy_graph(g2);
            ulp__devcap_free(dc);
            assert_int_equal(host_allocs, host_frees);
        }
    }

    /* Another thread captures in GLOBAL mode while this one captures
     * eagerly (a new staging buffer) and the harvest waits on its event. */
    reset(NULL);
    ulp__devcap *dc = make(1 << 20, 256 << 10);
    capture_arg arg = {
        S2,  CU_STREAM_CAPTURE_MODE_GLOBAL, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
        NULL};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_capture, &arg), 0);
    pthread_mutex_lock(&arg.m);
    while (arg.phase != 1)
        pthread_cond_wait(&arg.cv, &arg.m);
    pthread_mutex_unlock(&arg.m);
    float e[4];
    fill(e, 4, 7);
    t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    assert_int_equal(mark(S1, "eager", e, 4), ULP_OK);
    ulp__devcap_flush(dc);
    pthread_mutex_lock(&arg.m);
    arg.phase = 2;
    pthread_cond_broadcast(&arg.cv);
    pthread_mutex_unlock(&arg.m);
    pthread_join(th, NULL);
    assert_non_null(arg.g); /* not invalidated */
    assert_int_equal(unsafe_refused, 0);
    assert_int_equal(ngot, 1);
    assert_true(gots[0].v[0] == 7.0f && gots[0].d.has_graph_replay == 0);
    destroy_graph(arg.g);
    ulp__devcap_free(dc);
}

/* A capture that ends in error drops its taps and frees their slots; the
 * next capture works.  A launch into another capture is not harvested. */
static void test_cuda_graphcap__capture_error(void **state)
{
    (void)state;
    ulp__devcap *dc = make(1 << 20, 256 << 10);
    float a[4];
    begin_capture(S1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    assert_int_equal(mark(S1, "l0", a, 4), ULP_OK);
    assert_int_equal(mark(S1, "l1", a, 4), ULP_OK);
    /* The application invalidates its own capture (an unsafe call). */
    assert_int_equal(f_ctx_synchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    /* A mark on the invalidated capture is skipped, not tapped. */
    assert_int_equal(mark(S1, "l2", a, 4), ULP_EUNSUPPORTED);
    assert_null(end_capture(S1));
    ulp__graphcap_stats gs;
    ulp__graphcap_get_stats(ulp__devcap_graphcap(dc), &gs);
    assert_true(gs.discarded == 2 && gs.slot_bytes == 0);
    assert_int_equal(host_allocs, host_frees);
    ulp__devcap_stats st;
    ulp__devcap_get_stats(dc, &st);
    assert_true(st.graph_taps == 2 && st.skipped_graph == 1);

    begin_capture(S1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    assert_int_equal(mark(S1, "l0", a, 4), ULP_OK);
    fake_graph *g = end_capture(S1);
    assert_non_null(g);
    fake_graph *x = instantiate(g);
    /* Launched into a capture on S2: a child graph node, nothing ran. */
    begin_capture(S2, CU_STREAM_CAPTURE_MODE_RELAXED);
    launch(x, S2);
    fake_graph *outer = end_capture(S2);
    ulp__graphcap_get_stats(ulp__devcap_graphcap(dc), &gs);
    assert_int_equal(gs.nested, 1);
    fill(a, 4, 5);
    launch(x, S1);
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 1);
    expect_got(0, "l0", 5, 4, ULP_STEP_NONE, 0);
    destroy_exec(x);
    destroy_graph(g);
    destroy_graph(outer);
    ulp__devcap_free(dc);
    assert_int_equal(host_allocs, host_frees);
}

/* Slots are bounded: the mark past the bound is refused and counted, the
 * graph keeps the taps within it. */
static void test_cuda_graphcap__bound(void **state)
{
    (void)state;
    /* 64 KiB of slots; the bound is also at most half the staging pool. */
    ulp__devcap *dc = make(1 << 20, 64 << 10);
    static float big[6 << 10]; /* 24 KiB */
    float small[4];
    begin_capture(S1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    int ok = 0, refused = 0;
    for (int i = 0; i < 4; i++) {
        ulp_status s = mark(S1, "big", big, 6 << 10);
        ok += s == ULP_OK;
        refused += s == ULP_ERANGE;
    }
    assert_int_equal(ok, 2);
    assert_int_equal(refused, 2);
    assert_int_equal(mark(S1, "l0", small, 4), ULP_OK); /* still fits */
    fake_graph *g = end_capture(S1);
    assert_int_equal(g->nnodes, 3);
    ulp__devcap_stats st;
    ulp__devcap_get_stats(dc, &st);
    assert_true(st.graph_bound == 2 && st.graph_taps == 3 && st.failed == 0);
    destroy_graph(g);
    ulp__devcap_free(dc);
    /* The bound is clamped to half the staging pool. */
    reset(NULL);
    dc = make(128 << 10, 1 << 30);
    begin_capture(S1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    assert_int_equal(mark(S1, "big", big, 6 << 10), ULP_OK);
    assert_int_equal(mark(S1, "big", big, 6 << 10), ULP_OK);
    assert_int_equal(mark(S1, "big", big, 6 << 10), ULP_ERANGE);
    g = end_capture(S1);
    destroy_graph(g);
    ulp__devcap_free(dc);
    assert_int_equal(host_allocs, host_frees);
}

/* The gate: launch k+1 does not run before replay k is harvested.  The
 * fake's event for replay k completes only once launch k+1 has entered;
 * without the gate launch k+1 would overwrite the slots first. */
static void test_cuda_graphcap__gate(void **state)
{
    (void)state;
    ulp__devcap *dc = make(1 << 20, 256 << 10);
    float a[4];
    begin_capture(S1, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    assert_int_equal(mark(S1, "l0", a, 4), ULP_OK);
    fake_graph *g = end_capture(S1);
    fake_graph *x = instantiate(g);
    gate_check = 1;
    for (int r = 0; r < 4; r++) {
        fill(a, 4, (float)(100 * r));
        launch(x, S1);
    }
    pthread_mutex_lock(&drv);
    no_more_launches = 1;
    pthread_cond_broadcast(&drv_cond);
    pthread_mutex_unlock(&drv);
    ulp__devcap_flush(dc);
    assert_int_equal(ngot, 4);
    for (int r = 0; r < 4; r++)
        expect_got(r, "l0", (float)(100 * r), 4, ULP_STEP_NONE, (uint64_t)r);
    destroy_exec(x);
    destroy_graph(g);
    ulp__devcap_free(dc);
}

/* --- through the real session into HDF5 ----------------------------------- */

static ulp_session *real_session;

static ulp_status session_sink(void *ctx, const ulp__desc *d, void *buf, size_t n,
                               void (*release)(void *, void *), void *rctx)
{
    (void)ctx;
    return ulp__session_capture_deferred(real_session, d, buf, n, NULL, release, rctx);
}

static int64_t attr_i64(hid_t ds, const char *name, int i)
{
    int64_t v[2] = {-99, -99};
    hid_t a = H5Aopen(ds, name, H5P_DEFAULT);
    assert_true(a >= 0);
    hid_t sp = H5Aget_space(a);
    assert_true(H5Sget_simple_extent_npoints(sp) > i);
    H5Sclose(sp);
    assert_true(H5Aread(a, H5T_NATIVE_INT64, v) >= 0);
    H5Aclose(a);
    return v[i];
}

/* Two taps replayed twice reach the file as occurrences 0 and 1 of each
 * name, in (replay, capture) order, with the replay's step and
 * graph_replay = [capture id, replay]. */
static void test_cuda_graphcap__session_file(void **state)
{
    (void)state;
    const char *tmp = getenv("ULPPROF_TEST_TMP");
    char dir[512], path[600];
    snprintf(dir, sizeof(dir), "%s", tmp ? tmp : "/tmp");
    mkdir(dir, 0777);
    snprintf(path, sizeof(path), "%s/test_cuda_graphcap_%d.h5", dir, (int)getpid());
    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = path;
    o.label = "graph";
    o.record_env = 0;
    assert_int_equal(ulp_session_open(&o, &real_session, NULL), ULP_OK);
    ulp__devcap_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ops = &fake_ops;
    cfg.sink.capture = session_sink;
    cfg.sink.step_now = step_now;
    cfg.pool_bytes = 1 << 20;
    cfg.graph_bytes = 256 << 10;
    ulp__devcap *dc = NULL;
    assert_int_equal(ulp__devcap_create(&cfg, &dc), ULP_OK);
    g_dc = dc;

    float a[4], b[2];
    begin_capture(S1, CU_STREAM_CAPTURE_MODE_GLOBAL);
    cuuint64_t id = caps[0].id;
    assert_int_equal(mark(S1, "l0", a, 4), ULP_OK);
    assert_int_equal(mark(S1, "logits", b, 2), ULP_OK);
    fake_graph *g = end_capture(S1);
    fake_graph *x = instantiate(g);
    destroy_graph(g);
    for (int r = 0; r < 2; r++) {
        fill(a, 4, (float)(10 * r));
        fill(b, 2, (float)(10 * r + 5));
        step_now_value = 7 + r;
        launch(x, S1);
    }
    ulp__devcap_flush(dc);
    assert_int_equal(ulp_session_flush(real_session), ULP_OK);
    destroy_exec(x);
    ulp__devcap_free(dc);
    g_dc = NULL;
    assert_int_equal(ulp_session_close(real_session), ULP_OK);

    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    static const char *const names[2] = {"l0", "logits"};
    for (int r = 0; r < 2; r++) {
        for (int k = 0; k < 2; k++) {
            char dpath[64];
            snprintf(dpath, sizeof(dpath), "/captures/%s/%d", names[k], r);
            hid_t ds = H5Dopen2(f, dpath, H5P_DEFAULT);
            assert_true(ds >= 0);
            float v[4], want[4];
            int n = k == 0 ? 4 : 2;
            assert_true(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
            fill(want, n, (float)(10 * r + 5 * k));
            assert_memory_equal(v, want, (size_t)n * sizeof(float));
            assert_true(attr_i64(ds, "seq", 0) == 2 * r + k);
            assert_true(attr_i64(ds, "step", 0) == 7 + r);
            assert_true(attr_i64(ds, "graph_replay", 0) == (int64_t)id);
            assert_true(attr_i64(ds, "graph_replay", 1) == r);
            H5Dclose(ds);
        }
    }
    H5Fclose(f);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_cuda_graphcap__replays, reset),
        cmocka_unit_test_setup(test_cuda_graphcap__modes, reset),
        cmocka_unit_test_setup(test_cuda_graphcap__capture_error, reset),
        cmocka_unit_test_setup(test_cuda_graphcap__bound, reset),
        cmocka_unit_test_setup(test_cuda_graphcap__gate, reset),
        cmocka_unit_test_setup(test_cuda_graphcap__session_file, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* !ULP_HAVE_CUDA_CORE */
int main(void)
{
    printf("SKIPPED: test_cuda_graphcap needs the CUDA collector (ULPPROF_WITH_CUDA=ON)\n");
    return 0;
}
#endif

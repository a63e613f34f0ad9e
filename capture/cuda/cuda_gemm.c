/* GEMM attribution: describing calls and numbering rows (cuda_gemm.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "cuda_gemm.h"

/* Rows queued before they go to the sink without waiting for a capture. */
#define BATCH_ROWS 256
/* Streams remembered for attribution; the least recently used is dropped. */
#define MAX_STREAMS 1024

static void put(char *dst, size_t size, const char *s)
{
    snprintf(dst, size, "%s", s);
}

void ulp__gemm_dtype_name(int t, char *out, size_t size)
{
    static const struct {
        int t;
        const char *name;
    } names[] = {
        {CUDA_R_16BF, "bf16"},
        {CUDA_R_16F, "f16"},
        {CUDA_R_32F, "f32"},
        {CUDA_R_64F, "f64"},
        {CUDA_R_8F_E4M3, "f8e4m3"},
        {CUDA_R_8F_E5M2, "f8e5m2"},
        {CUDA_R_8I, "i8"},
        {CUDA_R_8U, "u8"},
        {CUDA_R_32I, "i32"},
        {CUDA_R_16I, "i16"},
        {CUDA_C_32F, "c32f"},
        {CUDA_C_64F, "c64f"},
        {CUDA_C_16F, "c16f"},
        {CUDA_C_16BF, "c16bf"},
        {CUDA_R_4F_E2M1, "f4e2m1"},
        {CUDA_R_8F_UE8M0, "f8ue8m0"},
        {CUDA_R_8F_UE4M3, "f8ue4m3"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (names[i].t == t) {
            put(out, size, names[i].name);
            return;
        }
    }
    snprintf(out, size, "R%d", t);
}

void ulp__gemm_compute_name(int c, char *out, size_t size)
{
    static const struct {
        int c;
        const char *name;
    } names[] = {
        {CUBLAS_COMPUTE_16F, "16F"},
        {CUBLAS_COMPUTE_16F_PEDANTIC, "16F_PEDANTIC"},
        {CUBLAS_COMPUTE_32F, "32F"},
        {CUBLAS_COMPUTE_32F_PEDANTIC, "32F_PEDANTIC"},
        {CUBLAS_COMPUTE_32F_FAST_16F, "32F_FAST_16F"},
        {CUBLAS_COMPUTE_32F_FAST_16BF, "32F_FAST_16BF"},
        {CUBLAS_COMPUTE_32F_FAST_TF32, "32F_FAST_TF32"},
        {CUBLAS_COMPUTE_32F_EMULATED_16BFX9, "32F_EMULATED_16BFX9"},
        {CUBLAS_COMPUTE_64F, "64F"},
        {CUBLAS_COMPUTE_64F_PEDANTIC, "64F_PEDANTIC"},
        {CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT, "64F_EMULATED_FIXED"},
        {CUBLAS_COMPUTE_32I, "32I"},
        {CUBLAS_COMPUTE_32I_PEDANTIC, "32I_PEDANTIC"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (names[i].c == c) {
            put(out, size, names[i].name);
            return;
        }
    }
    /* cublasGemmEx before CUDA 11 took a cudaDataType as compute type. */
    char t[12];
    ulp__gemm_dtype_name(c, t, sizeof(t));
    snprintf(out, size, "type:%s", t);
}

static const char *op_name(int op)
{
    return op == CUBLAS_OP_N ? "N" : op == CUBLAS_OP_T ? "T" : op == CUBLAS_OP_C ? "C" : "?";
}

static const char *reduction_name(unsigned r)
{
    switch (r) {
    case CUBLASLT_REDUCTION_SCHEME_NONE:
        return "none";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE:
        return "inplace";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE:
        return "compute";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE:
        return "output";
    default:
        return "?";
    }
}

/* Reads an attribute of up to 8 bytes as an unsigned value; 0 on success.
 * The getters write exactly the attribute's size (little-endian host). */
static int get_desc(const ulp__cublaslt_getters *g, cublasLtMatmulDesc_t d,
                    cublasLtMatmulDescAttributes_t a, size_t size, uint64_t *v)
{
    size_t written = 0;
    *v = 0;
    return d == NULL || g->desc_get(d, a, v, size, &written) != CUBLAS_STATUS_SUCCESS ||
           written != size;
}

static int get_layout(const ulp__cublaslt_getters *g, cublasLtMatrixLayout_t l,
                      cublasLtMatrixLayoutAttribute_t a, size_t size, uint64_t *v)
{
    size_t written = 0;
    *v = 0;
    return l == NULL || g->layout_get(l, a, v, size, &written) != CUBLAS_STATUS_SUCCESS ||
           written != size;
}

static int get_algo(const ulp__cublaslt_getters *g, const cublasLtMatmulAlgo_t *algo,
                    cublasLtMatmulAlgoConfigAttributes_t a, size_t size, uint64_t *v)
{
    size_t written = 0;
    *v = 0;
    return algo == NULL || g->algo_get(algo, a, v, size, &written) != CUBLAS_STATUS_SUCCESS ||
           written != size;
}

static void layout_type(const ulp__cublaslt_getters *g, cublasLtMatrixLayout_t l, char *out,
                        size_t size)
{
    uint64_t t;
    if (get_layout(g, l, CUBLASLT_MATRIX_LAYOUT_TYPE, sizeof(uint32_t), &t) == 0)
        ulp__gemm_dtype_name((int)(uint32_t)t, out, size);
    else
        out[0] = '\0';
}

void ulp__gemm_describe_lt(const ulp__cublaslt_getters *g, cublasLtMatmulDesc_t desc,
                           cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                           cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                           const cublasLtMatmulAlgo_t *algo, size_t workspace, ulp__gemm_row *row)
{
    uint64_t v;
    put(row->api, sizeof(row->api), "cublasLtMatmul");
    uint64_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
    get_desc(g, desc, CUBLASLT_MATMUL_DESC_TRANSA, sizeof(int32_t), &ta);
    get_desc(g, desc, CUBLASLT_MATMUL_DESC_TRANSB, sizeof(int32_t), &tb);
    put(row->transa, sizeof(row->transa), op_name((int)(int32_t)ta));
    put(row->transb, sizeof(row->transb), op_name((int)(int32_t)tb));
    if (get_desc(g, desc, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, sizeof(int32_t), &v) == 0)
        ulp__gemm_compute_name((int)(int32_t)v, row->compute, sizeof(row->compute));
    row->epilogue = get_desc(g, desc, CUBLASLT_MATMUL_DESC_EPILOGUE, sizeof(uint32_t), &v) == 0
                        ? (int32_t)v
                        : -1;
    uint64_t rows = 0, cols = 0, batch = 1;
    get_layout(g, d, CUBLASLT_MATRIX_LAYOUT_ROWS, sizeof(uint64_t), &rows);
    get_layout(g, d, CUBLASLT_MATRIX_LAYOUT_COLS, sizeof(uint64_t), &cols);
    if (get_layout(g, d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, sizeof(int32_t), &batch) != 0)
        batch = 1;
    row->m = (int64_t)rows;
    row->n = (int64_t)cols;
    row->batch = (int32_t)batch;
    /* op(A) is m x k: k is A's other extent. */
    uint64_t ak = 0;
    get_layout(g, a,
               (int32_t)ta == CUBLAS_OP_N ? CUBLASLT_MATRIX_LAYOUT_COLS
                                          : CUBLASLT_MATRIX_LAYOUT_ROWS,
               sizeof(uint64_t), &ak);
    row->k = (int64_t)ak;
    layout_type(g, a, row->a_type, sizeof(row->a_type));
    layout_type(g, b, row->b_type, sizeof(row->b_type));
    layout_type(g, c, row->c_type, sizeof(row->c_type));
    layout_type(g, d, row->d_type, sizeof(row->d_type));
    row->workspace = workspace;
    row->algo_id = -1;
    if (algo == NULL) {
        /* cuBLASLt runs its heuristic inside: only the kernel name tells. */
        put(row->algo, sizeof(row->algo), "heuristic");
        return;
    }
    put(row->algo, sizeof(row->algo), "given");
    if (get_algo(g, algo, CUBLASLT_ALGO_CONFIG_ID, sizeof(int32_t), &v) == 0)
        row->algo_id = (int32_t)v;
    if (get_algo(g, algo, CUBLASLT_ALGO_CONFIG_TILE_ID, sizeof(uint32_t), &v) == 0)
        ulp__gemm_tile_name((unsigned)v, row->tile, sizeof(row->tile));
    if (get_algo(g, algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, sizeof(uint32_t), &v) == 0)
        ulp__gemm_stages_name((unsigned)v, row->stages, sizeof(row->stages));
    if (get_algo(g, algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, sizeof(int32_t), &v) == 0)
        row->splitk = (int32_t)v;
    if (get_algo(g, algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, sizeof(uint32_t), &v) == 0)
        put(row->reduction, sizeof(row->reduction), reduction_name((unsigned)v));
    if (get_algo(g, algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, sizeof(uint32_t), &v) == 0)
        row->swizzle = (int32_t)v;
    if (get_algo(g, algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, sizeof(uint32_t), &v) == 0)
        row->custom = (int32_t)v;
    if (get_algo(g, algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, sizeof(uint16_t), &v) == 0)
        ulp__gemm_cluster_name((unsigned)v, row->cluster, sizeof(row->cluster));
}

void ulp__gemm_describe_ex(const char *api, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                           int64_t n, int64_t k, int64_t batch, cudaDataType_t at,
                           cudaDataType_t bt, cudaDataType_t ct, int compute, int algo,
                           ulp__gemm_row *row)
{
    put(row->api, sizeof(row->api), api);
    put(row->transa, sizeof(row->transa), op_name(ta));
    put(row->transb, sizeof(row->transb), op_name(tb));
    row->m = m;
    row->n = n;
    row->k = k;
    row->batch = batch;
    ulp__gemm_dtype_name(at, row->a_type, sizeof(row->a_type));
    ulp__gemm_dtype_name(bt, row->b_type, sizeof(row->b_type));
    ulp__gemm_dtype_name(ct, row->c_type, sizeof(row->c_type));
    ulp__gemm_dtype_name(ct, row->d_type, sizeof(row->d_type));
    ulp__gemm_compute_name(compute, row->compute, sizeof(row->compute));
    /* cuBLAS picks the kernel itself; the algo argument is a hint. */
    put(row->algo, sizeof(row->algo), "cublas");
    row->algo_id = algo;
    row->epilogue = -1;
}

/* --- the log ------------------------------------------------------------ */

typedef struct stream_rows {
    uint64_t stream;
    uint64_t first, last; /* rows since the last take: [first, last] */
    int any;
    uint64_t used; /* LRU clock */
} stream_rows;

struct ulp__gemm_log {
    pthread_mutex_t lock;
    ulp__gemm_sink sink;
    int stopped;
    uint64_t rows; /* numbered so far */
    ulp__gemm_row *queue;
    size_t nqueue, capqueue;
    stream_rows *streams;
    size_t nstreams, capstreams;
    uint64_t clock;
};

ulp_status ulp__gemm_log_create(const ulp__gemm_sink *sink, ulp__gemm_log **out)
{
    *out = NULL;
    ulp__gemm_log *log = calloc(1, sizeof(*log));
    if (log == NULL)
        return ULP_ENOMEM;
    if (pthread_mutex_init(&log->lock, NULL) != 0) {
        free(log);
        return ULP_ETHREAD;
    }
    log->sink = *sink;
    *out = log;
    return ULP_OK;
}

static void flush_locked(ulp__gemm_log *log)
{
    if (log->nqueue == 0)
        return;
    if (!log->stopped && log->sink.rows(log->sink.ctx, log->queue, log->nqueue) != ULP_OK)
        log->stopped = 1;
    log->nqueue = 0;
}

static stream_rows *stream_get_locked(ulp__gemm_log *log, uint64_t stream)
{
    log->clock++;
    for (size_t i = 0; i < log->nstreams; i++) {
        if (log->streams[i].stream == stream) {
            log->streams[i].used = log->clock;
            return &log->streams[i];
        }
    }
    if (log->nstreams == MAX_STREAMS) {
        size_t lru = 0;
        for (size_t i = 1; i < log->nstreams; i++)
            if (log->streams[i].used < log->streams[lru].used)
                lru = i;
        log->streams[lru] = log->streams[--log->nstreams];
    }
    if (ULP__GROW(log->streams, log->capstreams, log->nstreams + 1) != 0)
        return NULL;
    stream_rows *s = &log->streams[log->nstreams++];
    memset(s, 0, sizeof(*s));
    s->stream = stream;
    s->used = log->clock;
    return s;
}

void ulp__gemm_log_add(ulp__gemm_log *log, ulp__gemm_row *row)
{
    pthread_mutex_lock(&log->lock);
    if (log->stopped)
        goto done;
    if (log->nqueue == BATCH_ROWS)
        flush_locked(log);
    if (ULP__GROW(log->queue, log->capqueue, log->nqueue + 1) != 0) {
        log->stopped = 1;
        goto done;
    }
    stream_rows *s = stream_get_locked(log, row->stream);
    if (s == NULL) {
        log->stopped = 1;
        goto done;
    }
    row->seq = log->rows++;
    log->queue[log->nqueue++] = *row;
    if (!s->any)
        s->first = row->seq;
    s->last = row->seq;
    s->any = 1;
done:
    pthread_mutex_unlock(&log->lock);
}

int ulp__gemm_log_take(ulp__gemm_log *log, int any_stream, uint64_t stream, int64_t range[2])
{
    pthread_mutex_lock(&log->lock);
    flush_locked(log);
    int ok = !log->stopped;
    if (ok) {
        uint64_t lo = log->rows, hi = log->rows;
        int any = 0;
        for (size_t i = 0; i < log->nstreams; i++) {
            stream_rows *s = &log->streams[i];
            if (!s->any || (!any_stream && s->stream != stream))
                continue;
            if (!any || s->first < lo)
                lo = s->first;
            if (!any || s->last + 1 > hi)
                hi = s->last + 1;
            any = 1;
            s->any = 0;
        }
        range[0] = (int64_t)lo;
        range[1] = (int64_t)hi;
    }
    pthread_mutex_unlock(&log->lock);
    return ok;
}

void ulp__gemm_log_flush(ulp__gemm_log *log)
{
    pthread_mutex_lock(&log->lock);
    flush_locked(log);
    pthread_mutex_unlock(&log->lock);
}

uint64_t ulp__gemm_log_rows(ulp__gemm_log *log)
{
    pthread_mutex_lock(&log->lock);
    uint64_t n = log->rows;
    pthread_mutex_unlock(&log->lock);
    return n;
}

void ulp__gemm_log_free(ulp__gemm_log *log)
{
    if (log == NULL)
        return;
    ulp__gemm_log_flush(log);
    free(log->queue);
    free(log->streams);
    pthread_mutex_destroy(&log->lock);
    free(log);
}

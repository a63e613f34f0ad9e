/*
 * A small cuBLAS workload that shows a prefix-cache hit changing bits.
 *
 * A residual stack of L layers, each  h = h + RMSNorm(h) W_l^T  (bf16 GEMM,
 * fp32 accumulation, cublasGemmEx), then logits = RMSNorm(h) W_vocab^T.
 * Every row (token) is independent, so the last token's result is the same
 * mathematical function whether the program processes the whole prompt
 * (--mode miss: GEMMs with M = T rows) or only the uncached tail
 * (--mode hit: M = H rows, default 1).  cuBLAS picks its kernel by M, so
 * the K-reduction order -- and the bits -- may differ.
 *
 * After each layer the last token's hidden state is announced with a `ulp1`
 * NVTX mark (capture/cuda/PROTOCOL.md) on the stream that produced it;
 * --api uses ulp_capture_device() instead.  Run it under
 *   ulpprof record -o miss.h5 --label miss --attr cache=miss -- ./ulpprof_gemm_chain --mode miss
 *   ulpprof record -o hit.h5  --label hit  --attr cache=hit  -- ./ulpprof_gemm_chain --mode hit
 *   ulpprof diff miss.h5 hit.h5; ulpprof kernels miss.h5 hit.h5
 *
 * For samples/cuda/gpu-check.sh, three more modes:
 *   --graph R        capture the forward pass (marks included) in a CUDA
 *                    graph, then replay it R times, each after an
 *                    `ev=step` mark: R captures per mark, steps 0..R-1;
 *   --time-steps N   run the forward pass N more times after a warm-up,
 *                    synchronizing after each, and print ms per step (the
 *                    tracing overhead is this under record against without);
 *   --bench-copy MB  capture one MB-MiB device tensor 8 times through
 *                    ulp_capture_device() and copy it 8 times with a pinned
 *                    cudaMemcpyAsync; print both rates in GB/s;
 *   --typed MATH     (MATH: default or tf32, the handle's math mode) one
 *                    cublasSgemm_v2 (64 x 48 x 96), one
 *                    cublasSgemmStridedBatched (batch 2) and one
 *                    cublasDgemm_v2, of small integers whose products and
 *                    sums are exact in TF32, f32 and f64: each result must
 *                    equal the CPU's exactly, so a wrapper that forwarded
 *                    an argument wrongly (record --gemms) shows; the
 *                    Sgemm's result is announced (typed.sgemm, f32); prints
 *                    "typed: ok".
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "ulpprof/capture_device.h"

#define CHECK_CUDA(x)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "gemm_chain: %s: %s\n", #x, cudaGetErrorString(e_));                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_CUBLAS(x)                                                                            \
    do {                                                                                           \
        cublasStatus_t s_ = (x);                                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                         \
            fprintf(stderr, "gemm_chain: %s: cuBLAS status %d\n", #x, (int)s_);                    \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static __device__ uint32_t mix(uint32_t a, uint32_t b)
{
    uint32_t h = a * 0x9e3779b9u ^ (b + 0x7f4a7c15u + (a << 6) + (a >> 2));
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

/* Uniform in [-scale, scale), a function of (seed, index) only. */
__global__ void fill_uniform(__nv_bfloat16 *p, size_t n, uint32_t seed, float scale)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) {
        uint32_t h = mix(seed, (uint32_t)i) ^ mix((uint32_t)(i >> 32), seed + 1);
        float u = (float)(h >> 8) * (1.0f / 16777216.0f);
        p[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
    }
}

/* One block per row: y = x / sqrt(mean(x^2) + eps), computed in fp32. */
__global__ void rmsnorm(const __nv_bfloat16 *x, __nv_bfloat16 *y, int d)
{
    __shared__ float part[256];
    const __nv_bfloat16 *row = x + (size_t)blockIdx.x * d;
    float s = 0.0f;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        float v = __bfloat162float(row[i]);
        s += v * v;
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    float r = rsqrtf(part[0] / (float)d + 1e-6f);
    for (int i = threadIdx.x; i < d; i += blockDim.x)
        y[(size_t)blockIdx.x * d + i] = __float2bfloat16(__bfloat162float(row[i]) * r);
}

__global__ void residual_add(__nv_bfloat16 *h, const __nv_bfloat16 *y, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        h[i] = __float2bfloat16(__bfloat162float(h[i]) + __bfloat162float(y[i]));
}

/* Y[rows x out] = X[rows x in] W[out x in]^T, all row-major bf16. */
static void gemm(cublasHandle_t blas, const __nv_bfloat16 *x, const __nv_bfloat16 *w,
                 __nv_bfloat16 *y, int rows, int in, int out)
{
    const float alpha = 1.0f, beta = 0.0f;
    /* Column-major view: Y^T (out x rows) = W (as the transpose of its
     * column-major in x out storage) times X^T (in x rows). */
    CHECK_CUBLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w, CUDA_R_16BF,
                              in, x, CUDA_R_16BF, in, &beta, y, CUDA_R_16BF, out,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

static int use_api;

/* Announces the row-major tensor at `ptr` to ulpprof. */
static void announce(const char *name, const void *ptr, int64_t cols, int layer, const char *role,
                     cudaStream_t stream)
{
    int64_t shape[2] = {1, cols};
    if (use_api) {
        ulp_status st = ulp_capture_device(
            name, ptr, ULP_DTYPE_BF16, 2, shape, layer,
            strcmp(role, "logits") == 0 ? ULP_ROLE_LOGITS : ULP_ROLE_ACTIVATION, (void *)stream);
        if (st != ULP_OK && st != ULP_EDISABLED)
            fprintf(stderr, "gemm_chain: capture of %s: ulp_status %d\n", name, (int)st);
        return;
    }
    char msg[512];
    snprintf(msg, sizeof(msg),
             "ulp1|name=%s|ptr=0x%llx|dtype=bf16|shape=1,%lld|layer=%d|role=%s|stream=0x%llx"
             "|bytes=%lld",
             name, (unsigned long long)(uintptr_t)ptr, (long long)cols, layer, role,
             (unsigned long long)(uintptr_t)stream, (long long)(2 * cols));
    nvtxMarkA(msg);
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--mode miss|hit] [--tokens T] [--hit-tokens H] [--hidden D]\n"
            "          [--layers L] [--vocab V] [--seed S] [--api] [--graph R]\n"
            "          [--time-steps N] [--bench-copy MB] [--typed default|tf32]\n",
            argv0);
    exit(2);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Capture bandwidth against a pinned cudaMemcpyAsync of the same bytes. */
static void bench_copy(int mb, cudaStream_t stream)
{
    size_t bytes = (size_t)mb << 20;
    const int reps = 8;
    __nv_bfloat16 *src;
    void *pinned;
    CHECK_CUDA(cudaMalloc(&src, bytes));
    CHECK_CUDA(cudaMallocHost(&pinned, bytes));
    CHECK_CUDA(cudaMemsetAsync(src, 0x3f, bytes, stream));
    CHECK_CUDA(cudaMemcpyAsync(pinned, src, bytes, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    double t0 = now_s();
    for (int r = 0; r < reps; r++)
        CHECK_CUDA(cudaMemcpyAsync(pinned, src, bytes, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    double t_copy = now_s() - t0;
    int64_t shape[1] = {(int64_t)(bytes / 2)};
    t0 = now_s();
    for (int r = 0; r < reps; r++) {
        ulp_status st = ulp_capture_device("bench.copy", src, ULP_DTYPE_BF16, 1, shape, -1,
                                           ULP_ROLE_ACTIVATION, (void *)stream);
        if (st != ULP_OK)
            fprintf(stderr, "gemm_chain: bench capture: ulp_status %d\n", (int)st);
    }
    double t_issue = now_s() - t0;
    ulp_capture_device_flush(); /* copied, and written to the file */
    double t_capture = now_s() - t0;
    double gb = (double)bytes * reps / 1e9;
    printf("bench-copy: %d x %d MiB: pinned cudaMemcpyAsync %.2f GB/s; ulp_capture_device "
           "%.2f GB/s to the file (%.2f ms to issue all); ratio %.2f\n",
           reps, mb, gb / t_copy, gb / t_capture, 1e3 * t_issue, t_copy / t_capture);
    cudaFreeHost(pinned);
    cudaFree(src);
}

/* Small integers in [-3, 3], a function of (seed, index). */
static double small_int(uint32_t seed, size_t i)
{
    uint32_t h = (uint32_t)i * 0x9e3779b9u ^ (seed * 0x85ebca6bu + 0x7f4a7c15u);
    h ^= h >> 15;
    h *= 0x2c1b3c6du;
    h ^= h >> 12;
    return (double)(int)(h % 7u) - 3.0;
}

/* C (m x n) = A (m x k) B (k x n), column-major, `batch` times, on the CPU. */
static void ref_gemm(const double *a, const double *b, double *c, int m, int n, int k, int batch)
{
    for (int t = 0; t < batch; t++)
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double acc = 0.0;
                for (int p = 0; p < k; p++)
                    acc += a[(size_t)t * m * k + (size_t)p * m + i] *
                           b[(size_t)t * k * n + (size_t)j * k + p];
                c[(size_t)t * m * n + (size_t)j * m + i] = acc;
            }
}

/* The typed cuBLAS calls, checked exactly against the CPU (--typed). */
static int typed_check(cublasHandle_t blas, cudaStream_t stream, int tf32)
{
    const int m = 64, n = 48, k = 96, batch = 2;
    size_t na = (size_t)batch * m * k, nb = (size_t)batch * k * n, nc = (size_t)batch * m * n;
    std::vector<double> a(na), b(nb), want(nc), got64(nc);
    std::vector<float> a32(na), b32(nb), got32(nc);
    for (size_t i = 0; i < na; i++)
        a32[i] = (float)(a[i] = small_int(1, i));
    for (size_t i = 0; i < nb; i++)
        b32[i] = (float)(b[i] = small_int(2, i));
    ref_gemm(a.data(), b.data(), want.data(), m, n, k, batch);
    CHECK_CUBLAS(cublasSetMathMode(blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    float *da32, *db32, *dc32;
    double *da, *db, *dc;
    CHECK_CUDA(cudaMalloc(&da32, na * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&db32, nb * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&dc32, nc * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&da, na * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&db, nb * sizeof(double)));
    CHECK_CUDA(cudaMalloc(&dc, nc * sizeof(double)));
    CHECK_CUDA(cudaMemcpy(da32, a32.data(), na * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db32, b32.data(), nb * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(da, a.data(), na * sizeof(double), cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b.data(), nb * sizeof(double), cudaMemcpyHostToDevice));
    const float one32 = 1.0f, zero32 = 0.0f;
    const double one = 1.0, zero = 0.0;
    int bad = 0;
    /* Sgemm: the first matrix of each; the strided batch: both. */
    CHECK_CUDA(cudaMemsetAsync(dc32, 0, nc * sizeof(float), stream));
    CHECK_CUBLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one32, da32, m, db32, k,
                             &zero32, dc32, m));
    /* One capture, so that `record` has a snapshot to write: C, n rows of m. */
    char msg[256];
    snprintf(msg, sizeof(msg),
             "ulp1|name=typed.sgemm|ptr=0x%llx|dtype=f32|shape=%d,%d|layer=0|role=activation"
             "|stream=0x%llx|bytes=%lld",
             (unsigned long long)(uintptr_t)dc32, n, m, (unsigned long long)(uintptr_t)stream,
             (long long)m * n * 4);
    nvtxMarkA(msg);
    CHECK_CUDA(cudaMemcpyAsync(got32.data(), dc32, (size_t)m * n * sizeof(float),
                               cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < (size_t)m * n; i++)
        bad += (double)got32[i] != want[i];
    CHECK_CUBLAS(cublasSgemmStridedBatched(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one32, da32, m,
                                           (long long)m * k, db32, k, (long long)k * n, &zero32,
                                           dc32, m, (long long)m * n, batch));
    CHECK_CUDA(
        cudaMemcpyAsync(got32.data(), dc32, nc * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < nc; i++)
        bad += (double)got32[i] != want[i];
    CHECK_CUBLAS(
        cublasDgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, da, m, db, k, &zero, dc, m));
    CHECK_CUDA(cudaMemcpyAsync(got64.data(), dc, (size_t)m * n * sizeof(double),
                               cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < (size_t)m * n; i++)
        bad += got64[i] != want[i];
    cudaFree(da32);
    cudaFree(db32);
    cudaFree(dc32);
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    if (bad) {
        fprintf(stderr, "gemm_chain: typed: %d elements differ from the CPU's\n", bad);
        return 1;
    }
    printf("typed: ok (cublasSgemm_v2, cublasSgemmStridedBatched, cublasDgemm_v2 exact, %s math)\n",
           tf32 ? "TF32" : "default");
    return 0;
}

int main(int argc, char **argv)
{
    int hit = 0, tokens = 384, hit_tokens = 1, d = 2048, layers = 8, vocab = 32000;
    uint32_t seed = 1234;
    int graph_replays = 0, time_steps = 0, copy_mb = 0, typed = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--api") == 0) {
            use_api = 1;
            continue;
        }
        if (v == NULL)
            usage(argv[0]);
        i++;
        if (strcmp(a, "--mode") == 0 && (strcmp(v, "miss") == 0 || strcmp(v, "hit") == 0))
            hit = strcmp(v, "hit") == 0;
        else if (strcmp(a, "--tokens") == 0)
            tokens = atoi(v);
        else if (strcmp(a, "--hit-tokens") == 0)
            hit_tokens = atoi(v);
        else if (strcmp(a, "--hidden") == 0)
            d = atoi(v);
        else if (strcmp(a, "--layers") == 0)
            layers = atoi(v);
        else if (strcmp(a, "--vocab") == 0)
            vocab = atoi(v);
        else if (strcmp(a, "--seed") == 0)
            seed = (uint32_t)strtoul(v, NULL, 10);
        else if (strcmp(a, "--graph") == 0)
            graph_replays = atoi(v);
        else if (strcmp(a, "--time-steps") == 0)
            time_steps = atoi(v);
        else if (strcmp(a, "--bench-copy") == 0)
            copy_mb = atoi(v);
        else if (strcmp(a, "--typed") == 0 && (strcmp(v, "default") == 0 || strcmp(v, "tf32") == 0))
            typed = strcmp(v, "tf32") == 0;
        else
            usage(argv[0]);
    }
    if (tokens < 1 || hit_tokens < 1 || hit_tokens > tokens || d < 1 || layers < 1 || vocab < 1)
        usage(argv[0]);
    /* A hit recomputes only the uncached tail of the prompt. */
    int rows = hit ? hit_tokens : tokens;
    int first = tokens - rows; /* token index of row 0 */

    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cublasHandle_t blas;
    CHECK_CUBLAS(cublasCreate(&blas));
    CHECK_CUBLAS(cublasSetStream(blas, stream));
    if (copy_mb > 0) {
        bench_copy(copy_mb, stream);
        cublasDestroy(blas);
        cudaStreamDestroy(stream);
        return 0;
    }
    if (typed >= 0) {
        int rc = typed_check(blas, stream, typed);
        cublasDestroy(blas);
        cudaStreamDestroy(stream);
        return rc;
    }
    /* A workspace of our own: cuBLAS must not allocate one while a graph
     * is being captured. */
    void *blas_ws;
    const size_t blas_ws_bytes = (size_t)32 << 20;
    CHECK_CUDA(cudaMalloc(&blas_ws, blas_ws_bytes));
    CHECK_CUBLAS(cublasSetWorkspace(blas, blas_ws, blas_ws_bytes));

    size_t wsz = (size_t)d * d, vsz = (size_t)vocab * d;
    __nv_bfloat16 *w, *wv, *h, *n, *y, *logits, *emb;
    CHECK_CUDA(cudaMalloc(&w, wsz * layers * sizeof(*w)));
    CHECK_CUDA(cudaMalloc(&wv, vsz * sizeof(*wv)));
    CHECK_CUDA(cudaMalloc(&emb, (size_t)tokens * d * sizeof(*emb)));
    CHECK_CUDA(cudaMalloc(&h, (size_t)rows * d * sizeof(*h)));
    CHECK_CUDA(cudaMalloc(&n, (size_t)rows * d * sizeof(*n)));
    CHECK_CUDA(cudaMalloc(&y, (size_t)rows * d * sizeof(*y)));
    CHECK_CUDA(cudaMalloc(&logits, (size_t)rows * vocab * sizeof(*logits)));

    const int tpb = 256;
    float ws = 1.0f / sqrtf((float)d);
    fill_uniform<<<(unsigned)((wsz * layers + tpb - 1) / tpb), tpb, 0, stream>>>(w, wsz * layers,
                                                                                 seed, ws);
    fill_uniform<<<(unsigned)((vsz + tpb - 1) / tpb), tpb, 0, stream>>>(wv, vsz, seed + 1, ws);
    fill_uniform<<<(unsigned)(((size_t)tokens * d + tpb - 1) / tpb), tpb, 0, stream>>>(
        emb, (size_t)tokens * d, seed + 2, 1.0f);
    /* The rows this run computes: the whole prompt, or its tail
     * (forward() below starts from them). */

    char name[64];
    size_t hn = (size_t)rows * d;
    /* One forward pass: restart from the embeddings, so every pass (eager,
     * replayed, timed) computes the same values. */
    auto forward = [&](int marks) {
        CHECK_CUDA(cudaMemcpyAsync(h, emb + (size_t)first * d, (size_t)rows * d * sizeof(*h),
                                   cudaMemcpyDeviceToDevice, stream));
        for (int l = 0; l < layers; l++) {
            rmsnorm<<<rows, 256, 0, stream>>>(h, n, d);
            gemm(blas, n, w + wsz * l, y, rows, d, d);
            residual_add<<<(unsigned)((hn + tpb - 1) / tpb), tpb, 0, stream>>>(h, y, hn);
            snprintf(name, sizeof(name), "model.layers.%d.out", l);
            if (marks)
                announce(name, h + (size_t)(rows - 1) * d, d, l, "activation", stream);
        }
        rmsnorm<<<rows, 256, 0, stream>>>(h, n, d);
        gemm(blas, n, wv, logits, rows, d, vocab);
        if (marks)
            announce("logits", logits + (size_t)(rows - 1) * vocab, vocab, -1, "logits", stream);
    };
    if (graph_replays > 0) {
        /* The marks during capture become copy nodes of the graph. */
        cudaGraph_t graph;
        cudaGraphExec_t exec;
        CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
        forward(1);
        CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
        CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
        CHECK_CUDA(cudaGraphDestroy(graph)); /* as PyTorch does */
        for (int r = 0; r < graph_replays; r++) {
            char step[64];
            snprintf(step, sizeof(step), "ulp1|ev=step|step=%d", r);
            nvtxMarkA(step);
            CHECK_CUDA(cudaGraphLaunch(exec, stream));
        }
        CHECK_CUDA(cudaStreamSynchronize(stream));
        CHECK_CUDA(cudaGraphExecDestroy(exec));
    } else {
        forward(1);
    }
    if (time_steps > 0) {
        forward(0); /* warm-up */
        CHECK_CUDA(cudaStreamSynchronize(stream));
        double t0 = now_s();
        for (int s = 0; s < time_steps; s++) {
            forward(1);
            CHECK_CUDA(cudaStreamSynchronize(stream));
        }
        printf("time-steps: %d steps, %.3f ms per step (marks on)\n", time_steps,
               1e3 * (now_s() - t0) / time_steps);
    }

    std::vector<__nv_bfloat16> last(vocab);
    CHECK_CUDA(cudaMemcpyAsync(last.data(), logits + (size_t)(rows - 1) * vocab,
                               vocab * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    int best = 0;
    for (int i = 1; i < vocab; i++)
        if (__bfloat162float(last[i]) > __bfloat162float(last[best]))
            best = i;
    printf("mode=%s rows=%d tokens=%d hidden=%d layers=%d vocab=%d argmax=%d logit=%.6f\n",
           hit ? "hit" : "miss", rows, tokens, d, layers, vocab, best,
           (double)__bfloat162float(last[best]));
    if (use_api)
        ulp_capture_device_flush();

    cudaFree(w);
    cudaFree(wv);
    cudaFree(emb);
    cudaFree(h);
    cudaFree(n);
    cudaFree(y);
    cudaFree(logits);
    cublasDestroy(blas);
    cudaFree(blas_ws);
    cudaStreamDestroy(stream);
    return 0;
}

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
 * NVTX mark (collector/cuda/PROTOCOL.md) on the stream that produced it;
 * --api uses ulp_capture_device() instead.  Run it under
 *   ulpprof record -o miss.h5 --label miss --attr cache=miss -- ./ulpprof_gemm_chain --mode miss
 *   ulpprof record -o hit.h5  --label hit  --attr cache=hit  -- ./ulpprof_gemm_chain --mode hit
 *   ulpprof diff miss.h5 hit.h5; ulpprof kernels miss.h5 hit.h5
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
            "          [--layers L] [--vocab V] [--seed S] [--api]\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    int hit = 0, tokens = 384, hit_tokens = 1, d = 2048, layers = 8, vocab = 32000;
    uint32_t seed = 1234;
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
    /* The rows this run computes: the whole prompt, or its tail. */
    CHECK_CUDA(cudaMemcpyAsync(h, emb + (size_t)first * d, (size_t)rows * d * sizeof(*h),
                               cudaMemcpyDeviceToDevice, stream));

    char name[64];
    size_t hn = (size_t)rows * d;
    for (int l = 0; l < layers; l++) {
        rmsnorm<<<rows, 256, 0, stream>>>(h, n, d);
        gemm(blas, n, w + wsz * l, y, rows, d, d);
        residual_add<<<(unsigned)((hn + tpb - 1) / tpb), tpb, 0, stream>>>(h, y, hn);
        snprintf(name, sizeof(name), "model.layers.%d.out", l);
        announce(name, h + (size_t)(rows - 1) * d, d, l, "activation", stream);
    }
    rmsnorm<<<rows, 256, 0, stream>>>(h, n, d);
    gemm(blas, n, wv, logits, rows, d, vocab);
    announce("logits", logits + (size_t)(rows - 1) * vocab, vocab, -1, "logits", stream);

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
    cudaStreamDestroy(stream);
    return 0;
}

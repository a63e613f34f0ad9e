/*
 * A CPU-only program that announces tensors with `ulp1` NVTX marks naming
 * HOST memory (PROTOCOL.md), so the collector's real NVTX injection path can
 * be exercised on a machine without a GPU:
 *
 *   ULPPROF_OUTPUT=x.h5 NVTX_INJECTION64_PATH=libulpprof_cuda.so ./ulpprof_nvtx_host_marks
 *
 * or `ulpprof record -o x.h5 -- ./ulpprof_nvtx_host_marks`.
 *
 * Layer l's output is a 2x8 f32 tensor with element i equal to
 * ((i * 7 + l * 3) % 17 - 8) * 0.25 -- exact in binary, so a test can
 * recompute it independently.  Logits are 2x5 bf16 built the same way.
 *
 * Options: --layers N (default 4), --malformed N (emit N malformed marks),
 * --exit CODE (exit status), --steps (emit an ev=step mark per pass),
 * --passes N (forward passes, default 1), --device-marks (also announce two
 * "device" tensors, which a machine without a GPU must drop cleanly),
 * --driver-init (load libcuda.so.1, call cuInit, then call
 * InitializeInjection of $CUDA_INJECTION64_PATH as a real driver would: on
 * a machine with only the toolkit's stub libcuda, this exercises the
 * collector's CUPTI failure path).
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvtx3/nvToolsExt.h>

static float value(int i, int layer)
{
    return (float)((i * 7 + layer * 3) % 17 - 8) * 0.25f;
}

/* float -> bf16 by truncation is exact here: every value has <= 8 bits. */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return (uint16_t)(u >> 16);
}

/* What libcuda does at cuInit with CUDA_INJECTION64_PATH, done by hand. */
static void driver_init(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (cuda == NULL) {
        fprintf(stderr, "nvtx_host_marks: no libcuda.so.1: %s\n", dlerror());
        return;
    }
    void *sym = dlsym(cuda, "cuInit");
    int (*cu_init)(unsigned) = NULL;
    memcpy(&cu_init, &sym, sizeof(sym));
    if (cu_init != NULL)
        fprintf(stderr, "nvtx_host_marks: cuInit -> %d\n", cu_init(0));
    const char *inj = getenv("CUDA_INJECTION64_PATH");
    void *lib = inj != NULL ? dlopen(inj, RTLD_NOW | RTLD_LOCAL) : NULL;
    sym = lib != NULL ? dlsym(lib, "InitializeInjection") : NULL;
    int (*init)(void) = NULL;
    memcpy(&init, &sym, sizeof(sym));
    if (init != NULL)
        fprintf(stderr, "nvtx_host_marks: InitializeInjection -> %d\n", init());
}

int main(int argc, char **argv)
{
    int layers = 4, malformed = 0, code = 0, steps = 0, passes = 1, device_marks = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc)
            layers = atoi(argv[++i]);
        else if (strcmp(argv[i], "--malformed") == 0 && i + 1 < argc)
            malformed = atoi(argv[++i]);
        else if (strcmp(argv[i], "--exit") == 0 && i + 1 < argc)
            code = atoi(argv[++i]);
        else if (strcmp(argv[i], "--passes") == 0 && i + 1 < argc)
            passes = atoi(argv[++i]);
        else if (strcmp(argv[i], "--steps") == 0)
            steps = 1;
        else if (strcmp(argv[i], "--device-marks") == 0)
            device_marks = 1;
        else if (strcmp(argv[i], "--driver-init") == 0)
            driver_init();
        else {
            fprintf(stderr,
                    "usage: %s [--layers N] [--malformed N] [--exit CODE] "
                    "[--passes N] [--steps] [--device-marks] [--driver-init]\n",
                    argv[0]);
            return 2;
        }
    }
    float out[16];
    uint16_t logits[10];
    char msg[512];
    nvtxMarkA("an ordinary mark that is not ours");
    for (int pass = 0; pass < passes; pass++) {
        if (steps) {
            snprintf(msg, sizeof(msg), "ulp1|ev=step|step=%d", pass);
            nvtxMarkA(msg);
        }
        for (int l = 0; l < layers; l++) {
            for (int i = 0; i < 16; i++)
                out[i] = value(i, l);
            snprintf(msg, sizeof(msg),
                     "ulp1|name=model.layers.%d.out|ptr=0x%" PRIxPTR
                     "|dtype=f32|shape=2,8|stride=8,1|layer=%d|dev=host|bytes=64",
                     l, (uintptr_t)out, l);
            /* Alternate the two entry points NVTX offers. */
            if (l % 2 == 0) {
                nvtxMarkA(msg);
            } else {
                nvtxEventAttributes_t a;
                memset(&a, 0, sizeof(a));
                a.version = NVTX_VERSION;
                a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
                a.messageType = NVTX_MESSAGE_TYPE_ASCII;
                a.message.ascii = msg;
                nvtxMarkEx(&a);
            }
        }
        for (int i = 0; i < 10; i++)
            logits[i] = to_bf16(value(i, 100));
        snprintf(msg, sizeof(msg),
                 "ulp1|name=logits|ptr=%" PRIuPTR "|dtype=bf16|shape=2,5|role=logits|dev=cpu",
                 (uintptr_t)logits);
        nvtxMarkA(msg);
    }
    if (device_marks) {
        /* A device address on a known stream, and one on an unknown stream. */
        nvtxMarkA("ulp1|name=dev.a|ptr=0x7f0000000000|dtype=f32|shape=4|stream=0x0");
        nvtxMarkA("ulp1|name=dev.b|ptr=0x7f0000000000|dtype=f32|shape=4");
    }
    for (int i = 0; i < malformed; i++)
        nvtxMarkA("ulp1|name=broken|dtype=f32|shape=2,x|dev=host");
    return code;
}

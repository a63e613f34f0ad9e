/*
 * The process-wide collector behind libulpprof_cuda.so: lazily opens the
 * default session, binds the driver, owns the trace and the device-capture
 * engine, and reports at exit.  Entry points: InitializeInjection (CUDA),
 * InitializeInjectionNvtx2 (cuda_nvtx.c), ulp_capture_device*().
 */
#ifndef ULPPROF_CUDA_INJECT_H
#define ULPPROF_CUDA_INJECT_H

/* 1 when ULPPROF_OUTPUT is set (the collector has work to do). */
int ulp__inject_enabled(void);

/* Handles one NVTX message (any thread; ignores messages that are not ours). */
void ulp__inject_mark(const char *msg);

/* Logs one GEMM call (cuda_cublas.c) into /trace/gemms; numbers it. */
struct ulp__gemm_row;
void ulp__inject_gemm(struct ulp__gemm_row *row);

/*
 * Registers how the collector asks whether this library's cublasLtMatmul
 * is the one the process calls (preloaded), so that GEMM calls are
 * recorded: cuda_cublas.c registers it when the library loads.  Unset,
 * GEMM calls are not recorded.
 */
void ulp__inject_gemm_source(int (*interposing)(void));

#endif /* ULPPROF_CUDA_INJECT_H */

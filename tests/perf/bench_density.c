/*
 * Cost of the element comparison against the share of elements that differ
 * (no cliff at any density).  For bf16 and f32 tensors of 8 Mi
 * elements (N(0,1)-like values), B moves a given fraction of the elements
 * by 1..4 ULP; ulp_diff_buffers() compares them in memory (no file, one
 * thread).  Prints, per density, the CPU nanoseconds per element pair (the
 * minimum of REPS runs) and the differing count it found, which is
 * checked against the count the generator made.
 *
 *   bench_density
 *
 * Not a test: tests/perf/run.sh runs it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ulpprof/diff.h"

#define ELEMENTS ((size_t)8 << 20)
#define REPS     3

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t g_x = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    g_x ^= g_x << 13;
    g_x ^= g_x >> 7;
    g_x ^= g_x << 17;
    return g_x;
}

/* A normal-ish float from the sum of four uniforms. */
static float gauss(void)
{
    float s = 0;
    for (int k = 0; k < 4; k++)
        s += (float)(rnd() >> 40) / 16777216.0f;
    return (s - 2.0f) * 1.7f;
}

/* Fills a (values) and b (a with `frac` of the elements moved); returns how many moved. */
static uint64_t fill(ulp_dtype dt, void *a, void *b, double frac)
{
    uint64_t moved = 0, cut = (uint64_t)(frac * 18446744073709551615.0);
    for (size_t i = 0; i < ELEMENTS; i++) {
        float v = gauss();
        int move = frac >= 1.0 || rnd() < cut;
        unsigned step = 1 + (unsigned)(rnd() & 3);
        if (dt == ULP_DTYPE_BF16) {
            uint16_t x = ulp_f32_to_bf16(v);
            ((uint16_t *)a)[i] = x;
            ((uint16_t *)b)[i] = move ? (uint16_t)(x + step) : x;
        } else {
            uint32_t x;
            memcpy(&x, &v, 4);
            ((uint32_t *)a)[i] = x;
            ((uint32_t *)b)[i] = move ? x + step : x;
        }
        moved += move;
    }
    return moved;
}

int main(void)
{
    static const double dens[] = {0,    0.001, 0.01, 0.03, 0.05, 0.0625,
                                  0.07, 0.09,  0.12, 0.2,  0.5,  1.0};
    static const ulp_dtype dts[] = {ULP_DTYPE_BF16, ULP_DTYPE_F32};
    void *a = malloc(ELEMENTS * 4), *b = malloc(ELEMENTS * 4);
    if (a == NULL || b == NULL) {
        fprintf(stderr, "bench_density: out of memory\n");
        return 2;
    }
    int64_t shape[1] = {(int64_t)ELEMENTS};
    printf("bench_density: %zu elements, one thread, ns per element pair (min of %d)\n", ELEMENTS,
           REPS);
    printf("%-8s", "density");
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        printf("  %8s", ulp_dtype_name(dts[d]));
    printf("\n");
    for (size_t k = 0; k < sizeof dens / sizeof dens[0]; k++) {
        printf("%-8.4f", dens[k]);
        for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
            uint64_t moved = fill(dts[d], a, b, dens[k]);
            double best = 1e30;
            for (int r = 0; r < REPS; r++) {
                ulp_diff_metrics m;
                double t0 = now_s();
                ulp_diff_buffers(dts[d], a, b, ELEMENTS, 1, shape, &m);
                double t = now_s() - t0;
                best = t < best ? t : best;
                if (m.differing != moved) {
                    fprintf(stderr, "bench_density: %s at %g: %llu differ, %llu moved\n",
                            ulp_dtype_name(dts[d]), dens[k], (unsigned long long)m.differing,
                            (unsigned long long)moved);
                    return 1;
                }
            }
            printf("  %8.3f", best * 1e9 / (double)ELEMENTS);
        }
        printf("\n");
    }
    free(a);
    free(b);
    return 0;
}

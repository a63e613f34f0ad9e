/*
 * The comparison kernels' instruction-set level (isa.h): the best the CPU
 * has, as the ifunc resolvers of target_clones choose it, unless
 * ULPPROF_ISA in the environment forces one it has.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "ulpprof/diff.h"

static const char *const NAMES[] = {"baseline", "x86-64-v3", "x86-64-v4"};

static int level = ULP__ISA_BASE;
static const char *problem; /* why ULPPROF_ISA was not taken, or NULL */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int cpu_level(void)
{
#if ULP__ISA_LEVELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        return ULP__ISA_V4;
    if (__builtin_cpu_supports("x86-64-v3"))
        return ULP__ISA_V3;
#endif
    return ULP__ISA_BASE;
}

static void choose(void)
{
    int best = cpu_level();
    level = best;
    const char *want = getenv("ULPPROF_ISA");
    if (want == NULL || *want == '\0')
        return;
    for (int k = 0; k <= ULP__ISA_V4; k++) {
        if (strcmp(want, NAMES[k]) != 0)
            continue;
        if (k > best)
            problem = ULP__ISA_LEVELS ? "this CPU lacks that level"
                                      : "this build has only the baseline kernels";
        else
            level = k;
        return;
    }
    problem = "not a level (x86-64-v4, x86-64-v3 or baseline)";
}

int ulp__isa(void)
{
    pthread_once(&once, choose);
    return level;
}

const char *ulp_diff_isa(const char **why)
{
    int k = ulp__isa();
    if (why != NULL)
        *why = problem;
    return NAMES[k];
}

const char *ulp_diff_isa_best(void)
{
    return NAMES[cpu_level()];
}

/*
 * The instruction-set level the comparison kernels run at
 * (diff_metrics.c, logits_row.c).  Each kernel is compiled once per level
 * with the target attribute below, and the caller picks the copy through
 * ulp__isa(): the best level the CPU has, or the one ULPPROF_ISA forces
 * (ulp_diff_isa() in ulpprof/diff.h).  Not installed.
 *
 * Explicit copies rather than target_clones: an ifunc resolver cannot be
 * told which copy to use, and it runs before ThreadSanitizer's runtime is
 * up (which crashed the program at load, tests/reliability).
 */
#ifndef ULPPROF_ANALYZER_ISA_H
#define ULPPROF_ANALYZER_ISA_H

enum { ULP__ISA_BASE = 0, ULP__ISA_V3 = 1, ULP__ISA_V4 = 2 };

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(ULP_NO_CLONES)
#define ULP__ISA_LEVELS 1
#define ULP__TARGET_V4  __attribute__((target("arch=x86-64-v4")))
#define ULP__TARGET_V3  __attribute__((target("arch=x86-64-v3")))
#else
#define ULP__ISA_LEVELS 0
#define ULP__TARGET_V4
#define ULP__TARGET_V3
#endif
#define ULP__TARGET_BASE

/* The level in use, chosen on the first call (thread-safe). */
int ulp__isa(void);

/*
 * ULP__ISA_EACH(M, args): M(args, V4) M(args, V3) M(args, BASE) where the
 * build has the levels, else M(args, BASE) -- a definition per level, whose
 * M names its function NAME##_##ISA and marks it ULP__TARGET_##ISA.
 * ULP__ISA_CALL(NAME, args): calls NAME##_V4, NAME##_V3 or NAME##_BASE.
 */
#if ULP__ISA_LEVELS
#define ULP__ISA_EACH(M, ...) M(__VA_ARGS__, V4) M(__VA_ARGS__, V3) M(__VA_ARGS__, BASE)
#define ULP__ISA_CALL(NAME, ...)                                                                   \
    (ulp__isa() == ULP__ISA_V4   ? NAME##_V4(__VA_ARGS__)                                          \
     : ulp__isa() == ULP__ISA_V3 ? NAME##_V3(__VA_ARGS__)                                          \
                                 : NAME##_BASE(__VA_ARGS__))
#else
#define ULP__ISA_EACH(M, ...)    M(__VA_ARGS__, BASE)
#define ULP__ISA_CALL(NAME, ...) NAME##_BASE(__VA_ARGS__)
#endif

#endif /* ULPPROF_ANALYZER_ISA_H */

/*
 * Function multiversioning of the comparison loops: a function marked
 * ULP__CLONES is also compiled for AVX2 and AVX-512 (x86-64-v3, -v4) and
 * the best one is picked at load time (ifunc).  Not installed.
 */
#ifndef ULPPROF_ANALYZER_CLONES_H
#define ULPPROF_ANALYZER_CLONES_H

/* Not under ThreadSanitizer: the ifunc resolvers run before its runtime is
 * up and crash the program at load (tests/reliability, .ci/sanitize). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(ULP_NO_CLONES) &&  \
    !defined(__SANITIZE_THREAD__)
#define ULP__CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ULP__CLONES
#endif

#endif /* ULPPROF_ANALYZER_CLONES_H */

/*
 * Skipping what an emulator cannot run.  A cross build's unit tests run under
 * CMAKE_CROSSCOMPILING_EMULATOR (qemu-aarch64 in .ci/arm64), which
 * tests/CMakeLists.txt names in ULPPROF_TEST_EMULATOR.  qemu-user lacks two
 * things some tests hold the code to: a fork child of a process whose
 * threads run aborts inside qemu, and madvise(MADV_POPULATE_WRITE) returns
 * success without populating a page (mincore() then sees none).  Such a
 * test says so on stderr and is skipped there; on a real CPU it runs.
 * Use inside a cmocka test, after <cmocka.h>.
 */
#ifndef ULPPROF_TESTS_EMULATED_H
#define ULPPROF_TESTS_EMULATED_H

#include <stdio.h>
#include <stdlib.h>

#define TU_SKIP_UNDER_EMULATOR(why)                                                                \
    do {                                                                                           \
        const char *emulator_ = getenv("ULPPROF_TEST_EMULATOR");                                   \
        if (emulator_ != NULL && *emulator_ != '\0') {                                             \
            fprintf(stderr, "skipped: under %s: %s\n", emulator_, why);                            \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

#endif /* ULPPROF_TESTS_EMULATED_H */

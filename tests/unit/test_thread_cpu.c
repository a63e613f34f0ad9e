/*
 * common/thread_cpu: a thread on a given CPU leaves it for another its
 * affinity allows, and keeps the affinity it had; a thread elsewhere, a
 * CPU of -1, or a thread allowed only one CPU does not move.  Checked with
 * sched_getcpu() and sched_getaffinity() after pinning the thread with
 * sched_setaffinity(): the moves are the kernel's answer to the calls, not
 * a matter of timing.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/thread_cpu.h"

static cpu_set_t g_was; /* the test's own affinity, restored after each test */

static int setup(void **state)
{
    (void)state;
    return sched_getaffinity(0, sizeof g_was, &g_was);
}

static int teardown(void **state)
{
    (void)state;
    return sched_setaffinity(0, sizeof g_was, &g_was);
}

/* The first two CPUs this thread may run on: 0, or -1 when it has one only. */
static int two_cpus(int *a, int *b)
{
    *a = *b = -1;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &g_was))
            continue;
        if (*a < 0)
            *a = c;
        else {
            *b = c;
            return 0;
        }
    }
    return -1;
}

static void pin(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    assert_int_equal(ulp__thread_cpu(), cpu);
}

static void test_thread_cpu__leaves_and_keeps_affinity(void **state)
{
    (void)state;
    int a, b;
    if (two_cpus(&a, &b) != 0)
        skip();
    cpu_set_t both;
    CPU_ZERO(&both);
    CPU_SET(a, &both);
    CPU_SET(b, &both);
    /* On a, allowed a and b: it moves to b, and may still run on both.  The
     * widened mask lets the scheduler move it too, between the calls: then
     * leave_cpu finds it elsewhere and says 0, and the round is tried again. */
    int moved = 0;
    for (int round = 0; round < 100 && !moved; round++) {
        pin(a);
        assert_int_equal(sched_setaffinity(0, sizeof both, &both), 0);
        int at = ulp__thread_cpu();
        moved = ulp__thread_leave_cpu(at);
        /* Once moved, the scheduler may move it back as soon as the mask is
         * wide again: only a round where it is seen elsewhere counts. */
        int now_at = ulp__thread_cpu();
        if (moved && now_at == at)
            moved = 0;
        if (moved)
            assert_int_equal(now_at, at == a ? b : a);
    }
    assert_int_equal(moved, 1);
    cpu_set_t now;
    assert_int_equal(sched_getaffinity(0, sizeof now, &now), 0);
    assert_true(CPU_EQUAL(&now, &both));
}

static void test_thread_cpu__stays(void **state)
{
    (void)state;
    int a, b;
    assert_int_equal(ulp__thread_leave_cpu(-1), 0);
    assert_int_equal(ulp__thread_leave_cpu(CPU_SETSIZE), 0);
    if (two_cpus(&a, &b) != 0) {
        /* One CPU allowed: there is nowhere to go. */
        assert_int_equal(ulp__thread_leave_cpu(ulp__thread_cpu()), 0);
        return;
    }
    /* Pinned to a: asked to leave b, it is not there; asked to leave a, it
     * has no other CPU.  Its affinity is a alone either way. */
    pin(a);
    assert_int_equal(ulp__thread_leave_cpu(b), 0);
    assert_int_equal(ulp__thread_leave_cpu(a), 0);
    assert_int_equal(ulp__thread_cpu(), a);
    cpu_set_t now;
    assert_int_equal(sched_getaffinity(0, sizeof now, &now), 0);
    assert_int_equal(CPU_COUNT(&now), 1);
    assert_true(CPU_ISSET(a, &now));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_thread_cpu__leaves_and_keeps_affinity, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_thread_cpu__stays, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

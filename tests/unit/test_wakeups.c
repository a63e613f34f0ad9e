/*
 * The writer's wakeups are coalesced (capture/session_internal.h): an
 * append wakes a writer that sleeps, not one that naps, and nothing an
 * append queues waits longer than the nap -- a flush, a close and a
 * producer that needs room end a nap at once.  The nap is set to 30 s
 * here, so that a missed wakeup shows as a wait of 30 s (the tests allow
 * 20 s), never as a race with the clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <time.h>
#include <unistd.h>

#include "capture/session_internal.h"
#include "capture_testutil.h"
#include "ulpprof/capture.h"

#define LONG_NAP_NS (30 * 1000000000LL)
#define PROMPT_S    20.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static ulp_session *open_in(const char *path, size_t bound)
{
    ulp_session_options o;
    ulp_session_options_init(&o);
    o.path = path;
    o.label = "wakeups";
    o.attrs = "";
    o.queue_bytes = bound;
    ulp_session *s = NULL;
    ulp_error err;
    assert_int_equal(ulp_session_open(&o, &s, &err), ULP_OK);
    pthread_mutex_lock(&s->mu);
    s->nap_ns = LONG_NAP_NS;
    pthread_mutex_unlock(&s->mu);
    return s;
}

static void capture_one(ulp_session *s, const char *name, const void *data, int64_t n)
{
    int64_t shape[1] = {n};
    ulp_capture_desc d;
    ulp_capture_desc_init(&d);
    d.name = name;
    d.data = data;
    d.dtype = ULP_DTYPE_F32;
    d.ndim = 1;
    d.shape = shape;
    assert_int_equal(ulp_session_capture(s, &d), ULP_OK);
}

static uint64_t locked_u64(ulp_session *s, const uint64_t *field)
{
    pthread_mutex_lock(&s->mu);
    uint64_t v = *field;
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* Waits (at most 10 s) until the writer sleeps for good; 1 if it does. */
static int until_sleeping(ulp_session *s)
{
    for (int i = 0; i < 10000; i++) {
        pthread_mutex_lock(&s->mu);
        int asleep = s->sleeping && s->head == NULL;
        pthread_mutex_unlock(&s->mu);
        if (asleep)
            return 1;
        usleep(1000);
    }
    return 0;
}

static long occurrences(const char *path, const char *name)
{
    hid_t f = tu_open(path);
    assert_true(f >= 0);
    char group[128];
    snprintf(group, sizeof(group), "/captures/%s", name);
    long n = tu_group_count(f, group);
    H5Fclose(f);
    return n;
}

/* A writer that sleeps is woken by the first append, without a flush. */
static void test_wakeups__sleeping_writer_is_woken(void **state)
{
    (void)state;
    const char *dir = tu_tmpdir("wakeups-sleep");
    char path[1100];
    snprintf(path, sizeof(path), "%s/w.h5", dir);
    ulp_session *s = open_in(path, 0);
    assert_true(until_sleeping(s));
    float x[16] = {1.0f};
    capture_one(s, "x", x, 16);
    assert_int_equal(locked_u64(s, &s->wakes), 1);
    double t0 = now_s();
    while (locked_u64(s, &s->completed) < 1 && now_s() - t0 < PROMPT_S)
        usleep(1000);
    assert_int_equal(locked_u64(s, &s->completed), 1);
    assert_int_equal(ulp_session_close(s), ULP_OK);
    assert_int_equal(occurrences(path, "x"), 1);
    tu_done();
}

/*
 * Appends during a nap wake nobody, and a flush then writes them at once;
 * a close during the next nap does too.  Nothing is lost.
 */
static void test_wakeups__nap_coalesces_flush_and_close_end_it(void **state)
{
    (void)state;
    const char *dir = tu_tmpdir("wakeups-nap");
    char path[1100];
    snprintf(path, sizeof(path), "%s/w.h5", dir);
    ulp_session *s = open_in(path, 0);
    float x[64];
    for (int i = 0; i < 64; i++)
        x[i] = (float)i;
    capture_one(s, "x", x, 64);
    assert_int_equal(ulp_session_flush(s), ULP_OK); /* the writer wrote: it naps now */
    uint64_t woken = locked_u64(s, &s->wakes);
    for (int i = 0; i < 100; i++) {
        capture_one(s, "x", x, 64);
        usleep(200);
    }
    assert_int_equal(locked_u64(s, &s->wakes), woken);
    double t0 = now_s();
    assert_int_equal(ulp_session_flush(s), ULP_OK);
    assert_true(now_s() - t0 < PROMPT_S);
    assert_int_equal(locked_u64(s, &s->completed), 101);
    for (int i = 0; i < 5; i++)
        capture_one(s, "y", x, 64);
    t0 = now_s();
    assert_int_equal(ulp_session_close(s), ULP_OK);
    assert_true(now_s() - t0 < PROMPT_S);
    assert_int_equal(occurrences(path, "x"), 101);
    assert_int_equal(occurrences(path, "y"), 5);
    tu_done();
}

/*
 * Small captures that fill a 1 MiB bound during a 30 s nap: the queue's
 * quarter and the producers that wait for room wake the writer, so 400
 * captures of 64 KiB (25 times the bound) go through at once.
 */
static void test_wakeups__full_queue_ends_the_nap(void **state)
{
    (void)state;
    const char *dir = tu_tmpdir("wakeups-room");
    char path[1100];
    snprintf(path, sizeof(path), "%s/w.h5", dir);
    ulp_session *s = open_in(path, 1 << 20);
    static float x[16384];
    capture_one(s, "x", x, 16384);
    assert_int_equal(ulp_session_flush(s), ULP_OK);
    double t0 = now_s();
    for (int i = 1; i < 400; i++)
        capture_one(s, "x", x, 16384);
    assert_true(now_s() - t0 < PROMPT_S);
    assert_int_equal(ulp_session_close(s), ULP_OK);
    assert_int_equal(occurrences(path, "x"), 400);
    tu_done();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wakeups__sleeping_writer_is_woken),
        cmocka_unit_test(test_wakeups__nap_coalesces_flush_and_close_end_it),
        cmocka_unit_test(test_wakeups__full_queue_ends_the_nap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The staging ring (capture/session_staging.c) checked against a model
 * of its own: blocks handed out never overlap and stay inside the ring,
 * whatever order they are given back in; what a block holds survives until
 * it is given back; the ring restarts at its start when it empties; and
 * the prefault thread populates what it says it did (mincore), the
 * reserve before the open returns.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture/session_internal.h"
#include "emulated.h"

/* A session with nothing but its mutex, its bound and its ring. */
static ulp_session *ring_session(size_t bound)
{
    ulp_session *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    assert_int_equal(pthread_mutex_init(&s->mu, NULL), 0);
    assert_int_equal(pthread_cond_init(&s->done, NULL), 0);
    s->bound = bound;
    ulp__staging_start(s);
    assert_non_null(s->staging.base);
    return s;
}

static void ring_session_free(ulp_session *s)
{
    assert_int_equal(s->staging.live, 0);
    ulp__staging_stop(s);
    pthread_cond_destroy(&s->done);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static ulp__item *take(ulp_session *s, size_t size)
{
    pthread_mutex_lock(&s->mu);
    ulp__item *it = ulp__staging_take(s, size);
    pthread_mutex_unlock(&s->mu);
    return it;
}

static void give(ulp_session *s, ulp__item *it)
{
    pthread_mutex_lock(&s->mu);
    assert_int_equal(ulp__staging_give(s, it), 1);
    pthread_mutex_unlock(&s->mu);
}

static void test_staging__restarts_and_wraps(void **state)
{
    (void)state;
    size_t cap = 1 << 20;
    ulp_session *s = ring_session(cap);
    char *base = s->staging.base;
    /* Each block starts with the ring's 64-byte header. */
    size_t H = 64;
    assert_true(ulp__staging_holds(s, cap - H));
    assert_false(ulp__staging_holds(s, cap - H + 1));

    /* Empty again: the next block is the first one's memory. */
    ulp__item *a = take(s, 1000);
    assert_ptr_equal(a, base + H);
    assert_int_equal(a->cap, 1024);
    give(s, a);
    ulp__item *a2 = take(s, 5000);
    assert_ptr_equal(a2, base + H);
    give(s, a2);

    /* Three blocks of 300 KiB; the second given back first frees nothing. */
    size_t k300 = 300 << 10;
    ulp__item *b[3];
    for (int i = 0; i < 3; i++) {
        b[i] = take(s, k300);
        assert_ptr_equal(b[i], base + (size_t)i * (k300 + H) + H);
    }
    give(s, b[1]);
    assert_null(take(s, k300));
    /* The first back: both are free, and a block goes to the start. */
    give(s, b[0]);
    ulp__item *c = take(s, 2 * k300);
    assert_ptr_equal(c, base + H);
    assert_null(take(s, k300 / 2)); /* between c's end and b[2]: nothing */
    give(s, b[2]);
    /* b[2]'s place and the end of the lap are free now. */
    ulp__item *d = take(s, cap - 2 * k300 - 2 * H);
    assert_ptr_equal(d, base + 2 * k300 + 2 * H);
    give(s, c);
    give(s, d);
    ring_session_free(s);
}

/* One block the model holds: where, how long, the byte it was filled with. */
typedef struct held_block {
    ulp__item *it;
    size_t size;
    unsigned char fill;
} held_block;

static void test_staging__model(void **state)
{
    (void)state;
    size_t cap = (size_t)3 << 20;
    ulp_session *s = ring_session(cap);
    char *base = s->staging.base;
    enum { MAXB = 64 };
    held_block h[MAXB];
    int n = 0;
    uint64_t x = 0x9e3779b97f4a7c15u;
    unsigned long refused = 0, taken = 0;
    for (int step = 0; step < 20000; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int want_take = n == 0 || (n < MAXB && (x & 3) != 0);
        if (want_take) {
            /* Sizes from 1 byte to about a third of the ring. */
            size_t size = 1 + (size_t)((x >> 8) % ((x >> 40) % 4 == 0 ? cap / 3 : 8192));
            ulp__item *it = take(s, size);
            if (it == NULL) {
                assert_true(n > 0); /* an empty ring holds any block up to its size */
                refused++;
            } else {
                char *p = (char *)it;
                assert_true(p >= base && p + size <= base + cap);
                assert_int_equal((uintptr_t)p % 64, 0);
                assert_true(it->cap >= size);
                for (int i = 0; i < n; i++) {
                    char *q = (char *)h[i].it;
                    assert_true(p + size <= q || q + h[i].size <= p);
                }
                /* The whole item is the builder's: the ring's header lies before it. */
                unsigned char fill = (unsigned char)(x >> 24);
                memset(it, fill, size);
                h[n++] = (held_block){it, size, fill};
                taken++;
            }
        } else {
            /* Back in any order, as threads that finish building do. */
            int i = (int)((x >> 16) % (uint64_t)n);
            unsigned char *p = (unsigned char *)h[i].it;
            for (size_t k = 0; k < h[i].size; k++)
                if (p[k] != h[i].fill)
                    fail_msg("block %p byte %zu changed while held", (void *)p, k);
            give(s, h[i].it);
            h[i] = h[--n];
        }
    }
    while (n > 0)
        give(s, h[--n].it);
    assert_true(taken > 5000);
    assert_true(refused > 0);
    ulp__item *whole = take(s, cap - 64);
    assert_ptr_equal(whole, base + 64);
    give(s, whole);
    ring_session_free(s);
}

/* Waits until the prefault thread has done what it was asked (no timing:
 * only a thread that never gets there fails, after 60 s). */
static void prefault_idle(ulp_session *s)
{
    for (int i = 0; i < 6000; i++) {
        pthread_mutex_lock(&s->mu);
        int idle = !s->staging.busy && s->staging.touched >= s->staging.target;
        pthread_mutex_unlock(&s->mu);
        if (idle)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Whether every page of [from, to) of the ring is resident (want 1) or none is (want 0). */
static void assert_resident(ulp_session *s, size_t from, size_t to, int want)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = to - from;
    unsigned char *vec = malloc(len / page);
    assert_non_null(vec);
    assert_int_equal(mincore(s->staging.base + from, len, vec), 0);
    for (size_t i = 0; i < len / page; i++)
        if ((vec[i] & 1) != want)
            fail_msg("page %zu of [%zu MiB, %zu MiB) is %spopulated", i, from >> 20, to >> 20,
                     vec[i] & 1 ? "" : "not ");
    free(vec);
}

/*
 * Past the reserve (half the ring, 32 MiB), the thread populates room for
 * one more block like the newest, and nothing further: three 10 MiB blocks
 * end at 30 MiB, so it populates up to 42 MiB (in 2 MiB steps), and the
 * rest of the ring stays unpopulated (a reserve kept ahead of the newest
 * block populated up to 62 MiB).
 */
static void test_staging__prefaults(void **state)
{
    (void)state;
    TU_SKIP_UNDER_EMULATOR("MADV_POPULATE_WRITE populates nothing in qemu");
    size_t cap = (size_t)64 << 20, mib10 = (size_t)10 << 20;
    ulp__staging_release_kept(); /* a new mapping: nothing populated yet */
    ulp_session *s = ring_session(cap);
    ulp__item *it[3];
    it[0] = take(s, mib10);
    assert_non_null(it[0]);
    prefault_idle(s);
    pthread_mutex_lock(&s->mu);
    assert_int_equal(s->staging.target, s->staging.reserve); /* 20 MiB would fit in it */
    pthread_mutex_unlock(&s->mu);
    for (int i = 1; i < 3; i++) {
        it[i] = take(s, mib10);
        assert_non_null(it[i]);
    }
    size_t want = (size_t)42 << 20;
    prefault_idle(s);
    /* Past the first block, up to 42 MiB (the first block's pages may be
     * the caller's to fault), and not one page further. */
    assert_resident(s, mib10, want, 1);
    assert_resident(s, want, cap, 0);
    pthread_mutex_lock(&s->mu);
    assert_int_equal(s->staging.target, want);
    assert_true(s->staging.populated >= want - mib10);
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < 3; i++)
        give(s, it[i]);
    ring_session_free(s);
}

/* What the open waits for: the reserve, populated before the first block. */
static void test_staging__ready_at_open(void **state)
{
    (void)state;
    TU_SKIP_UNDER_EMULATOR("MADV_POPULATE_WRITE populates nothing in qemu");
    size_t cap = (size_t)16 << 20;
    ulp__staging_release_kept(); /* a new mapping: nothing populated yet */
    ulp_session *s = ring_session(cap);
    pthread_mutex_lock(&s->mu);
    ulp__staging_wait_ready(s);
    assert_true(s->staging.ready);
    assert_int_equal(s->staging.reserve, cap / 2);
    assert_int_equal(s->staging.populated, cap / 2);
    pthread_mutex_unlock(&s->mu);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *vec = malloc(cap / page);
    assert_non_null(vec);
    assert_int_equal(mincore(s->staging.base, cap, vec), 0);
    for (size_t i = 0; i < cap / page; i++)
        if ((vec[i] & 1) != (i < cap / 2 / page))
            fail_msg("page %zu is %spopulated", i, vec[i] & 1 ? "" : "not ");
    free(vec);
    ring_session_free(s);
}

/*
 * A new ring of `cap` in this process: its reserve populated, then every
 * page of a `size` block touched; 0 if all went well.
 */
static int ring_touch(size_t cap, size_t size)
{
    ulp_session *s = ring_session(cap);
    pthread_mutex_lock(&s->mu);
    ulp__staging_wait_ready(s);
    int populated = s->staging.populated == cap / 2;
    pthread_mutex_unlock(&s->mu);
    if (!populated) /* refused: the ring is not (all) mapped */
        return -1;
    ulp__item *it = take(s, size);
    if (it == NULL)
        return -1;
    memset(it, 0x5a, size);
    give(s, it);
    ring_session_free(s);
    return 0;
}

/*
 * The first ring a process closes is unmapped (a program that captures
 * once gets its memory back); from the second on, a closed session's ring
 * is kept for the next session of the same bound (the same mapping, its
 * reserve already there); one of another bound
 * maps its own; and a fork child, which does not have the kept mapping
 * (MADV_DONTFORK), maps its own too (the parent's address is not mapped
 * there: its prefault thread is refused, or the child dies of SIGSEGV).
 */
static void test_staging__kept_for_next(void **state)
{
    (void)state;
    size_t cap = (size_t)16 << 20;
    ulp__staging_release_kept();
    ulp__session_fork_watch();
    ulp_session *s = ring_session(cap);
    ring_session_free(s);
    assert_false(ulp__staging_kept()); /* the first: unmapped */
    s = ring_session(cap);
    char *base = s->staging.base;
    pthread_mutex_lock(&s->mu);
    ulp__staging_wait_ready(s);
    pthread_mutex_unlock(&s->mu);
    ring_session_free(s);
    assert_true(ulp__staging_kept());

    s = ring_session(cap);
    assert_ptr_equal(s->staging.base, base);
    pthread_mutex_lock(&s->mu);
    ulp__staging_wait_ready(s);
    assert_int_equal(s->staging.populated, cap / 2);
    pthread_mutex_unlock(&s->mu);
    ring_session_free(s); /* kept again */

    TU_SKIP_UNDER_EMULATOR("a fork child of a process whose threads run aborts in qemu");
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(ring_touch(cap, cap / 2) == 0 ? 0 : 1);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    /* Another bound: a mapping of its own, which is kept in turn. */
    assert_int_equal(ring_touch(cap * 2, cap), 0);
    assert_int_equal(ring_touch(cap, cap / 2), 0);
    ulp__staging_release_kept();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_staging__restarts_and_wraps),
        cmocka_unit_test(test_staging__model),
        cmocka_unit_test(test_staging__prefaults),
        cmocka_unit_test(test_staging__ready_at_open),
        cmocka_unit_test(test_staging__kept_for_next),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Staging memory: one ring of the session's bound, mapped once, from which
 * queued items are carved in admission order and to which the writer gives
 * them back as soon as it has written them.  A background thread populates
 * the ring ahead of use, so that the capturing thread copies into memory
 * whose pages exist: a fresh page costs the kernel's zeroing (about as
 * much as the copy itself) plus a fault, and that cost then falls on the
 * prefault thread instead of the caller.
 *
 * The ring restarts at its beginning whenever it empties, so a session
 * whose writer keeps up reuses the same few warm megabytes; it is backed by
 * huge pages where the kernel gives them (MADV_HUGEPAGE): one fault and one
 * 2 MiB clear instead of 512 faults.  A reserve of half the bound
 * (128 MiB at most) is populated while the writer creates the file, and
 * the open waits for it (ulp__staging_wait_ready): a first burst of
 * captures then finds its pages ready, instead of clearing them itself or
 * sharing the memory bus with this thread clearing them beside it.  Past
 * the reserve, the thread keeps one block like the newest ahead of it, no
 * more; what is populated stays within the bound.  (It kept the reserve
 * itself ahead of the newest block: a fresh session's first burst then
 * had it clear another 128 MiB while the caller copied -- 6 ms of CPU
 * per session, and the caller's copies sharing the memory bus with it,
 * for pages that a burst of the reserve's size never reaches.)  From a
 * process's second closed session on, a closed session's ring is kept for
 * its next session (spare_keep).
 */
#define _GNU_SOURCE /* MADV_POPULATE_WRITE, MADV_DONTFORK, MADV_FREE */
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>

#include "session_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define STAGING_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STAGING_ASAN 1
#endif
#endif
#ifdef STAGING_ASAN
#include <sanitizer/asan_interface.h>
/* Regions not handed out are poisoned, as free()d memory would be. */
#define STAGING_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define STAGING_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define STAGING_POISON(p, n)   ((void)(p), (void)(n))
#define STAGING_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#ifndef MADV_FREE
#define MADV_FREE 8 /* Linux 4.5 */
#endif

#define REGION_ALIGN ((size_t)64)
#define PAGE_BYTES   ((size_t)4096)
#define RESERVE_MAX  ((size_t)128 << 20) /* populated ahead: half the bound, at most this */

/*
 * Each block starts with the ring's own header, which the item built after
 * it never touches: the writer reads the oldest blocks' headers while other
 * threads build their items, outside the lock.
 */
typedef struct ring_hdr {
    size_t cap; /* the block's bytes, header included */
    int released;
} ring_hdr;
#define HDR_BYTES REGION_ALIGN

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* Asks the prefault thread to populate up to `want` (s->mu held). */
static void prefault_ahead(ulp__staging *g, size_t want)
{
    want = min_size(round_up(want, ULP__HUGE_BYTES), g->populate_end);
    if (want > g->target) {
        g->target = want;
        if (g->target > g->touched)
            pthread_cond_signal(&g->wake);
    }
}

/*
 * The prefault thread: populates [touched, target) in 2 MiB steps, without
 * the lock, with MADV_POPULATE_WRITE -- which writes nothing, so a region a
 * caller is already copying into is left as it is.  It stops at the first
 * refusal (a kernel without it, or no memory: the caller then faults its
 * own pages, as it would without this thread).
 */
static void *prefault_main(void *arg)
{
    ulp_session *s = arg;
    ulp__staging *g = &s->staging;
    pthread_mutex_lock(&s->mu);
    while (!g->stop) {
        if (g->touched >= g->target) {
            pthread_cond_wait(&g->wake, &s->mu);
            continue;
        }
        size_t from = g->touched;
        size_t to = min_size(round_up(from + 1, ULP__HUGE_BYTES), g->target);
        g->touched = to;
        g->busy = 1;
        pthread_mutex_unlock(&s->mu);
        int rc = madvise(g->base + from, to - from, MADV_POPULATE_WRITE);
        pthread_mutex_lock(&s->mu);
        g->busy = 0;
        if (rc != 0)
            break;
        g->populated += to - from;
        if (!g->ready && g->populated >= g->reserve) {
            g->ready = 1;
            pthread_cond_broadcast(&s->done);
        }
    }
    /* Stopped, or refused: ulp__staging_wait_ready() waits no longer. */
    g->ready = 1;
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/*
 * The ring of the process's last closed session, kept for its next one
 * (a program that captures runs one after the other): that session's
 * prefault thread then finds the pages that the kernel has not taken
 * back, where a new mapping would have it clear the whole reserve again
 * (6 ms of CPU for 128 MiB, and tenths of a second on a VM whose host
 * must back fresh memory again).  Given to the kernel to take back when
 * it needs the memory (MADV_FREE), and never in a fork child (the
 * mapping is MADV_DONTFORK).  Not the first ring a process closes: a
 * program that captures once gets its memory back at close (the kept
 * pages count in its RSS until the kernel wants them); one that has
 * already opened a second session is likely to open more, and keeps it.
 */
static pthread_mutex_t g_spare_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_spare_map;
static size_t g_spare_bytes;
static unsigned g_closed; /* rings closed since the start or the last release, at most 2 */

/* The kept ring if it has `map_bytes`, else NULL (and a kept ring of another size is unmapped). */
static char *spare_take(size_t map_bytes)
{
    pthread_mutex_lock(&g_spare_mu);
    char *map = g_spare_map, *other = NULL;
    size_t other_bytes = g_spare_bytes;
    if (map != NULL && g_spare_bytes != map_bytes) {
        other = map;
        map = NULL;
    }
    g_spare_map = NULL;
    g_spare_bytes = 0;
    pthread_mutex_unlock(&g_spare_mu);
    if (other != NULL) {
        STAGING_UNPOISON(other, other_bytes);
        munmap(other, other_bytes);
    }
    return map;
}

/*
 * Keeps `map` for the next session, its ring's `bytes` from `base` the
 * kernel's to take back; 0 if one is kept already (the caller unmaps it).
 */
static int spare_keep(char *map, size_t map_bytes, char *base, size_t bytes)
{
    pthread_mutex_lock(&g_spare_mu);
    int kept = g_closed > 0 && g_spare_map == NULL;
    if (g_closed < 2)
        g_closed++;
    if (kept) {
        madvise(base, bytes, MADV_FREE);
        g_spare_map = map;
        g_spare_bytes = map_bytes;
    }
    pthread_mutex_unlock(&g_spare_mu);
    return kept;
}

void ulp__staging_release_kept(void)
{
    pthread_mutex_lock(&g_spare_mu);
    g_closed = 0;
    pthread_mutex_unlock(&g_spare_mu);
    (void)spare_take(0);
}

int ulp__staging_kept(void)
{
    pthread_mutex_lock(&g_spare_mu);
    int kept = g_spare_map != NULL;
    pthread_mutex_unlock(&g_spare_mu);
    return kept;
}

void ulp__staging_fork_prepare(void)
{
    pthread_mutex_lock(&g_spare_mu);
}

void ulp__staging_fork_parent(void)
{
    pthread_mutex_unlock(&g_spare_mu);
}

void ulp__staging_fork_child(void)
{
    g_spare_map = NULL; /* not mapped here (MADV_DONTFORK) */
    g_spare_bytes = 0;
    pthread_mutex_unlock(&g_spare_mu);
}

void ulp__staging_start(ulp_session *s)
{
    ulp__staging *g = &s->staging;
    size_t cap = s->bound & ~(REGION_ALIGN - 1);
    if (cap < REGION_ALIGN || cap > SIZE_MAX / 2 - 2 * ULP__HUGE_BYTES)
        return;
    /* Address space only (MAP_NORESERVE): pages exist once touched. */
    size_t map_bytes = round_up(cap, ULP__HUGE_BYTES) + ULP__HUGE_BYTES;
    char *map = spare_take(map_bytes);
    if (map == NULL)
        map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED)
        return;
    char *base = (char *)round_up((uintptr_t)map, ULP__HUGE_BYTES);
    madvise(base, round_up(cap, ULP__HUGE_BYTES), MADV_HUGEPAGE);
    /* A fork child's copy of the session never captures: it needs no ring. */
    madvise(map, map_bytes, MADV_DONTFORK);
    if (pthread_cond_init(&g->wake, NULL) != 0) {
        munmap(map, map_bytes);
        return;
    }
    STAGING_POISON(base, cap);
    g->map = map;
    g->map_bytes = map_bytes;
    g->base = base;
    g->cap = cap;
    g->populate_end = round_up(cap, PAGE_BYTES);
    g->reserve = min_size(cap / 2, RESERVE_MAX);
    g->head = g->tail = g->wrap = g->live = g->hwm = 0;
    g->touched = g->target = g->populated = 0;
    g->stop = g->ready = 0;

    /* Like the writer thread, it takes no signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    g->has_thread = pthread_create(&g->thread, NULL, prefault_main, s) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (g->has_thread) {
        pthread_mutex_lock(&s->mu);
        prefault_ahead(g, g->reserve);
        pthread_mutex_unlock(&s->mu);
    }
}

void ulp__staging_wait_ready(ulp_session *s)
{
    ulp__staging *g = &s->staging;
    while (g->base != NULL && g->has_thread && !g->ready)
        pthread_cond_wait(&s->done, &s->mu);
}

void ulp__staging_stop(ulp_session *s)
{
    ulp__staging *g = &s->staging;
    if (g->base == NULL)
        return;
    if (g->has_thread) {
        pthread_mutex_lock(&s->mu);
        g->stop = 1;
        pthread_cond_signal(&g->wake);
        pthread_mutex_unlock(&s->mu);
        pthread_join(g->thread, NULL);
        g->has_thread = 0;
    }
    pthread_cond_destroy(&g->wake);
    if (!spare_keep(g->map, g->map_bytes, g->base, g->populate_end)) {
        /* ASan's shadow outlives the mapping: clear it for whoever maps here next. */
        STAGING_UNPOISON(g->base, g->cap);
        munmap(g->map, g->map_bytes);
    }
    g->base = NULL;
}

int ulp__staging_holds(const ulp_session *s, size_t size)
{
    return s->staging.base != NULL && size <= s->staging.cap - HDR_BYTES &&
           round_up(size, REGION_ALIGN) + HDR_BYTES <= s->staging.cap;
}

ulp__item *ulp__staging_take(ulp_session *s, size_t size)
{
    ulp__staging *g = &s->staging;
    size_t need = round_up(size, REGION_ALIGN) + HDR_BYTES, at;
    if (g->live == 0)
        g->head = g->tail = g->wrap = 0;
    if (g->wrap == 0 && g->cap - g->head >= need) {
        at = g->head; /* used: [tail, head) */
    } else if (g->wrap == 0 && g->tail >= need) {
        g->wrap = g->head; /* a new lap; used: [tail, wrap) and [0, head) */
        at = 0;
    } else if (g->wrap != 0 && g->tail - g->head >= need) {
        at = g->head;
    } else {
        return NULL;
    }
    g->head = at + need;
    g->live++;
    ring_hdr *h = (ring_hdr *)(void *)(g->base + at);
    STAGING_UNPOISON(h, need);
    h->cap = need;
    h->released = 0;
    ulp__item *it = (ulp__item *)(void *)(g->base + at + HDR_BYTES);
    it->cap = need - HDR_BYTES;
    /*
     * Pages of the block not populated yet: while the prefault thread works
     * its way up, the caller follows it (clearing a page is faster than a
     * copy into it); an idle thread takes the upper half of them, the
     * caller faults the lower half as it copies.
     */
    size_t end = min_size(round_up(g->head, ULP__HUGE_BYTES), g->populate_end);
    if (end > g->touched && !g->busy && g->touched >= g->target) {
        size_t lo = g->touched > at ? g->touched : at - at % ULP__HUGE_BYTES;
        g->touched = min_size(lo + round_up((end - lo) / 2, ULP__HUGE_BYTES), end);
    }
    if (g->head > g->hwm)
        g->hwm = g->head;
    /* The reserve, and room for one more block like this one. */
    size_t ahead = g->head + need;
    prefault_ahead(g, ahead > g->reserve ? ahead : g->reserve);
    return it;
}

int ulp__staging_give(ulp_session *s, ulp__item *it)
{
    ulp__staging *g = &s->staging;
    char *p = (char *)it;
    if (g->base == NULL || p < g->base || p >= g->base + g->cap)
        return 0;
    ((ring_hdr *)(void *)(p - HDR_BYTES))->released = 1;
    g->live--;
    /* The oldest regions the writer is done with become free. */
    while (g->live > 0) {
        if (g->wrap != 0 && g->tail == g->wrap) {
            g->tail = 0;
            g->wrap = 0;
            continue;
        }
        ring_hdr *old = (ring_hdr *)(void *)(g->base + g->tail);
        if (!old->released)
            break;
        g->tail += old->cap;
        STAGING_POISON(old, old->cap);
    }
    if (g->live == 0) {
        STAGING_POISON(g->base, g->hwm);
        g->head = g->tail = g->wrap = 0;
    }
    return 1;
}

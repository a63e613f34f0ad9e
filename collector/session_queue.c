/*
 * The session's queue: requests are admitted in arrival order (a ticket)
 * while the bytes they hold stay within the bound, built into staging
 * blocks outside the lock, and appended for the writer thread.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "session_internal.h"

/*
 * Staging blocks of at least POOL_MIN bytes are kept for reuse after they
 * are written, as long as the queued bytes plus the kept ones stay within
 * the bound: fresh memory costs a page fault per 4 KiB (several times a
 * memcpy of the same bytes), memory used before costs nothing.
 */
#define POOL_MIN        ((size_t)64 << 10)
#define POOL_MAX_BLOCKS 1024 /* 64 let 1 MiB captures take fresh blocks past the 64th */

/*
 * Waits for this request's turn and for room for `charge` bytes, then
 * charges them.  Called with s->mu held.  A terminal state (closing or
 * failed) ends every wait; later tickets then never need serving.
 */
static ulp_status admit(ulp_session *s, size_t charge)
{
    if (s->closing)
        return ULP_ECLOSED;
    if (s->failed)
        return s->fail_status;
    uint64_t ticket = s->ticket_next++;
    for (;;) {
        /* An item larger than the bound goes alone, into an empty queue. */
        int fits = s->held == 0 || (s->held <= s->bound && charge <= s->bound - s->held);
        if (s->ticket_serving == ticket && fits)
            break;
        if (s->closing)
            return ULP_ECLOSED;
        if (s->failed)
            return s->fail_status;
        pthread_cond_wait(&s->room, &s->mu);
    }
    s->ticket_serving++;
    s->held += charge;
    s->pending++;
    /* The next ticket may fit as well. */
    pthread_cond_broadcast(&s->room);
    return ULP_OK;
}

/* Gives back an admission whose item could not be built.  s->mu held. */
static void unadmit(ulp_session *s, size_t charge)
{
    s->held -= charge;
    s->pending--;
    pthread_cond_broadcast(&s->room);
    pthread_cond_broadcast(&s->work);
}

static void append(ulp_session *s, ulp__item *it)
{
    it->next = NULL;
    if (s->tail != NULL)
        s->tail->next = it;
    else
        s->head = it;
    s->tail = it;
    s->appended++;
    s->pending--;
    pthread_cond_signal(&s->work);
}

/*
 * A kept block for `size` bytes (not much larger, so that a big block does
 * not serve a small request), unlinked from the spares, or NULL.  Then the
 * spares that no longer fit beside the queued bytes are detached into
 * *evict for the caller to free outside the lock.  s->mu held.
 */
static ulp__item *pool_take(ulp_session *s, size_t size, ulp__item **evict)
{
    ulp__item *got = NULL;
    if (size >= POOL_MIN) {
        for (ulp__item **pp = &s->spares; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->cap >= size && (*pp)->cap - size <= size / 4) {
                got = *pp;
                *pp = got->next;
                s->spare_bytes -= got->cap;
                s->spare_count--;
                break;
            }
        }
    }
    *evict = NULL;
    while (s->spares != NULL && s->held + s->spare_bytes > s->bound) {
        ulp__item *e = s->spares;
        s->spares = e->next;
        s->spare_bytes -= e->cap;
        s->spare_count--;
        e->next = *evict;
        *evict = e;
    }
    return got;
}

/*
 * A new block.  Large ones are 2 MiB-aligned and asked to be backed by huge
 * pages: the copy into a fresh block otherwise takes a page fault every
 * 4 KiB, which costs the capturing thread as much as the copy itself.
 */
#define HUGE_BYTES ((size_t)2 << 20)
static ulp__item *block_alloc(size_t size)
{
    if (size < HUGE_BYTES)
        return malloc(size);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_BYTES, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, size & ~(HUGE_BYTES - 1), MADV_HUGEPAGE);
#endif
    return p;
}

void ulp__item_list_free(ulp__item *it)
{
    while (it != NULL) {
        ulp__item *next = it->next;
        free(it);
        it = next;
    }
}

/*
 * Admits `charge` bytes, gets a block of `size` bytes (a kept one, or new),
 * builds the item outside the lock -- so that threads copy in parallel --
 * and appends it.
 */
static ulp_status enqueue(ulp_session *s, size_t charge, size_t size, ulp__item_builder build,
                          void *arg)
{
    ulp__item *evict = NULL, *it = NULL;
    if (s->forked)
        return ulp__session_forked_refusal();
    pthread_mutex_lock(&s->mu);
    ulp_status st = admit(s, charge);
    if (st == ULP_OK)
        it = pool_take(s, size, &evict);
    pthread_mutex_unlock(&s->mu);
    ulp__item_list_free(evict);
    if (st != ULP_OK)
        return st;
    if (it == NULL) {
        it = block_alloc(size);
        if (it != NULL)
            it->cap = size;
    }
    if (it != NULL) {
        size_t cap = it->cap;
        build(it, arg);
        it->cap = cap;
        it->charge = charge;
    }
    pthread_mutex_lock(&s->mu);
    if (it == NULL) {
        unadmit(s, charge);
        st = ULP_ENOMEM;
    } else {
        append(s, it);
    }
    pthread_mutex_unlock(&s->mu);
    return st;
}

/*
 * A request from a signal handler that interrupted this thread inside the
 * queue (its mutex held, or malloc) would deadlock: it is refused instead.
 */
static __thread int t_in_enqueue;

ulp_status ulp__session_enqueue(ulp_session *s, size_t charge, size_t size, ulp__item_builder build,
                                void *arg)
{
    if (t_in_enqueue)
        return ULP_EBUSY;
    t_in_enqueue = 1;
    ulp_status st = enqueue(s, charge, size, build, arg);
    t_in_enqueue = 0;
    return st;
}

/* Keeps a written block for reuse when it fits; 1 if kept.  s->mu held. */
int ulp__session_pool_keep(ulp_session *s, ulp__item *it)
{
    if (it->cap < POOL_MIN || s->spare_count >= POOL_MAX_BLOCKS || s->closing ||
        s->held + s->spare_bytes > s->bound || it->cap > s->bound - s->held - s->spare_bytes)
        return 0;
    it->next = s->spares;
    s->spares = it;
    s->spare_bytes += it->cap;
    s->spare_count++;
    return 1;
}

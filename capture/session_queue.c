/*
 * The session's queue: requests are admitted in arrival order (a ticket)
 * while the bytes they hold stay within the bound, built into staging
 * blocks outside the lock, and appended for the writer thread.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "session_internal.h"

/*
 * Waits for this request's turn, for room for `charge` bytes and for a
 * ring block of `size` bytes (*block; NULL when the ring cannot hold it:
 * the caller then allocates one), then charges them.  Called with s->mu
 * held.  A terminal state (closing or failed) ends every wait; later
 * tickets then never need serving.  The ring empties when the queue does,
 * so a wait for a block ends as the one for the bound does.
 */
static ulp_status admit(ulp_session *s, size_t charge, size_t size, ulp__item **block)
{
    if (s->closing)
        return ULP_ECLOSED;
    if (s->failed)
        return s->fail_status;
    uint64_t ticket = s->ticket_next++;
    for (;;) {
        /* An item larger than the bound goes alone, into an empty queue. */
        int fits = s->held == 0 || (s->held <= s->bound && charge <= s->bound - s->held);
        if (s->ticket_serving == ticket && fits) {
            if (!ulp__staging_holds(s, size))
                break;
            if ((*block = ulp__staging_take(s, size)) != NULL)
                break;
        }
        if (s->closing)
            return ULP_ECLOSED;
        if (s->failed)
            return s->fail_status;
        /* Room comes from the writer: it must not nap while this waits. */
        pthread_cond_signal(&s->work);
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
    /* A napping writer finds it within ULP__SESSION_NAP_NS (session_internal.h). */
    if (!s->napping || s->closing || it->charge >= ULP__SESSION_WAKE_BYTES ||
        it->kind == ITEM_DEFERRED || s->held >= s->bound / 4) {
        s->wakes += s->sleeping;
        pthread_cond_signal(&s->work);
    }
}

/*
 * A block the ring cannot hold (larger than the bound, or no ring).  Large
 * ones are 2 MiB-aligned and asked to be backed by huge pages: the copy
 * into a fresh block otherwise takes a page fault every 4 KiB.
 */
static ulp__item *block_alloc(size_t size)
{
    if (size < ULP__HUGE_BYTES)
        return malloc(size);
    void *p = NULL;
    if (posix_memalign(&p, ULP__HUGE_BYTES, size) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, size & ~(ULP__HUGE_BYTES - 1), MADV_HUGEPAGE);
#endif
    return p;
}

/*
 * Admits `charge` bytes, gets a block of `size` bytes (the ring's, or new),
 * builds the item outside the lock -- so that threads copy in parallel --
 * and appends it.
 */
static ulp_status enqueue(ulp_session *s, size_t charge, size_t size, ulp__item_builder build,
                          void *arg)
{
    ulp__item *it = NULL;
    if (s->forked)
        return ulp__session_forked_refusal();
    pthread_mutex_lock(&s->mu);
    ulp_status st = admit(s, charge, size, &it);
    pthread_mutex_unlock(&s->mu);
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

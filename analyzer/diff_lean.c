/*
 * Finding the partners of A's captures in B as both stream by in seq order
 * (the lean pairing), with memory that does not grow with the capture
 * count: per name, only its counts and the B captures read ahead of the
 * capture of A that wants them.
 *
 * Pairing by name and occurrence (diff_pair.c) needs to know, for capture
 * (name, k) of A, where B's (name, k) is, and for each capture of B whether
 * A has its (name, occurrence).  Where every name both files have numbers
 * its occurrences 0, 1, 2, ... in seq order (as every writer does), A has
 * (name, k) exactly when k < A's count of the name, and A asks for the
 * occurrences of a name in rising order -- the order in which a walk of B
 * meets them.  So one cursor walks B: what it passes that A will ask for
 * later waits in a queue of its name; what A will never ask for is "only
 * in B", remembered in the order met.  Two runs of one program capture in
 * the same order: the queues stay empty and the walk of B keeps pace with
 * A's.  In any other order the queues hold what is out of step -- memory
 * that grows with the disorder, never wrong.
 *
 * Not used (the pairing takes the whole tables) when a name the files
 * share numbers its occurrences otherwise, or has positions on both sides
 * (an aligned row gathers every occurrence of its name at once).
 */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "diff_priv.h"
#include "format/snapshot_summary.h"

/* What the walk knows of one name of A. */
typedef struct lean_name {
    uint64_t count_a, count_b; /* its captures in A, in B                        */
    int pa, pb;                /* positions states (snapshot_summary.h) in A, B */
    size_t *queue;             /* B captures met, not yet asked for: ring       */
    size_t head, n, cap;
} lean_name;

/* A snapshot's name pointer and its entry in `names` (or -1: not a name of A). */
typedef struct name_slot {
    const char *ptr;
    ptrdiff_t id;
} name_slot;
#define SLOTS 1024

/* A capture of B put in a name's queue, in the order queued (rising). */
typedef struct queued {
    size_t k;
    int popped; /* taken out of its name's queue since */
} queued;

struct ulp__lean {
    const ulp_snapshot *a, *b;
    const ulp__snapshot_summary *sa, *sb;
    lean_name *names; /* [sa->nnames], as sa->names */
    name_slot slots_a[SLOTS], slots_b[SLOTS];
    size_t scan;  /* the next capture of B the walk meets */
    size_t asked; /* captures of A asked for so far */
    queued *pend; /* [pend_lo, n_pend): the queues' captures, rising, from the lowest */
    size_t pend_lo, n_pend, cap_pend;
    size_t *only_b; /* captures of B before `scan` that A has not, rising */
    size_t n_only_b, cap_only_b, next_only_b;
};

/* The entry of a name of A (or -1), by the name's pointer in snapshot s. */
static ptrdiff_t name_id(ulp__lean *l, name_slot *slots, const char *name)
{
    name_slot *e = &slots[((uintptr_t)name >> 4) % SLOTS];
    if (e->ptr == name)
        return e->id;
    const ulp__name_summary *n = ulp__snapshot_summary_find(l->sa, name);
    e->ptr = name;
    e->id = n != NULL ? n - l->sa->names : -1;
    return e->id;
}

int ulp__lean_new(const ulp_snapshot *a, const ulp_snapshot *b, ulp__lean **out)
{
    *out = NULL;
    const char *env = getenv("ULPPROF_PAIRING");
    if (env != NULL && strcmp(env, "whole") == 0)
        return 0;
    const ulp__snapshot_summary *sa = ulp__snapshot_summary_get(a);
    const ulp__snapshot_summary *sb = ulp__snapshot_summary_get(b);
    if (sa == NULL || sb == NULL)
        return -1;
    ulp__lean *l = calloc(1, sizeof *l);
    if (l == NULL || (l->names = calloc(sa->nnames + 1, sizeof *l->names)) == NULL) {
        free(l);
        return -1;
    }
    *l = (ulp__lean){.a = a, .b = b, .sa = sa, .sb = sb, .names = l->names};
    int usable = 1;
    for (size_t i = 0; i < sa->nnames && usable; i++) {
        const ulp__name_summary *na = &sa->names[i];
        const ulp__name_summary *nb = ulp__snapshot_summary_find(sb, na->name);
        lean_name *e = &l->names[i];
        e->count_a = na->count;
        e->pa = na->positions;
        e->count_b = nb != NULL ? nb->count : 0;
        e->pb = nb != NULL ? nb->positions : 0;
        usable = nb == NULL || (na->contiguous && nb->contiguous && !(e->pa == 1 && e->pb == 1));
    }
    if (!usable) {
        ulp__lean_free(l);
        /* ULPPROF_PAIRING=lean: the tests' check that the lean pairing ran. */
        return env != NULL && strcmp(env, "lean") == 0 ? -2 : 0;
    }
    *out = l;
    return 1;
}

/* Appends B capture k to the queue of name entry e; 0, or -1 out of memory. */
static int queue_push(lean_name *e, size_t k)
{
    if (e->n == e->cap) {
        size_t cap = e->cap ? 2 * e->cap : 8;
        size_t *q = malloc(cap * sizeof *q);
        if (q == NULL)
            return -1;
        for (size_t i = 0; i < e->n; i++)
            q[i] = e->queue[(e->head + i) % e->cap];
        free(e->queue);
        e->queue = q;
        e->head = 0;
        e->cap = cap;
    }
    e->queue[(e->head + e->n++) % e->cap] = k;
    return 0;
}

static size_t queue_pop(lean_name *e)
{
    size_t k = e->queue[e->head];
    e->head = (e->head + 1) % e->cap;
    e->n--;
    return k;
}

/* Adds B capture k, above every one before, to the captures queued; 0, or -1 out of memory. */
static int pend_push(ulp__lean *l, size_t k)
{
    if (l->pend_lo > 0 && l->pend_lo >= l->n_pend - l->pend_lo) {
        /* Half of them popped or more: the rest moves down. */
        memmove(l->pend, l->pend + l->pend_lo, (l->n_pend - l->pend_lo) * sizeof *l->pend);
        l->n_pend -= l->pend_lo;
        l->pend_lo = 0;
    }
    if (ULP__GROW(l->pend, l->cap_pend, l->n_pend + 1) != 0)
        return -1;
    l->pend[l->n_pend++] = (queued){k, 0};
    return 0;
}

/*
 * Queued capture k was taken out of its name's queue.  The lowest capture
 * the queues hold is the first not popped: kept so, the low-water mark no
 * longer looked through every name (O(names) a batch: 100,000 distinct
 * names, each batch of 512 rows, one capture out of order).
 */
static void pend_pop(ulp__lean *l, size_t k)
{
    size_t lo = l->pend_lo, hi = l->n_pend;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (l->pend[mid].k < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    l->pend[lo].popped = 1;
    while (l->pend_lo < l->n_pend && l->pend[l->pend_lo].popped)
        l->pend_lo++;
}

/* Whether A has B capture cb's (name, occurrence); *id: its name's entry or -1. */
static int in_a(ulp__lean *l, const ulp_capture_info *cb, ptrdiff_t *id)
{
    *id = name_id(l, l->slots_b, cb->name);
    return *id >= 0 && cb->occurrence >= 0 && (uint64_t)cb->occurrence < l->names[*id].count_a;
}

int ulp__lean_partner(ulp__lean *l, const ulp_capture_info *ca, ptrdiff_t *k, int *pa, int *pb)
{
    *k = -1;
    l->asked++;
    ptrdiff_t id = name_id(l, l->slots_a, ca->name);
    if (id < 0)
        return -2; /* a summary that lacks a name of its snapshot */
    lean_name *e = &l->names[id];
    *pa = e->pa;
    *pb = e->pb;
    if (ca->occurrence < 0 || (uint64_t)ca->occurrence >= e->count_b)
        return 0; /* B has no such occurrence */
    if (e->n > 0) {
        *k = (ptrdiff_t)queue_pop(e);
        pend_pop(l, (size_t)*k);
        return 0;
    }
    size_t nb = ulp_snapshot_capture_count(l->b);
    for (; l->scan < nb; l->scan++) {
        size_t j = l->scan;
        const ulp_capture_info *cb = ulp_snapshot_capture(l->b, j);
        ptrdiff_t jd;
        if (cb == NULL)
            return -2; /* a page that cannot be made again */
        if (!in_a(l, cb, &jd)) {
            if (ULP__GROW(l->only_b, l->cap_only_b, l->n_only_b + 1) != 0)
                return -1;
            l->only_b[l->n_only_b++] = j;
        } else if (jd == id) {
            /* Occurrences come in order on both sides: this is ca's. */
            l->scan++;
            *k = (ptrdiff_t)j;
            return cb->occurrence == ca->occurrence ? 0 : -2;
        } else {
            if (pend_push(l, j) != 0 || queue_push(&l->names[jd], j) != 0)
                return -1;
        }
    }
    return -2; /* the summary counted a capture the walk did not meet */
}

ptrdiff_t ulp__lean_next_only_b(ulp__lean *l)
{
    if (l->next_only_b < l->n_only_b)
        return (ptrdiff_t)l->only_b[l->next_only_b++];
    size_t nb = ulp_snapshot_capture_count(l->b);
    for (; l->scan < nb; l->scan++) {
        ptrdiff_t id;
        const ulp_capture_info *cb = ulp_snapshot_capture(l->b, l->scan);
        if (cb == NULL || !in_a(l, cb, &id)) /* NULL: the caller's to say */
            return (ptrdiff_t)l->scan++;
    }
    return -1;
}

size_t ulp__lean_low_b(const ulp__lean *l)
{
    size_t low = l->scan;
    /* The captures only B has wait for A's last: counted until then, one
     * of them at B's start would keep B's every capture. */
    if (l->asked == ulp_snapshot_capture_count(l->a) && l->next_only_b < l->n_only_b &&
        l->only_b[l->next_only_b] < low)
        low = l->only_b[l->next_only_b];
    if (l->pend_lo < l->n_pend && l->pend[l->pend_lo].k < low)
        low = l->pend[l->pend_lo].k;
    return low;
}

void ulp__lean_free(ulp__lean *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; l->names != NULL && i < l->sa->nnames; i++)
        free(l->names[i].queue);
    free(l->names);
    free(l->only_b);
    free(l->pend);
    free(l);
}

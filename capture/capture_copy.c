/*
 * The capture copy: the one cost a capture lays on the calling thread.
 *
 * The staged bytes are read once, later, by the writer thread on another
 * CPU, and never by the caller.  A plain memcpy() into them first reads
 * every destination line into the cache (the ring cycles through more
 * memory than the last-level cache holds, so from DRAM), then writes it,
 * and evicts as much of the caller's own working set -- the model's
 * weights and activations.  glibc switches to non-temporal stores only
 * past ~3/4 of the last-level cache it is told of (on some VMs the whole
 * host's, hundreds of MiB), so a tensor of a few MiB gets the plain copy.
 *
 * From STREAM_MIN bytes on, the copy here uses non-temporal stores: no
 * destination read, no eviction.  On the 2-vCPU EPYC VM where
 * tests/perf/bench_capture.c runs, a loop of copies alone took 1 MiB from
 * 38 to 27 us and 8 MiB from 352 to 206 us, and beside a thread writing a
 * file (as the writer does during a burst of captures) 1 MiB from 55 to
 * 33 us; bench_capture's calling-thread ratio over memcpy went from
 * 1.04-1.91 to 0.70-0.99 at 1, 8 and 64 MiB.  The writer then reads the
 * staged bytes from memory instead of the cache, which for tensors this
 * large it mostly did anyway (its throughput stayed within its noise).
 * Below STREAM_MIN the ring's warm start (session_staging.c) keeps the
 * blocks in cache for a writer that keeps up, and memcpy() stays.
 *
 * The stores are SSE2 (every x86-64): streaming stores of any width fill
 * the same write-combining buffers, so wider ones gain nothing on a copy
 * bound by memory.  Elsewhere memcpy() serves.
 */
#include <stdint.h>
#include <string.h>

#include "capture_copy.h"

/*
 * Sanitizers do not see the intrinsics' stores (ASan does not flag a
 * streaming store past a block; TSan loses them): under one, memcpy()
 * copies, so that an overflow of a staging block shows.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COPY_PLAIN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define COPY_PLAIN 1
#endif
#endif

#if defined(__SSE2__) && !defined(COPY_PLAIN)
#define COPY_STREAMING 1
#include <emmintrin.h>
#endif

#define STREAM_MIN ((size_t)256 << 10)

#ifdef COPY_STREAMING
/* Non-temporal copy: the unaligned head and the tail by memcpy(), the rest 64 bytes a step. */
static void copy_streaming(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    size_t head = (size_t)(-(uintptr_t)d & 15);
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    __m128i *dv = (__m128i *)(void *)d;
    const __m128i *sv = (const __m128i *)(const void *)s;
    size_t blocks = n / 64;
    for (size_t i = 0; i < blocks; i++, dv += 4, sv += 4) {
        __m128i a = _mm_loadu_si128(sv), b = _mm_loadu_si128(sv + 1);
        __m128i c = _mm_loadu_si128(sv + 2), e = _mm_loadu_si128(sv + 3);
        _mm_stream_si128(dv, a);
        _mm_stream_si128(dv + 1, b);
        _mm_stream_si128(dv + 2, c);
        _mm_stream_si128(dv + 3, e);
    }
    memcpy(d + blocks * 64, s + blocks * 64, n - blocks * 64);
    /* Streaming stores are weakly ordered: drain them before the item is published. */
    _mm_sfence();
}
#endif

void ulp__capture_copy(void *dst, const void *src, size_t n)
{
#ifdef COPY_STREAMING
    if (n >= STREAM_MIN) {
        copy_streaming(dst, src, n);
        return;
    }
#endif
    memcpy(dst, src, n);
}

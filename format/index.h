/*
 * The capture index: what the writer knows of every capture it wrote, in
 * one table, sealed with a hash of the file at its clean close (FORMAT.md,
 * "Capture index").
 *
 * Why it exists: describing a capture through HDF5 (open its header, read
 * a dozen attributes, its type and space) costs tens of microseconds, so a
 * file of 10,000 small captures took longer to open than to compare.  The
 * index holds the same description in a few hundred bytes a capture, read
 * in one call.  It is a cache, never the only copy: a reader trusts it only
 * when the seal's hash matches the file as it is now, and otherwise reads
 * the captures through the groups exactly as before.
 *
 * Layout (all integers little-endian):
 *   /index/records, uint8[n], chunked: the records, one after the other,
 *   in seq order.  A record (8-byte aligned length):
 *       0  u32 length (a multiple of 8)
 *       4  u32 flags (ULP__INDEX_*)
 *       8  i64 seq                      16  i64 occurrence
 *      24  u64 object header address    32  u64 file offset of element 0, or
 *                                               UINT64_MAX (not contiguous, or empty)
 *      40  i32 dtype (ulp_dtype)        44  i32 rank
 *      48  i32 layer (-1: none)         52  i32 row_rank (0: no positions)
 *      56  i64 step
 *      64  i64 kernels[2]               80  i64 gemms[2]
 *      96  i64 graph_replay[2]
 *     112  u64 device_ptr              120  u64 stream
 *     128  i64 time_ns                 136  u64 rows (positions entries)
 *     144  u32 name bytes              148  u32 role bytes
 *     152  u32 inputs                  156  u32 inputs bytes
 *     160  i64 shape[rank]
 *          i64 positions[rows], i64 requests[rows] (when flagged)
 *          name NUL, role NUL, each input NUL; zero padding to the length
 *   /index/seal, uint8[64], contiguous:
 *       0  "ULPINDX1"
 *       8  u64 hash of the file (ulp__index_hash_file), 0 until sealed
 *      16  u64 size of the file the hash covers
 *      24  u64 bytes of /index/records
 *      32  u64 records
 *      40  u64 stamp: the file's mtime in ns since the epoch as its
 *              writer left it, or 0 (files before the stamp)
 *      48  zero
 *
 * The hash covers every byte of the file except the captures' own data
 * (their bytes are read, and checked, by whoever compares them) and the
 * seal's hash and size fields, written after it is computed, and the
 * journal's closed mark, written after them: any change HDF5 or h5py makes to the
 * file's structure or attributes changes it.
 *
 * The stamp spares a reader that hash (3 ms for a 13 MB file of 10,000
 * captures) on a file nothing wrote to since it was sealed, as rsync's
 * quick check and git's stat cache do.  The writer chooses it when it
 * creates the seal (so the hash covers it, and readers before the stamp
 * verify these files unchanged): 1 or 2 ns before the wall clock's coarse
 * reading (CLOCK_REALTIME_COARSE, the clock Linux stamps writes with),
 * whichever is odd.
 * After its very last write to the file it sets the file's mtime to it
 * (futimens).  Any write after that, by anyone, sets the mtime to the time
 * of that write, which is at or after that reading: never the stamp, unless
 * the system clock was set back between the two.  A reader that finds the
 * file's size equal to the seal's and its st_mtim equal to the stamp to the
 * nanosecond trusts the seal without hashing; otherwise it hashes.  What it
 * trusts that the hash would not: an edit after which someone deliberately
 * set the mtime back to the stamp (touch -d, os.utime), or an edit through
 * something that does not update mtimes (a raw block device, a filesystem
 * mounted without them).  A filesystem that keeps coarser times than
 * nanoseconds never matches, and is hashed.  cp -p, rsync -t and tar
 * --format=posix copy the bytes and the mtime together, and stay trusted
 * (GNU tar's default format keeps whole seconds: hashed).  ULPPROF_INDEX=hash
 * makes readers hash every file.
 */
#ifndef ULPPROF_FORMAT_INDEX_H
#define ULPPROF_FORMAT_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/le.h"
#include "ulpprof/format.h"

#define ULP__INDEX_GROUP         "index"
#define ULP__INDEX_RECORDS       "/index/records"
#define ULP__INDEX_SEAL          "/index/seal"
#define ULP__INDEX_MAGIC         "ULPINDX1"
#define ULP__INDEX_SEAL_BYTES    64
#define ULP__INDEX_HASH_AT       8  /* seal byte of the hash, followed by the size */
#define ULP__INDEX_HASHED_FIELDS 16 /* hash and size: left out of the hash */
#define ULP__INDEX_STAMP_AT      40 /* seal byte of the stamp */
#define ULP__INDEX_FIXED         160
#define ULP__INDEX_NO_OFFSET     UINT64_MAX
#define ULP__INDEX_NO_JOURNAL    UINT64_MAX /* a sealed file without a journal (a copy) */

enum {
    ULP__INDEX_HAS_STEP = 1u << 0,
    ULP__INDEX_HAS_KERNELS = 1u << 1,
    ULP__INDEX_HAS_GEMMS = 1u << 2,
    ULP__INDEX_HAS_GRAPH_REPLAY = 1u << 3,
    ULP__INDEX_HAS_POSITIONS = 1u << 4,
    ULP__INDEX_HAS_REQUESTS = 1u << 5
};

/* One record, decoded; pointers point into the encoded bytes. */
typedef struct ulp__index_entry {
    uint32_t flags;
    int64_t seq, occurrence;
    uint64_t oaddr, offset;
    int32_t dtype, ndim, layer, row_rank;
    int64_t step, kernels[2], gemms[2], graph_replay[2];
    uint64_t device_ptr, stream;
    int64_t time_ns;
    uint64_t rows;
    int64_t shape[ULP_MAX_RANK];
    const unsigned char *positions, *requests; /* rows little-endian i64 each */
    const char *name, *role, *inputs;          /* NUL-terminated; inputs: n_inputs in a row */
    uint32_t name_len, role_len, n_inputs, inputs_len;
} ulp__index_entry;

/* Bytes the record of `e` takes; 0 if that overflows. */
size_t ulp__index_record_size(const ulp__index_entry *e);

/*
 * Encodes `e` into `out` (ulp__index_record_size(e) bytes).  The arrays and
 * strings are read from e's pointers: positions/requests as host int64.
 */
void ulp__index_record_encode(unsigned char *out, const ulp__index_entry *e);

/*
 * The `n` strings `v` as a record's inputs field (each with its NUL, in a
 * row): in `small` (`small_bytes` long) when they fit, else in a new
 * allocation that the caller frees (when it is not `small`); its length in
 * *len.  NULL when out of memory, or longer than a record can hold.
 */
char *ulp__index_inputs_join(const char *const *v, size_t n, char *small, size_t small_bytes,
                             size_t *len);

/*
 * Decodes the record at `in`, of which `avail` bytes remain: its length, or
 * 0 when it is not a well-formed record (lengths that do not add up,
 * strings without their NUL, a rank over ULP_MAX_RANK).
 */
size_t ulp__index_record_decode(const unsigned char *in, size_t avail, ulp__index_entry *e);

/*
 * Of the record at `in` (`avail` bytes left), only what the hash needs: the
 * data's file offset (ULP__INDEX_NO_OFFSET when none) and its bytes, read
 * as ulp__index_record_decode() and the reader read them when the record
 * is valid; its length, or 0 when even those fields are out of bounds.
 */
size_t ulp__index_record_extent(const unsigned char *in, size_t avail, uint64_t *offset,
                                uint64_t *bytes);

/* A byte range of the file left out of the hash. */
typedef struct ulp__index_range {
    uint64_t off, len;
} ulp__index_range;

/* Sorts ranges by offset as ulp__index_hash_file() does (the same input
 * order gives the same output order). */
void ulp__index_ranges_sort(ulp__index_range *skip, size_t n);

/*
 * Appends to skip[0..n) (room for two more) what the hash leaves out besides
 * the captures' data -- the seal's hash and size fields at `seal_off` and,
 * in a file with a journal (`jfirst`: its first block; else
 * ULP__INDEX_NO_JOURNAL), the journal's closed mark -- and returns the new
 * count.  The one rule that writers (index_seal.c) and the reader share.
 */
size_t ulp__index_add_unhashed(ulp__index_range *skip, size_t n, uint64_t seal_off,
                               uint64_t jfirst);

/*
 * The hash of the first `size` bytes of the file open at `fd` without the
 * `n` ranges `skip` (sorted here; they may overlap), read with pread(2) a
 * window of ULP__INDEX_WINDOW bytes at a time (the file's windows: each
 * kept run of one is hashed on its own, seeded with the hash so far and
 * its offset).  0 on success; -1 when a range lies outside the file or a
 * read fails.
 */
#define ULP__INDEX_WINDOW ((uint64_t)64 << 10)
int ulp__index_hash_file(int fd, uint64_t size, ulp__index_range *skip, size_t n, uint64_t *hash);

/* Bytes of the file a caller holds already: [off, off + len) at p. */
typedef struct ulp__index_mem {
    uint64_t off, len;
    const unsigned char *p;
} ulp__index_mem;

/*
 * ulp__index_hash_file(), the same hash, but a window that lies inside one
 * of the `nmem` ranges `mem` (sorted by offset, not overlapping) is taken
 * from there instead of read: the reader holds the index records, which
 * it read a moment before.
 */
int ulp__index_hash_file_mem(int fd, uint64_t size, ulp__index_range *skip, size_t n,
                             const ulp__index_mem *mem, size_t nmem, uint64_t *hash);

#endif /* ULPPROF_FORMAT_INDEX_H */

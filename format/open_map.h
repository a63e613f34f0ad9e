/*
 * The open map (FORMAT.md, "Open map"): what a reader needs of a sealed
 * snapshot besides its captures' records -- the root's attributes, /run and
 * /env, where the records and the seal lie -- repeated after the end of
 * the HDF5 file, so that a reader can open the file without HDF5.
 *
 * Why: `ulpprof diff` of two files of 10,000 small captures spent ~1.9 ms
 * of its ~12 in HDF5 alone -- the library's start (0.45 ms), H5Fopen and
 * its 1 MiB metadata cache (0.4 ms a file), looking up the journal, the
 * root's attributes, /run, /env and the index's datasets, and the close
 * -- to learn what a few kilobytes say.
 *
 * Layout (integers little-endian), at the very end of the file, after
 * HDF5's end of allocation (HDF5 and h5py ignore bytes past it):
 *   body:
 *       0  u32 version (1)          4  u32 flags (ULP__MAP_*)
 *       8  u64 file offset of the journal's first block (ULP__INDEX_NO_JOURNAL:
 *          none, a copy)
 *      16  i64 format_version      24  i64 created_unix_ns
 *      32  u32 /run entries        36  u32 /env entries
 *      40  u64 runs of the records (n)
 *      48  n x (u64 file offset, u64 bytes): /index/records, in order
 *          then strings, each a u32 byte count, the bytes and a NUL:
 *          format, label, writer, then /run's and /env's key and value
 *          pairs (strings as written: the writer's are all strings)
 *          with ULP__MAP_HAS_OBSERVED, then a u32 count and /observed's
 *          pairs (a flag that readers before /observed do not know: they
 *          read such a file through HDF5, which they did not need to
 *          change for it)
 *   footer (ULP__MAP_FOOTER_BYTES):
 *       0  "ULPOMAP1"
 *       8  u64 body bytes          16  u64 file offset of /index/seal
 *      24  u32 CRC-32 of the body  28  u32 0
 *
 * The writer appends it after H5Fclose and before the seal's hash, so the
 * hash and the seal's file size cover it: readers that do not know it see
 * an unchanged, sealed file.  A reader trusts it only where it trusts the
 * seal without hashing (the stamp, index.h) and the journal's closed mark
 * is set (a copy has no journal: its trusted seal says it was written
 * whole); anything else, and any flag it does not know, sends it through
 * HDF5 as before.  The writer and ulp_snapshot_copy write it through one
 * writer (index_write.h).
 */
#ifndef ULPPROF_FORMAT_OPEN_MAP_H
#define ULPPROF_FORMAT_OPEN_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "index.h"

#define ULP__MAP_MAGIC        "ULPOMAP1"
#define ULP__MAP_FOOTER_BYTES 32
#define ULP__MAP_VERSION      1
#define ULP__MAP_FIXED        48 /* body bytes before the runs */

enum {
    ULP__MAP_HAS_TRACE = 1u << 0,    /* /trace exists: read it through HDF5  */
    ULP__MAP_HAS_OBSERVED = 1u << 1, /* /observed exists: its pairs follow   */
    ULP__MAP_HAS_KEPT = 1u << 2      /* /digests keeps captures: read through HDF5 */
};

typedef struct ulp__map_kv {
    const char *key, *value;
} ulp__map_kv;

/* A map's content; decoded strings point into the body, NUL-terminated. */
typedef struct ulp__open_map {
    uint32_t flags;
    uint64_t journal;
    int64_t format_version, created_unix_ns;
    const char *format, *label, *writer;
    const ulp__map_kv *run, *env, *observed;
    uint32_t nrun, nenv, nobserved; /* nobserved: with ULP__MAP_HAS_OBSERVED */
    const ulp__index_mem *runs;     /* off and len; p unused */
    uint64_t nruns;
} ulp__open_map;

/*
 * Body and footer of `m`, for a seal at `seal_off`, in a new buffer
 * (*out, *len; free()): 0, or -1 out of memory or too large.
 */
int ulp__map_encode(const ulp__open_map *m, uint64_t seal_off, unsigned char **out, size_t *len);

/*
 * Appends the encoded map (`len` bytes) at the end of the file `fd`: after
 * H5Fclose, before the seal's hash.  0, or -1 (what was appended, if
 * anything, is no valid map).
 */
int ulp__map_append(int fd, const unsigned char *map, size_t len);

/*
 * The footer `f` of a file of `file_size` bytes: where its body starts and
 * how long it is, the seal's offset and the body's CRC.  0, or -1 when it
 * is no footer (then the file has no map).
 */
int ulp__map_footer(const unsigned char f[ULP__MAP_FOOTER_BYTES], uint64_t file_size,
                    uint64_t *body_off, uint64_t *body_len, uint64_t *seal_off, uint32_t *crc);

/*
 * Decodes the `len` bytes of `body` (CRC `crc`) into *m, pointing into
 * `body`; the arrays of kv pairs and runs are allocated (ulp__map_release).
 * 0, or -1 when anything is out of place: wrong CRC, an unknown version, a
 * count or length past the body, a string without its NUL or with one
 * inside, bytes left over.
 */
int ulp__map_decode(const unsigned char *body, size_t len, uint32_t crc, ulp__open_map *m);

/* Frees what ulp__map_decode() allocated. */
void ulp__map_release(ulp__open_map *m);

#endif /* ULPPROF_FORMAT_OPEN_MAP_H */

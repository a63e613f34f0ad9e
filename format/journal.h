/*
 * The capture journal: a second, append-only index of a snapshot's captures,
 * kept inside the file (FORMAT.md, "Capture journal").
 *
 * Why it exists: HDF5 1.10 updates a group's B-tree and name heap in place.
 * When SIGKILL lands inside a multi-page write(2), Linux may have copied
 * only the first pages, and the half-updated group can no longer be listed
 * -- taking every earlier capture with it, though their headers and bytes
 * are intact.  The journal names each capture's object header by address,
 * so a reader can reach every capture without the groups.  Its records are
 * only ever appended, each in one write with its own CRC, so a torn write
 * costs at most the record it was writing.
 *
 * Layout (all integers little-endian):
 *   block header, 32 bytes, at the start of every block:
 *     0  "ULPJRNL1" for the first block (/journal), "ULPJRNL+" for the later
 *        ones (so a search for the first block never takes a later one)
 *     8  u64 file offset of this header (a copy found elsewhere is not it)
 *    16  u64 block size in bytes, header included
 *    24  u32 CRC-32 of bytes 0..23
 *    28  u32 first block: "CLSD" once the writer closed the file cleanly
 *            (written last, after HDF5 closed the file), else zero
 *   records, 8-byte aligned, one after the other from byte 32:
 *     0  u32 CRC-32 of bytes 4..length-1
 *     4  u32 length: 40 + name length, rounded up to 8
 *     8  u32 kind: 1 capture, 2 next block, 3 kept capture
 *    12  u32 name length (bytes, no terminator)
 *    16  i64 capture: seq                 next: 0          kept: kept_seq
 *    24  i64 capture: occurrence          next: size of the next block
 *                                                          kept: kept_occurrence
 *    32  u64 capture: object header addr  next: file offset of the next block
 *                                                          kept: time_ns
 *    40  name (UTF-8), zero padding; kept: the payload of format/journal_kept.h
 *   A record of length 0 (never written) ends the journal; so does one whose
 *   CRC does not match (torn).  A reader steps over a valid record of a kind
 *   it does not know (kind 3 keeps the length rule, its payload in the name
 *   field, so that readers from before it read such a journal as before:
 *   they skip it).  A kept record whose CRC holds but that this writer could
 *   not have written (its payload does not parse, its name id undefined)
 *   ends the kept captures read from the journal (format/snapshot_kept_journal.c).
 *
 * Only the codec lives here; the writer (format/writer_journal.c) appends and the
 * reader (format/snapshot_journal.c) walks.
 */
#ifndef ULPPROF_FORMAT_JOURNAL_H
#define ULPPROF_FORMAT_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

#define ULP__JOURNAL_DATASET      "journal"  /* the first block: /journal, uint8 */
#define ULP__JOURNAL_MAGIC        "ULPJRNL1" /* first block                      */
#define ULP__JOURNAL_MAGIC_LATER  "ULPJRNL+" /* blocks a next record leads to    */
#define ULP__JOURNAL_HEADER_BYTES 32
#define ULP__JOURNAL_RECORD_FIXED 40 /* record bytes before the name     */
#define ULP__JOURNAL_CLOSED_AT    28 /* header byte of the closed mark   */
#define ULP__JOURNAL_CLOSED       "CLSD"

typedef enum ulp__journal_kind {
    ULP__JOURNAL_CAPTURE = 1,
    ULP__JOURNAL_NEXT = 2,
    ULP__JOURNAL_KEPT = 3 /* a capture kept in /digests, whole (journal_kept.h) */
} ulp__journal_kind;

typedef struct ulp__journal_record {
    uint32_t kind; /* ulp__journal_kind                                */
    int64_t seq;
    int64_t occurrence; /* NEXT: the next block's size                      */
    uint64_t addr;      /* CAPTURE: object header; NEXT: next block offset;
                           KEPT: time_ns                                   */
    const char *name;   /* not terminated; points into the decoded buffer
                           (KEPT: the payload)                             */
    size_t name_len;
} ulp__journal_record;

/* CRC-32 (IEEE 802.3, zlib's crc32()) of n bytes. */
uint32_t ulp__crc32(const void *p, size_t n);

enum { ULP__JOURNAL_FIRST_BLOCK = 1, ULP__JOURNAL_LATER_BLOCK = 2 };

/*
 * Fills the 32-byte header of a block at file offset `self` of `bytes`
 * bytes; `first` says whether it is the first block.
 */
void ulp__journal_header_encode(unsigned char out[ULP__JOURNAL_HEADER_BYTES], uint64_t self,
                                uint64_t bytes, int first);

/*
 * Whether `in` is a valid header of a block at file offset `self`: returns
 * ULP__JOURNAL_FIRST_BLOCK or ULP__JOURNAL_LATER_BLOCK and sets *bytes to
 * the block's size, or returns 0.
 */
int ulp__journal_header_decode(const unsigned char in[ULP__JOURNAL_HEADER_BYTES], uint64_t self,
                               uint64_t *bytes);

/* Bytes a record with a name of `name_len` bytes takes; 0 if that overflows. */
size_t ulp__journal_record_size(size_t name_len);

/* Encodes `r` into `out` (ulp__journal_record_size(r->name_len) bytes); returns that size. */
size_t ulp__journal_record_encode(unsigned char *out, const ulp__journal_record *r);

/* The length field of the record whose first ULP__JOURNAL_RECORD_FIXED bytes are `in`. */
uint32_t ulp__journal_record_length(const unsigned char *in);

/*
 * Decodes the record at `in`, of which `avail` bytes belong to the block.
 * Returns the record's length, or 0 when there is no valid record there
 * (the end of the journal: unwritten, torn, or not a record).
 */
size_t ulp__journal_record_decode(const unsigned char *in, size_t avail, ulp__journal_record *r);

/*
 * Reads / writes exactly n bytes at file offset `off` (retrying after
 * EINTR and short transfers); 0, or -1 with errno set (0 for end of file).
 * Journal records are written and read with them, beside HDF5's own I/O.
 */
int ulp__journal_pread(int fd, void *buf, size_t n, uint64_t off);
int ulp__journal_pwrite(int fd, const void *buf, size_t n, uint64_t off);

#endif /* ULPPROF_FORMAT_JOURNAL_H */

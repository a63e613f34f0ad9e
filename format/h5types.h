/*
 * The HDF5 side of the snapshot contract (FORMAT.md): file types for each
 * dtype, and small attribute helpers shared by the writer and the reader.
 * Internal to the ulpprof libraries.
 */
#ifndef ULPPROF_FORMAT_H5TYPES_H
#define ULPPROF_FORMAT_H5TYPES_H

#include <hdf5.h>
#include <stdint.h>

#include "ulpprof/dtype.h"
#include "ulpprof/status.h"

#define ULP__FORMAT_NAME "ulpprof-snapshot"

/*
 * A new HDF5 type id for the file (and memory) type of `dtype`, exactly as
 * FORMAT.md describes it; the caller closes it with H5Tclose().  Negative
 * on an invalid dtype or an HDF5 failure.
 */
hid_t ulp__h5_file_type(ulp_dtype dtype);

/*
 * Whether a stored type is acceptable for `dtype`: same size and byte order,
 * float or integer class.  Readers move raw bits, so a bf16 stored as a
 * 16-bit integer (as some h5py scripts do) is accepted; a 4-byte type under
 * a `bf16` attribute is not.
 */
int ulp__h5_type_fits(hid_t type, ulp_dtype dtype);

/*
 * 0 when `type` is, or holds (as a compound member, or as the base of an
 * array, variable-length or enum type), an integer whose bit
 * offset and precision lie past its bytes (or a precision of 0): a damaged
 * file's type, which HDF5 1.10 converts from bits past the value (a
 * different number on each read); else 1.  Readers refuse such a type.
 */
int ulp__h5_ints_sound(hid_t type);

/*
 * Whether dataset ds's storage holds every element its dataspace names:
 * always for a chunked one (a chunk not written reads as the fill
 * value); for a contiguous or compact one, its storage size at least the
 * elements times the file type's size.  A killed writer's torn header can
 * name a dataspace larger than its storage, and HDF5 1.10's read then
 * copies past its own buffer: such a dataset is not read.
 */
int ulp__h5_storage_whole(hid_t ds);

/* Writes a scalar attribute on `obj`; 0 on success, negative on failure. */
int ulp__h5_attr_write_str(hid_t obj, const char *name, const char *value);
int ulp__h5_attr_write_i32(hid_t obj, const char *name, int32_t value);
int ulp__h5_attr_write_i64(hid_t obj, const char *name, int64_t value);

/*
 * Fixes the metadata cache of files opened with `fapl` at `bytes` (no
 * growth, no shrinking).  HDF5's default grows toward 32 MiB of object
 * headers, about ten times that decoded in memory; the writer and the
 * reader visit each capture's objects once, in order, and need little.
 */
void ulp__h5_fapl_fixed_cache(hid_t fapl, size_t bytes);

/*
 * A group creation list for a group that keeps a few links (at most
 * `links`, names of up to `name_len` bytes) and attributes: /run, /env,
 * /observed, /index, /trace and a digest name's group.  A "new-style"
 * group (link creation order tracked; HDF5 1.8+ and h5py read it as any
 * group) whose links stay in its object header, sized for them up front,
 * and no object times.  An old-style group costs a B-tree node and a local
 * heap even when empty, and a symbol-table node of the file's leaf K (64:
 * 5 KiB) at its first link.  -1 on failure; the caller closes it.
 */
hid_t ulp__h5_small_gcpl(unsigned links, unsigned name_len);

/*
 * Sets on `dcpl` what a dataset that never gets attributes (the digests'
 * rows) keeps in its header: no object times, and a header sized to its
 * messages (HDF5 1.10.5+; older HDF5 gives every dataset header 256 bytes
 * whatever it holds).  0, or -1 on failure.
 */
int ulp__h5_dcpl_no_attrs(hid_t dcpl);

/* Turns off HDF5's automatic error stack printing for this thread's calls. */
void ulp__h5_silence(void);

#endif /* ULPPROF_FORMAT_H5TYPES_H */

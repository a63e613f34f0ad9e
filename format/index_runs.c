/* The records' runs in the file (index_runs.h). */
#include "index_runs.h"

#include <stdlib.h>

/* The most chunks kept track of; more are read through H5Dread. */
#define RUNS_MAX ((uint64_t)1 << 20)

int ulp__index_runs(hid_t d, uint64_t bytes, uint64_t file_size, ulp__index_mem **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    hid_t dcpl = H5Dget_create_plist(d);
    if (dcpl < 0)
        return -1;
    H5D_layout_t layout = H5Pget_layout(dcpl);
    hsize_t cdim = 0;
    int ok = (layout == H5D_CONTIGUOUS || (layout == H5D_CHUNKED && H5Pget_nfilters(dcpl) == 0 &&
                                           H5Pget_chunk(dcpl, 1, &cdim) == 1 && cdim > 0));
    H5Pclose(dcpl);
    if (!ok)
        return -1;
    /* Storage never allocated (no record written) reads its fill value, through HDF5: with a
     * user block HDF5 1.10.8 answers H5Dget_offset() with the block's size - 1 there
     * (docs/hdf5.md), a plausible offset. */
    H5D_space_status_t alloc = H5D_SPACE_STATUS_ERROR;
    if (layout == H5D_CONTIGUOUS && bytes > 0 &&
        (H5Dget_space_status(d, &alloc) < 0 || alloc == H5D_SPACE_STATUS_NOT_ALLOCATED))
        return -1;
    if (layout == H5D_CONTIGUOUS)
        cdim = bytes > 0 ? bytes : 1;
    /* At most a run a chunk; our writers' chunks are 64 KiB, a copy's records contiguous. */
    uint64_t chunks = (bytes + cdim - 1) / cdim;
    ulp__index_mem *runs =
        chunks <= RUNS_MAX ? malloc((size_t)(chunks ? chunks : 1) * sizeof *runs) : NULL;
    if (runs == NULL)
        return -1;
    size_t k = 0; /* runs[k - 1]: the run being extended */
    for (uint64_t at = 0; at < bytes; at += cdim) {
        uint64_t len = bytes - at < cdim ? bytes - at : cdim;
        haddr_t addr = HADDR_UNDEF;
        if (layout == H5D_CONTIGUOUS) {
            addr = H5Dget_offset(d);
        } else {
            hsize_t coord = at, size = 0;
            unsigned mask = 0;
            if (H5Dget_chunk_info_by_coord(d, &coord, &mask, &addr, &size) < 0 || mask != 0 ||
                size != cdim)
                addr = HADDR_UNDEF;
        }
        if (addr == HADDR_UNDEF || addr > file_size || file_size - addr < len) {
            free(runs);
            return -1;
        }
        if (k > 0 && addr == runs[k - 1].off + runs[k - 1].len)
            runs[k - 1].len += len;
        else
            runs[k++] = (ulp__index_mem){addr, len, NULL};
    }
    *out = runs;
    *n = k;
    return 0;
}

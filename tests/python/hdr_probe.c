/*
 * hdr_probe FILE SA SL BASE ADDR...: the object header reader of files
 * without the capture index (ulp__hdr_parse, format/snapshot_hdr.c) on the
 * headers at HDF5 addresses ADDR of FILE, whose sizes of offsets and lengths
 * are SA and SL and whose user block is BASE bytes.  Prints one line per
 * address: "ADDR RC" and, when the reader describes it (RC 1), "dtype
 * SHAPE OFFSET ROLE" with SHAPE comma-separated ("-" for a scalar), OFFSET
 * the file offset of element 0 ("-" when none) and ROLE "-" when absent,
 * then "ROW_RANK POSITIONS REQUESTS INPUTS": the integers comma-separated,
 * the inputs '|'-separated, "-" for an absent attribute, "=" an empty one.
 * For tests/python/test_foreign_random.py, which checks that the headers
 * it writes for the reader are read by it, and read right.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/journal.h"
#include "format/snapshot_hdr.h"

static int file_read(void *ctx, void *buf, size_t n, uint64_t off)
{
    return ulp__journal_pread(*(const int *)ctx, buf, n, off);
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: hdr_probe FILE SA SL BASE ADDR...\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        fprintf(stderr, "hdr_probe: cannot open '%s'\n", argv[1]);
        return 2;
    }
    ulp__hdr_file f = {0};
    f.sa = (unsigned)strtoul(argv[2], NULL, 10);
    f.sl = (unsigned)strtoul(argv[3], NULL, 10);
    f.base = strtoull(argv[4], NULL, 10);
    f.src = (ulp__hdr_src){.read = file_read, .ctx = &fd, .size = (uint64_t)sb.st_size};
    for (int i = 5; i < argc; i++) {
        uint64_t addr = strtoull(argv[i], NULL, 10), offset = 0;
        ulp_capture_info c = {0};
        char *role = NULL;
        void *tokens = NULL;
        int rc = ulp__hdr_parse(&f, addr, &c, &offset, &role, &tokens);
        printf("%" PRIu64 " %d", addr, rc);
        if (rc == 1) {
            printf(" %s ", ulp_dtype_name(c.dtype));
            for (int k = 0; k < c.ndim; k++)
                printf("%s%" PRId64, k ? "," : "", c.shape[k]);
            if (c.ndim == 0)
                printf("-");
            if (offset == ULP__NO_OFFSET)
                printf(" -");
            else
                printf(" %" PRIu64, offset);
            printf(" %s", role != NULL ? role : "-");
            /* the token attributes: row rank, positions, requests, inputs ("-": none) */
            printf(" %d ", (int)c.row_rank);
            for (uint64_t j = 0; c.positions != NULL && j < c.rows; j++)
                printf("%s%" PRId64, j ? "," : "", c.positions[j]);
            fputs(c.positions == NULL ? "-" : c.rows == 0 ? "=" : "", stdout);
            printf(" ");
            for (uint64_t j = 0; c.requests != NULL && j < c.rows; j++)
                printf("%s%" PRId64, j ? "," : "", c.requests[j]);
            fputs(c.requests == NULL ? "-" : c.rows == 0 ? "=" : "", stdout);
            printf(" ");
            for (size_t j = 0; c.inputs != NULL && j < c.n_inputs; j++)
                printf("%s%s", j ? "|" : "", c.inputs[j]);
            fputs(c.inputs == NULL ? "-" : c.n_inputs == 0 ? "=" : "", stdout);
        }
        printf("\n");
        free(role);
        free(tokens);
    }
    ulp__hdr_release(&f);
    close(fd);
    return 0;
}

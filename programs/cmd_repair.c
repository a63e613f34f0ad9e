/*
 * `ulpprof repair IN.h5 OUT.h5`: writes a clean copy of a snapshot whose
 * writer was killed.  ulpprof itself reads such a file as it is (through its
 * capture journal); the copy is for the other HDF5 tools, which read the
 * groups a kill may have torn.  `--digests` writes the digest-only
 * rendition instead: the file digest mode would have written of the same
 * tensors.  IN is never changed.
 */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"

#define REPAIR_USAGE "ulpprof repair [--digests] IN.h5 OUT.h5"

static void repair_help(void)
{
    printf("usage: " REPAIR_USAGE "\n"
           "\n"
           "Writes OUT.h5, a clean copy of IN.h5 with every capture ulpprof reads\n"
           "in it: for a snapshot whose writer was killed (ulpprof reads it through\n"
           "its capture journal, and says so), OUT.h5 is the file h5py, h5dump and\n"
           "other HDF5 tools can read.  OUT.h5 has a capture index, so it also\n"
           "serves as a fast-opening copy of a file of many captures without a\n"
           "valid one (written by h5py, or edited after its writer closed it).\n"
           "IN.h5 is not changed; OUT.h5 must not exist.\n"
           "\n"
           "With --digests, OUT.h5 is IN.h5's digest-only rendition: the file a\n"
           "capture of the same tensors in mode \"digest\" writes -- one XXH64\n"
           "digest per (request, position) row of each capture in /digests, the\n"
           "produced tokens and fed token ids in full, /run, /env and /observed; no\n"
           "tensor and no kernel trace.  Of a file captured in mode \"data\" or\n"
           "\"both\", it is what `ulpprof diff` and `ulpprof streams --activations`\n"
           "compare by digest, at 8 bytes a row.\n"
           "\n"
           "options:\n"
           "      --digests  write the digest-only rendition\n"
           "  -h, --help     show this help\n"
           "\n"
           "Exit status: 0 written, 2 error (nothing is left at OUT.h5).\n");
}

/* IN and OUT from the command line: -1 to go on, else the exit status. */
static int repair_parse(int argc, char **argv, const char **in, const char **out, int *digests)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'}, {"digests", no_argument, NULL, 'd'}, {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        if (c == 'h') {
            repair_help();
            return CLI_EXIT_OK;
        }
        if (c == 'd') {
            *digests = 1;
            continue;
        }
        return cli_bad_option("repair", REPAIR_USAGE, argv, c);
    }
    if (argc - optind != 2) {
        cli_error("repair: need IN.h5 and OUT.h5\nusage: " REPAIR_USAGE);
        return CLI_EXIT_ERROR;
    }
    *in = argv[optind];
    *out = argv[optind + 1];
    return -1;
}

int cmd_repair(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    int digests = 0;
    int rc = repair_parse(argc, argv, &in, &out, &digests);
    if (rc >= 0)
        return rc;
    /* Run: read what can be read, copy it. */
    cli_repair_hint = 0; /* the reader's warning need not point here */
    ulp_snapshot *s = cli_open_snapshot(in);
    if (s == NULL)
        return CLI_EXIT_ERROR;
    ulp_error err;
    ulp_status st =
        digests ? ulp_snapshot_copy_digests(s, out, &err) : ulp_snapshot_copy(s, out, &err);
    size_t n = ulp_snapshot_capture_count(s), k = ulp_snapshot_kernel_count(s);
    ulp_snapshot_close(s);
    if (st != ULP_OK) {
        cli_error("%s", err.msg);
        return CLI_EXIT_ERROR;
    }
    /* Print: what was copied. */
    printf("%s: %zu capture%s", out, n, n == 1 ? "" : "s");
    if (k > 0 && !digests) /* the rendition carries no trace */
        printf(", %zu kernel launch%s", k, k == 1 ? "" : "es");
    printf(digests ? " as digests from %s\n" : " copied from %s\n", in);
    return CLI_EXIT_OK;
}

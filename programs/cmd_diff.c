/*
 * `ulpprof diff [<options>] A B`: compares two snapshots and reports where
 * they diverge.  Exit status as diff(1): 0 identical, 1 different, 2 error.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ulpprof/diff.h"
#include "ulpprof/format.h"
#include "ulpprof/plot.h"
#include "ulpprof/report.h"

#define DIFF_USAGE                                                                                 \
    "ulpprof diff [--format table|markdown|csv|json] [--out FILE] [--match GLOB]\n"                \
    "                    [--role ROLE] [--rows head:N|tail:N|A:B] [--temperature T]...\n"          \
    "                    [--threads N] [--plot DIR]\n"                                             \
    "                    A.h5 B.h5"

static void diff_help(void)
{
    printf("usage: " DIFF_USAGE "\n"
           "\n"
           "Pairs the captures of two snapshots by name and occurrence and compares\n"
           "each pair bit for bit (captures with positions on both sides: all\n"
           "occurrences of a name, row by row on the (request, position) keys both\n"
           "runs have, and where each difference was introduced): elements that differ, max and "
           "mean ULP distance in\n"
           "the tensor's own format, a ULP histogram, max |a-b|, NaN/inf mismatches\n"
           "and the worst element.  Then: the first divergence and how it grows to\n"
           "the last activation, the kernels behind it (when the files have a trace),\n"
           "the logits' argmax flips and why, and the ladder rung the pair tests.\n"
           "\n"
           "options:\n"
           "  -f, --format FMT       table (default), markdown, csv or json\n"
           "  -o, --out FILE         write the report to FILE instead of stdout\n"
           "  -m, --match GLOB       only captures whose name matches GLOB (fnmatch)\n"
           "  -r, --role ROLE        only captures of this role (activation, logits, kv,\n"
           "                         input, weight)\n"
           "      --rows SPEC        captures without positions: compare only rows of the\n"
           "                         token axis (next-to-last axis): head:N, tail:N or A:B\n"
           "  -t, --temperature T    for logits: total variation and the probability that\n"
           "                         same-draw sampling at temperature T differs\n"
           "                         (repeatable, at most %d)\n"
           "  -j, --threads N        worker threads (default: online CPUs, at most 8)\n"
           "      --chunk-elements N elements per read and thread (default 1048576)\n"
           "      --color WHEN       auto (default), always or never\n"
           "      --plot DIR         also draw the gnuplot plots (amplification curve,\n"
           "                         ULP heatmap, logits margins) into DIR\n"
           "  -h, --help             show this help\n"
           "\n"
           "exit status: 0 identical, 1 the snapshots differ, 2 error\n",
           ULP_DIFF_MAX_TEMPERATURES);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

int cmd_diff(int argc, char **argv)
{
    enum { OPT_CHUNK = 256, OPT_COLOR, OPT_PLOT, OPT_ROWS };
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"out", required_argument, NULL, 'o'},
        {"match", required_argument, NULL, 'm'},
        {"role", required_argument, NULL, 'r'},
        {"temperature", required_argument, NULL, 't'},
        {"threads", required_argument, NULL, 'j'},
        {"chunk-elements", required_argument, NULL, OPT_CHUNK},
        {"color", required_argument, NULL, OPT_COLOR},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"rows", required_argument, NULL, OPT_ROWS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ulp_diff_options opts;
    ulp_report_format format = ULP_REPORT_TABLE;
    const char *out_path = NULL, *color = "auto", *plot_dir = NULL;
    int c;

    ulp_diff_options_init(&opts);
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":f:o:m:r:t:j:h", longopts, NULL)) != -1) {
        uint64_t v;
        switch (c) {
        case 'f': {
            int fmt = ulp_report_format_from_name(optarg);
            if (fmt < 0) {
                fprintf(stderr, "ulpprof diff: unknown format '%s' (table, markdown, csv, json)\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            format = (ulp_report_format)fmt;
            break;
        }
        case 'o':
            out_path = optarg;
            break;
        case 'm':
            opts.match = optarg;
            break;
        case 'r':
            if (ulp_role_from_name(optarg) < 0) {
                fprintf(stderr,
                        "ulpprof diff: unknown role '%s' (activation, logits, kv, input, "
                        "weight)\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            opts.role = optarg;
            break;
        case OPT_ROWS:
            opts.rows = optarg;
            break;
        case 't': {
            char *end;
            double t = strtod(optarg, &end);
            if (end == optarg || *end || !(t > 0) || isinf(t)) {
                fprintf(stderr, "ulpprof diff: temperature '%s' is not a positive number\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            if (opts.n_temperatures == ULP_DIFF_MAX_TEMPERATURES) {
                fprintf(stderr, "ulpprof diff: at most %d temperatures\n",
                        ULP_DIFF_MAX_TEMPERATURES);
                return CLI_EXIT_ERROR;
            }
            opts.temperatures[opts.n_temperatures++] = t;
            break;
        }
        case 'j':
            if (parse_u64(optarg, &v) || v < 1 || v > 64) {
                fprintf(stderr, "ulpprof diff: threads '%s' is not a number from 1 to 64\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            opts.threads = (int)v;
            break;
        case OPT_CHUNK:
            if (parse_u64(optarg, &v) || v < 1 || v > ((uint64_t)1 << 30)) {
                fprintf(stderr,
                        "ulpprof diff: chunk-elements '%s' is not a number from 1 to "
                        "2^30\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            opts.chunk_elements = v;
            break;
        case OPT_COLOR:
            if (strcmp(optarg, "auto") && strcmp(optarg, "always") && strcmp(optarg, "never")) {
                fprintf(stderr, "ulpprof diff: --color takes auto, always or never\n");
                return CLI_EXIT_ERROR;
            }
            color = optarg;
            break;
        case OPT_PLOT:
            plot_dir = optarg;
            break;
        case 'h':
            diff_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("diff", DIFF_USAGE, argv, c);
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "ulpprof diff: expected two snapshot files, got %d\nusage: %s\n",
                argc - optind, DIFF_USAGE);
        return CLI_EXIT_ERROR;
    }
    if (cli_output_is_input("diff", out_path, argv + optind, 2) ||
        cli_plot_dir_has_input("diff", plot_dir, argv + optind, 2))
        return CLI_EXIT_ERROR;

    int rc = CLI_EXIT_ERROR;
    ulp_snapshot *a = NULL, *b = NULL;
    ulp_diff_result *res = NULL;
    FILE *out = stdout;
    ulp_error err;

    a = cli_open_snapshot(argv[optind]);
    if (a == NULL)
        goto cleanup;
    b = cli_open_snapshot(argv[optind + 1]);
    if (b == NULL)
        goto cleanup;
    opts.progress = isatty(STDERR_FILENO);
    if (ulp_diff_run(a, b, &opts, &res, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        goto cleanup;
    }
    if (out_path) {
        FILE *o = fopen(out_path, "w");
        if (o == NULL) {
            cli_error("cannot open '%s' for writing: %s", out_path, strerror(errno));
            goto cleanup;
        }
        out = o;
    }
    unsigned flags = 0;
    if (format == ULP_REPORT_TABLE &&
        (strcmp(color, "always") == 0 || (strcmp(color, "auto") == 0 && cli_use_color(out))))
        flags |= ULP_REPORT_COLOR;
    if (ulp_report_write(res, format, out, flags, &err) != ULP_OK) {
        cli_error("cannot write '%s': %s", out_path ? out_path : "standard output", err.msg);
        goto cleanup;
    }
    if (out != stdout) {
        FILE *o = out;
        out = stdout;
        if (fclose(o) != 0) {
            cli_error("cannot write '%s': %s", out_path, strerror(errno));
            goto cleanup;
        }
    }
    if (plot_dir) {
        ulp_plot_options po;
        ulp_plot_options_init(&po);
        po.dir = plot_dir;
        ulp_status ps = ulp_plot_write(res, &po, NULL, &err);
        /* Without gnuplot the report above still stands: say so, keep its exit status. */
        if (ps == ULP_EUNSUPPORTED) {
            fprintf(stderr, "ulpprof: %s\n", err.msg);
        } else if (ps != ULP_OK) {
            cli_error("%s", err.msg);
            goto cleanup;
        }
    }
    rc = res->identical ? CLI_EXIT_OK : CLI_EXIT_DIFFER;

cleanup:
    if (out != stdout)
        fclose(out);
    ulp_diff_result_free(res);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return rc;
}

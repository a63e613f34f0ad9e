/*
 * `ulpprof plot A.h5 B.h5 -o DIR`: compares two snapshots as `ulpprof diff`
 * does and draws the comparison with gnuplot (plot.h): the amplification
 * curve, the ULP heatmap and the logits margins, as PNG and SVG, with the
 * data files and scripts beside them.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "ulpprof/diff.h"
#include "ulpprof/plot.h"

#define PLOT_USAGE                                                                                 \
    "ulpprof plot [--match GLOB] [--role ROLE] [--threads N] [--gnuplot PROG]\n"                   \
    "                    [--no-render] -o DIR A.h5 B.h5"

static void plot_help(void)
{
    printf("usage: " PLOT_USAGE "\n"
           "\n"
           "Compares two snapshots (as 'ulpprof diff') and writes into DIR, through\n"
           "gnuplot, each as PNG and SVG:\n"
           "  amplification   per layer, the fraction of differing elements and the\n"
           "                  max |a - b| on log scales, the first divergence marked\n"
           "  ulp_heatmap     per layer, how many elements differ by 1, 2, 3-4, ... ULP\n"
           "  logits_margin   per logits row, top-1/top-2 margin against the largest\n"
           "                  logit perturbation, flipped rows marked\n"
           "The data (.dat) and gnuplot scripts (.gp) sit beside the images;\n"
           "'cd DIR && gnuplot amplification.gp' redraws one.\n"
           "\n"
           "options:\n"
           "  -o, --out DIR        output directory (created if missing)\n"
           "  -m, --match GLOB     only captures whose name matches GLOB\n"
           "  -r, --role ROLE      only captures of this role\n"
           "  -j, --threads N      comparison threads (default 2)\n"
           "      --gnuplot PROG   gnuplot program (default $ULPPROF_GNUPLOT or gnuplot)\n"
           "      --no-render      write the data and scripts only\n"
           "  -h, --help           show this help\n"
           "\n"
           "exit status: 0 the plots were written, 2 error (gnuplot missing included:\n"
           "the data and scripts are still written)\n");
}

int cmd_plot(int argc, char **argv)
{
    enum { OPT_GNUPLOT = 256, OPT_NO_RENDER };
    static const struct option longopts[] = {
        {"out", required_argument, NULL, 'o'},
        {"match", required_argument, NULL, 'm'},
        {"role", required_argument, NULL, 'r'},
        {"threads", required_argument, NULL, 'j'},
        {"gnuplot", required_argument, NULL, OPT_GNUPLOT},
        {"no-render", no_argument, NULL, OPT_NO_RENDER},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ulp_diff_options dopts;
    ulp_plot_options popts;
    ulp_diff_options_init(&dopts);
    ulp_plot_options_init(&popts);
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:m:r:j:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            popts.dir = optarg;
            break;
        case 'm':
            dopts.match = optarg;
            break;
        case 'r':
            dopts.role = optarg;
            break;
        case 'j': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 64) {
                fprintf(stderr, "ulpprof plot: threads '%s' is not a number from 1 to 64\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            dopts.threads = (int)v;
            break;
        }
        case OPT_GNUPLOT:
            popts.gnuplot = optarg;
            break;
        case OPT_NO_RENDER:
            popts.no_render = 1;
            break;
        case 'h':
            plot_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("plot", PLOT_USAGE, argv, c);
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "ulpprof plot: expected two snapshot files, got %d\nusage: %s\n",
                argc - optind, PLOT_USAGE);
        return CLI_EXIT_ERROR;
    }
    if (!popts.dir) {
        fprintf(stderr, "ulpprof plot: no output directory (-o DIR)\nusage: %s\n", PLOT_USAGE);
        return CLI_EXIT_ERROR;
    }
    if (cli_plot_dir_has_input("plot", popts.dir, argv + optind, 2))
        return CLI_EXIT_ERROR;

    int rc = CLI_EXIT_ERROR;
    ulp_snapshot *a = NULL, *b = NULL;
    ulp_diff_result *res = NULL;
    ulp_error err;
    ulp_plot_files files;
    ulp_error_clear(&err);

    if (!(a = cli_open_snapshot(argv[optind])) || !(b = cli_open_snapshot(argv[optind + 1])))
        goto cleanup;
    dopts.progress = isatty(STDERR_FILENO);
    if (ulp_diff_run(a, b, &dopts, &res, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        goto cleanup;
    }
    ulp_status st = ulp_plot_write(res, &popts, &files, &err);
    for (int i = 0; i < files.n; i++)
        printf("%s\n", files.path[i]);
    if (st != ULP_OK) {
        cli_error("%s", err.msg);
        goto cleanup;
    }
    rc = CLI_EXIT_OK;

cleanup:
    ulp_diff_result_free(res);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return rc;
}

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

typedef struct plot_cli {
    ulp_diff_options dopts;
    ulp_plot_options popts;
    const char *path_a, *path_b;
} plot_cli;

/* Fills `o` from the command line: -1 to go on, else the exit status. */
static int plot_parse(int argc, char **argv, plot_cli *o)
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
    ulp_diff_options_init(&o->dopts);
    ulp_plot_options_init(&o->popts);
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":o:m:r:j:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'o':
            o->popts.dir = optarg;
            break;
        case 'm':
            o->dopts.match = optarg;
            break;
        case 'r':
            o->dopts.role = optarg;
            break;
        case 'j': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 1 || v > 64) {
                fprintf(stderr, "ulpprof plot: threads '%s' is not a number from 1 to 64\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            o->dopts.threads = (int)v;
            break;
        }
        case OPT_GNUPLOT:
            o->popts.gnuplot = optarg;
            break;
        case OPT_NO_RENDER:
            o->popts.no_render = 1;
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
    if (!o->popts.dir) {
        fprintf(stderr, "ulpprof plot: no output directory (-o DIR)\nusage: %s\n", PLOT_USAGE);
        return CLI_EXIT_ERROR;
    }
    if (cli_plot_dir_has_input("plot", o->popts.dir, argv + optind, 2))
        return CLI_EXIT_ERROR;
    o->path_a = argv[optind];
    o->path_b = argv[optind + 1];
    return -1;
}

int cmd_plot(int argc, char **argv)
{
    plot_cli o;
    memset(&o, 0, sizeof o);
    int rc = plot_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    rc = CLI_EXIT_ERROR;
    ulp_snapshot *a = NULL, *b = NULL;
    ulp_diff_result *res = NULL;
    ulp_error err;
    ulp_plot_files files;
    ulp_error_clear(&err);

    /* Run: compare the two snapshots. */
    if (cli_open_pair(o.path_a, o.path_b, &a, &b, 0) < 0)
        goto cleanup;
    o.dopts.progress = isatty(STDERR_FILENO);
    if (ulp_diff_run(a, b, &o.dopts, &res, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        goto cleanup;
    }
    /* Print: the plots, and the files written. */
    ulp_status st = ulp_plot_write(res, &o.popts, &files, &err);
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

/*
 * `ulpprof ladder RUN... | DIR`: compares every pair of runs and says, rung
 * by rung of the determinism ladder, which condition breaks bit-equality
 * and where (ladder.h).  Exit 0 when no rung breaks, 1 when one does, 2 on
 * error.  A run that cannot be read is named on stderr and left out: the
 * ladder of the others is still printed, and the exit status is 2.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "ulpprof/contract.h"
#include "ulpprof/ladder.h"
#include "ulpprof/plot.h"
#include "ulpprof/report.h"

#define LADDER_USAGE                                                                               \
    "ulpprof ladder [-f table|markdown|json] [-o FILE] [--ignore KEY]... [--plot DIR]\n"           \
    "                      [--match GLOB] [--role ROLE] [-j N] [--contract C.json]\n"              \
    "                      RUN RUN... | DIR"

static void ladder_help(void)
{
    printf("usage: " LADDER_USAGE "\n"
           "\n"
           "Compares every pair of runs and, for each rung of the determinism ladder\n"
           "(0 repeat, 1 batch size, 2 cache, 3 block size/chunking, 4 tp/dp/ep,\n"
           "5 quantization, 6 engine, 7 vendor/device), says whether it holds (every\n"
           "pair that differs only in that rung's /run keys is bitwise identical),\n"
           "breaks (where: the first diverging capture, its layer and row, and the\n"
           "argmax flips) or is untested.  Pairs that differ in several rungs, or in a\n"
           "/run key without a rung, are shown and decide nothing.\n"
           "\n"
           "A RUN is a snapshot file or a directory of per-rank files of one run\n"
           "(ranks from /env 'rank'; ranks both runs have are compared, and a rank\n"
           "only one run has makes the pair differ).  One DIR argument: every *.h5\n"
           "file and every directory of them in it is a run.  A pair identical on no\n"
           "element (every capture empty) decides no rung; one that shares no\n"
           "capture name is an error.\n"
           "\n"
           "options:\n"
           "  -f, --format FMT   table (default), markdown or json\n"
           "  -o, --output FILE  write the report to FILE instead of stdout\n"
           "  -i, --ignore KEY   a /run key that describes a run rather than sets a\n"
           "                     condition (writers put such facts in /observed,\n"
           "                     which is never compared); it no longer keeps a pair\n"
           "                     from deciding (repeatable)\n"
           "      --plot DIR     pairwise matrix heatmap and the ladder, with gnuplot\n"
           "      --gnuplot PROG gnuplot program (default $ULPPROF_GNUPLOT or gnuplot)\n"
           "      --match GLOB   compare only captures whose name matches\n"
           "      --role ROLE    compare only captures of this role\n"
           "  -j, --jobs N       pairs compared at once (default: online CPUs)\n"
           "      --contract C   the contract's word on every pair (docs/contract.md):\n"
           "                     bug (it breaks a claim), kept, or not promised\n"
           "  -h, --help         show this help\n"
           "\n"
           "A run that cannot be read gets one line on stderr and is left out; the\n"
           "ladder of the other runs is still printed, and the exit status is 2.\n"
           "\n"
           "exit status: 0 no rung breaks, 1 a rung breaks, 2 error\n");
}

static int write_plots(const ulp_ladder_result *r, const char *dir, const char *gnuplot)
{
    ulp_plot_options po;
    ulp_plot_options_init(&po);
    po.dir = dir;
    po.gnuplot = gnuplot;
    ulp_plot_files pf;
    ulp_error err;
    ulp_error_clear(&err);
    ulp_status st = ulp_plot_ladder_write(r, &po, &pf, &err);
    if (st == ULP_EUNSUPPORTED) {
        fprintf(stderr, "ulpprof: %s\n", err.msg);
        return 0;
    }
    if (st != ULP_OK) {
        cli_error("%s", err.msg);
        return -1;
    }
    return 0;
}

typedef struct ladder_args {
    ulp_ladder_options opts;
    ulp_diff_options diff; /* opts.diff */
    ulp_report_format format;
    const char *output, *plot_dir, *gnuplot, *contract;
} ladder_args;

/* Parses the options; returns -1 to go on, else the exit status. */
static int parse(int argc, char **argv, ladder_args *a)
{
    enum { OPT_PLOT = 256, OPT_GNUPLOT, OPT_MATCH, OPT_ROLE, OPT_CONTRACT };
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"ignore", required_argument, NULL, 'i'},
        {"plot", required_argument, NULL, OPT_PLOT},
        {"gnuplot", required_argument, NULL, OPT_GNUPLOT},
        {"match", required_argument, NULL, OPT_MATCH},
        {"role", required_argument, NULL, OPT_ROLE},
        {"jobs", required_argument, NULL, 'j'},
        {"contract", required_argument, NULL, OPT_CONTRACT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":f:o:i:j:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'f': {
            int fmt = ulp_report_format_from_name(optarg);
            if (fmt < 0 || fmt == ULP_REPORT_CSV) {
                fprintf(stderr,
                        "ulpprof ladder: unknown format '%s' (table, markdown or md, json)\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            a->format = (ulp_report_format)fmt;
            break;
        }
        case 'o':
            a->output = optarg;
            break;
        case OPT_CONTRACT:
            a->contract = optarg;
            break;
        case 'i':
            if (a->opts.n_ignore == ULP_LADDER_MAX_IGNORE) {
                fprintf(stderr, "ulpprof ladder: at most %d --ignore keys\n",
                        ULP_LADDER_MAX_IGNORE);
                return CLI_EXIT_ERROR;
            }
            a->opts.ignore[a->opts.n_ignore++] = optarg;
            break;
        case 'j': {
            char *end;
            long j = strtol(optarg, &end, 10);
            if (end == optarg || *end || j < 1 || j > 1024) {
                fprintf(stderr, "ulpprof ladder: --jobs takes a number from 1 to 1024\n");
                return CLI_EXIT_ERROR;
            }
            a->opts.jobs = (int)j;
            break;
        }
        case OPT_PLOT:
            a->plot_dir = optarg;
            break;
        case OPT_GNUPLOT:
            a->gnuplot = optarg;
            break;
        case OPT_MATCH:
            a->diff.match = optarg;
            break;
        case OPT_ROLE:
            a->diff.role = optarg;
            break;
        case 'h':
            ladder_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("ladder", LADDER_USAGE, argv, c);
        }
    }
    if (argc - optind < 1) {
        fprintf(stderr, "ulpprof ladder: give two runs or more, or a directory of runs\n"
                        "usage: " LADDER_USAGE "\n");
        return CLI_EXIT_ERROR;
    }
    return -1;
}

/* The ladder opens each file through the guarded open, once, and names a run it cannot read. */
static ulp_status open_guarded(void *user, const char *path, ulp_snapshot **s, ulp_error *err)
{
    (void)user;
    return cli_open_snapshot_err(path, s, err);
}

static void left_out(void *user, const char *path, const ulp_error *err)
{
    (void)path;
    ++*(size_t *)user;
    cli_error("%s", err->msg);
}

int cmd_ladder(int argc, char **argv)
{
    ladder_args a = {.format = ULP_REPORT_TABLE};
    ulp_ladder_options_init(&a.opts);
    ulp_diff_options_init(&a.diff);
    a.diff.threads = 1; /* the pairs run in parallel: one thread each */
    a.opts.diff = &a.diff;
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    a.opts.progress = cli_use_color(stderr); /* a terminal */

    char **listed = NULL;
    size_t n = (size_t)(argc - optind);
    const char *const *paths = (const char *const *)(argv + optind);
    ulp_error err;
    ulp_error_clear(&err);
    struct stat st;
    if (n == 1) {
        if (stat(paths[0], &st) != 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "ulpprof ladder: one argument must be a directory of runs\n"
                            "usage: " LADDER_USAGE "\n");
            return CLI_EXIT_ERROR;
        }
        if (ulp_ladder_list_dir(paths[0], &listed, &n, &err) != ULP_OK) {
            cli_error("%s", err.msg);
            return CLI_EXIT_ERROR;
        }
        paths = (const char *const *)listed;
    }
    ulp_ladder_result *r = NULL;
    FILE *out = stdout;
    rc = CLI_EXIT_ERROR;
    /* A run that cannot be read is named (left_out) and the others compared. */
    size_t n_bad = 0;
    a.opts.open = open_guarded;
    a.opts.left_out = left_out;
    a.opts.user = &n_bad;
    if (ulp_ladder_compare(paths, n, &a.opts, &r, &err) != ULP_OK) {
        if (n_bad > 0 && n - n_bad < 2)
            cli_error("ladder: %zu of %zu runs can be read, and a ladder needs 2", n - n_bad, n);
        else
            cli_error("%s", err.msg);
        goto cleanup;
    }
    if (a.contract) {
        ulp_contract *ct = NULL;
        ulp_status cst = ulp_contract_read(a.contract, &ct, &err);
        if (cst == ULP_OK)
            cst = ulp_contract_judge_ladder(ct, r, &err);
        ulp_contract_free(ct);
        if (cst != ULP_OK) {
            cli_error("%s", err.msg);
            goto cleanup;
        }
    }
    if (a.output && (out = fopen(a.output, "w")) == NULL) {
        cli_error("cannot open '%s' for writing: %s", a.output, strerror(errno));
        goto cleanup;
    }
    if (ulp_ladder_report_write(r, a.format, out, 0, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        goto cleanup;
    }
    if (a.plot_dir && write_plots(r, a.plot_dir, a.gnuplot) != 0)
        goto cleanup;
    rc = CLI_EXIT_OK;
    for (int g = 0; g < ULP_LADDER_RUNGS; g++)
        if (r->rungs[g].verdict == ULP_LADDER_BREAKS)
            rc = CLI_EXIT_DIFFER;
    /* A run was left out (named above): the ladder is not the whole one asked for. */
    if (n_bad > 0)
        rc = CLI_EXIT_ERROR;

cleanup:
    if (out != stdout && out && fclose(out) != 0 && rc != CLI_EXIT_ERROR) {
        cli_error("cannot write '%s': %s", a.output, strerror(errno));
        rc = CLI_EXIT_ERROR;
    }
    for (size_t i = 0; listed && i < n; i++)
        free(listed[i]);
    free(listed);
    ulp_ladder_result_free(r);
    return rc;
}

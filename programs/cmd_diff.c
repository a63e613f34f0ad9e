/*
 * `ulpprof diff [<options>] A B`: compares two snapshots and reports where
 * they diverge.  Exit status as diff(1): 0 identical, 1 different, 2 error.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ulpprof/diff.h"
#include "ulpprof/digest.h"
#include "ulpprof/format.h"
#include "ulpprof/plot.h"
#include "ulpprof/report.h"

#define DIFF_USAGE                                                                                 \
    "ulpprof diff [--format table|markdown|md|csv|json] [--out FILE] [--match GLOB]\n"             \
    "                    [--role ROLE] [--rows head:N|tail:N|A:B] [--temperature T]...\n"          \
    "                    [--threads N] [--plot DIR] [--by name|site|auto] [--map FILE]\n"          \
    "                    [--dist] [--topk K,...]\n"                                                \
    "                    A B     (snapshot files, or run directories of per-rank files)"

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
           "A run directory (the per-rank files of one run, `record -o DIR/%%r.h5`) is\n"
           "compared rank by rank with another run: rank r of A with rank r of B, for\n"
           "the ranks both have (ranks from /env 'rank'); a rank only one run has is\n"
           "named and makes the runs differ.  --plot DIR writes DIR/rank<r>.\n"
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
           "      --dist             for logits: whole distributions per row -- KL both\n"
           "                         ways, |delta log p| at A's top token, top-k overlap,\n"
           "                         mean |a-b| and SGLang's rel_diff -- summarized\n"
           "      --topk K,...       the k of the top-k overlaps (default 1,5,10; at most\n"
           "                         %d of them); implies --dist\n"
           "      --by HOW           pair captures by name, by site (what the tensor is:\n"
           "                         layer 3's q projection, the logits; docs/sites.md) or\n"
           "                         auto (default): by name, by site when the snapshots\n"
           "                         share no name but share sites\n"
           "      --map FILE         extra naming rules for sites, one 'REGEX SITE' a line\n"
           "                         (the regex's first group is the layer number)\n"
           "  -j, --threads N        worker threads (default: online CPUs, at most 8)\n"
           "      --chunk-elements N elements per read and thread (default 1048576)\n"
           "      --color WHEN       auto (default), always or never\n"
           "      --plot DIR         also draw the gnuplot plots (amplification curve,\n"
           "                         ULP heatmap, logits margins) into DIR\n"
           "  -h, --help             show this help\n"
           "\n"
           "exit status: 0 identical, 1 the snapshots differ, 2 error (nothing to\n"
           "compare -- no capture, none selected, no capture name in common -- is one)\n",
           ULP_DIFF_MAX_TEMPERATURES, ULP_DIFF_MAX_TOPK);
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

typedef struct diff_cli {
    ulp_diff_options opts;
    ulp_report_format format;
    const char *out_path, *color, *plot_dir;
    const char *path_a, *path_b;
} diff_cli;

/* Fills `o` from the command line: -1 to go on, else the exit status. */
static int diff_parse(int argc, char **argv, diff_cli *o)
{
    enum { OPT_CHUNK = 256, OPT_COLOR, OPT_PLOT, OPT_ROWS, OPT_BY, OPT_MAP, OPT_DIST, OPT_TOPK };
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
        {"by", required_argument, NULL, OPT_BY},
        {"map", required_argument, NULL, OPT_MAP},
        {"dist", no_argument, NULL, OPT_DIST},
        {"topk", required_argument, NULL, OPT_TOPK},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    memset(o, 0, sizeof *o);
    o->format = ULP_REPORT_TABLE;
    o->color = "auto";
    ulp_diff_options_init(&o->opts);
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":f:o:m:r:t:j:h", longopts, NULL)) != -1) {
        uint64_t v;
        switch (c) {
        case 'f': {
            int fmt = ulp_report_format_from_name(optarg);
            if (fmt < 0) {
                fprintf(stderr,
                        "ulpprof diff: unknown format '%s' (table, markdown or md, csv, json)\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            o->format = (ulp_report_format)fmt;
            break;
        }
        case 'o':
            o->out_path = optarg;
            break;
        case 'm':
            o->opts.match = optarg;
            break;
        case 'r':
            if (ulp_role_from_name(optarg) < 0) {
                fprintf(stderr,
                        "ulpprof diff: unknown role '%s' (activation, logits, kv, input, "
                        "weight)\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            o->opts.role = optarg;
            break;
        case OPT_ROWS:
            o->opts.rows = optarg;
            break;
        case OPT_BY:
            if (strcmp(optarg, "name") == 0) {
                o->opts.by = ULP_DIFF_BY_NAME;
            } else if (strcmp(optarg, "site") == 0) {
                o->opts.by = ULP_DIFF_BY_SITE;
            } else if (strcmp(optarg, "auto") == 0) {
                o->opts.by = ULP_DIFF_BY_AUTO;
            } else {
                fprintf(stderr, "ulpprof diff: --by takes name, site or auto, not '%s'\n", optarg);
                return CLI_EXIT_ERROR;
            }
            break;
        case OPT_MAP:
            o->opts.site_map = optarg;
            break;
        case 't': {
            char *end;
            double t = strtod(optarg, &end);
            if (end == optarg || *end || !(t > 0) || isinf(t)) {
                fprintf(stderr, "ulpprof diff: temperature '%s' is not a positive number\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            if (o->opts.n_temperatures == ULP_DIFF_MAX_TEMPERATURES) {
                fprintf(stderr, "ulpprof diff: at most %d temperatures\n",
                        ULP_DIFF_MAX_TEMPERATURES);
                return CLI_EXIT_ERROR;
            }
            o->opts.temperatures[o->opts.n_temperatures++] = t;
            break;
        }
        case OPT_DIST:
            o->opts.distributions = 1;
            break;
        case OPT_TOPK: {
            o->opts.distributions = 1;
            o->opts.n_topk = 0;
            char buf[256];
            snprintf(buf, sizeof buf, "%s", optarg);
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
                 tok = strtok_r(NULL, ",", &save)) {
                if (parse_u64(tok, &v) || v < 1 || v > 1000000 ||
                    o->opts.n_topk == ULP_DIFF_MAX_TOPK) {
                    fprintf(stderr,
                            "ulpprof diff: --topk '%s' is not a list of at most %d numbers "
                            "from 1 to 1000000\n",
                            optarg, ULP_DIFF_MAX_TOPK);
                    return CLI_EXIT_ERROR;
                }
                o->opts.topk[o->opts.n_topk++] = (int)v;
            }
            if (o->opts.n_topk == 0 || strlen(optarg) >= sizeof buf) {
                fprintf(stderr, "ulpprof diff: --topk '%s' is not a list of numbers\n", optarg);
                return CLI_EXIT_ERROR;
            }
            break;
        }
        case 'j':
            if (parse_u64(optarg, &v) || v < 1 || v > 64) {
                fprintf(stderr, "ulpprof diff: threads '%s' is not a number from 1 to 64\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            o->opts.threads = (int)v;
            break;
        case OPT_CHUNK:
            if (parse_u64(optarg, &v) || v < 1 || v > ((uint64_t)1 << 30)) {
                fprintf(stderr,
                        "ulpprof diff: chunk-elements '%s' is not a number from 1 to "
                        "2^30\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            o->opts.chunk_elements = v;
            break;
        case OPT_COLOR:
            if (strcmp(optarg, "auto") && strcmp(optarg, "always") && strcmp(optarg, "never")) {
                fprintf(stderr, "ulpprof diff: --color takes auto, always or never\n");
                return CLI_EXIT_ERROR;
            }
            o->color = optarg;
            break;
        case OPT_PLOT:
            o->plot_dir = optarg;
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
    if (o->opts.site_map != NULL && o->opts.by == ULP_DIFF_BY_NAME) {
        fprintf(stderr, "ulpprof diff: --map names sites, which --by name does not use\n");
        return CLI_EXIT_ERROR;
    }
    if (cli_output_is_input("diff", o->out_path, argv + optind, 2) ||
        cli_plot_dir_has_input("diff", o->plot_dir, argv + optind, 2))
        return CLI_EXIT_ERROR;
    o->path_a = argv[optind];
    o->path_b = argv[optind + 1];
    return -1;
}

/* The table's colour flag, as diff_print() will find it. */
static unsigned color_flag(const diff_cli *o, FILE *out)
{
    if (o->format == ULP_REPORT_TABLE &&
        (strcmp(o->color, "always") == 0 || (strcmp(o->color, "auto") == 0 && cli_use_color(out))))
        return ULP_REPORT_COLOR;
    return 0;
}

/*
 * A stream for the report when the rows can go to it as they come (diff
 * then keeps none of them in memory): not for --plot, which draws every
 * row, nor where only the open --out file can tell the colour (a
 * terminal named by path); ULPPROF_DIFF_STREAM=0 turns it off (tests).
 * NULL: ulp_diff_run() and ulp_report_write().
 */
static ulp_report_stream *diff_stream(const diff_cli *o)
{
    const char *env = getenv("ULPPROF_DIFF_STREAM");
    struct stat sb;
    unsigned flags = 0;
    ulp_report_stream *rs = NULL;
    ulp_error err;
    if (o->plot_dir != NULL || (env != NULL && strcmp(env, "0") == 0))
        return NULL;
    if (o->out_path == NULL || strcmp(o->color, "always") == 0)
        flags = color_flag(o, stdout);
    else if (strcmp(o->color, "auto") == 0 && stat(o->out_path, &sb) == 0 && S_ISCHR(sb.st_mode))
        return NULL;
    /* Without a temporary file the rows are kept in memory instead. */
    if (ulp_report_stream_open(o->format, flags, &rs, &err) != ULP_OK)
        return NULL;
    return rs;
}

/* The stream's callback, noting when the stream itself failed (its
 * temporary file could not take the rows) rather than the comparison. */
typedef struct stream_ctx {
    ulp_report_stream *rs;
    int failed;
} stream_ctx;

static ulp_status stream_rows(void *ctx, const ulp_diff_row *rows, size_t first, size_t n,
                              ulp_error *err)
{
    stream_ctx *sc = ctx;
    ulp_status st = ulp_report_stream_rows(sc->rs, rows, first, n, err);
    sc->failed = st != ULP_OK;
    return st;
}

/* Opens both snapshots and compares them, the rows to *rs if not NULL:
 * *res, or a message and NULL.  When the stream fails (a full /tmp: its
 * rows are lost), it is freed (*rs NULL) and the comparison runs again
 * with the rows in memory, as it would have without a temporary file. */
static ulp_diff_result *diff_run(diff_cli *o, ulp_report_stream **rs, ulp_snapshot **a,
                                 ulp_snapshot **b)
{
    ulp_diff_result *res = NULL;
    ulp_error err;
    stream_ctx sc = {*rs, 0};
    /* Nothing here keeps a capture's description across the diff. */
    if (cli_open_pair(o->path_a, o->path_b, a, b, *rs != NULL) < 0)
        return NULL;
    o->opts.progress = isatty(STDERR_FILENO);
    ulp_status st = *rs != NULL ? ulp_diff_stream(*a, *b, &o->opts, stream_rows, &sc, &res, &err)
                                : ulp_diff_run(*a, *b, &o->opts, &res, &err);
    if (st != ULP_OK && sc.failed) {
        ulp_report_stream_free(*rs);
        *rs = NULL;
        st = ulp_diff_run(*a, *b, &o->opts, &res, &err);
    }
    if (st != ULP_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
    return res;
}

/* The report, to --out or stdout (from `rs` if not NULL): 0, or -1 after a message. */
static int diff_print(const diff_cli *o, const ulp_diff_result *res, ulp_report_stream *rs)
{
    FILE *out = stdout;
    ulp_error err;
    if (o->out_path) {
        out = fopen(o->out_path, "w");
        if (out == NULL) {
            cli_error("cannot open '%s' for writing: %s", o->out_path, strerror(errno));
            return -1;
        }
    }
    ulp_status st = rs != NULL ? ulp_report_stream_write(rs, res, out, &err)
                               : ulp_report_write(res, o->format, out, color_flag(o, out), &err);
    if (st != ULP_OK) {
        cli_error("cannot write '%s': %s", o->out_path ? o->out_path : "standard output", err.msg);
        if (out != stdout)
            fclose(out);
        return -1;
    }
    if (out != stdout && fclose(out) != 0) {
        cli_error("cannot write '%s': %s", o->out_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The plots of --plot: 0, or -1 after a message. */
static int diff_plot(const diff_cli *o, const ulp_diff_result *res)
{
    ulp_error err;
    ulp_plot_options po;
    ulp_plot_options_init(&po);
    po.dir = o->plot_dir;
    ulp_status ps = ulp_plot_write(res, &po, NULL, &err);
    /* Without gnuplot the report above still stands: say so, keep its exit status. */
    if (ps == ULP_EUNSUPPORTED) {
        fprintf(stderr, "ulpprof: %s\n", err.msg);
    } else if (ps != ULP_OK) {
        cli_error("%s", err.msg);
        return -1;
    }
    return 0;
}

/* Run directories of per-rank files: rank by rank (cmd_diff_ranks.c). */
static int diff_runs(const diff_cli *o)
{
    FILE *out = o->out_path ? fopen(o->out_path, "w") : stdout;
    if (out == NULL) {
        cli_error("cannot open '%s' for writing: %s", o->out_path, strerror(errno));
        return CLI_EXIT_ERROR;
    }
    cli_diff_ranks_args x = {.a = o->path_a,
                             .b = o->path_b,
                             .opts = &o->opts,
                             .format = o->format,
                             .plot_dir = o->plot_dir};
    x.flags |= color_flag(o, out);
    int rc = cli_diff_ranks(&x, out);
    if (out != stdout && fclose(out) != 0 && rc != CLI_EXIT_ERROR) {
        cli_error("cannot write '%s': %s", o->out_path, strerror(errno));
        rc = CLI_EXIT_ERROR;
    }
    return rc;
}

int cmd_diff(int argc, char **argv)
{
    diff_cli o;
    int rc = diff_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (cli_is_dir(o.path_a) || cli_is_dir(o.path_b))
        return diff_runs(&o);
    if (ulp_digest_only(o.path_a) || ulp_digest_only(o.path_b)) {
        FILE *out = o.out_path ? fopen(o.out_path, "w") : stdout;
        if (out == NULL) {
            cli_error("cannot open '%s' for writing: %s", o.out_path, strerror(errno));
            return CLI_EXIT_ERROR;
        }
        rc = cli_diff_digests(o.path_a, o.path_b, o.format == ULP_REPORT_JSON, out);
        if (out != stdout)
            fclose(out);
        return rc;
    }
    rc = CLI_EXIT_ERROR;
    ulp_snapshot *a = NULL, *b = NULL;
    ulp_report_stream *rs = diff_stream(&o);
    ulp_diff_result *res = diff_run(&o, &rs, &a, &b);
    if (res != NULL && diff_print(&o, res, rs) == 0 && (!o.plot_dir || diff_plot(&o, res) == 0))
        rc = res->identical ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
    ulp_report_stream_free(rs);
    ulp_diff_result_free(res);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return rc;
}

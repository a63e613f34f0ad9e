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
#include "ulpprof/contract.h"
#include "ulpprof/diff.h"
#include "ulpprof/digest.h"
#include "ulpprof/format.h"
#include "ulpprof/plot.h"
#include "ulpprof/report.h"
#include "ulpprof/sites.h"
#include "ulpprof/verdict.h"

#define DIFF_USAGE                                                                                 \
    "ulpprof diff [--format table|markdown|md|csv|json] [--out FILE] [--match GLOB]\n"             \
    "                    [--role ROLE] [--rows head:N|tail:N|A:B] [--temperature T]...\n"          \
    "                    [--threads N] [--plot DIR] [--by name|site|auto] [--map FILE]\n"          \
    "                    [--dist] [--topk K,...] [--contract C.json] [--tp-join]\n"                \
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
           "                         auto (default): by name, and by site the captures\n"
           "                         no name pairs when their sites are on both sides\n"
           "      --map FILE         extra naming rules for sites, 'REGEX SITE [LAYOUT]' a line\n"
           "                         (the regex's first group is the layer number)\n"
           "      --tp-join          a run directory is one tensor-parallel run: its ranks'\n"
           "                         files are joined into one snapshot (column-parallel\n"
           "                         outputs on the last axis in rank order; the others\n"
           "                         rank 0's, the ranks checked to agree) and compared\n"
           "                         with the other side as one run (docs/sites.md)\n"
           "      --contract C.json  judge the divergence against a numeric contract\n"
           "                         (docs/contract.md): a bug naming the claim it breaks,\n"
           "                         or not promised\n"
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

/* A count from 1 to max (shown as max_text). */
static int parse_range(const char *what, const char *arg, uint64_t max, const char *max_text,
                       uint64_t *out)
{
    if (parse_u64(arg, out) || *out < 1 || *out > max) {
        fprintf(stderr, "ulpprof diff: %s '%s' is not a number from 1 to %s\n", what, arg,
                max_text);
        return -1;
    }
    return 0;
}

static int parse_format(const char *arg, ulp_report_format *out)
{
    int fmt = ulp_report_format_from_name(arg);
    if (fmt < 0) {
        fprintf(stderr, "ulpprof diff: unknown format '%s' (table, markdown or md, csv, json)\n",
                arg);
        return -1;
    }
    *out = (ulp_report_format)fmt;
    return 0;
}

static int parse_role(const char *arg, ulp_diff_options *opts)
{
    if (ulp_role_from_name(arg) < 0) {
        fprintf(stderr, "ulpprof diff: unknown role '%s' (activation, logits, kv, input, weight)\n",
                arg);
        return -1;
    }
    opts->role = arg;
    return 0;
}

/* --by name|site|auto. */
static int parse_by(const char *arg, ulp_diff_options *opts)
{
    if (strcmp(arg, "name") == 0)
        opts->by = ULP_DIFF_BY_NAME;
    else if (strcmp(arg, "site") == 0)
        opts->by = ULP_DIFF_BY_SITE;
    else if (strcmp(arg, "auto") == 0)
        opts->by = ULP_DIFF_BY_AUTO;
    else {
        fprintf(stderr, "ulpprof diff: --by takes name, site or auto, not '%s'\n", arg);
        return -1;
    }
    return 0;
}

/* One more -t T: a positive finite temperature. */
static int parse_temperature(const char *arg, ulp_diff_options *opts)
{
    char *end;
    double t = strtod(arg, &end);
    if (end == arg || *end || !(t > 0) || isinf(t)) {
        fprintf(stderr, "ulpprof diff: temperature '%s' is not a positive number\n", arg);
        return -1;
    }
    if (opts->n_temperatures == ULP_DIFF_MAX_TEMPERATURES) {
        fprintf(stderr, "ulpprof diff: at most %d temperatures\n", ULP_DIFF_MAX_TEMPERATURES);
        return -1;
    }
    opts->temperatures[opts->n_temperatures++] = t;
    return 0;
}

/* --topk K,...: turns the distribution measures on. */
static int parse_topk(const char *arg, ulp_diff_options *opts)
{
    char buf[256];
    uint64_t v;
    opts->distributions = 1;
    opts->n_topk = 0;
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        if (parse_u64(tok, &v) || v < 1 || v > 1000000 || opts->n_topk == ULP_DIFF_MAX_TOPK) {
            fprintf(stderr,
                    "ulpprof diff: --topk '%s' is not a list of at most %d numbers from 1 to "
                    "1000000\n",
                    arg, ULP_DIFF_MAX_TOPK);
            return -1;
        }
        opts->topk[opts->n_topk++] = (int)v;
    }
    if (opts->n_topk == 0 || strlen(arg) >= sizeof buf) {
        fprintf(stderr, "ulpprof diff: --topk '%s' is not a list of numbers\n", arg);
        return -1;
    }
    return 0;
}

typedef struct diff_cli {
    ulp_diff_options opts;
    ulp_report_format format;
    const char *out_path, *color, *plot_dir;
    const char *path_a, *path_b;
    const char *contract;
    int tp_join;
    char *joined[2];         /* --tp-join: the joined snapshots, removed at the end */
    const char *dirs[2];     /* --tp-join: the paths given                          */
    ulp_tp_join_info *tp[2]; /* --tp-join: what joining side 0 (A) or 1 (B) did    */
} diff_cli;

/* Fills `o` from the command line: -1 to go on, else the exit status. */
static int diff_parse(int argc, char **argv, diff_cli *o)
{
    enum {
        OPT_CHUNK = 256,
        OPT_COLOR,
        OPT_PLOT,
        OPT_ROWS,
        OPT_BY,
        OPT_MAP,
        OPT_DIST,
        OPT_TOPK,
        OPT_CONTRACT,
        OPT_TP_JOIN
    };
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
        {"contract", required_argument, NULL, OPT_CONTRACT},
        {"tp-join", no_argument, NULL, OPT_TP_JOIN},
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
        case 'f':
            if (parse_format(optarg, &o->format) != 0)
                return CLI_EXIT_ERROR;
            break;
        case 'o':
            o->out_path = optarg;
            break;
        case 'm':
            o->opts.match = optarg;
            break;
        case 'r':
            if (parse_role(optarg, &o->opts) != 0)
                return CLI_EXIT_ERROR;
            break;
        case OPT_ROWS:
            o->opts.rows = optarg;
            break;
        case OPT_BY:
            if (parse_by(optarg, &o->opts) != 0)
                return CLI_EXIT_ERROR;
            break;
        case OPT_MAP:
            o->opts.site_map = optarg;
            break;
        case OPT_CONTRACT:
            o->contract = optarg;
            break;
        case OPT_TP_JOIN:
            o->tp_join = 1;
            break;
        case 't':
            if (parse_temperature(optarg, &o->opts) != 0)
                return CLI_EXIT_ERROR;
            break;
        case OPT_DIST:
            o->opts.distributions = 1;
            break;
        case OPT_TOPK:
            if (parse_topk(optarg, &o->opts) != 0)
                return CLI_EXIT_ERROR;
            break;
        case 'j':
            if (parse_range("threads", optarg, 64, "64", &v) != 0)
                return CLI_EXIT_ERROR;
            o->opts.threads = (int)v;
            break;
        case OPT_CHUNK:
            if (parse_range("chunk-elements", optarg, (uint64_t)1 << 30, "2^30", &v) != 0)
                return CLI_EXIT_ERROR;
            o->opts.chunk_elements = v;
            break;
        case OPT_COLOR:
            if (strcmp(optarg, "auto") && strcmp(optarg, "always") && strcmp(optarg, "never")) {
                fputs("ulpprof diff: --color takes auto, always or never\n", stderr);
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
    /* A joined side's CSV cells, in every row: known before the rows come. */
    ulp_report_stream_tp_join(rs, o->joined[0] != NULL ? o->tp[0] : NULL,
                              o->joined[1] != NULL ? o->tp[1] : NULL);
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
/*
 * 1 if every capture of `s` is one that a digest-mode file keeps in full:
 * the produced `tokens` and the fed token ids (role input, an integer
 * dtype, positions, one element per row; FORMAT.md "Digests").
 */
static int streams_only(const ulp_snapshot *s)
{
    for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        const ulp_dtype_info *t = ulp_dtype_get(c->dtype);
        int fed = strcmp(c->role, "input") == 0 && t != NULL && !t->is_float &&
                  c->positions != NULL && c->rows == c->elements;
        if (strcmp(c->name, "tokens") != 0 && !fed)
            return 0;
    }
    return 1;
}

/*
 * NULL with *digests set when a side holds no captures but row digests: the
 * digest comparison's to do.  Asked only once both files opened (through
 * the open guard), so that the files with captures, nearly all of them,
 * cost nothing more.
 */
static ulp_diff_result *diff_run(diff_cli *o, ulp_report_stream **rs, ulp_snapshot **a,
                                 ulp_snapshot **b, int *digests)
{
    ulp_diff_result *res = NULL;
    ulp_error err;
    stream_ctx sc = {*rs, 0};
    /* Nothing here keeps a capture's description across the diff. */
    if (cli_open_pair(o->path_a, o->path_b, a, b, *rs != NULL) < 0)
        return NULL;
    if ((streams_only(*a) && ulp_digest_only(o->path_a)) ||
        (streams_only(*b) && ulp_digest_only(o->path_b))) {
        *digests = 1;
        return NULL;
    }
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

/* The verdict of a pair that is not identical (ulpprof/verdict.h), and the
 * contract's word on it with --contract: set on `res` for the reports. */
static int diff_judge(const diff_cli *o, const ulp_contract *c, const ulp_snapshot *a,
                      const ulp_snapshot *b, ulp_diff_result *res, ulp_diff_verdict **v)
{
    ulp_error err;
    if (res->identical && !c)
        return 0;
    if (ulp_diff_verdict_compute(a, b, res, v, &err) != ULP_OK ||
        (c && ulp_contract_judge(c, o->path_a, o->path_b, res, *v, &err) != ULP_OK)) {
        cli_error("%s", err.msg);
        return -1;
    }
    res->verdict = *v;
    return 0;
}

/* Run directories of per-rank files: rank by rank (cmd_diff_ranks.c). */
/* Two runs of which one holds row digests only (FORMAT.md "Digests"). */
static int diff_digests(const diff_cli *o)
{
    if (o->contract) {
        fprintf(stderr, "ulpprof diff: --contract needs captured tensors, not digests\n");
        return CLI_EXIT_ERROR;
    }
    FILE *out = o->out_path ? fopen(o->out_path, "w") : stdout;
    if (out == NULL) {
        cli_error("cannot open '%s' for writing: %s", o->out_path, strerror(errno));
        return CLI_EXIT_ERROR;
    }
    int rc = cli_diff_digests(o->path_a, o->path_b, o->format == ULP_REPORT_JSON, out);
    if (out != stdout && fclose(out) != 0 && rc != CLI_EXIT_ERROR) {
        cli_error("cannot write '%s': %s", o->out_path, strerror(errno));
        rc = CLI_EXIT_ERROR;
    }
    return rc;
}

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

/* --tp-join: side `side`'s run directory joined into a temporary snapshot,
 * said on stderr; o's path is then that snapshot's.  0, or -1 said. */
static int tp_join(diff_cli *o, int side)
{
    const char **path = side ? &o->path_b : &o->path_a;
    o->dirs[side] = *path;
    if (!cli_is_dir(*path))
        return 0;
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ulpprof-tp-join-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        cli_error("cannot create a temporary directory in '%s': %s", tmp && *tmp ? tmp : "/tmp",
                  strerror(errno));
        return -1;
    }
    size_t n = strlen(dir) + 16;
    o->joined[side] = malloc(n);
    if (o->joined[side] == NULL) {
        rmdir(dir);
        cli_error("out of memory");
        return -1;
    }
    snprintf(o->joined[side], n, "%s/joined.h5", dir);
    ulp_error err;
    if (ulp_tp_join(*path, o->opts.site_map, o->joined[side], &o->tp[side], &err) != ULP_OK) {
        cli_error("%s", err.msg);
        return -1;
    }
    const ulp_tp_join_info info = *o->tp[side];
    fprintf(stderr,
            "ulpprof diff: '%s': %zu ranks joined: %zu captures column-parallel, joined on the "
            "last axis in rank order; %zu whole on every rank, rank 0's compared",
            *path, info.ranks, info.joined, info.replicated);
    if (info.disagree == 0)
        fprintf(stderr, " (the ranks agree bit for bit on all %zu)\n", info.replicated);
    else
        fprintf(stderr,
                " (the ranks DISAGREE on %zu: first '%s' #%lld, rank %zu differs from rank 0 in "
                "%llu of %llu elements)\n",
                info.disagree, info.first_disagree, (long long)info.first_disagree_occurrence,
                info.first_disagree_rank, (unsigned long long)info.first_disagree_elements,
                (unsigned long long)info.first_disagree_of);
    *path = o->joined[side];
    return 0;
}

/* The joined snapshots' files and directories, removed. */
static void tp_join_clean(diff_cli *o)
{
    for (int side = 0; side < 2; side++) {
        ulp_tp_join_info_free(o->tp[side]);
        o->tp[side] = NULL;
        if (o->joined[side] == NULL)
            continue;
        unlink(o->joined[side]);
        char *slash = strrchr(o->joined[side], '/');
        if (slash != NULL) {
            *slash = '\0';
            rmdir(o->joined[side]);
        }
        free(o->joined[side]);
        o->joined[side] = NULL;
    }
}

/* The result names the directories, not the joined snapshots, and says
 * what joining them did. */
static void tp_join_paths(const diff_cli *o, ulp_diff_result *res)
{
    const char *a = o->dirs[0], *b = o->dirs[1];
    res->tp_join_a = o->joined[0] != NULL ? o->tp[0] : NULL;
    res->tp_join_b = o->joined[1] != NULL ? o->tp[1] : NULL;
    char *pa = strdup(a), *pb = strdup(b);
    if (pa == NULL || pb == NULL) {
        free(pa);
        free(pb);
        return;
    }
    free(res->path_a);
    free(res->path_b);
    res->path_a = pa;
    res->path_b = pb;
}

static int cmd_diff_files(diff_cli *o);

int cmd_diff(int argc, char **argv)
{
    diff_cli o;
    int rc = diff_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    if (o.tp_join) {
        rc = tp_join(&o, 0) == 0 && tp_join(&o, 1) == 0 ? cmd_diff_files(&o) : CLI_EXIT_ERROR;
        tp_join_clean(&o);
        return rc;
    }
    return cmd_diff_files(&o);
}

static int cmd_diff_files(diff_cli *po)
{
    diff_cli o = *po;
    int rc;
    if (cli_is_dir(o.path_a) || cli_is_dir(o.path_b)) {
        if (o.contract) {
            fprintf(stderr, "ulpprof diff: --contract takes two snapshot files, not run "
                            "directories\n");
            return CLI_EXIT_ERROR;
        }
        return diff_runs(&o);
    }
    rc = CLI_EXIT_ERROR;
    ulp_snapshot *a = NULL, *b = NULL;
    ulp_report_stream *rs = diff_stream(&o);
    ulp_contract *contract = NULL;
    ulp_diff_verdict *verdict = NULL;
    ulp_error err;
    if (o.contract && ulp_contract_read(o.contract, &contract, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        ulp_report_stream_free(rs);
        return CLI_EXIT_ERROR;
    }
    int digests = 0;
    ulp_diff_result *res = diff_run(&o, &rs, &a, &b, &digests);
    if (res != NULL && (o.joined[0] != NULL || o.joined[1] != NULL))
        tp_join_paths(po, res);
    if (res != NULL && diff_judge(&o, contract, a, b, res, &verdict) != 0) {
        ulp_diff_result_free(res);
        res = NULL;
    }
    if (res != NULL && diff_print(&o, res, rs) == 0 && (!o.plot_dir || diff_plot(&o, res) == 0))
        rc = res->identical ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
    ulp_report_stream_free(rs);
    ulp_diff_result_free(res);
    ulp_diff_verdict_free(verdict);
    ulp_contract_free(contract);
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return digests ? diff_digests(&o) : rc;
}

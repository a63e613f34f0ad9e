/*
 * `ulpprof demo [--dir DIR]`: the whole mechanism in one command, on any
 * machine.  Runs the reference transformer (workload/) as a prefix
 * cache miss, a hit and a split miss, writes the three snapshots, prints the
 * miss-vs-hit report (first divergence, amplification, the argmax flips
 * and why) and the split-vs-hit report (the fix: bitwise identical), draws
 * the plots and says where everything is.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ulpprof/diff.h"
#include "ulpprof/plot.h"
#include "ulpprof/refmodel.h"
#include "ulpprof/report.h"

#define DEMO_USAGE                                                                                 \
    "ulpprof demo [--dir DIR] [--gemm tiled|blas|exact] [--preset tiny|qwen1.5b]\n"                \
    "                    [--seed N] [--prompt-len N] [--cached N] [--no-plots] [--ladder]\n"       \
    "                    [--contract]"

static void demo_help(void)
{
    printf("usage: " DEMO_USAGE "\n"
           "\n"
           "Runs a small bf16 transformer (weights from a seed, paged KV cache with\n"
           "block size 16) on one prompt three ways and compares the last tokens'\n"
           "per-layer outputs and logits:\n"
           "  miss   the whole prompt in one pass: every GEMM has M = N rows\n"
           "  hit    the first N - N mod 16 tokens come from the prefix cache (computed\n"
           "         by an earlier request); only the suffix is computed, M = N mod 16\n"
           "  split  the fix: a miss cut at the last block boundary, so that the suffix\n"
           "         goes through the GEMMs a hit uses\n"
           "It prints the miss-vs-hit report (where the runs first differ, how the\n"
           "difference grows, which greedy tokens flip and why), the split-vs-hit\n"
           "report, and writes the snapshots, JSON/Markdown reports and plots to DIR.\n"
           "\n"
           "options:\n"
           "  -d, --dir DIR        output directory (default ulpprof-demo; created)\n"
           "  -g, --gemm GEMM      tiled (default): an emulated cuBLAS-style heuristic whose\n"
           "                       split-K depends on M, so the divergence shows on every CPU;\n"
           "                       blas: the system OpenBLAS, unmodified (on many CPUs it\n"
           "                       computes a row the same way for every M: then miss = hit);\n"
           "                       exact: M-independent fp64 accumulation (miss = hit)\n"
           "  -p, --preset NAME    tiny (default) or qwen1.5b (Qwen2.5-1.5B shapes; minutes)\n"
           "  -s, --seed N         weights and prompt (default %d)\n"
           "  -n, --prompt-len N   prompt tokens (default %d)\n"
           "      --cached N       tokens a hit takes from the cache (default N - N mod 16)\n"
           "      --logits-rows N  logits of the last N suffix rows only (default all)\n"
           "      --no-plots       skip the plots\n"
           "      --ladder         climb the determinism ladder instead: the miss, a repeat,\n"
           "                       batch of 4, hit and split, chunked prefill (64 tokens),\n"
           "                       the reduction order of 2 and 4 TP ranks (emulated), then\n"
           "                       `ulpprof ladder` over the 8 runs: where each rung breaks\n"
           "      --contract       the ladder's runs, then the contracts of the miss, hit and\n"
           "                       split, `contract compare` of them and `contract check` of\n"
           "                       two claims: level 2 with the split (kept), plain level 2\n"
           "                       (broken); docs/contract.md\n"
           "      --gnuplot PROG   gnuplot program (default $ULPPROF_GNUPLOT or gnuplot)\n"
           "      --color WHEN     auto (default), always or never\n"
           "  -h, --help           show this help\n"
           "\n"
           "exit status: 0 the demo ran and split equals hit, 1 split differs from\n"
           "hit (--ladder: 0 the ladder ran; --contract: 0 the first claim kept and\n"
           "the second broken), 2 error\n",
           ULP_REFMODEL_DEFAULT_SEED, ULP_REFMODEL_DEFAULT_PROMPT_LEN);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* mkdir -p. */
static int make_dirs(const char *path)
{
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

static int run_mode(ulp_refmodel_options *o, ulp_refmodel_mode mode, const char *dir,
                    const char *label, char *path, size_t len, int progress)
{
    snprintf(path, len, "%s/%s.h5", dir, label);
    o->mode = mode;
    o->out = path;
    o->label = label;
    if (progress)
        fprintf(stderr, "ulpprof demo: running %s...\n", label);
    ulp_error err;
    ulp_error_clear(&err);
    if (ulp_refmodel_run(o, &err) != ULP_OK) {
        cli_error("demo: %s run failed: %s", label, err.msg);
        return -1;
    }
    return 0;
}

static ulp_diff_result *compare(const char *pa, const char *pb)
{
    ulp_snapshot *a = NULL, *b = NULL;
    ulp_diff_result *res = NULL;
    ulp_error err;
    if (cli_open_pair(pa, pb, &a, &b, 0) == 0 && ulp_diff_run(a, b, NULL, &res, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        res = NULL;
    }
    ulp_snapshot_close(a);
    ulp_snapshot_close(b);
    return res;
}

static int write_report(const ulp_diff_result *r, ulp_report_format fmt, const char *dir,
                        const char *name)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ulp_error err;
    if (!f) {
        cli_error("cannot open '%s' for writing: %s", path, strerror(errno));
        return -1;
    }
    if (ulp_report_write(r, fmt, f, 0, &err) != ULP_OK) {
        fclose(f);
        cli_error("cannot write '%s': %s", path, err.msg);
        return -1;
    }
    if (fclose(f) != 0) {
        cli_error("cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* How the backend treats M rows, for the explanation. */
static void gemm_words(ulp_refmodel_gemm g, int m, char *buf, size_t len)
{
    if (g == ULP_REFMODEL_GEMM_TILED) {
        /* Mirrors the table documented in workload/refmodel_gemm.c. */
        const char *k = m <= 16    ? "split-K 4"
                        : m <= 64  ? "split-K 2"
                        : m <= 256 ? "split-K 1"
                                   : "split-K 1, 2 k-lanes";
        snprintf(buf, len, "M=%d (%s)", m, k);
    } else {
        snprintf(buf, len, "M=%d", m);
    }
}

/* A few lines saying what the miss-vs-hit report shows. */
static void explain(const ulp_diff_result *r, const ulp_refmodel_options *o, int n, int cached)
{
    char gm[64], gh[64];
    gemm_words(o->gemm, n, gm, sizeof gm);
    gemm_words(o->gemm, n - cached, gh, sizeof gh);
    printf("\nWhat happened\n");
    if (!r->has_first_divergence) {
        printf("  miss and hit are bitwise identical: with gemm '%s' every output row is\n"
               "  computed the same way whatever M is, so the prefix cache changes nothing.\n",
               ulp_refmodel_gemm_name(o->gemm));
        return;
    }
    const ulp_diff_row *f = &r->rows[r->first_divergence];
    printf("  1. The miss computed the last %d tokens inside GEMMs of %s, the hit in\n"
           "     GEMMs of %s: the same products, summed in another order.  fp32 results\n"
           "     move by an ULP or so; rounding to bf16 hides most of that, not all.\n",
           n - cached, gm, gh);
    printf("  2. First divergence: %s: %llu of %llu elements differ, by at most %llu ULP\n"
           "     (max |a-b| %.3g).\n",
           f->name, (unsigned long long)f->m.differing, (unsigned long long)f->elements,
           (unsigned long long)f->m.max_ulp, f->m.max_abs_diff);
    if (f->aligned && f->first_position >= 0)
        printf("     The same token compared in both runs: %llu of %llu positions differ, the\n"
               "     first at position %lld; %s.\n",
               (unsigned long long)f->positions_differing,
               (unsigned long long)f->positions_compared, (long long)f->first_position,
               f->origin == ULP_DIFF_ORIGIN_INTRODUCED
                   ? "introduced there: every input it was computed from is identical"
                   : "see the report for where it came from");
    if (r->amp.valid && r->amp.last_row != r->amp.first_row) {
        const ulp_diff_row *l = &r->rows[r->amp.last_row];
        printf("  3. Each layer feeds the difference forward: at %s, %llu of %llu\n"
               "     elements differ (%.1f%%), max |a-b| %.3g (x%.3g).\n",
               l->name, (unsigned long long)l->m.differing, (unsigned long long)l->elements,
               100.0 * r->amp.frac_last, l->m.max_abs_diff, r->amp.abs_factor);
    }
    for (size_t i = 0; i < r->n_logits; i++) {
        const ulp_diff_logits *lg = &r->logits[i];
        printf("  4. Logits (%s): %llu of %llu rows flip their greedy token.\n", lg->name,
               (unsigned long long)lg->argmax_flips, (unsigned long long)lg->rows);
        for (size_t k = 0; k < lg->n_flips && k < 3; k++) {
            const ulp_diff_flip *fl = &lg->flips[k];
            printf(
                "     row %llu: token %lld -> %lld.  In A, token %lld led token %lld by %.3g; the\n"
                "     logits moved by up to %.3g, and %lld gained %.3g on %lld: more than its "
                "lead.\n",
                (unsigned long long)fl->row, (long long)fl->argmax_a, (long long)fl->argmax_b,
                (long long)fl->argmax_a, (long long)fl->argmax_b, fl->gap_a,
                lg->max_perturbation[fl->row], (long long)fl->argmax_b, -fl->gap_perturbation,
                (long long)fl->argmax_a);
        }
        if (lg->argmax_flips == 0)
            printf("     No argmax flipped this time (%llu rows at risk: margin below the\n"
                   "     perturbation); try another --seed.\n",
                   (unsigned long long)lg->rows_at_risk);
    }
}

typedef struct demo_cli {
    ulp_refmodel_options o;
    const char *dir, *gnuplot, *color;
    int plots, ladder, contract;
    int n, cached; /* prompt tokens, of which the hit takes `cached` from the cache */
} demo_cli;

/* Fills `d` from the command line: -1 to go on, else the exit status. */
static int demo_parse(int argc, char **argv, demo_cli *d)
{
    enum {
        OPT_CACHED = 256,
        OPT_LOGITS_ROWS,
        OPT_NO_PLOTS,
        OPT_GNUPLOT,
        OPT_COLOR,
        OPT_LADDER,
        OPT_CONTRACT
    };
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"gemm", required_argument, NULL, 'g'},
        {"preset", required_argument, NULL, 'p'},
        {"seed", required_argument, NULL, 's'},
        {"prompt-len", required_argument, NULL, 'n'},
        {"cached", required_argument, NULL, OPT_CACHED},
        {"logits-rows", required_argument, NULL, OPT_LOGITS_ROWS},
        {"no-plots", no_argument, NULL, OPT_NO_PLOTS},
        {"gnuplot", required_argument, NULL, OPT_GNUPLOT},
        {"color", required_argument, NULL, OPT_COLOR},
        {"ladder", no_argument, NULL, OPT_LADDER},
        {"contract", no_argument, NULL, OPT_CONTRACT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ulp_refmodel_options *o = &d->o;
    ulp_refmodel_options_init(o);
    d->dir = "ulpprof-demo";
    d->gnuplot = NULL;
    d->color = "auto";
    d->plots = 1;
    d->ladder = 0;
    d->contract = 0;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":d:g:p:s:n:h", longopts, NULL)) != -1) {
        char *end = NULL;
        long v = 0;
        if (c == 'n' || c == OPT_CACHED || c == OPT_LOGITS_ROWS) {
            v = strtol(optarg, &end, 10);
            if (end == optarg || *end || v < 0 || v > 65536) {
                fprintf(stderr, "ulpprof demo: '%s' is not a number from 0 to 65536\n", optarg);
                return CLI_EXIT_ERROR;
            }
        }
        switch (c) {
        case 'd':
            d->dir = optarg;
            break;
        case 'g':
            if (ulp_refmodel_gemm_parse(optarg, &o->gemm) != 0) {
                fprintf(stderr, "ulpprof demo: unknown gemm '%s' (tiled, blas, exact)\n", optarg);
                return CLI_EXIT_ERROR;
            }
            break;
        case 'p':
            if (ulp_refmodel_preset(optarg, &o->dims) != ULP_OK) {
                fprintf(stderr, "ulpprof demo: unknown preset '%s' (tiny, qwen1.5b)\n", optarg);
                return CLI_EXIT_ERROR;
            }
            break;
        case 's': {
            errno = 0;
            unsigned long long s = strtoull(optarg, &end, 10);
            if (end == optarg || *end || optarg[0] == '-' || errno == ERANGE) {
                fprintf(stderr, "ulpprof demo: seed '%s' is not a number from 0 to 2^64-1\n",
                        optarg);
                return CLI_EXIT_ERROR;
            }
            o->seed = s;
            break;
        }
        case 'n':
            o->prompt_len = (int)v;
            break;
        case OPT_CACHED:
            o->cached_tokens = (int)v;
            break;
        case OPT_LOGITS_ROWS:
            o->logits_rows = (int)v;
            break;
        case OPT_NO_PLOTS:
            d->plots = 0;
            break;
        case OPT_LADDER:
            d->ladder = 1;
            break;
        case OPT_CONTRACT:
            d->contract = 1;
            break;
        case OPT_GNUPLOT:
            d->gnuplot = optarg;
            break;
        case OPT_COLOR:
            if (strcmp(optarg, "auto") && strcmp(optarg, "always") && strcmp(optarg, "never")) {
                fprintf(stderr, "ulpprof demo: --color takes auto, always or never\n");
                return CLI_EXIT_ERROR;
            }
            d->color = optarg;
            break;
        case 'h':
            demo_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("demo", DEMO_USAGE, argv, c);
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ulpprof demo: unexpected argument '%s'\nusage: %s\n", argv[optind],
                DEMO_USAGE);
        return CLI_EXIT_ERROR;
    }
    int n = o->prompt_len, bs = ULP_REFMODEL_BLOCK_SIZE;
    int cached = o->cached_tokens >= 0 ? o->cached_tokens : n - n % bs;
    if (n < 2 || cached <= 0 || cached % bs || cached >= n) {
        fprintf(stderr,
                "ulpprof demo: the cached prefix (%d tokens) must be a positive multiple "
                "of %d below the prompt length (%d)\n",
                cached, bs, n);
        return CLI_EXIT_ERROR;
    }
    d->n = n;
    d->cached = cached;
    return -1;
}

/* What the three runs were, before the reports. */
static void print_intro(const demo_cli *dc)
{
    const ulp_refmodel_options *o = &dc->o;
    const ulp_refmodel_dims *d = &o->dims;
    int n = dc->n, cached = dc->cached;
    char gm[64], gh[64];
    gemm_words(o->gemm, n, gm, sizeof gm);
    gemm_words(o->gemm, n - cached, gh, sizeof gh);
    printf("ulpprof demo: a %d-layer bf16 transformer (hidden %d, %d heads, vocab %d; preset %s,\n"
           "seed %llu) prefills one %d-token prompt three ways and captures every layer's\n"
           "attention, MLP and residual outputs at every position of every pass (the hit's\n"
           "prefix pass too, each row with its position), and the logits of the last %d:\n",
           d->layers, d->hidden, d->heads, d->vocab, d->name, (unsigned long long)o->seed, n,
           n - cached);
    printf("  miss   all %d tokens in one pass                      GEMMs %s\n", n, gm);
    printf("  hit    %d tokens from the prefix cache, %d computed   GEMMs %s\n", cached, n - cached,
           gh);
    printf("  split  the fix: the miss cut at token %d               GEMMs M=%d, then %s\n", cached,
           cached, gh);
    if (o->gemm == ULP_REFMODEL_GEMM_TILED)
        printf("GEMM 'tiled' EMULATES a cuBLAS-style heuristic: its split-K depends on M, so\n"
               "the effect shows on every CPU (--gemm blas uses OpenBLAS as is).\n");
    else if (o->gemm == ULP_REFMODEL_GEMM_BLAS)
        printf("GEMM 'blas': %s, 1 thread, unmodified.\n", ulp_refmodel_blas_info());
    else
        printf("GEMM 'exact': fp64 accumulation in a fixed order, the same for every M.\n");
}

/* The two reports on stdout: 0, or -1 after a message. */
static int print_reports(const demo_cli *dc, const ulp_diff_result *mh, const ulp_diff_result *sh,
                         const char *pmiss, const char *phit, const char *psplit)
{
    unsigned flags = (strcmp(dc->color, "always") == 0 ||
                      (strcmp(dc->color, "auto") == 0 && cli_use_color(stdout)))
                         ? ULP_REPORT_COLOR
                         : 0;
    ulp_error err;
    printf("\n=== miss vs hit: ulpprof diff %s %s\n\n", pmiss, phit);
    fflush(stdout);
    if (ulp_report_write(mh, ULP_REPORT_TABLE, stdout, flags, &err) != ULP_OK) {
        cli_error("cannot write the report: %s", err.msg);
        return -1;
    }
    explain(mh, &dc->o, dc->n, dc->cached);

    printf("\n=== split vs hit (the fix): ulpprof diff %s %s\n\n", psplit, phit);
    if (sh->identical) {
        /* 37 rows of "identical" say less than one line; the JSON has them all. */
        printf("identical: all %zu captures are bitwise identical (%s/split_vs_hit.json)\n"
               "pair tests level %d (%s): holds\n"
               "\nCutting the miss at the last block boundary gives the suffix the GEMMs of a\n"
               "hit, so the cache rung of the determinism ladder holds with the fix.\n",
               sh->n_rows, dc->dir, sh->ladder.level,
               sh->ladder.level_name ? sh->ladder.level_name : "none");
        return 0;
    }
    fflush(stdout);
    if (ulp_report_write(sh, ULP_REPORT_TABLE, stdout, flags, &err) != ULP_OK) {
        cli_error("cannot write the report: %s", err.msg);
        return -1;
    }
    printf("\nsplit and hit DIFFER: the fix did not hold here.\n");
    return 0;
}

/* The plots of miss vs hit into `pdir`: 1 drawn, 0 not (no gnuplot), -1 error. */
static int demo_plots(const demo_cli *dc, const ulp_diff_result *mh, const char *pdir)
{
    ulp_plot_options po;
    ulp_plot_options_init(&po);
    po.dir = pdir;
    po.gnuplot = dc->gnuplot;
    ulp_plot_files pf;
    ulp_error perr;
    ulp_error_clear(&perr);
    ulp_status ps = ulp_plot_write(mh, &po, &pf, &perr);
    if (ps == ULP_OK)
        return 1;
    if (ps == ULP_EUNSUPPORTED) {
        fprintf(stderr, "ulpprof: %s\n", perr.msg);
        return 0;
    }
    cli_error("%s", perr.msg);
    return -1;
}

/* Where everything is, and the command to compare by hand. */
static void print_files(const demo_cli *dc, const char *pdir, int drew, double t_runs, double t_all,
                        const char *pmiss, const char *phit)
{
    const char *dir = dc->dir;
    printf("\nFiles (%.1f s for the three runs, %.1f s in all):\n", t_runs, t_all);
    printf("  %s/{miss,hit,split}.h5          the snapshots ('ulpprof ls' lists them)\n", dir);
    printf("  %s/miss_vs_hit.{json,md}        the report, for scripts and bug reports\n", dir);
    printf("  %s/split_vs_hit.json\n", dir);
    if (dc->plots)
        printf("  %s/%s.{png,svg}  amplification, ulp_heatmap, logits_margin (.dat/.gp beside)\n",
               pdir, drew ? "*" : "* (no images: gnuplot missing)");
    /* The program's own path, so that the line works when it is not on PATH. */
    char self[4096];
    ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[self_len > 0 ? self_len : 0] = '\0';
    printf("Again by hand: %s diff %s %s\n", self_len > 0 ? self : "ulpprof", pmiss, phit);
}

int cmd_demo(int argc, char **argv)
{
    demo_cli dc;
    int rc = demo_parse(argc, argv, &dc);
    if (rc >= 0)
        return rc;
    if (make_dirs(dc.dir) != 0) {
        cli_error("cannot create '%s': %s", dc.dir, strerror(errno));
        return CLI_EXIT_ERROR;
    }
    if (dc.contract)
        return demo_contract(&dc.o, dc.dir, dc.gnuplot, dc.plots);
    if (dc.ladder)
        return demo_ladder(&dc.o, dc.dir, dc.gnuplot, dc.plots);

    /* Run: the three modes, two comparisons. */
    double t0 = now_s();
    int progress = isatty(STDERR_FILENO);
    const char *dir = dc.dir;
    char pmiss[1100], phit[1100], psplit[1100];
    ulp_diff_result *mh = NULL, *sh = NULL;
    if (run_mode(&dc.o, ULP_REFMODEL_MISS, dir, "miss", pmiss, sizeof pmiss, progress) ||
        run_mode(&dc.o, ULP_REFMODEL_HIT, dir, "hit", phit, sizeof phit, progress) ||
        run_mode(&dc.o, ULP_REFMODEL_SPLIT, dir, "split", psplit, sizeof psplit, progress))
        return CLI_EXIT_ERROR;
    double t_runs = now_s() - t0;
    rc = CLI_EXIT_ERROR;
    if (!(mh = compare(pmiss, phit)) || !(sh = compare(psplit, phit)))
        goto cleanup;

    /* Print: the reports, their files, the plots, where everything is. */
    print_intro(&dc);
    if (print_reports(&dc, mh, sh, pmiss, phit, psplit) != 0)
        goto cleanup;
    if (write_report(mh, ULP_REPORT_JSON, dir, "miss_vs_hit.json") ||
        write_report(mh, ULP_REPORT_MARKDOWN, dir, "miss_vs_hit.md") ||
        write_report(sh, ULP_REPORT_JSON, dir, "split_vs_hit.json"))
        goto cleanup;
    char pdir[1100];
    snprintf(pdir, sizeof pdir, "%s/plots", dir);
    int drew = dc.plots ? demo_plots(&dc, mh, pdir) : 0;
    if (drew < 0)
        goto cleanup;
    print_files(&dc, pdir, drew, t_runs, now_s() - t0, pmiss, phit);
    rc = sh->identical ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
cleanup:
    ulp_diff_result_free(mh);
    ulp_diff_result_free(sh);
    return rc;
}

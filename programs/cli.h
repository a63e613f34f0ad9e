/*
 * The `ulpprof` program: its commands and the helpers they share.
 *
 * Each command is `int cmd_<name>(int argc, char **argv)`, called with
 * argv[0] = "<name>" and the arguments after it; it parses its options with
 * getopt_long, answers --help on stdout with exit 0, and returns the exit
 * status: CLI_EXIT_OK, CLI_EXIT_DIFFER (diff only) or CLI_EXIT_ERROR.
 * To add a command: write cmd_<name>.c, declare it here and add one line to
 * the table in ulpprof.c.
 */
#ifndef ULPPROF_CLI_H
#define ULPPROF_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "ulpprof/diff.h"
#include "ulpprof/refmodel.h"
#include "ulpprof/report.h"
#include "ulpprof/snapshot.h"

#define CLI_EXIT_OK     0
#define CLI_EXIT_DIFFER 1
#define CLI_EXIT_ERROR  2

/* --- Commands (one line each) ------------------------------------------------------ */
int cmd_ls(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_kernels(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_repair(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_ladder(int argc, char **argv);
int cmd_streams(int argc, char **argv);
int cmd_contract(int argc, char **argv);

/* `ulpprof diff A B` when A or B is a run directory of per-rank files (cmd_diff_ranks.c). */
typedef struct cli_diff_ranks_args {
    const char *a, *b; /* runs: files or directories of per-rank files */
    const ulp_diff_options *opts;
    ulp_report_format format;
    unsigned flags;       /* ULP_REPORT_COLOR                          */
    const char *plot_dir; /* per rank: DIR/rank<R>; NULL: no plots     */
} cli_diff_ranks_args;
/* Prints the rank-by-rank reports to `out`; returns the exit status. */
int cli_diff_ranks(const cli_diff_ranks_args *x, FILE *out);

/* A diff where a side holds row digests only (cmd_diff_digests.c); json: 1 for --format json. */
int cli_diff_digests(const char *a, const char *b, int json, FILE *out);
/* Whether `path` is a directory. */
int cli_is_dir(const char *path);
/*
 * Opens every snapshot of a run (a file, or the *.h5 of a run directory)
 * through cli_open_snapshot() and closes it: a file that makes HDF5 crash or
 * hang gets its line and exit 2 there.  0, or -1 after the message.
 */
int cli_check_run(const char *path);

/* `ulpprof demo --ladder` (cmd_demo_ladder.c): the runs, the ladder, its plots; an exit status. */
int demo_ladder(const ulp_refmodel_options *base, const char *dir, const char *gnuplot, int plots);
/* `ulpprof demo --contract` (cmd_demo_contract.c): the ladder runs, contracts, claims. */
int demo_contract(const ulp_refmodel_options *base, const char *dir, const char *gnuplot,
                  int plots);

/* --- Shared helpers (cli.c) -------------------------------------------------------- */

#if defined(__GNUC__) || defined(__clang__)
#define CLI_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CLI_PRINTF(fmt, args)
#endif

/* Prints "ulpprof: <message>" and a newline on stderr. */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);
/* How many messages cli_error() has printed. */
int cli_errors_reported(void);

/*
 * For a getopt_long failure (it returned '?' or ':' with opterr = 0):
 * prints "ulpprof <cmd>: unknown option '...'" (or "option '...' needs a
 * value") and "usage: <usage>" on stderr; returns CLI_EXIT_ERROR.
 */
int cli_bad_option(const char *cmd, const char *usage, char **argv, int c);

/*
 * Opens a snapshot; on error prints "ulpprof: <message>" and returns NULL.
 * A snapshot read around damage (ulp_snapshot_warning) gets one warning
 * line, which points to `ulpprof repair` unless cli_repair_hint is 0.
 */
ulp_snapshot *cli_open_snapshot(const char *path);
/*
 * cli_open_snapshot() that hands its error back in `err` instead of saying
 * it (the warning of a snapshot read around damage is still said).
 */
ulp_status cli_open_snapshot_err(const char *path, ulp_snapshot **s, ulp_error *err);
/*
 * Opens two snapshots, the second while the first one's capture index is
 * still checked (ulp_snapshot_open_deferred), and confirms both: what
 * cli_open_snapshot() on each in turn would give and say.  With `stream`,
 * for ulp_diff_stream() (ulp_snapshot_open_stream).  0, or -1 after the
 * message (the caller closes *a and *b, which may be NULL).
 */
int cli_open_pair(const char *path_a, const char *path_b, ulp_snapshot **a, ulp_snapshot **b,
                  int stream);
extern int cli_repair_hint;

/*
 * Whether `out` (an output file of command `cmd`) is one of the n `inputs`
 * (the same file, through any path or link); if so prints one line and
 * returns 1.  A command checks before it writes, so no input is replaced.
 */
int cli_output_is_input(const char *cmd, const char *out, char *const *inputs, int n);

/* Whether the plot directory `dir` holds an input a plot file could replace (one line, 1). */
int cli_plot_dir_has_input(const char *cmd, const char *dir, char *const *inputs, int n);

/* Whether to colour output to `f`: a terminal, TERM not "dumb", NO_COLOR unset. */
int cli_use_color(FILE *f);

/* "512 B", "8.0 KiB", "1.5 MiB", ... (binary units, one decimal). */
void cli_human_bytes(char *buf, size_t size, uint64_t bytes);

/* A capture's shape as "[1,92160]" ("[]" for a scalar). */
void cli_format_shape(char *buf, size_t size, const ulp_capture_info *c);

/* Prints `s` with control characters escaped (\n, \t, \xNN) so that one value stays one line. */
void cli_print_escaped(FILE *f, const char *s);

/* Display width of a UTF-8 string (code points; wide characters are not special-cased). */
size_t cli_utf8_width(const char *s);

#endif /* ULPPROF_CLI_H */

/*
 * `ulpprof <command> [<options>] <args>`: dispatches to cmd_<command>() from
 * one table, as git's builtins do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ulpprof/diff.h"
#include "ulpprof/export.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

/* One line per command, in the order `ulpprof --help` lists them. */
static const command commands[] = {
    {"ls", cmd_ls, "list the runs and captures of snapshot files"},
    {"diff", cmd_diff, "compare two snapshots: where they diverge, how it grows, why"},
    {"record", cmd_record, "run a program with the collector: its captures and kernel trace"},
    {"ladder", cmd_ladder, "compare many runs: which rung of the determinism ladder breaks, where"},
    {"streams", cmd_streams, "many runs' generations: the distinct completions, where they part"},
    {"contract", cmd_contract,
     "emit a numeric contract from runs, check one against runs, compare two"},
    {"plot", cmd_plot, "draw a comparison with gnuplot: amplification, ULP heatmap, logits"},
    {"demo", cmd_demo, "run the reference transformer as cache miss, hit and split; report"},
    {"kernels", cmd_kernels, "align the kernel launches of two snapshots and show where they part"},
    {"repair", cmd_repair, "write a clean copy of a killed writer's snapshot for other HDF5 tools"},
    {"import", cmd_import, "turn .npy/.npz/.safetensors/torch.save dumps into a snapshot"},
};

#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: ulpprof <command> [<options>] <args>\n"
               "       ulpprof --help | --version\n"
               "\n"
               "ULP-divergence amplification profiler: compares per-layer tensors of\n"
               "two runs that should agree and shows where and how the difference grows.\n"
               "\n"
               "commands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'ulpprof <command> --help' describes a command.\n"
               "exit status: 0 success (diff: identical), 1 diff found differences, 2 error\n");
}

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

/* Flushes stdout and turns a write error (disk full, closed pipe) into
 * exit 2, with one message: none more when the command already said why. */
static int finish(int rc)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        int e = errno;
        if (cli_errors_reported() == 0)
            cli_error("cannot write to standard output: %s", e != 0 ? strerror(e) : "write error");
        return CLI_EXIT_ERROR;
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_ERROR;
    }
    const char *arg = argv[1];
    /* A forced kernel level the CPU lacks would be a silent fallback. */
    const char *why = NULL;
    const char *isa = ulp_diff_isa(&why);
    if (why != NULL) {
        cli_error("ULPPROF_ISA=%s: %s (the best here: %s)", getenv("ULPPROF_ISA"), why,
                  ulp_diff_isa_best());
        return CLI_EXIT_ERROR;
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 ||
        (strcmp(arg, "help") == 0 && argc == 2)) {
        usage(stdout);
        return finish(CLI_EXIT_OK);
    }
    if (strcmp(arg, "--version") == 0) {
        printf("ulpprof %s\ncomparison kernels: %s\n", ULP_VERSION_STRING, isa);
        return finish(CLI_EXIT_OK);
    }
    if (strcmp(arg, "help") == 0) {
        /* `ulpprof help <command>` is `ulpprof <command> --help`. */
        const command *c = find_command(argv[2]);
        if (c == NULL) {
            cli_error("'%s' is not a command; see 'ulpprof --help'", argv[2]);
            return CLI_EXIT_ERROR;
        }
        static char help_opt[] = "--help";
        char *help_argv[] = {argv[2], help_opt, NULL};
        return finish(c->fn(2, help_argv));
    }
    if (arg[0] == '-') {
        cli_error("unknown option '%s'; see 'ulpprof --help'", arg);
        return CLI_EXIT_ERROR;
    }
    const command *c = find_command(arg);
    if (c == NULL) {
        cli_error("'%s' is not a command; see 'ulpprof --help'", arg);
        return CLI_EXIT_ERROR;
    }
    return finish(c->fn(argc - 1, argv + 1));
}

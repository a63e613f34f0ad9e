/*
 * `ulpprof record -o FILE [--label L] [--attr K=V]... -- CMD [ARGS...]`:
 * runs CMD with the capture session configured through its environment
 * (ULPPROF_OUTPUT, ULPPROF_LABEL, ULPPROF_ATTR) and libulpprof_cuda.so as
 * both its CUDA and its NVTX injection library, as `nsys profile` does.
 * It also tells CMD where the host capture library is
 * (ULPPROF_CAPTURE_LIBRARY), for helpers that load it, such as the Python
 * package's.  The exit status is CMD's (128+N when a signal N killed it, 127
 * when it could not be started), so `record` can stand in for the command in
 * scripts; errors of `record` itself exit 2 before CMD runs, and a CMD that
 * exits 0 without writing a snapshot makes it exit 2 (unless --allow-empty),
 * so that a CI script cannot carry on with nothing.
 */
#include <errno.h>
#include <getopt.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#define RECORD_USAGE                                                                               \
    "ulpprof record -o FILE [--label L] [--attr K=V]... [--mode data|digest|both] "                \
    "[--select SPEC] [--no-cuda] [--allow-empty] [--gemms] -- CMD [ARGS...]"
#define CUDA_LIB_NAME    "libulpprof_cuda.so"
#define CAPTURE_LIB_NAME "libulpprof_capture.so"

static void record_help(void)
{
    printf("usage: " RECORD_USAGE "\n"
           "\n"
           "Runs CMD with ulpprof's collector loaded and writes what it captures to\n"
           "FILE: tensors announced with `ulp1|...` NVTX marks (see\n"
           "capture/cuda/PROTOCOL.md), calls of the host capture API, and the\n"
           "CUPTI kernel trace of CUDA programs.  Sets for CMD:\n"
           "  ULPPROF_OUTPUT          FILE, made absolute\n"
           "  ULPPROF_LABEL           the run label (--label)\n"
           "  ULPPROF_ATTR            /run attributes (--attr, appended to any set)\n"
           "  ULPPROF_CAPTURE_MODE    --mode; ULPPROF_SELECT  --select\n"
           "  CUDA_INJECTION64_PATH   libulpprof_cuda.so (unless --no-cuda)\n"
           "  NVTX_INJECTION64_PATH   libulpprof_cuda.so (unless --no-cuda)\n"
           "  LD_PRELOAD              libulpprof_cuda.so prepended (with --gemms)\n"
           "  ULPPROF_CAPTURE_LIBRARY libulpprof_capture.so, the host capture library\n"
           "                          (for helpers that load it, e.g. ulpprof.torch)\n"
           "\n"
           "options:\n"
           "  -o, --output FILE  snapshot to write; %%p is the process id, %%r the rank\n"
           "                     (RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK), %%h the host,\n"
           "                     %%l the label, %%%% a '%%'.  Use %%p or %%r when CMD starts\n"
           "                     several processes that capture: one file each.\n"
           "  -l, --label L      run label, e.g. miss, hit, bs1 (default: run)\n"
           "  -a, --attr K=V     a /run attribute (repeatable), e.g. cache=hit\n"
           "      --mode M       data (default), digest (one 64-bit digest per row of\n"
           "                     each host capture, in /digests, instead of the\n"
           "                     bytes) or both\n"
           "      --select SPEC  write the data of these rows only: NAME or\n"
           "                     NAME@REQUEST:FIRST-LAST, comma-separated (what\n"
           "                     `ulpprof diff` prints for digest runs)\n"
           "      --gemms        preload the collector so that it sees each cuBLAS /\n"
           "                     cuBLASLt GEMM call (M, N, K, types, tile, split-K) and\n"
           "                     writes /trace/gemms\n"
           "      --no-cuda      do not set the injection variables\n"
           "      --allow-empty  exit with CMD's status 0 even when no snapshot was written\n"
           "  -h, --help         show this help\n"
           "\n"
           "ULPPROF_CUDA_LIBRARY and ULPPROF_CAPTURE_LIBRARY override where the\n"
           "libraries are found (default: beside the program, or ../lib).\n"
           "Exit status: CMD's; 128+N if signal N killed it; 127 if it could not\n"
           "be run; 2 for a usage error of record itself, and 2 when CMD exited 0\n"
           "but no snapshot was written (unless --allow-empty).\n");
}

/* Appends `s` to `out` with ',', '=' and '\' escaped for ULPPROF_ATTR. */
static void attr_escape(char *out, size_t *len, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ',' || s[i] == '=' || s[i] == '\\')
            out[(*len)++] = '\\';
        out[(*len)++] = s[i];
    }
    out[*len] = '\0';
}

static int file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A library of ours: $<env_var>, else beside the program in an install (or
 * a pip package: ulpprof/bin, ulpprof/lib) or in a build tree (<build_dir>).
 * Returns 0 and fills `out` when found. */
static int find_library(const char *lib_name, const char *env_var, const char *build_dir, char *out,
                        size_t size)
{
    const char *env = getenv(env_var);
    if (env != NULL && *env != '\0') {
        if (realpath(env, out) != NULL && file_exists(out))
            return 0;
        cli_error("record: %s '%s' does not exist", env_var, env);
        return -1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    /* Beside the program; installed (PREFIX/bin and PREFIX/lib, also the pip
     * package's ulpprof/bin and ulpprof/lib); the build tree. */
    const char *rel[] = {"", "/../lib", "/../lib64", "/../lib/x86_64-linux-gnu", build_dir};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char cand[PATH_MAX + 128];
        snprintf(cand, sizeof(cand), "%s%s/%s", exe, rel[i], lib_name);
        if (file_exists(cand) && realpath(cand, out) != NULL && strlen(out) < size)
            return 0;
    }
    return -1;
}

/*
 * The files the output pattern can name: %p, %r and %h become '*', %l the
 * label, %% a '%'.  Fills `g` (globfree() it); returns the number found.
 */
static size_t output_files(const char *pattern, const char *label, glob_t *g)
{
    char pat[PATH_MAX * 2];
    size_t n = 0;
    for (const char *p = pattern; *p != '\0' && n + 8 < sizeof(pat); p++) {
        if (*p == '%' && (p[1] == 'p' || p[1] == 'r' || p[1] == 'h')) {
            pat[n++] = '*';
            p++;
        } else if (*p == '%' && p[1] == 'l') {
            for (const char *q = label; *q != '\0' && n + 8 < sizeof(pat); q++) {
                if (*q == '*' || *q == '?' || *q == '[' || *q == '\\')
                    pat[n++] = '\\';
                pat[n++] = *q;
            }
            p++;
        } else if (*p == '%' && p[1] == '%') {
            pat[n++] = '%';
            p++;
        } else {
            if (*p == '*' || *p == '?' || *p == '[' || *p == '\\')
                pat[n++] = '\\';
            pat[n++] = *p;
        }
    }
    pat[n] = '\0';
    memset(g, 0, sizeof(*g));
    if (glob(pat, 0, NULL, g) != 0)
        return 0;
    return g->gl_pathc;
}

/* What a file was before CMD ran, to tell whether CMD wrote it. */
typedef struct file_mark {
    char *path;
    struct stat st;
} file_mark;

static int stat_changed(const struct stat *a, const struct stat *b)
{
    return a->st_ino != b->st_ino || a->st_dev != b->st_dev || a->st_size != b->st_size ||
           a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec;
}

/* Records the files the pattern names now; returns their count (marks owned). */
static size_t marks_take(const char *pattern, const char *label, file_mark **out)
{
    glob_t g;
    size_t n = output_files(pattern, label, &g);
    *out = n > 0 ? calloc(n, sizeof(**out)) : NULL;
    size_t k = 0;
    for (size_t i = 0; i < n && *out != NULL; i++) {
        (*out)[k].path = strdup(g.gl_pathv[i]);
        if ((*out)[k].path != NULL && stat(g.gl_pathv[i], &(*out)[k].st) == 0)
            k++;
        else
            free((*out)[k].path);
    }
    globfree(&g);
    return k;
}

/* 1 when a file the pattern names is new or changed since the marks. */
static int snapshot_written(const char *pattern, const char *label, const file_mark *marks,
                            size_t n_marks)
{
    glob_t g;
    size_t n = output_files(pattern, label, &g);
    int written = 0;
    for (size_t i = 0; i < n && !written; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        written = 1;
        for (size_t j = 0; j < n_marks; j++)
            if (strcmp(marks[j].path, g.gl_pathv[i]) == 0 && !stat_changed(&marks[j].st, &st))
                written = 0;
    }
    globfree(&g);
    return written;
}

static int set_env(const char *name, const char *value)
{
    if (setenv(name, value, 1) != 0) {
        cli_error("record: cannot set %s: %s", name, strerror(errno));
        return -1;
    }
    return 0;
}

/* Runs argv, waits, and returns its exit status as a shell would. */
static int run_child(char **argv)
{
    /* Like system(3): the terminal's ^C and ^\ are for the child; record
     * waits for it and passes its fate on. */
    struct sigaction ign, old_int, old_quit;
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGINT, &ign, &old_int);
    sigaction(SIGQUIT, &ign, &old_quit);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        cli_error("record: cannot start '%s': %s", argv[0], strerror(errno));
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        return CLI_EXIT_ERROR;
    }
    if (pid == 0) {
        sigaction(SIGINT, &old_int, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
        execvp(argv[0], argv);
        fprintf(stderr, "ulpprof: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            cli_error("record: cannot wait for '%s': %s", argv[0], strerror(errno));
            status = CLI_EXIT_ERROR << 8;
            break;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        cli_error("record: '%s' was killed by signal %d (%s)", argv[0], WTERMSIG(status),
                  strsignal(WTERMSIG(status)));
        return 128 + WTERMSIG(status);
    }
    return CLI_EXIT_ERROR;
}

typedef struct record_cli {
    const char *output, *label, *mode, *select;
    int no_cuda, allow_empty, gemms;
    char *attrs; /* ULPPROF_ATTR as built: every --attr escaped, after any inherited */
    size_t attr_len;
    char **cmd; /* CMD [ARGS...], NULL-terminated */
} record_cli;

/* ULPPROF_ATTR's buffer, holding any inherited value: room for every argument escaped. */
static int attrs_init(record_cli *o, int argc, char **argv)
{
    size_t attr_cap = 64;
    for (int i = 1; i < argc; i++)
        attr_cap += 2 * strlen(argv[i]) + 2;
    const char *inherited = getenv("ULPPROF_ATTR");
    if (inherited != NULL)
        attr_cap += strlen(inherited) + 1;
    o->attrs = malloc(attr_cap);
    if (o->attrs == NULL) {
        cli_error("record: out of memory");
        return -1;
    }
    o->attrs[0] = '\0';
    if (inherited != NULL && *inherited != '\0') {
        strcpy(o->attrs, inherited);
        o->attr_len = strlen(o->attrs);
    }
    return 0;
}

/* Fills `o` from the command line: -1 to go on, else the exit status. */
static int record_parse(int argc, char **argv, record_cli *o)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"label", required_argument, NULL, 'l'},
        {"attr", required_argument, NULL, 'a'},   {"no-cuda", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},         {"allow-empty", no_argument, NULL, 'E'},
        {"gemms", no_argument, NULL, 'G'},        {"mode", required_argument, NULL, 'M'},
        {"select", required_argument, NULL, 'S'}, {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    if (attrs_init(o, argc, argv) != 0)
        return CLI_EXIT_ERROR;
    opterr = 0;
    optind = 1;
    int c;
    /* '+': stop at the first non-option, so CMD's own options stay CMD's. */
    while ((c = getopt_long(argc, argv, "+o:l:a:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            o->output = optarg;
            break;
        case 'l':
            o->label = optarg;
            break;
        case 'a': {
            const char *eq = strchr(optarg, '=');
            if (eq == NULL || eq == optarg) {
                cli_error("record: --attr '%s' is not KEY=VALUE", optarg);
                return CLI_EXIT_ERROR;
            }
            if (o->attr_len > 0)
                o->attrs[o->attr_len++] = ',';
            attr_escape(o->attrs, &o->attr_len, optarg, (size_t)(eq - optarg));
            o->attrs[o->attr_len++] = '=';
            attr_escape(o->attrs, &o->attr_len, eq + 1, strlen(eq + 1));
            break;
        }
        case 'M':
            if (strcmp(optarg, "data") != 0 && strcmp(optarg, "digest") != 0 &&
                strcmp(optarg, "both") != 0) {
                cli_error("record: --mode '%s' is not data, digest or both", optarg);
                return CLI_EXIT_ERROR;
            }
            o->mode = optarg;
            break;
        case 'S':
            o->select = optarg;
            break;
        case 'N':
            o->no_cuda = 1;
            break;
        case 'G':
            o->gemms = 1;
            break;
        case 'E':
            o->allow_empty = 1;
            break;
        case 'h':
            record_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("record", RECORD_USAGE, argv, c);
        }
    }
    if (o->output == NULL || *o->output == '\0') {
        cli_error("record: no output file; usage: " RECORD_USAGE);
        return CLI_EXIT_ERROR;
    }
    if (optind >= argc) {
        cli_error("record: no command to run; usage: " RECORD_USAGE);
        return CLI_EXIT_ERROR;
    }
    o->cmd = argv + optind;
    return -1;
}

/* LD_PRELOAD=lib[:what was there]: the GEMM entry points are interposed. */
static int prepend_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    size_t n = strlen(lib) + (old != NULL ? strlen(old) : 0) + 2;
    char *v = malloc(n);
    if (v == NULL) {
        cli_error("record: out of memory");
        return -1;
    }
    if (old != NULL && *old != '\0')
        snprintf(v, n, "%s:%s", lib, old);
    else
        snprintf(v, n, "%s", lib);
    int rc = set_env("LD_PRELOAD", v);
    free(v);
    return rc;
}

/* The injection variables, unless --no-cuda (and LD_PRELOAD with
 * --gemms): 0, or -1 after a message. */
static int set_injection(int gemms)
{
    char lib[PATH_MAX];
    if (find_library(CUDA_LIB_NAME, "ULPPROF_CUDA_LIBRARY", "/../capture/cuda", lib, sizeof(lib)) !=
        0) {
        cli_error("record: %s not found (set ULPPROF_CUDA_LIBRARY); recording host "
                  "captures only",
                  CUDA_LIB_NAME);
        return 0;
    }
    const char *vars[] = {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"};
    for (int i = 0; i < 2; i++) {
        const char *old = getenv(vars[i]);
        if (old != NULL && *old != '\0' && strcmp(old, lib) != 0)
            cli_error("record: replacing %s='%s' (one injection library per process)", vars[i],
                      old);
        if (set_env(vars[i], lib) != 0)
            return -1;
    }
    return gemms ? prepend_preload(lib) : 0;
}

/* CMD's environment; `abs_out` gets the output path made absolute.  0, or -1. */
static int record_env(const record_cli *o, char *abs_out, size_t size)
{
    /* The child may change directory: give it an absolute path. */
    if (o->output[0] == '/') {
        snprintf(abs_out, size, "%s", o->output);
    } else {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            cli_error("record: cannot get the current directory: %s", strerror(errno));
            return -1;
        }
        if ((size_t)snprintf(abs_out, size, "%s/%s", cwd, o->output) >= size) {
            cli_error("record: output path '%s' is too long", o->output);
            return -1;
        }
    }
    if (set_env("ULPPROF_OUTPUT", abs_out) != 0)
        return -1;
    if (o->label != NULL && set_env("ULPPROF_LABEL", o->label) != 0)
        return -1;
    if (o->attr_len > 0 && set_env("ULPPROF_ATTR", o->attrs) != 0)
        return -1;
    if (o->mode != NULL && set_env("ULPPROF_CAPTURE_MODE", o->mode) != 0)
        return -1;
    if (o->select != NULL && set_env("ULPPROF_SELECT", o->select) != 0)
        return -1;
    if (!o->no_cuda && set_injection(o->gemms) != 0)
        return -1;
    char lib[PATH_MAX];
    if (find_library(CAPTURE_LIB_NAME, "ULPPROF_CAPTURE_LIBRARY", "/../capture", lib,
                     sizeof(lib)) == 0)
        return set_env("ULPPROF_CAPTURE_LIBRARY", lib) != 0 ? -1 : 0;
    return getenv("ULPPROF_CAPTURE_LIBRARY") != NULL ? -1 : 0; /* a bad override was named */
}

int cmd_record(int argc, char **argv)
{
    record_cli o;
    file_mark *marks = NULL;
    size_t n_marks = 0;
    char abs_out[PATH_MAX + 8];
    int rc = record_parse(argc, argv, &o);
    if (rc >= 0)
        goto cleanup;
    rc = CLI_EXIT_ERROR;
    if (record_env(&o, abs_out, sizeof abs_out) != 0)
        goto cleanup;

    const char *run_label = o.label != NULL ? o.label : "run";
    n_marks = marks_take(abs_out, run_label, &marks);
    rc = run_child(o.cmd);

    /* Nothing written: the program captured nothing.  A successful exit
     * with nothing to show is an error, so that a script cannot go on. */
    if (!snapshot_written(abs_out, run_label, marks, n_marks)) {
        if (rc == CLI_EXIT_OK && !o.allow_empty) {
            cli_error("record: '%s' exited 0 but no snapshot was written to '%s' (nothing was "
                      "captured; --allow-empty accepts that)",
                      o.cmd[0], abs_out);
            rc = CLI_EXIT_ERROR;
        } else {
            cli_error("record: no snapshot was written to '%s' (nothing was captured)", abs_out);
        }
    }
cleanup:
    for (size_t i = 0; i < n_marks; i++)
        free(marks[i].path);
    free(marks);
    free(o.attrs);
    return rc;
}

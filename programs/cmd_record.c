/*
 * `ulpprof record -o FILE [--label L] [--attr K=V]... -- CMD [ARGS...]`:
 * runs CMD with the capture session configured through its environment
 * (ULPPROF_OUTPUT, ULPPROF_LABEL, ULPPROF_ATTR) and libulpprof_cuda.so as
 * both its CUDA and its NVTX injection library, as `nsys profile` does.
 * The exit status is CMD's (128+N when a signal N killed it, 127 when it
 * could not be started), so `record` can stand in for the command in
 * scripts; errors of `record` itself exit 2 before CMD runs.
 */
#include <errno.h>
#include <getopt.h>
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
    "ulpprof record -o FILE [--label L] [--attr K=V]... [--no-cuda] -- CMD [ARGS...]"
#define CUDA_LIB_NAME "libulpprof_cuda.so"

static void record_help(void)
{
    printf("usage: " RECORD_USAGE "\n"
           "\n"
           "Runs CMD with ulpprof's collector loaded and writes what it captures to\n"
           "FILE: tensors announced with `ulp1|...` NVTX marks (see\n"
           "collector/cuda/PROTOCOL.md), calls of the host capture API, and the\n"
           "CUPTI kernel trace of CUDA programs.  Sets for CMD:\n"
           "  ULPPROF_OUTPUT          FILE, made absolute\n"
           "  ULPPROF_LABEL           the run label (--label)\n"
           "  ULPPROF_ATTR            /run attributes (--attr, appended to any set)\n"
           "  CUDA_INJECTION64_PATH   libulpprof_cuda.so (unless --no-cuda)\n"
           "  NVTX_INJECTION64_PATH   libulpprof_cuda.so (unless --no-cuda)\n"
           "\n"
           "options:\n"
           "  -o, --output FILE  snapshot to write; %%p is the process id, %%r the rank\n"
           "                     (RANK, LOCAL_RANK, OMPI_COMM_WORLD_RANK), %%h the host,\n"
           "                     %%l the label, %%%% a '%%'.  Use %%p or %%r when CMD starts\n"
           "                     several processes that capture: one file each.\n"
           "  -l, --label L      run label, e.g. miss, hit, bs1 (default: run)\n"
           "  -a, --attr K=V     a /run attribute (repeatable), e.g. cache=hit\n"
           "      --no-cuda      do not set the injection variables\n"
           "  -h, --help         show this help\n"
           "\n"
           "ULPPROF_CUDA_LIBRARY overrides where libulpprof_cuda.so is found.\n"
           "Exit status: CMD's; 128+N if signal N killed it; 127 if it could not\n"
           "be run; 2 for a usage error of record itself.\n");
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

/* The injection library: $ULPPROF_CUDA_LIBRARY, else beside the program in
 * an install or a build tree.  Returns 0 and fills `out` when found. */
static int find_cuda_library(char *out, size_t size)
{
    const char *env = getenv("ULPPROF_CUDA_LIBRARY");
    if (env != NULL && *env != '\0') {
        if (realpath(env, out) != NULL && file_exists(out))
            return 0;
        cli_error("record: ULPPROF_CUDA_LIBRARY '%s' does not exist", env);
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
    static const char *const rel[] = {
        "",        /* beside the program                 */
        "/../lib", /* installed: PREFIX/bin, PREFIX/lib  */
        "/../lib64",
        "/../lib/x86_64-linux-gnu",
        "/../collector/cuda", /* build tree: programs/ulpprof       */
    };
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char cand[PATH_MAX + 64];
        snprintf(cand, sizeof(cand), "%s%s/" CUDA_LIB_NAME, exe, rel[i]);
        if (file_exists(cand) && realpath(cand, out) != NULL && strlen(out) < size)
            return 0;
    }
    return -1;
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

int cmd_record(int argc, char **argv)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'}, {"label", required_argument, NULL, 'l'},
        {"attr", required_argument, NULL, 'a'},   {"no-cuda", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *output = NULL, *label = NULL;
    int no_cuda = 0;
    /* ULPPROF_ATTR as built: every --attr escaped, after any inherited. */
    size_t attr_cap = 64, attr_len = 0;
    for (int i = 1; i < argc; i++)
        attr_cap += 2 * strlen(argv[i]) + 2;
    const char *inherited = getenv("ULPPROF_ATTR");
    if (inherited != NULL)
        attr_cap += strlen(inherited) + 1;
    char *attrs = malloc(attr_cap);
    if (attrs == NULL) {
        cli_error("record: out of memory");
        return CLI_EXIT_ERROR;
    }
    attrs[0] = '\0';
    if (inherited != NULL && *inherited != '\0') {
        strcpy(attrs, inherited);
        attr_len = strlen(attrs);
    }
    int rc = CLI_EXIT_ERROR;

    opterr = 0;
    optind = 1;
    int c;
    /* '+': stop at the first non-option, so CMD's own options stay CMD's. */
    while ((c = getopt_long(argc, argv, "+o:l:a:h", opts, NULL)) != -1) {
        switch (c) {
        case 'o':
            output = optarg;
            break;
        case 'l':
            label = optarg;
            break;
        case 'a': {
            const char *eq = strchr(optarg, '=');
            if (eq == NULL || eq == optarg) {
                cli_error("record: --attr '%s' is not KEY=VALUE", optarg);
                goto cleanup;
            }
            if (attr_len > 0)
                attrs[attr_len++] = ',';
            attr_escape(attrs, &attr_len, optarg, (size_t)(eq - optarg));
            attrs[attr_len++] = '=';
            attr_escape(attrs, &attr_len, eq + 1, strlen(eq + 1));
            break;
        }
        case 'N':
            no_cuda = 1;
            break;
        case 'h':
            record_help();
            rc = CLI_EXIT_OK;
            goto cleanup;
        default:
            rc = cli_bad_option("record", RECORD_USAGE, argv, c);
            goto cleanup;
        }
    }
    if (output == NULL || *output == '\0') {
        cli_error("record: no output file; usage: " RECORD_USAGE);
        goto cleanup;
    }
    if (optind >= argc) {
        cli_error("record: no command to run; usage: " RECORD_USAGE);
        goto cleanup;
    }

    /* The child may change directory: give it an absolute path. */
    char abs_out[PATH_MAX + 8];
    if (output[0] == '/') {
        snprintf(abs_out, sizeof(abs_out), "%s", output);
    } else {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            cli_error("record: cannot get the current directory: %s", strerror(errno));
            goto cleanup;
        }
        if ((size_t)snprintf(abs_out, sizeof(abs_out), "%s/%s", cwd, output) >= sizeof(abs_out)) {
            cli_error("record: output path '%s' is too long", output);
            goto cleanup;
        }
    }
    if (set_env("ULPPROF_OUTPUT", abs_out) != 0)
        goto cleanup;
    if (label != NULL && set_env("ULPPROF_LABEL", label) != 0)
        goto cleanup;
    if (attr_len > 0 && set_env("ULPPROF_ATTR", attrs) != 0)
        goto cleanup;
    if (!no_cuda) {
        char lib[PATH_MAX];
        if (find_cuda_library(lib, sizeof(lib)) == 0) {
            const char *vars[] = {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"};
            for (int i = 0; i < 2; i++) {
                const char *old = getenv(vars[i]);
                if (old != NULL && *old != '\0' && strcmp(old, lib) != 0)
                    cli_error("record: replacing %s='%s' (one injection library per process)",
                              vars[i], old);
                if (set_env(vars[i], lib) != 0)
                    goto cleanup;
            }
        } else {
            cli_error("record: %s not found (set ULPPROF_CUDA_LIBRARY); recording host "
                      "captures only",
                      CUDA_LIB_NAME);
        }
    }

    rc = run_child(argv + optind);

    /* A plain path that never appeared: the program captured nothing. */
    if (strchr(abs_out, '%') == NULL && !file_exists(abs_out))
        cli_error("record: no snapshot was written to '%s' (nothing was captured)", abs_out);
cleanup:
    free(attrs);
    return rc;
}

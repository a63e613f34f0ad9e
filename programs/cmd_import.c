/*
 * `ulpprof import -o FILE PATH...`: turns .npy/.npz/.safetensors/torch.save
 * dumps into a snapshot.  The reading is Python's (numpy, torch: the
 * libraries that wrote the files), in the package's ulpprof._import; this
 * command runs it with $ULPPROF_PYTHON, else `python3` on PATH.  When this
 * program is the one inside the pip package (site-packages/ulpprof/bin),
 * that package is put first on PYTHONPATH, so both are of one version.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Runs the package's entry point, or says in one line that it is missing. */
static const char import_program[] =
    "import sys\n"
    "try:\n"
    "    from ulpprof._import import main\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('ulpprof: import: needs the Python package ulpprof in %s (%s); '\n"
    "                     'pip install it, or set ULPPROF_PYTHON\\n' % (sys.executable, e))\n"
    "    sys.exit(2)\n"
    "sys.exit(main(sys.argv[1:]))\n";

/* The help, printed here so that it prints without the Python package. */
static void import_help(void)
{
    printf("usage: ulpprof import -o OUT.h5 [--label L] [--attr K=V]... [--rank R] "
           "[--unsafe-pickle] PATH...\n"
           "Turns tensor dumps written by other tools into a snapshot.  PATH is a file or a\n"
           "directory (walked recursively, files in natural order of their names):\n"
           "  .npy .npz        numpy.save / numpy.savez\n"
           "  .safetensors     one capture per tensor (no execution order is kept: the\n"
           "                   captures are ordered by name, with a warning)\n"
           "  .pt .pth .bin    torch.save of tensors, dicts, lists, SGLang dumper files;\n"
           "                   loaded with weights_only=True on torch >= 2.6, refused on an\n"
           "                   older torch unless --unsafe-pickle; TorchScript archives are\n"
           "                   always refused\n"
           "A 1-D integer tensor named 'positions' gives the rows of the other tensors of its\n"
           "forward pass (its SGLang step, else its file) their positions.\n"
           "  -o, --output FILE   snapshot to write (never one of the inputs)\n"
           "  -l, --label L       run label (default: import)\n"
           "  -a, --attr K=V      a /run attribute (repeatable), e.g. cache=hit\n"
           "  --rank R            keep the tensors of this rank (SGLang dumps)\n"
           "  --unsafe-pickle     load torch files with full pickle (runs code they contain:\n"
           "                      only for files you trust)\n"
           "  -h, --help          show this help\n"
           "The reading is done by the Python package ulpprof ($ULPPROF_PYTHON, else python3).\n"
           "exit status: 0 written, 2 error\n");
}

/* PREFIX where the program is PREFIX/ulpprof/bin/ulpprof of a package. */
static void add_package_path(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(exe, '/');
        if (slash == NULL)
            return;
        *slash = '\0';
    }
    char init[PATH_MAX + 32];
    struct stat st;
    snprintf(init, sizeof(init), "%s/ulpprof/__init__.py", exe);
    if (stat(init, &st) != 0)
        return;
    const char *old = getenv("PYTHONPATH");
    size_t len = strlen(exe) + (old != NULL ? strlen(old) : 0) + 2;
    char *path = malloc(len);
    if (path == NULL)
        return;
    snprintf(path, len, "%s%s%s", exe, old != NULL && *old != '\0' ? ":" : "",
             old != NULL ? old : "");
    setenv("PYTHONPATH", path, 1);
    free(path);
}

int cmd_import(int argc, char **argv)
{
    static const char *const takes_value[] = {"-o", "--output", "-l",    "--label",
                                              "-a", "--attr",   "--rank"};
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            import_help();
            return CLI_EXIT_OK;
        }
        for (size_t k = 0; k < sizeof takes_value / sizeof takes_value[0]; k++)
            if (strcmp(argv[i], takes_value[k]) == 0)
                i++; /* its value, even one that reads "-h" */
    }
    const char *python = getenv("ULPPROF_PYTHON");
    if (python == NULL || *python == '\0')
        python = "python3";
    add_package_path();
    char **args = calloc((size_t)argc + 4, sizeof(*args));
    if (args == NULL) {
        cli_error("import: out of memory");
        return CLI_EXIT_ERROR;
    }
    args[0] = (char *)(uintptr_t)python;
    args[1] = (char *)(uintptr_t) "-c";
    args[2] = (char *)(uintptr_t)import_program;
    for (int i = 1; i < argc; i++)
        args[2 + i] = argv[i];
    fflush(NULL);
    execvp(python, args);
    cli_error("import: cannot run the Python interpreter '%s': %s (set ULPPROF_PYTHON)", python,
              strerror(errno));
    free(args);
    return CLI_EXIT_ERROR;
}

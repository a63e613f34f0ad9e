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

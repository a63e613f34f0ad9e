/*
 * ulp_plot_write(): the data files and scripts, then gnuplot, run once per
 * script in the output directory with its stderr collected so that a
 * failure comes back as one line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/sized.h"
#include "plot_priv.h"

#define OPTIONS_MIN ULP__SIZE_THROUGH(ulp_plot_options, dir) /* the first version */

static void options_defaults(ulp_plot_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
}

ulp_status ulp_plot_options_init_sized(ulp_plot_options *opts, size_t size)
{
    ulp_plot_options def;
    options_defaults(&def);
    return ulp__sized_init(opts, size, &def, sizeof def, OPTIONS_MIN, "ulp_plot_options");
}

ulp_status ulp__plot_options_read(ulp_plot_options *out, const ulp_plot_options *in, ulp_error *err)
{
    ulp_plot_options def;
    options_defaults(&def);
    return ulp__sized_read(out, &def, sizeof def, OPTIONS_MIN, in, "ulp_plot_options", err);
}

static void add_file(ulp_plot_files *files, const char *dir, const char *name)
{
    if (files && files->n < ULP_PLOT_MAX_FILES)
        snprintf(files->path[files->n++], sizeof files->path[0], "%s/%s", dir, name);
}

const char *ulp__plot_find_gnuplot(const ulp_plot_options *o, char *buf, size_t len)
{
    const char *prog = o->gnuplot;
    if (!prog || !*prog)
        prog = getenv("ULPPROF_GNUPLOT");
    if (!prog || !*prog)
        prog = "gnuplot";
    if (strchr(prog, '/'))
        return access(prog, X_OK) == 0 ? prog : NULL;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        snprintf(buf, len, "%.*s/%s", (int)(n ? n : 1), n ? path : ".", prog);
        if (access(buf, X_OK) == 0)
            return buf;
        path += n;
        if (*path == ':')
            path++;
    }
    return NULL;
}

/* The line of gnuplot's stderr that says what went wrong. */
static void error_line(const char *log, char *out, size_t len)
{
    const char *best = NULL, *last = NULL;
    for (const char *p = log; *p;) {
        size_t n = strcspn(p, "\n");
        int blank = 1;
        for (size_t i = 0; i < n; i++)
            if (p[i] != ' ' && p[i] != '^')
                blank = 0;
        if (!blank) {
            last = p;
            if (!best && (strstr(p, "error") || strstr(p, "Error")) &&
                (size_t)(strstr(p, "rror") - p) < n)
                best = p;
        }
        p += n;
        if (*p)
            p++;
    }
    const char *pick = best ? best : last;
    if (!pick) {
        snprintf(out, len, "no message");
        return;
    }
    size_t n = strcspn(pick, "\n");
    while (*pick == ' ' && n) {
        pick++;
        n--;
    }
    snprintf(out, len, "%.*s", (int)n, pick);
}

ulp_status ulp__plot_run_gnuplot(const char *prog, const char *dir, const char *script,
                                 ulp_error *err)
{
    int pipefd[2];
    if (pipe(pipefd) != 0)
        return ulp__error(err, ULP_EIO, "cannot run gnuplot: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        close(pipefd[0]);
        close(pipefd[1]);
        return ulp__error(err, ULP_EIO, "cannot run gnuplot: %s", strerror(errno));
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        if (chdir(dir) != 0)
            _exit(126);
        execl(prog, prog, script, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    char log[8192];
    size_t have = 0;
    for (;;) {
        char chunk[1024];
        ssize_t got = read(pipefd[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        size_t take = (size_t)got < sizeof log - 1 - have ? (size_t)got : sizeof log - 1 - have;
        memcpy(log + have, chunk, take);
        have += take;
    }
    log[have] = '\0';
    close(pipefd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return ULP_OK;
    char line[400];
    error_line(log, line, sizeof line);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
        return ulp__error(err, ULP_EIO, "cannot enter '%s'", dir);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return ulp__error(err, ULP_EIO, "cannot run '%s'", prog);
    return ulp__error(err, ULP_EIO, "gnuplot failed on '%s/%s': %s", dir, script, line);
}

ulp_status ulp__plot_make_dir(const char *dir, ulp_error *err)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (mkdir(dir, 0777) != 0)
            return ulp__error(err, ULP_EIO, "cannot create '%s': %s", dir, strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        return ulp__error(err, ULP_EIO, "cannot write plots into '%s': not a directory", dir);
    }
    return ULP_OK;
}

ulp_status ulp__plot_render(const ulp_plot_options *o, const char *dir, const char *const *scripts,
                            size_t n, const char *what, ulp_plot_files *files, ulp_error *err)
{
    char buf[1100], path[1100], name[300];
    const char *prog = ulp__plot_find_gnuplot(o, buf, sizeof buf);
    if (!prog)
        return ulp__error(err, ULP_EUNSUPPORTED,
                          "gnuplot not found: wrote the %splot data and scripts to '%s' but no "
                          "images (install gnuplot, e.g. apt-get install gnuplot-nox)",
                          what, dir);
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s.gp", scripts[i]);
        ulp_status s = ulp__plot_run_gnuplot(prog, dir, name, err);
        if (s != ULP_OK)
            return s;
        const char *ext[] = {"png", "svg"};
        for (int e = 0; e < 2; e++) {
            struct stat st;
            snprintf(name, sizeof name, "%s.%s", scripts[i], ext[e]);
            snprintf(path, sizeof path, "%s/%s", dir, name);
            if (stat(path, &st) != 0 || st.st_size == 0)
                return ulp__error(err, ULP_EIO, "gnuplot wrote no '%s'", path);
            add_file(files, dir, name);
        }
    }
    if (files)
        files->rendered = 1;
    return ULP_OK;
}

ulp_status ulp_plot_write(const ulp_diff_result *r, const ulp_plot_options *opts,
                          ulp_plot_files *files, ulp_error *err)
{
    if (files)
        memset(files, 0, sizeof *files);
    ulp_plot_options oo;
    const ulp_plot_options *o = NULL;
    if (opts != NULL) {
        if (ulp__plot_options_read(&oo, opts, err) != ULP_OK)
            return ULP_EINVAL;
        o = &oo;
    }
    if (!r || !o || !o->dir || !*o->dir)
        return ulp__error(err, ULP_EINVAL, "no plot directory given");
    const char *dir = o->dir;
    ulp_status s = ulp__plot_make_dir(dir, err);
    if (s != ULP_OK)
        return s;

    ulp__plot_model m;
    s = ulp__plot_model_build(r, &m, err);
    if (s != ULP_OK)
        return s;

    /* Every figure: its base name and, for logits, which capture. */
    size_t nfig = 2 + r->n_logits;
    char path[1100], name[300];
    const char *scripts[ULP_PLOT_MAX_FILES / 4];
    char bases[ULP_PLOT_MAX_FILES / 4][64];
    size_t nscripts = 0;
    for (size_t fig = 0; fig < nfig && nscripts < sizeof bases / sizeof *bases; fig++) {
        const char *base = bases[nscripts];
        if (fig == 0)
            snprintf(bases[nscripts], sizeof bases[0], "amplification");
        else if (fig == 1)
            snprintf(bases[nscripts], sizeof bases[0], "ulp_heatmap");
        else if (fig == 2)
            snprintf(bases[nscripts], sizeof bases[0], "logits_margin");
        else
            snprintf(bases[nscripts], sizeof bases[0], "logits_margin_%zu", fig - 2);
        snprintf(path, sizeof path, "%s/%.63s.dat", dir, base);
        if (fig == 0)
            s = ulp__plot_write_amplification_dat(&m, path, err);
        else if (fig == 1)
            s = ulp__plot_write_hist_dat(&m, path, err);
        else
            s = ulp__plot_write_logits_dat(&m, fig - 2, path, err);
        if (s == ULP_OK) {
            if (fig == 0)
                s = ulp__plot_write_amplification_gp(&m, dir, base, err);
            else if (fig == 1)
                s = ulp__plot_write_hist_gp(&m, dir, base, err);
            else
                s = ulp__plot_write_logits_gp(&m, fig - 2, dir, base, err);
        }
        if (s != ULP_OK) {
            ulp__plot_model_release(&m);
            return s;
        }
        snprintf(name, sizeof name, "%.63s.dat", base);
        add_file(files, dir, name);
        snprintf(name, sizeof name, "%.63s.gp", base);
        add_file(files, dir, name);
        scripts[nscripts++] = base;
    }
    ulp__plot_model_release(&m);
    if (o->no_render)
        return ULP_OK;

    return ulp__plot_render(o, dir, scripts, nscripts, "", files, err);
}

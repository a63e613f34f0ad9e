/* Helpers shared by the `ulpprof` commands: errors, opening snapshots, formatting. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static int errors_reported;

int cli_errors_reported(void)
{
    return errors_reported;
}

void cli_error(const char *fmt, ...)
{
    /* One message, one line: a path or name with a newline or an escape
     * sequence in it is shown escaped, as `ls` shows names. */
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    errors_reported++;
    fputs("ulpprof: ", stderr);
    cli_print_escaped(stderr, msg);
    fputc('\n', stderr);
}

int cli_output_is_input(const char *cmd, const char *out, char *const *inputs, int n)
{
    struct stat so, si;
    if (out == NULL || stat(out, &so) != 0)
        return 0; /* a new file cannot be an input */
    for (int i = 0; i < n; i++)
        if (stat(inputs[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
            cli_error("%s: output '%s' is the input '%s': refusing to overwrite it", cmd, out,
                      inputs[i]);
            return 1;
        }
    return 0;
}

int cli_plot_dir_has_input(const char *cmd, const char *dir, char *const *inputs, int n)
{
    /* The plot writers name their files <plot>.dat, .gp, .png and .svg in DIR. */
    static const char *const ext[] = {".dat", ".gp", ".png", ".svg"};
    struct stat sd, sp;
    if (dir == NULL || stat(dir, &sd) != 0)
        return 0;
    for (int i = 0; i < n; i++) {
        char parent[4096];
        const char *slash = strrchr(inputs[i], '/');
        const char *base = slash ? slash + 1 : inputs[i];
        size_t blen = strlen(base);
        snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - inputs[i]) + 1 : 1,
                 slash ? inputs[i] : ".");
        if (stat(parent, &sp) != 0 || sp.st_dev != sd.st_dev || sp.st_ino != sd.st_ino)
            continue;
        for (size_t k = 0; k < sizeof ext / sizeof ext[0]; k++) {
            size_t elen = strlen(ext[k]);
            if (blen > elen && strcmp(base + blen - elen, ext[k]) == 0) {
                cli_error("%s: plot directory '%s' holds the input '%s', which a plot file "
                          "could overwrite: refusing",
                          cmd, dir, inputs[i]);
                return 1;
            }
        }
    }
    return 0;
}

int cli_bad_option(const char *cmd, const char *usage, char **argv, int c)
{
    const char *arg = argv[optind - 1];
    if (c == ':')
        fprintf(stderr, "ulpprof %s: option '%s' needs a value\n", cmd, arg);
    else if (optopt != 0 && (arg == NULL || strncmp(arg, "--", 2) != 0))
        fprintf(stderr, "ulpprof %s: unknown option '-%c'\n", cmd, optopt);
    else
        fprintf(stderr, "ulpprof %s: unknown option '%s'\n", cmd, arg ? arg : "?");
    fprintf(stderr, "usage: %s\n", usage);
    return CLI_EXIT_ERROR;
}

/*
 * A guard around opening a snapshot.  Some damaged files make HDF5 1.10
 * itself crash or loop while it decodes their metadata, before any check of
 * ours can run (tests/fuzz/known/).  The user is owed one line and exit 2
 * for a bad file, not a core dump or a hang: while a file is being opened,
 * a fatal signal or the watchdog alarm prints a prepared line and exits 2.
 * The handlers are in place only during the open, so a fault anywhere else
 * still shows as what it is.
 */
static char guard_crash_msg[1024], guard_hang_msg[1024];

static void guard_write(const char *msg)
{
    size_t n = strlen(msg);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, msg, n);
        if (w <= 0)
            break;
        msg += w;
        n -= (size_t)w;
    }
}

static void guard_on_fatal(int sig)
{
    (void)sig;
    guard_write(guard_crash_msg);
    _exit(CLI_EXIT_ERROR);
}

/* Progress the open had made at the last alarm, and the limit it runs under. */
static volatile uint64_t guard_progress;
static volatile unsigned guard_timeout;

static void guard_on_alarm(int sig)
{
    (void)sig;
    /* A file with a million captures takes minutes to open: while the
     * reader still moves, it is not stuck; wait another period. */
    uint64_t now = ulp_snapshot_open_progress();
    if (now != guard_progress) {
        guard_progress = now;
        alarm(guard_timeout);
        return;
    }
    guard_write(guard_hang_msg);
    _exit(CLI_EXIT_ERROR);
}

static const int guard_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NGUARD (sizeof guard_signals / sizeof guard_signals[0])

/*
 * Snapshots are read through a mapping of the file: one that another
 * program truncates while it is read raises SIGBUS in the reading thread.
 * Each opened file's path and size are kept here; the handler names the
 * one that shrank (stat(2) is async-signal-safe) and exits 2.  A SIGBUS
 * with no shrunken file is re-raised as what it is.
 */
#define MAX_READING 8
static struct {
    char msg[1024];
    char path[1024];
    off_t size;
} reading[MAX_READING];
static volatile sig_atomic_t n_reading;

/* `s` as cli_print_escaped() shows it, cut to fit `size`. */
static void escape_into(char *buf, size_t size, const char *s)
{
    FILE *m = fmemopen(buf, size, "w");
    buf[0] = '\0';
    if (m == NULL)
        return;
    setvbuf(m, NULL, _IONBF, 0);
    cli_print_escaped(m, s);
    fclose(m);
    buf[size - 1] = '\0';
}

static void reading_on_bus(int sig)
{
    struct stat sb;
    for (int i = 0; i < n_reading; i++)
        if (stat(reading[i].path, &sb) != 0 || sb.st_size < reading[i].size) {
            guard_write(reading[i].msg);
            _exit(CLI_EXIT_ERROR);
        }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void reading_add(const char *path)
{
    struct stat sb;
    int i = n_reading;
    if (i == MAX_READING || strlen(path) >= sizeof reading[i].path || stat(path, &sb) != 0)
        return;
    snprintf(reading[i].path, sizeof reading[i].path, "%s", path);
    reading[i].size = sb.st_size;
    char esc[700];
    escape_into(esc, sizeof esc, path);
    snprintf(reading[i].msg, sizeof reading[i].msg,
             "ulpprof: '%s': the file shrank while it was read (truncated by another "
             "program?)\n",
             esc);
    n_reading = i + 1;
    struct sigaction bus;
    memset(&bus, 0, sizeof bus);
    bus.sa_handler = reading_on_bus;
    sigemptyset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
}

int cli_repair_hint = 1;

/* How guarded() opens `path`. */
typedef enum open_how { OPEN_SURE, OPEN_DEFERRED, OPEN_STREAM, OPEN_CONFIRM } open_how;

/*
 * Opens `path` (or confirms *s, which may open it again) with HDF5's
 * crashes and hangs turned into one line naming it.
 */
static ulp_status guarded(const char *path, open_how how, ulp_snapshot **s, ulp_error *err)
{
    /* Seconds an open may take before it counts as hung: $ULPPROF_OPEN_TIMEOUT, default 60. */
    unsigned timeout = 60;
    const char *env = getenv("ULPPROF_OPEN_TIMEOUT");
    if (env != NULL && atoi(env) > 0)
        timeout = (unsigned)atoi(env);
    char esc[700];
    escape_into(esc, sizeof esc, path);
    snprintf(guard_crash_msg, sizeof guard_crash_msg,
             "ulpprof: cannot open '%s': the HDF5 library crashed decoding its metadata "
             "(damaged file, or HDF5 out of memory)\n",
             esc);
    snprintf(
        guard_hang_msg, sizeof guard_hang_msg,
        "ulpprof: cannot open '%s': the HDF5 library was decoding its metadata "
        "for %u s without reading a capture (damaged file?; ULPPROF_OPEN_TIMEOUT sets the limit)\n",
        esc, timeout);

    struct sigaction fatal, alarm_act, old[NGUARD], old_alarm;
    memset(&fatal, 0, sizeof fatal);
    fatal.sa_handler = guard_on_fatal;
    sigemptyset(&fatal.sa_mask);
    fatal.sa_flags = SA_RESETHAND;
    memset(&alarm_act, 0, sizeof alarm_act);
    alarm_act.sa_handler = guard_on_alarm;
    sigemptyset(&alarm_act.sa_mask);
    for (size_t i = 0; i < NGUARD; i++)
        sigaction(guard_signals[i], &fatal, &old[i]);
    sigaction(SIGALRM, &alarm_act, &old_alarm);
    guard_progress = ulp_snapshot_open_progress();
    guard_timeout = timeout;
    unsigned old_timer = alarm(timeout);

    ulp_status st = how == OPEN_SURE       ? ulp_snapshot_open(path, s, err)
                    : how == OPEN_DEFERRED ? ulp_snapshot_open_deferred(path, s, err)
                    : how == OPEN_STREAM   ? ulp_snapshot_open_stream(path, s, err)
                                           : ulp_snapshot_confirm(s, err);

    alarm(old_timer);
    sigaction(SIGALRM, &old_alarm, NULL);
    for (size_t i = 0; i < NGUARD; i++)
        sigaction(guard_signals[i], &old[i], NULL);
    return st;
}

/* What an opened snapshot needs said (its warning) and watched (a shrinking file). */
static void opened(const char *path, ulp_snapshot *s)
{
    if (ulp_snapshot_warning(s) != NULL)
        cli_error("warning: '%s': %s%s%s%s", path, ulp_snapshot_warning(s),
                  cli_repair_hint ? " (for other HDF5 tools: ulpprof repair '" : "",
                  cli_repair_hint ? path : "", cli_repair_hint ? "' COPY.h5)" : "");
    reading_add(path);
}

ulp_status cli_open_snapshot_err(const char *path, ulp_snapshot **s, ulp_error *err)
{
    *s = NULL;
    ulp_status st = guarded(path, OPEN_SURE, s, err);
    if (st == ULP_OK)
        opened(path, *s);
    return st;
}

ulp_snapshot *cli_open_snapshot(const char *path)
{
    ulp_snapshot *s = NULL;
    ulp_error err;
    if (cli_open_snapshot_err(path, &s, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
    return s;
}

/*
 * The second file opens while the first one's index is checked; each is
 * confirmed, and said, in the order cli_open_snapshot() would say them: a
 * warning is said only of a confirmed snapshot, the second file's error
 * only after the first file is confirmed.
 */
int cli_open_pair(const char *path_a, const char *path_b, ulp_snapshot **a, ulp_snapshot **b,
                  int stream)
{
    ulp_error ea, eb;
    open_how how = stream ? OPEN_STREAM : OPEN_DEFERRED;
    *a = NULL;
    *b = NULL;
    if (guarded(path_a, how, a, &ea) != ULP_OK) {
        cli_error("%s", ea.msg);
        return -1;
    }
    int a_said = ulp_snapshot_warning(*a) != NULL;
    if (a_said) {
        if (guarded(path_a, OPEN_CONFIRM, a, &ea) != ULP_OK) {
            cli_error("%s", ea.msg);
            return -1;
        }
        opened(path_a, *a);
    }
    ulp_status sb = guarded(path_b, how, b, &eb);
    if (!a_said) {
        if (guarded(path_a, OPEN_CONFIRM, a, &ea) != ULP_OK) {
            cli_error("%s", ea.msg);
            ulp_snapshot_close(*b);
            *b = NULL;
            return -1;
        }
        opened(path_a, *a);
    }
    if (sb == ULP_OK)
        sb = guarded(path_b, OPEN_CONFIRM, b, &eb);
    if (sb != ULP_OK) {
        cli_error("%s", eb.msg);
        return -1;
    }
    opened(path_b, *b);
    return 0;
}

int cli_use_color(FILE *f)
{
    const char *term = getenv("TERM");
    if (getenv("NO_COLOR") != NULL)
        return 0;
    if (term == NULL || strcmp(term, "dumb") == 0)
        return 0;
    return isatty(fileno(f));
}

void cli_human_bytes(char *buf, size_t size, uint64_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(buf, size, "%u B", (unsigned)bytes);
        return;
    }
    double v = (double)bytes;
    int u = -1;
    /* Step up while the value, rounded to one decimal, would reach 1024. */
    while (u < 5 && v >= 1023.95) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, size, "%.1f %s", v, units[u]);
}

void cli_format_shape(char *buf, size_t size, const ulp_capture_info *c)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int k = 0; k < c->ndim && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", k ? "," : "", (long long)c->shape[k]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
}

void cli_print_escaped(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p == '\\')
            fputs("\\\\", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

size_t cli_utf8_width(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xc0) != 0x80)
            n++;
    return n;
}

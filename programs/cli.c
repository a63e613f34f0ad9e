/* Helpers shared by the `ulpprof` commands: errors, opening snapshots, formatting. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

void cli_error(const char *fmt, ...)
{
    va_list ap;
    fputs("ulpprof: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
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

static void guard_on_alarm(int sig)
{
    (void)sig;
    guard_write(guard_hang_msg);
    _exit(CLI_EXIT_ERROR);
}

static const int guard_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NGUARD (sizeof guard_signals / sizeof guard_signals[0])

int cli_repair_hint = 1;

ulp_snapshot *cli_open_snapshot(const char *path)
{
    /* Seconds an open may take before it counts as hung: $ULPPROF_OPEN_TIMEOUT, default 60. */
    unsigned timeout = 60;
    const char *env = getenv("ULPPROF_OPEN_TIMEOUT");
    if (env != NULL && atoi(env) > 0)
        timeout = (unsigned)atoi(env);
    snprintf(guard_crash_msg, sizeof guard_crash_msg,
             "ulpprof: cannot open '%s': the HDF5 library crashed decoding its metadata "
             "(damaged file)\n",
             path);
    snprintf(guard_hang_msg, sizeof guard_hang_msg,
             "ulpprof: cannot open '%s': the HDF5 library was still decoding its metadata "
             "after %u s (damaged file?; ULPPROF_OPEN_TIMEOUT sets the limit)\n",
             path, timeout);

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
    unsigned old_timer = alarm(timeout);

    ulp_snapshot *s = NULL;
    ulp_error err;
    ulp_status st = ulp_snapshot_open(path, &s, &err);

    alarm(old_timer);
    sigaction(SIGALRM, &old_alarm, NULL);
    for (size_t i = 0; i < NGUARD; i++)
        sigaction(guard_signals[i], &old[i], NULL);
    if (st != ULP_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
    if (ulp_snapshot_warning(s) != NULL)
        fprintf(stderr, "ulpprof: warning: '%s': %s%s%s%s\n", path, ulp_snapshot_warning(s),
                cli_repair_hint ? " (for other HDF5 tools: ulpprof repair '" : "",
                cli_repair_hint ? path : "", cli_repair_hint ? "' COPY.h5)" : "");
    return s;
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

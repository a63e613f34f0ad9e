/* Helpers shared by the `ulpprof` commands: errors, opening snapshots, formatting. */
#include <stdarg.h>
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

ulp_snapshot *cli_open_snapshot(const char *path)
{
    ulp_snapshot *s = NULL;
    ulp_error err;
    if (ulp_snapshot_open(path, &s, &err) != ULP_OK) {
        cli_error("%s", err.msg);
        return NULL;
    }
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

/*
 * `ulpprof ls FILE...`: what a snapshot holds -- its run label, /run and
 * /env, one line per capture in seq order, and a total.
 *
 * Every file is listed in turn; a file that cannot be opened gets one line
 * on stderr and the others are still listed; the exit status is then 2.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "ulpprof/report.h"

#define LS_USAGE "ulpprof ls [--json] FILE..."

static void ls_help(void)
{
    printf("usage: " LS_USAGE "\n"
           "\n"
           "Lists each snapshot: its path, run label, writer, format version,\n"
           "the /run and /env attributes, then one line per capture in seq order\n"
           "(seq, name, occurrence, layer or '-', role, dtype, shape, size) and a\n"
           "total of captures, elements and bytes.\n"
           "\n"
           "options:\n"
           "  --json      one JSON array with an object per file\n"
           "  -h, --help  show this help\n"
           "\n"
           "A file that cannot be read gets one line on stderr; the other files are\n"
           "still listed, and the exit status is 2.  Otherwise it is 0.\n");
}

static void print_kvs(const char *title, size_t n,
                      const ulp_kv *(*get)(const ulp_snapshot *, size_t), const ulp_snapshot *s)
{
    if (n == 0) {
        printf("  %-8s (none)\n", title);
        return;
    }
    printf("  %s\n", title);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        size_t kw = cli_utf8_width(get(s, i)->key);
        w = kw > w ? kw : w;
    }
    for (size_t i = 0; i < n; i++) {
        const ulp_kv *kv = get(s, i);
        printf("    ");
        cli_print_escaped(stdout, kv->key);
        printf("%*s = ", (int)(w - cli_utf8_width(kv->key)), "");
        cli_print_escaped(stdout, kv->value);
        printf("\n");
    }
}

static uint64_t capture_bytes(const ulp_capture_info *c)
{
    return c->elements * ulp_dtype_size(c->dtype);
}

/* "  pos 96-103 req 7" (FORMAT.md "Rows and tokens"); "" without positions. */
static void fmt_tokens(char *buf, size_t n, const ulp_capture_info *c)
{
    buf[0] = '\0';
    if (c->row_rank == 0 || c->positions == NULL || c->rows == 0)
        return;
    int64_t lo = c->positions[0], hi = lo;
    int one_req = 1;
    for (uint64_t i = 0; i < c->rows; i++) {
        lo = c->positions[i] < lo ? c->positions[i] : lo;
        hi = c->positions[i] > hi ? c->positions[i] : hi;
        if (c->requests != NULL && c->requests[i] != c->requests[0])
            one_req = 0;
    }
    size_t w = (size_t)snprintf(buf, n, "  pos %" PRId64 "-%" PRId64, lo, hi);
    if (w < n && c->requests != NULL && one_req)
        w += (size_t)snprintf(buf + w, n - w, " req %" PRId64, c->requests[0]);
    else if (w < n && c->requests != NULL)
        w += (size_t)snprintf(buf + w, n - w, " several requests");
    if (w < n && (uint64_t)(hi - lo) + 1 != c->rows)
        snprintf(buf + w, n - w, " (%" PRIu64 " rows)", c->rows);
}

static void print_text(const ulp_snapshot *s, int color)
{
    size_t n = ulp_snapshot_capture_count(s);
    printf("%s\n", ulp_snapshot_path(s));
    printf("  label:   ");
    cli_print_escaped(stdout, ulp_snapshot_label(s));
    printf("\n  writer:  ");
    cli_print_escaped(stdout, ulp_snapshot_writer(s));
    printf("\n  format:  ulpprof-snapshot version %d\n", (int)ulp_snapshot_format_version(s));
    int64_t ns = ulp_snapshot_created_unix_ns(s);
    if (ns != 0) {
        time_t t = (time_t)(ns / 1000000000);
        struct tm tm;
        char when[64];
        if (gmtime_r(&t, &tm) != NULL && strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm))
            printf("  created: %s\n", when);
    }
    print_kvs("run:", ulp_snapshot_run_count(s), ulp_snapshot_run, s);
    print_kvs("env:", ulp_snapshot_env_count(s), ulp_snapshot_env, s);
    /* Observations (FORMAT.md /observed), in files that have them. */
    if (ulp_snapshot_observed_count(s) > 0)
        print_kvs("observed:", ulp_snapshot_observed_count(s), ulp_snapshot_observed, s);
    if (ulp_snapshot_kernel_count(s) > 0)
        printf("  trace:   %zu kernel launches\n", ulp_snapshot_kernel_count(s));

    /* Column widths from the data, so the table lines up. */
    size_t wseq = 3, wname = 4, wocc = 3, wlayer = 5, wrole = 4, wdtype = 5, wshape = 5, wsize = 4;
    char buf[256];
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        size_t w;
        w = (size_t)snprintf(buf, sizeof buf, "%" PRId64, c->seq);
        wseq = w > wseq ? w : wseq;
        w = cli_utf8_width(c->name);
        wname = w > wname ? w : wname;
        w = (size_t)snprintf(buf, sizeof buf, "%" PRId64, c->occurrence);
        wocc = w > wocc ? w : wocc;
        w = (size_t)snprintf(buf, sizeof buf, "%d", (int)c->layer);
        wlayer = w > wlayer ? w : wlayer;
        w = cli_utf8_width(c->role);
        wrole = w > wrole ? w : wrole;
        w = strlen(ulp_dtype_name(c->dtype));
        wdtype = w > wdtype ? w : wdtype;
        cli_format_shape(buf, sizeof buf, c);
        w = strlen(buf);
        wshape = w > wshape ? w : wshape;
        cli_human_bytes(buf, sizeof buf, capture_bytes(c));
        w = strlen(buf);
        wsize = w > wsize ? w : wsize;
    }
    const char *bold = color ? "\033[1m" : "", *plain = color ? "\033[0m" : "";
    printf("%s  %*s  %-*s  %*s  %*s  %-*s  %-*s  %-*s  %*s%s\n", bold, (int)wseq, "seq", (int)wname,
           "name", (int)wocc, "occ", (int)wlayer, "layer", (int)wrole, "role", (int)wdtype, "dtype",
           (int)wshape, "shape", (int)wsize, "size", plain);
    uint64_t total_elements = 0, total_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        char layer[16], shape[256], size[32];
        if (c->layer < 0)
            snprintf(layer, sizeof layer, "-");
        else
            snprintf(layer, sizeof layer, "%d", (int)c->layer);
        cli_format_shape(shape, sizeof shape, c);
        cli_human_bytes(size, sizeof size, capture_bytes(c));
        printf("  %*" PRId64 "  ", (int)wseq, c->seq);
        cli_print_escaped(stdout, c->name);
        char tokens[128];
        fmt_tokens(tokens, sizeof tokens, c);
        printf("%*s  %*" PRId64 "  %*s  %-*s%*s  %-*s  %-*s  %*s (%" PRIu64 " B)%s\n",
               (int)(wname - cli_utf8_width(c->name)), "", (int)wocc, c->occurrence, (int)wlayer,
               layer, (int)cli_utf8_width(c->role), c->role, (int)(wrole - cli_utf8_width(c->role)),
               "", (int)wdtype, ulp_dtype_name(c->dtype), (int)wshape, shape, (int)wsize, size,
               capture_bytes(c), tokens);
        total_elements += c->elements;
        total_bytes += capture_bytes(c);
    }
    cli_human_bytes(buf, sizeof buf, total_bytes);
    printf("  total: %zu capture%s, %" PRIu64 " elements, %s (%" PRIu64 " B)\n", n,
           n == 1 ? "" : "s", total_elements, buf, total_bytes);
}

/* The key-value pairs as an object; a key given twice keeps its first
 * place and its last value. */
static void kvs_json(ulp_json *j, const char *key, size_t n,
                     const ulp_kv *(*get)(const ulp_snapshot *, size_t), const ulp_snapshot *s)
{
    ulp_json_key(j, key);
    ulp_json_object(j);
    for (size_t i = 0; i < n; i++) {
        const char *k = get(s, i)->key;
        size_t seen = 0, last = i;
        while (seen < i && strcmp(get(s, seen)->key, k) != 0)
            seen++;
        if (seen < i)
            continue;
        for (size_t m = i + 1; m < n; m++)
            if (strcmp(get(s, m)->key, k) == 0)
                last = m;
        ulp_json_key(j, k);
        ulp_json_string(j, get(s, last)->value);
    }
    ulp_json_end(j);
}

static void kstr(ulp_json *j, const char *key, const char *v)
{
    ulp_json_key(j, key);
    ulp_json_string(j, v);
}

static void kint(ulp_json *j, const char *key, int64_t v)
{
    ulp_json_key(j, key);
    ulp_json_int(j, v);
}

static void snapshot_json(ulp_json *j, const ulp_snapshot *s)
{
    ulp_json_object(j);
    kstr(j, "path", ulp_snapshot_path(s));
    kstr(j, "label", ulp_snapshot_label(s));
    kstr(j, "writer", ulp_snapshot_writer(s));
    kint(j, "format_version", ulp_snapshot_format_version(s));
    kint(j, "created_unix_ns", ulp_snapshot_created_unix_ns(s));
    kvs_json(j, "run", ulp_snapshot_run_count(s), ulp_snapshot_run, s);
    kvs_json(j, "env", ulp_snapshot_env_count(s), ulp_snapshot_env, s);
    kvs_json(j, "observed", ulp_snapshot_observed_count(s), ulp_snapshot_observed, s);
    kint(j, "kernels", (int64_t)ulp_snapshot_kernel_count(s));
    /* What the reader read around (a killed writer's file), or null. */
    kstr(j, "warning", ulp_snapshot_warning(s));
    ulp_json_key(j, "captures");
    ulp_json_array(j);
    uint64_t total_elements = 0, total_bytes = 0;
    for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        ulp_json_object(j);
        kint(j, "seq", c->seq);
        kstr(j, "name", c->name);
        kint(j, "occurrence", c->occurrence);
        ulp_json_key(j, "layer");
        if (c->layer < 0)
            ulp_json_null(j);
        else
            ulp_json_int(j, c->layer);
        kstr(j, "role", c->role);
        kstr(j, "dtype", ulp_dtype_name(c->dtype));
        ulp_json_key(j, "shape");
        ulp_json_array(j);
        for (int k = 0; k < c->ndim; k++)
            ulp_json_int(j, c->shape[k]);
        ulp_json_end(j);
        kint(j, "elements", (int64_t)c->elements);
        kint(j, "bytes", (int64_t)capture_bytes(c));
        if (c->row_rank > 0) {
            /* The token metadata, in full (FORMAT.md "Rows and tokens"). */
            kint(j, "row_rank", c->row_rank);
            ulp_json_key(j, "positions");
            ulp_json_array(j);
            for (uint64_t k = 0; k < c->rows; k++)
                ulp_json_int(j, c->positions[k]);
            ulp_json_end(j);
            ulp_json_key(j, "requests");
            ulp_json_array(j);
            for (uint64_t k = 0; k < c->rows; k++)
                ulp_json_int(j, c->requests ? c->requests[k] : 0);
            ulp_json_end(j);
        }
        if (c->n_inputs > 0) {
            ulp_json_key(j, "inputs");
            ulp_json_array(j);
            for (size_t k = 0; k < c->n_inputs; k++)
                ulp_json_string(j, c->inputs[k]);
            ulp_json_end(j);
        }
        ulp_json_end(j);
        total_elements += c->elements;
        total_bytes += capture_bytes(c);
    }
    ulp_json_end(j);
    ulp_json_key(j, "total");
    ulp_json_object(j);
    kint(j, "captures", (int64_t)ulp_snapshot_capture_count(s));
    kint(j, "elements", (int64_t)total_elements);
    kint(j, "bytes", (int64_t)total_bytes);
    ulp_json_end(j);
    ulp_json_end(j);
}

typedef struct ls_cli {
    int json;
    char **paths; /* the snapshots, n_paths of them */
    int n_paths;
} ls_cli;

/* Fills `o` from the command line: -1 to go on, else the exit status. */
static int ls_parse(int argc, char **argv, ls_cli *o)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    o->json = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            o->json = 1;
            break;
        case 'h':
            ls_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("ls", LS_USAGE, argv, c);
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "ulpprof ls: no snapshot given\nusage: %s\n", LS_USAGE);
        return CLI_EXIT_ERROR;
    }
    o->paths = argv + optind;
    o->n_paths = argc - optind;
    return -1;
}

/* Lists each snapshot as it is opened, as text or as an element of the JSON array. */
int cmd_ls(int argc, char **argv)
{
    ls_cli o = {0};
    int rc = ls_parse(argc, argv, &o);
    if (rc >= 0)
        return rc;
    rc = CLI_EXIT_OK;
    int color = !o.json && cli_use_color(stdout), listed = 0;
    ulp_json *all = o.json ? ulp_json_open(stdout) : NULL;
    if (o.json && all == NULL) {
        cli_error("out of memory writing the JSON listing");
        return CLI_EXIT_ERROR;
    }
    if (all != NULL)
        ulp_json_array(all);
    for (int i = 0; i < o.n_paths; i++) {
        ulp_snapshot *s = cli_open_snapshot(o.paths[i]);
        if (s == NULL) {
            rc = CLI_EXIT_ERROR;
            continue;
        }
        if (o.json) {
            snapshot_json(all, s);
        } else {
            if (listed++ > 0)
                printf("\n");
            print_text(s, color);
            fflush(stdout);
        }
        ulp_snapshot_close(s);
    }
    if (all != NULL) {
        ulp_json_end(all);
        if (ulp_json_close(all) != 0 || putchar('\n') == EOF) {
            cli_error("cannot write the JSON listing");
            rc = CLI_EXIT_ERROR;
        }
    }
    return rc;
}

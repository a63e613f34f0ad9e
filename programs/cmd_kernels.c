/*
 * `ulpprof kernels A.h5 B.h5`: aligns the two kernel traces (/trace/kernels)
 * and shows where they part -- typically a GEMM whose tile, split-K or grid
 * changed with the batch or the cached prefix.
 *
 * Two launches match when their name, grid and block are equal.  The
 * alignment is a longest common subsequence, computed as a shortest edit
 * script (Myers' O((N+M)D) greedy algorithm) after trimming the common prefix
 * and suffix.  Exit status as diff(1): 0 same sequence, 1 they differ, 2 error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define KERNELS_USAGE "ulpprof kernels [--json] [--max-hunks N] [--context N] A.h5 B.h5"
/* Edit distance beyond which the full alignment is not attempted (memory
 * grows as D^2); the first divergence is still exact. */
#define MAX_EDITS 2000

static void kernels_help(void)
{
    printf("usage: " KERNELS_USAGE "\n"
           "\n"
           "Aligns the kernel launches of two snapshots (recorded by `ulpprof record`\n"
           "on a CUDA program) and shows where the sequences part.  Two launches\n"
           "match when name, grid and block are equal.  Prints the counts, the first\n"
           "divergence with the capture each side belongs to, then the differing\n"
           "stretches ('-' only in A, '+' only in B, ' ' common context).\n"
           "\n"
           "options:\n"
           "      --json          one JSON object instead of text\n"
           "      --max-hunks N   differing stretches to print (default 10, 0: all)\n"
           "      --context N     common launches shown around each (default 2)\n"
           "  -h, --help          show this help\n"
           "\n"
           "Exit status: 0 same sequence, 1 the sequences differ, 2 error.\n");
}

/* --- symbols: each distinct (name, grid, block) becomes one integer ---------- */

typedef struct symtab {
    char **keys;
    size_t cap, n;
    int *ids;
} symtab;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int sym_grow(symtab *t)
{
    size_t cap = t->cap ? 2 * t->cap : 1024;
    char **keys = calloc(cap, sizeof(*keys));
    int *ids = calloc(cap, sizeof(*ids));
    if (keys == NULL || ids == NULL) {
        free(keys);
        free(ids);
        return -1;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (t->keys[i] == NULL)
            continue;
        size_t j = hash_str(t->keys[i]) & (cap - 1);
        while (keys[j] != NULL)
            j = (j + 1) & (cap - 1);
        keys[j] = t->keys[i];
        ids[j] = t->ids[i];
    }
    free(t->keys);
    free(t->ids);
    t->keys = keys;
    t->ids = ids;
    t->cap = cap;
    return 0;
}

/* The id of `key` (taken over when new); -1 when out of memory. */
static int sym_intern(symtab *t, char *key)
{
    if (2 * (t->n + 1) > t->cap && sym_grow(t) != 0) {
        free(key);
        return -1;
    }
    size_t j = hash_str(key) & (t->cap - 1);
    while (t->keys[j] != NULL) {
        if (strcmp(t->keys[j], key) == 0) {
            free(key);
            return t->ids[j];
        }
        j = (j + 1) & (t->cap - 1);
    }
    t->keys[j] = key;
    t->ids[j] = (int)t->n++;
    return t->ids[j];
}

static void sym_free(symtab *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->keys[i]);
    free(t->keys);
    free(t->ids);
}

static int *symbols_of(const ulp_snapshot *s, symtab *t, size_t *n)
{
    *n = ulp_snapshot_kernel_count(s);
    int *v = malloc((*n ? *n : 1) * sizeof(*v));
    if (v == NULL)
        return NULL;
    for (size_t i = 0; i < *n; i++) {
        const ulp_kernel_info *k = ulp_snapshot_kernel(s, i);
        size_t len = strlen(k->name) + 96;
        char *key = malloc(len);
        if (key == NULL) {
            free(v);
            return NULL;
        }
        snprintf(key, len, "%s\x1f%d,%d,%d\x1f%d,%d,%d", k->name, k->grid[0], k->grid[1],
                 k->grid[2], k->block[0], k->block[1], k->block[2]);
        v[i] = sym_intern(t, key);
        if (v[i] < 0) {
            free(v);
            return NULL;
        }
    }
    return v;
}

/* --- alignment ------------------------------------------------------------------ */

/* One step of the alignment: a common pair, or a launch only in A or B. */
typedef enum op { OP_SAME = 0, OP_DEL, OP_INS } op;
typedef struct step {
    op kind;
    size_t a, b; /* index in A (SAME, DEL) and in B (SAME, INS) */
} step;

typedef struct script {
    step *v;
    size_t n, cap;
} script;

static int script_push(script *s, op kind, size_t a, size_t b)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        step *v = realloc(s->v, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].kind = kind;
    s->v[s->n].a = a;
    s->v[s->n].b = b;
    s->n++;
    return 0;
}

/*
 * Myers' greedy shortest edit script between a[0..n) and b[0..m).  Appends
 * the steps (offset by ao, bo) to `out` in order.  Returns 0, 1 when the
 * distance exceeds MAX_EDITS (nothing appended), -1 when out of memory.
 */
static int myers(const int *a, size_t n, const int *b, size_t m, size_t ao, size_t bo, script *out)
{
    long N = (long)n, M = (long)m, max = N + M;
    if (max > MAX_EDITS)
        max = MAX_EDITS;
    long off = max + 1;
    long *v = calloc((size_t)(2 * max + 3), sizeof(long));
    /* trace[d] holds V[-(d+1) .. d+1] as it stood before step d, for the
     * walk back: about D^2 integers in all. */
    int32_t **trace = calloc((size_t)(max + 1), sizeof(*trace));
    if (v == NULL || trace == NULL) {
        free(v);
        free(trace);
        return -1;
    }
    long found = -1;
    int rc = 0;
    for (long d = 0; d <= max && found < 0; d++) {
        trace[d] = malloc((size_t)(2 * d + 3) * sizeof(int32_t));
        if (trace[d] == NULL) {
            rc = -1;
            break;
        }
        for (long k = -(d + 1); k <= d + 1; k++)
            trace[d][k + d + 1] = (int32_t)v[off + k];
        for (long k = -d; k <= d; k += 2) {
            long x;
            if (k == -d || (k != d && v[off + k - 1] < v[off + k + 1]))
                x = v[off + k + 1]; /* down: a launch only in B */
            else
                x = v[off + k - 1] + 1; /* right: a launch only in A */
            long y = x - k;
            while (x < N && y < M && a[x] == b[y])
                x++, y++;
            v[off + k] = x;
            if (x >= N && y >= M) {
                found = d;
                break;
            }
        }
    }
    free(v);
    if (rc == 0 && found < 0)
        rc = 1;
    /* Walk back from (N, M), collecting steps in reverse. */
    script rev = {NULL, 0, 0};
    long x = N, y = M;
    for (long d = found; rc == 0 && d >= 0; d--) {
        const int32_t *vd = trace[d] + d + 1; /* vd[k] for k in [-(d+1), d+1] */
        long k = x - y;
        long pk = (k == -d || (k != d && vd[k - 1] < vd[k + 1])) ? k + 1 : k - 1;
        long px = vd[pk];
        long py = px - pk;
        while (x > px && y > py && rc == 0) {
            x--, y--;
            rc = script_push(&rev, OP_SAME, (size_t)x, (size_t)y);
        }
        if (d > 0 && rc == 0) {
            if (x == px)
                rc = script_push(&rev, OP_INS, 0, (size_t)py); /* b[py] only in B */
            else
                rc = script_push(&rev, OP_DEL, (size_t)px, 0); /* a[px] only in A */
        }
        x = px, y = py;
    }
    for (long d = 0; d <= max; d++)
        free(trace[d]);
    free(trace);
    for (size_t i = rev.n; i-- > 0 && rc == 0;)
        rc = script_push(out, rev.v[i].kind, rev.v[i].a + ao, rev.v[i].b + bo);
    free(rev.v);
    return rc;
}

/* --- output ---------------------------------------------------------------------- */

/* Where row r of a snapshot's trace falls: the capture it was attributed to,
 * or else the next capture after it.  NULL when no capture has `kernels`. */
static const ulp_capture_info *capture_of(const ulp_snapshot *s, size_t r, int *inside)
{
    const ulp_capture_info *after = NULL;
    for (size_t i = 0; i < ulp_snapshot_capture_count(s); i++) {
        const ulp_capture_info *c = ulp_snapshot_capture(s, i);
        if (!c->has_kernels)
            continue;
        if ((int64_t)r >= c->kernels[0] && (int64_t)r < c->kernels[1]) {
            *inside = 1;
            return c;
        }
        if (after == NULL && c->kernels[0] > (int64_t)r)
            after = c;
    }
    *inside = 0;
    return after;
}

static void print_kernel(char tag, const char *side, size_t i, const ulp_kernel_info *k)
{
    printf("%c %s #%zu  ", tag, side, i);
    cli_print_escaped(stdout, k->name);
    printf("  grid=(%d,%d,%d) block=(%d,%d,%d)\n", k->grid[0], k->grid[1], k->grid[2], k->block[0],
           k->block[1], k->block[2]);
}

static void print_where(const char *side, const ulp_snapshot *s, size_t r)
{
    int inside;
    const ulp_capture_info *c = capture_of(s, r, &inside);
    if (c == NULL)
        return;
    printf("  %s #%zu %s capture %s/%" PRId64, side, r, inside ? "belongs to" : "precedes", c->name,
           c->occurrence);
    if (c->layer >= 0)
        printf(" (layer %d)", c->layer);
    printf("\n");
}

static json_t *kernel_json(size_t i, const ulp_kernel_info *k)
{
    return json_pack("{s:I, s:o, s:[i,i,i], s:[i,i,i]}", "index", (json_int_t)i, "name",
                     cli_json_str(k->name), "grid", k->grid[0], k->grid[1], k->grid[2], "block",
                     k->block[0], k->block[1], k->block[2]);
}

int cmd_kernels(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},
        {"max-hunks", required_argument, NULL, 'm'},
        {"context", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int as_json = 0;
    long max_hunks = 10, context = 2;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'j':
            as_json = 1;
            break;
        case 'm':
        case 'c': {
            errno = 0;
            long v = strtol(optarg, &end, 10);
            /* Beyond a million, a value is a typo, and 2 * context would overflow. */
            if (end == optarg || *end != '\0' || v < 0 || v > 1000000 || errno) {
                cli_error("kernels: --%s needs an integer from 0 to 1000000, not '%s'",
                          c == 'm' ? "max-hunks" : "context", optarg);
                return CLI_EXIT_ERROR;
            }
            if (c == 'm')
                max_hunks = v;
            else
                context = v;
            break;
        }
        case 'h':
            kernels_help();
            return CLI_EXIT_OK;
        default:
            return cli_bad_option("kernels", KERNELS_USAGE, argv, c);
        }
    }
    if (argc - optind != 2) {
        cli_error("kernels: expected two snapshots; usage: " KERNELS_USAGE);
        return CLI_EXIT_ERROR;
    }
    int rc = CLI_EXIT_ERROR;
    symtab syms = {NULL, 0, 0, NULL};
    int *sa = NULL, *sb = NULL;
    script sc = {NULL, 0, 0};
    ulp_snapshot *A = cli_open_snapshot(argv[optind]);
    ulp_snapshot *B = A ? cli_open_snapshot(argv[optind + 1]) : NULL;
    if (A == NULL || B == NULL)
        goto cleanup;
    size_t na, nb;
    sa = symbols_of(A, &syms, &na);
    sb = sa ? symbols_of(B, &syms, &nb) : NULL;
    if (sa == NULL || sb == NULL) {
        cli_error("kernels: out of memory");
        goto cleanup;
    }
    for (int i = 0; i < 2; i++) {
        const ulp_snapshot *s = i ? B : A;
        if (ulp_snapshot_kernel_count(s) == 0)
            cli_error("kernels: '%s' has no kernel trace (record a CUDA program with "
                      "'ulpprof record')",
                      ulp_snapshot_path(s));
    }

    size_t pre = 0;
    while (pre < na && pre < nb && sa[pre] == sb[pre])
        pre++;
    size_t suf = 0;
    while (suf < na - pre && suf < nb - pre && sa[na - 1 - suf] == sb[nb - 1 - suf])
        suf++;
    int identical = pre == na && pre == nb;
    int aligned = 1;
    size_t common = pre + suf, only_a = 0, only_b = 0;
    if (!identical) {
        for (size_t i = 0; i < pre; i++)
            if (script_push(&sc, OP_SAME, i, i) != 0)
                goto oom;
        int m = myers(sa + pre, na - pre - suf, sb + pre, nb - pre - suf, pre, pre, &sc);
        if (m < 0)
            goto oom;
        if (m > 0) {
            aligned = 0;
        } else {
            for (size_t i = 0; i < suf; i++)
                if (script_push(&sc, OP_SAME, na - suf + i, nb - suf + i) != 0)
                    goto oom;
            common = 0;
            for (size_t i = 0; i < sc.n; i++) {
                common += sc.v[i].kind == OP_SAME;
                only_a += sc.v[i].kind == OP_DEL;
                only_b += sc.v[i].kind == OP_INS;
            }
        }
    }

    if (as_json) {
        json_t *o = json_pack(
            "{s:s, s:i, s:{s:o, s:o, s:I}, s:{s:o, s:o, s:I}, s:b, s:b}", "format",
            "ulpprof-kernels", "format_version", 1, "a", "path", cli_json_str(ulp_snapshot_path(A)),
            "label", cli_json_str(ulp_snapshot_label(A)), "launches", (json_int_t)na, "b", "path",
            cli_json_str(ulp_snapshot_path(B)), "label", cli_json_str(ulp_snapshot_label(B)),
            "launches", (json_int_t)nb, "identical", identical, "aligned", aligned);
        if (o == NULL)
            goto oom;
        if (aligned) {
            json_object_set_new(o, "common", json_integer((json_int_t)common));
            json_object_set_new(o, "only_in_a", json_integer((json_int_t)only_a));
            json_object_set_new(o, "only_in_b", json_integer((json_int_t)only_b));
        }
        if (identical) {
            json_object_set_new(o, "first_divergence", json_null());
        } else {
            json_t *fd = json_object();
            json_object_set_new(fd, "a_index", json_integer((json_int_t)pre));
            json_object_set_new(fd, "b_index", json_integer((json_int_t)pre));
            json_object_set_new(
                fd, "a", pre < na ? kernel_json(pre, ulp_snapshot_kernel(A, pre)) : json_null());
            json_object_set_new(
                fd, "b", pre < nb ? kernel_json(pre, ulp_snapshot_kernel(B, pre)) : json_null());
            json_object_set_new(o, "first_divergence", fd);
        }
        if (aligned && !identical) {
            json_t *ops = json_array();
            for (size_t i = 0; i < sc.n; i++) {
                if (sc.v[i].kind == OP_SAME)
                    continue;
                json_array_append_new(
                    ops, json_pack("{s:s, s:I}", "op", sc.v[i].kind == OP_DEL ? "only_a" : "only_b",
                                   "index",
                                   (json_int_t)(sc.v[i].kind == OP_DEL ? sc.v[i].a : sc.v[i].b)));
            }
            json_object_set_new(o, "edits", ops);
        }
        int bad = cli_json_print(o, stdout);
        json_decref(o);
        if (bad)
            goto oom;
        rc = identical ? CLI_EXIT_OK : CLI_EXIT_DIFFER;
        goto cleanup;
    }

    printf("A: %s (label %s): %zu kernel launches\n", ulp_snapshot_path(A), ulp_snapshot_label(A),
           na);
    printf("B: %s (label %s): %zu kernel launches\n", ulp_snapshot_path(B), ulp_snapshot_label(B),
           nb);
    if (identical) {
        printf("identical: the same %zu launches (name, grid, block) in the same order\n", na);
        rc = CLI_EXIT_OK;
        goto cleanup;
    }
    if (aligned)
        printf("common: %zu launches in both, in order; %zu only in A, %zu only in B\n", common,
               only_a, only_b);
    else
        printf("common: more than %d edits apart after the first %zu launches; no alignment\n",
               MAX_EDITS, pre);
    printf("first divergence: A #%zu, B #%zu (after %zu common launches)\n", pre, pre, pre);
    if (pre < na)
        print_kernel('-', "A", pre, ulp_snapshot_kernel(A, pre));
    else
        printf("- A ends here\n");
    if (pre < nb)
        print_kernel('+', "B", pre, ulp_snapshot_kernel(B, pre));
    else
        printf("+ B ends here\n");
    if (pre < na)
        print_where("A", A, pre);
    if (pre < nb)
        print_where("B", B, pre);

    if (aligned) {
        /* Hunks: runs of edits with `context` common steps around them. */
        long hunks = 0;
        size_t i = 0;
        while (i < sc.n) {
            if (sc.v[i].kind == OP_SAME) {
                i++;
                continue;
            }
            if (max_hunks > 0 && hunks == max_hunks) {
                size_t left = 0;
                for (size_t j = i; j < sc.n; j++)
                    left += sc.v[j].kind != OP_SAME && (j == 0 || sc.v[j - 1].kind == OP_SAME);
                printf("... %zu more differing stretch%s (--max-hunks 0 shows all)\n", left,
                       left == 1 ? "" : "es");
                break;
            }
            size_t start = i, end = i;
            /* Extend while the gap of common steps is short enough to merge. */
            for (;;) {
                while (end < sc.n && sc.v[end].kind != OP_SAME)
                    end++;
                size_t gap = end;
                while (gap < sc.n && sc.v[gap].kind == OP_SAME)
                    gap++;
                if (gap < sc.n && (long)(gap - end) <= 2 * context)
                    end = gap;
                else
                    break;
            }
            size_t from = start > (size_t)context ? start - (size_t)context : 0;
            size_t to = end + (size_t)context < sc.n ? end + (size_t)context : sc.n;
            printf("@@ stretch %ld @@\n", hunks + 1);
            for (size_t j = from; j < to; j++) {
                const step *st = &sc.v[j];
                if (st->kind == OP_SAME)
                    print_kernel(' ', "A", st->a, ulp_snapshot_kernel(A, st->a));
                else if (st->kind == OP_DEL)
                    print_kernel('-', "A", st->a, ulp_snapshot_kernel(A, st->a));
                else
                    print_kernel('+', "B", st->b, ulp_snapshot_kernel(B, st->b));
            }
            hunks++;
            i = end;
        }
    }
    rc = CLI_EXIT_DIFFER;
    goto cleanup;
oom:
    cli_error("kernels: out of memory");
    rc = CLI_EXIT_ERROR;
cleanup:
    free(sc.v);
    free(sa);
    free(sb);
    sym_free(&syms);
    ulp_snapshot_close(B);
    ulp_snapshot_close(A);
    return rc;
}

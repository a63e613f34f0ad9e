/*
 * What a run is on disk (ladder.h): one snapshot file, or a directory of the
 * per-rank files of one multi-process run (`ulpprof record -o run/%r.h5`).
 * A directory's files are ordered by the rank their /env records, else by
 * file name; `ulp_ladder_list_dir()` turns a directory of runs into paths.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/grow.h"
#include "ulpprof/ladder.h"
#include "ulpprof/snapshot.h"

#include "ladder_priv.h"

static int has_h5_suffix(const char *name)
{
    size_t n = strlen(name);
    return n > 3 && strcmp(name + n - 3, ".h5") == 0 && name[0] != '.';
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* Entries of `dir` that `keep` accepts, joined to it, sorted. */
static ulp_status list(const char *dir, int (*keep)(const char *path, const char *name),
                       char ***out, size_t *n_out, ulp_error *err)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return ulp__error(err, errno == ENOENT ? ULP_ENOENT : ULP_EIO, "cannot open '%s': %s", dir,
                          strerror(errno));
    char **v = NULL;
    size_t n = 0, cap = 0;
    ulp_status st = ULP_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char *p = join(dir, e->d_name);
        if (p == NULL) {
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            break;
        }
        if (!keep(p, e->d_name)) {
            free(p);
            continue;
        }
        if (ULP__GROW(v, cap, n + 1) != 0) {
            free(p);
            st = ulp__error(err, ULP_ENOMEM, "out of memory");
            break;
        }
        v[n++] = p;
    }
    closedir(d);
    if (st != ULP_OK) {
        free_list(v, n);
        return st;
    }
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    *n_out = n;
    return ULP_OK;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int keep_h5_file(const char *path, const char *name)
{
    struct stat st;
    return has_h5_suffix(name) && stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int keep_run(const char *path, const char *name)
{
    if (keep_h5_file(path, name))
        return 1;
    if (!is_dir(path))
        return 0;
    char **v = NULL;
    size_t n = 0;
    if (list(path, keep_h5_file, &v, &n, NULL) != ULP_OK)
        return 0;
    free_list(v, n);
    return n > 0;
}

ulp_status ulp_ladder_list_dir(const char *dir, char ***paths, size_t *n, ulp_error *err)
{
    *paths = NULL;
    *n = 0;
    ulp_status st = list(dir, keep_run, paths, n, err);
    if (st == ULP_OK && *n == 0)
        return ulp__error(err, ULP_ENOENT, "'%s' holds no run (no *.h5 file or directory of them)",
                          dir);
    return st;
}

void ulp_ladder_files_free(ulp_ladder_file *files, size_t n)
{
    for (size_t i = 0; files && i < n; i++)
        free(files[i].path);
    free(files);
}

typedef struct ranked {
    ulp_ladder_file f;
    ulp_snapshot *s;
} ranked;

static int cmp_rank(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    return (a->f.rank > b->f.rank) - (a->f.rank < b->f.rank);
}

/* The rank a file's /env records, or -1. */
static int env_rank(const ulp_snapshot *s)
{
    for (size_t i = 0; i < ulp_snapshot_env_count(s); i++) {
        const ulp_kv *kv = ulp_snapshot_env(s, i);
        if (strcmp(kv->key, "rank") != 0)
            continue;
        char *end;
        long r = strtol(kv->value, &end, 10);
        return end != kv->value && *end == '\0' && r >= 0 && r < 1 << 20 ? (int)r : -1;
    }
    return -1;
}

static ulp_status open_file(const ulp__ladder_opener *o, const char *path, ulp_snapshot **s,
                            ulp_error *err)
{
    return o && o->open ? o->open(o->user, path, s, err) : ulp_snapshot_open(path, s, err);
}

static void free_ranked(ranked *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].f.path);
        ulp_snapshot_close(v[i].s);
    }
    free(v);
}

ulp_status ulp__ladder_run_open(const char *path, const ulp__ladder_opener *o,
                                ulp_ladder_file **files, ulp_snapshot ***snaps, size_t *n,
                                ulp_error *err)
{
    *files = NULL;
    *n = 0;
    if (snaps)
        *snaps = NULL;
    ranked *v = NULL;
    size_t k = 0;
    ulp_status st = ULP_OK;
    if (!is_dir(path)) {
        if ((v = calloc(1, sizeof *v)) == NULL || (v->f.path = strdup(path)) == NULL) {
            free(v);
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        k = 1;
        if (snaps && (st = open_file(o, path, &v->s, err)) != ULP_OK) {
            free_ranked(v, k);
            return st;
        }
    } else {
        char **names = NULL;
        if ((st = list(path, keep_h5_file, &names, &k, err)) != ULP_OK)
            return st;
        if (k == 0) {
            free(names);
            return ulp__error(err, ULP_ENOENT, "run directory '%s' holds no *.h5 file", path);
        }
        if ((v = calloc(k, sizeof *v)) == NULL) {
            free_list(names, k);
            return ulp__error(err, ULP_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < k; i++)
            v[i].f.path = names[i];
        free(names);
        /* Ranks from /env when every file has one; else the order by name. */
        int all_ranked = 1;
        for (size_t i = 0; i < k; i++) {
            if ((st = open_file(o, v[i].f.path, &v[i].s, err)) != ULP_OK) {
                free_ranked(v, k);
                return st;
            }
            v[i].f.rank = env_rank(v[i].s);
            all_ranked &= v[i].f.rank >= 0;
            if (snaps == NULL) {
                ulp_snapshot_close(v[i].s);
                v[i].s = NULL;
            }
        }
        for (size_t i = 0; i < k; i++)
            v[i].f.rank = all_ranked ? v[i].f.rank : (int)i;
        qsort(v, k, sizeof *v, cmp_rank);
        for (size_t i = 1; i < k; i++)
            if (v[i].f.rank == v[i - 1].f.rank) {
                st = ulp__error(err, ULP_EINVAL,
                                "run directory '%s': '%s' and '%s' are both rank %d (their /env "
                                "rank; a process without RANK records 0): not one multi-rank run",
                                path, v[i - 1].f.path, v[i].f.path, v[i].f.rank);
                free_ranked(v, k);
                return st;
            }
    }
    ulp_ladder_file *f = calloc(k, sizeof *f);
    ulp_snapshot **s = snaps ? calloc(k, sizeof *s) : NULL;
    if (f == NULL || (snaps && s == NULL)) {
        free(f);
        free(s);
        free_ranked(v, k);
        return ulp__error(err, ULP_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < k; i++) {
        f[i] = v[i].f;
        if (s)
            s[i] = v[i].s;
    }
    free(v);
    *files = f;
    *n = k;
    if (snaps)
        *snaps = s;
    return ULP_OK;
}

ulp_status ulp_ladder_run_files(const char *path, ulp_ladder_file **files, size_t *n,
                                ulp_error *err)
{
    return ulp__ladder_run_open(path, NULL, files, NULL, n, err);
}

/*
 * Helpers for the writer and capture tests: temporary directories, plain
 * HDF5 reads of what the writer produced (deliberately NOT the analyzer's
 * reader: these tests check the writer against HDF5 itself), deterministic
 * bit patterns, and stderr capture.  Header-only; every function is static.
 */
#ifndef ULPPROF_TESTS_CAPTURE_TESTUTIL_H
#define ULPPROF_TESTS_CAPTURE_TESTUTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ulpprof/dtype.h"

/* Not every test uses every helper. */
#define TU_UNUSED __attribute__((unused))

static char tu_last_dir[1024];

/*
 * A fresh directory under $ULPPROF_TEST_TMP (or /tmp); returns a static
 * path, which tu_done() removes when the test got that far.
 */
static TU_UNUSED char *tu_tmpdir(const char *tag)
{
    char *dir = tu_last_dir;
    const char *base = getenv("ULPPROF_TEST_TMP");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    mkdir(base, 0777);
    snprintf(dir, sizeof(tu_last_dir), "%s/%s-XXXXXX", base, tag);
    if (mkdtemp(dir) == NULL) {
        fprintf(stderr, "test: mkdtemp(%s): %s\n", dir, strerror(errno));
        abort();
    }
    return dir;
}

/* Removes a test's directory and the files in it (the tests make no subdirectories). */
static TU_UNUSED void tu_rmtree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    char path[2048];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        remove(path);
    }
    closedir(d);
    rmdir(dir);
}

/* The end of a passing test: its directory goes (a failing one keeps it). */
static TU_UNUSED void tu_done(void)
{
    if (tu_last_dir[0] != '\0')
        tu_rmtree(tu_last_dir);
    tu_last_dir[0] = '\0';
}

/* Bits of element i of a deterministic pattern: i times an odd constant. */
static TU_UNUSED uint64_t tu_pattern(uint64_t i)
{
    return (i + 1) * UINT64_C(0x9E3779B97F4A7C15);
}

/*
 * Fills `n` elements of `dtype` so that the 16-bit and 8-bit types hold every
 * bit pattern (element i = i mod 2^bits) and the wider ones tu_pattern(i).
 */
static TU_UNUSED void tu_fill(ulp_dtype dtype, void *buf, size_t n)
{
    size_t size = ulp_dtype_size(dtype);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = size <= 2 ? (uint64_t)i : tu_pattern(i);
        memcpy((char *)buf + i * size, &bits, size); /* little-endian host */
    }
}

/* A string attribute (variable- or fixed-length); 0 on success. */
static TU_UNUSED int tu_attr_str(hid_t obj, const char *name, char *out, size_t size)
{
    int rc = -1;
    out[0] = '\0';
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    hid_t t = H5Aget_type(a);
    if (H5Tget_class(t) == H5T_STRING) {
        if (H5Tis_variable_str(t) > 0) {
            char *s = NULL;
            hid_t mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(mt, H5T_VARIABLE);
            H5Tset_cset(mt, H5Tget_cset(t));
            if (H5Aread(a, mt, &s) >= 0 && s != NULL) {
                snprintf(out, size, "%s", s);
                H5free_memory(s);
                rc = 0;
            }
            H5Tclose(mt);
        } else {
            size_t n = H5Tget_size(t);
            char *s = calloc(1, n + 1);
            if (s != NULL && H5Aread(a, t, s) >= 0) {
                snprintf(out, size, "%s", s);
                rc = 0;
            }
            free(s);
        }
    }
    H5Tclose(t);
    H5Aclose(a);
    return rc;
}

/* An integer attribute read as int64 (with HDF5's integer conversion); 0 on success. */
static TU_UNUSED int tu_attr_i64(hid_t obj, const char *name, int64_t *out)
{
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    int rc = H5Aread(a, H5T_NATIVE_INT64, out) >= 0 ? 0 : -1;
    H5Aclose(a);
    return rc;
}

/* The class, size and byte order of an attribute's stored type. */
static TU_UNUSED int tu_attr_type_is(hid_t obj, const char *name, hid_t want)
{
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return 0;
    hid_t t = H5Aget_type(a);
    int eq = H5Tequal(t, want) > 0;
    H5Tclose(t);
    H5Aclose(a);
    return eq;
}

static TU_UNUSED int tu_attr_exists(hid_t obj, const char *name)
{
    return H5Aexists(obj, name) > 0;
}

/*
 * Reads a dataset's raw bits with memory type = its own file type (HDF5
 * converts nothing).  Returns a malloc'd buffer (caller frees; non-NULL even
 * for 0 bytes) and sets *nbytes; NULL on failure.
 */
static TU_UNUSED void *tu_read_raw(hid_t file, const char *path, size_t *nbytes)
{
    hid_t ds = H5Dopen2(file, path, H5P_DEFAULT);
    if (ds < 0)
        return NULL;
    hid_t t = H5Dget_type(ds);
    hid_t sp = H5Dget_space(ds);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    size_t bytes = (size_t)n * H5Tget_size(t);
    void *buf = malloc(bytes ? bytes : 1);
    if (buf != NULL && bytes > 0 && H5Dread(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        buf = NULL;
    }
    *nbytes = bytes;
    H5Sclose(sp);
    H5Tclose(t);
    H5Dclose(ds);
    return buf;
}

/* Number of links in a group (-1 when it cannot be opened). */
static TU_UNUSED long tu_group_count(hid_t file, const char *path)
{
    hid_t g = H5Gopen2(file, path, H5P_DEFAULT);
    if (g < 0)
        return -1;
    H5G_info_t info;
    long n = H5Gget_info(g, &info) >= 0 ? (long)info.nlinks : -1;
    H5Gclose(g);
    return n;
}

/* Opens a snapshot read-only with HDF5's error printing off. */
static TU_UNUSED hid_t tu_open(const char *path)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    return H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
}

/* Redirects stderr into a file until tu_stderr_end(), which returns its text. */
typedef struct tu_stderr {
    int saved;
    char path[1100];
    char text[8192];
} tu_stderr;

static TU_UNUSED void tu_stderr_begin(tu_stderr *c, const char *dir)
{
    fflush(stderr);
    snprintf(c->path, sizeof(c->path), "%s/stderr.txt", dir);
    int fd = open(c->path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    c->saved = dup(2);
    dup2(fd, 2);
    close(fd);
}

static TU_UNUSED const char *tu_stderr_end(tu_stderr *c)
{
    fflush(stderr);
    dup2(c->saved, 2);
    close(c->saved);
    c->text[0] = '\0';
    FILE *f = fopen(c->path, "r");
    if (f != NULL) {
        size_t n = fread(c->text, 1, sizeof(c->text) - 1, f);
        c->text[n] = '\0';
        fclose(f);
    }
    return c->text;
}

/* Number of '\n' in a string. */
static TU_UNUSED int tu_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#endif /* ULPPROF_TESTS_CAPTURE_TESTUTIL_H */

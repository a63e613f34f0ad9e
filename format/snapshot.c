/*
 * The snapshot reader: opening and validating a snapshot (FORMAT.md), and
 * the accessors.
 *
 * Everything the analyzer relies on is checked once, here, at open, so that
 * the comparison code can trust what it is given.  The parts: the root
 * attributes and the file checks (this file), the capture index
 * (snapshot_recover.c over snapshot_captures.c and snapshot_journal.c),
 * /run and /env (snapshot_attr.c), the kernel trace (snapshot_trace.c), raw
 * reads (snapshot_read.c), messages (snapshot_errors.c) and what a snapshot
 * owns (snapshot_store.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/strmap.h"
#include "h5types.h"
#include "journal.h"
#include "snapshot_file.h"
#include "snapshot_priv.h"

/* --- Open and close ------------------------------------------------------------------ */

/* The file-level checks before HDF5 looks at the file. */
static ulp_status open_file(ulp_snapshot *s, ulp_error *err)
{
    struct stat sb;
    if (stat(s->path, &sb) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return ulp__error(err, ULP_ENOENT, "cannot open '%s': no such file", s->path);
        return ulp__error(err, ULP_EIO, "cannot open '%s': %s", s->path, strerror(errno));
    }
    if (S_ISDIR(sb.st_mode))
        return ulp__error(err, ULP_EIO, "cannot open '%s': is a directory", s->path);
    /* A FIFO or a device would block the open, or never end: refuse it now. */
    if (!S_ISREG(sb.st_mode))
        return ulp__error(err, ULP_EIO, "cannot open '%s': not a regular file", s->path);
    s->fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (s->fd < 0)
        return ulp__error(err, errno == ENOENT ? ULP_ENOENT : ULP_EIO, "cannot open '%s': %s",
                          s->path, strerror(errno));
    if (fstat(s->fd, &sb) != 0)
        return ulp__error(err, ULP_EIO, "cannot open '%s': %s", s->path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) /* replaced since the stat above */
        return ulp__error(err, ULP_EIO, "cannot open '%s': not a regular file", s->path);
    s->file_size = (uint64_t)sb.st_size;
    if (sb.st_mtim.tv_sec > 0)
        s->mtime_ns = (uint64_t)sb.st_mtim.tv_sec * 1000000000u + (uint64_t)sb.st_mtim.tv_nsec;
    if (s->file_size == 0)
        return ulp__error(err, ULP_ENOTHDF5, "cannot open '%s': not an HDF5 file (empty file)",
                          s->path);
    /*
     * A read-only mapping lets ulp_snapshot_view() hand out contiguous
     * datasets without copying them (the comparison reads the page cache
     * directly).  Without one, views fall back to pread(2).
     */
    if ((uint64_t)(size_t)s->file_size == s->file_size) {
        void *m = mmap(NULL, (size_t)s->file_size, PROT_READ, MAP_SHARED, s->fd, 0);
        s->map = m == MAP_FAILED ? NULL : m;
    }

    /*
     * A live writer holds HDF5's exclusive lock (flock(2)) on the file; HDF5's
     * own open then fails with an error that names nothing.  Ask first.
     */
    if (flock(s->fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK)
        return ulp__error(err, ULP_EIO,
                          "cannot open '%s': locked by a running writer (read it once the "
                          "writer has closed it)",
                          s->path);
    flock(s->fd, LOCK_UN);
    return ULP_OK;
}

/* HDF5's file access list for a snapshot: its metadata cache of a fixed size. */
/* HDF5's open of the file open_file() checked. */
/*
 * Whether HDF5 may have refused the file for a superblock whose end of allocation lies past
 * the file's end, the file being a killed writer's of ours (a journal without its closed
 * mark, found by its magic).  HDF5 1.10's flush truncates the file to its end of allocation
 * before it writes the superblock that says where that end is: a writer killed between the
 * two leaves a superblock past the file's end, over bytes nothing uses.  Such a file is
 * opened again without that check; a capture past the end is still refused as truncated (its
 * header's or its data's address, as for any file cut short).
 */
static int killed_past_eof(ulp_snapshot *s)
{
    ulp__journal_state js;
    ulp__journal_find(s, &js);
    return js.found && !js.closed;
}

static ulp_status open_hdf5(ulp_snapshot *s, ulp_error *err)
{
    htri_t is = H5Fis_hdf5(s->path);
    if (is <= 0) {
        ulp__h5_err_info info;
        ulp__h5_last_error(&info);
        if (is < 0 && info.nomem)
            return ulp__error(err, ULP_ENOMEM, "cannot open '%s': out of memory", s->path);
        if (is < 0 && info.truncated)
            return ulp__error(err, ULP_ETRUNC, "cannot open '%s': file is truncated", s->path);
        return ulp__error(err, ULP_ENOTHDF5, "cannot open '%s': not an HDF5 file", s->path);
    }
    s->file = ulp__snap_open_h5(s);
    if (s->file < 0 && killed_past_eof(s)) {
        s->past_eof = 1;
        s->file = ulp__snap_open_h5(s);
    }
    if (s->file < 0) {
        ulp__h5_err_info info;
        ulp__h5_last_error(&info);
        const char *eof = strstr(info.desc, "stored_eof = ");
        if (info.nomem)
            return ulp__error(err, ULP_ENOMEM, "cannot open '%s': out of memory", s->path);
        if (info.truncated && eof != NULL)
            return ulp__error(err, ULP_ETRUNC,
                              "cannot open '%s': file is truncated (%" PRIu64
                              " bytes, HDF5 expects %s)",
                              s->path, s->file_size, eof + strlen("stored_eof = "));
        if (info.truncated)
            return ulp__error(err, ULP_ETRUNC, "cannot open '%s': file is truncated (%s)", s->path,
                              info.desc);
        if (info.locked)
            return ulp__error(err, ULP_EIO,
                              "cannot open '%s': file is locked (is a writer still running?)",
                              s->path);
        /* A valid signature but an unreadable superblock or root: most often a
         * file cut short while it was written. */
        return ulp__error(err, ULP_ETRUNC,
                          "cannot open '%s': HDF5 cannot read its metadata "
                          "(truncated or corrupt: %s)",
                          s->path, info.desc);
    }
    /* Objects reached through an external link report another file number. */
    H5O_info_t oi;
    if (H5Oget_info2(s->file, &oi, H5O_INFO_BASIC) < 0)
        return ulp__error(err, ULP_EHDF5, "cannot open '%s': its root group cannot be read",
                          s->path);
    s->fileno = oi.fileno;
    return ULP_OK;
}

static ulp_status read_root(ulp_snapshot *s, ulp_error *err)
{
    const char *why = NULL;
    char *fmt = NULL;
    ulp_status st = ulp__attr_check_object(s, s->file, "/", err);
    if (st != ULP_OK)
        return st;
    int rc = ulp__attr_read_str(s->file, "format", &fmt, &why);
    if (rc > 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': not an ulpprof snapshot (no 'format' attribute)",
                          s->path);
    if (rc < 0)
        return ulp__error(err, ULP_EFORMAT, "'%s': not an ulpprof snapshot (attribute 'format' %s)",
                          s->path, why);
    if (strcmp(fmt, ULP__FORMAT_NAME) != 0) {
        ulp__error(err, ULP_EFORMAT, "'%s': not an ulpprof snapshot (format is '%.100s')", s->path,
                   fmt);
        free(fmt);
        return ULP_EFORMAT;
    }
    free(fmt);

    int64_t v = 0;
    rc = ulp__attr_read_i64(s->file, "format_version", &v, &why);
    if (rc != 0)
        return ulp__error(err, ULP_EBADATTR, "'%s': required attribute 'format_version' %s",
                          s->path, rc > 0 ? "is missing" : why);
    if (v > ULP_FORMAT_VERSION)
        return ulp__error(err, ULP_EVERSION,
                          "'%s': format version %" PRId64
                          " is not supported (this build reads version %d)",
                          s->path, v, ULP_FORMAT_VERSION);
    if (v < 1)
        return ulp__error(err, ULP_EVERSION, "'%s': format version %" PRId64 " is not valid",
                          s->path, v);
    s->format_version = (int32_t)v;

    char *str = NULL;
    if ((rc = ulp__attr_read_str(s->file, "label", &str, &why)) < 0)
        return ulp__error(err, ULP_EBADATTR, "'%s': attribute 'label' %s", s->path, why);
    s->label = rc == 0 ? str : strdup("");
    if ((rc = ulp__attr_read_str(s->file, "writer", &str, &why)) < 0)
        return ulp__error(err, ULP_EBADATTR, "'%s': attribute 'writer' %s", s->path, why);
    s->writer = rc == 0 ? str : strdup("");
    if (s->label == NULL || s->writer == NULL)
        return ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    if (ulp__attr_read_i64(s->file, "created_unix_ns", &s->created_unix_ns, &why) < 0)
        return ulp__error(err, ULP_EBADATTR, "'%s': attribute 'created_unix_ns' %s", s->path, why);
    return ULP_OK;
}

/*
 * In a killed writer's file, `what` could not be read (st, err): unless the
 * file is cut short (then nothing is read around) or memory ran out, it is
 * left out, and "; <what> is left out (<why>)" is added to `left`.
 */
static ulp_status leave_out(ulp_snapshot *s, const ulp__h5_err_info *sticky, ulp_status st,
                            const char *what, char *left, size_t size, ulp_error *err)
{
    if (st == ULP_ENOMEM || st == ULP_ETRUNC || sticky->truncated)
        return st;
    size_t n = strlen(left);
    snprintf(left + n, size - n, "; %s is left out (%s)", what, ulp__snap_without_path(s, err));
    ulp_error_clear(err);
    return ULP_OK;
}

/*
 * The captures a digest-mode file keeps in /digests (snapshot_kept.c) into kept/kept_mem.
 * Of a killed writer's file (`unclosed`), the journal holds every kept capture the writer
 * accepted (FORMAT.md "Capture journal"): a name it holds needs no table; and a kill may
 * have torn /digests (digests are durable once flushed, their last chunk rewritten at the
 * next flush): a name that cannot be read is left out (said in `left`), and HDF5's
 * complaints about it do not make the file "truncated" (*sticky).
 */
static ulp_status read_kept(ulp_snapshot *s, ulp__journal_state *js, int unclosed,
                            ulp__h5_err_info *sticky, ulp__cap_vec *kept,
                            const unsigned char ***kept_mem, char *left, size_t left_size,
                            ulp_error *err)
{
    ulp__h5_err_info before = *sticky;
    ulp__cap_vec jkept = {0};
    const unsigned char **jkept_mem = NULL;
    ulp__strmap jnames;
    ulp__strmap_init(&jnames);
    ulp_status st = ULP_OK;
    if (unclosed)
        st = ulp__snapshot_kept_journal(s, js, &jkept, &jkept_mem, &jnames, err);
    if (st == ULP_OK)
        st = ulp__snapshot_kept_read(s, kept, kept_mem, unclosed ? left : NULL,
                                     unclosed ? left_size : 0, unclosed ? &jnames : NULL, err);
    if (unclosed && st != ULP_ENOMEM) {
        before.nomem |= sticky->nomem; /* a lack of memory stays one */
        *sticky = before;
        if (st != ULP_OK)
            st = leave_out(s, sticky, st, "what /digests keeps", left, left_size, err);
    }
    if (st == ULP_OK && unclosed) {
        st = ulp__snapshot_kept_merge(s, kept, kept_mem, &jkept, jkept_mem, &jnames, err);
        jkept_mem = NULL;
    }
    free(jkept.v);
    free(jkept_mem);
    ulp__strmap_release(&jnames);
    return st;
}

/*
 * ulp_snapshot_open(), and with `defer` ulp_snapshot_open_deferred()'s
 * open: on failure *unsure says whether it may differ from the former's
 * (the index it read from was stale).
 */
static ulp_status open_snapshot(const char *path, int defer, int stream, ulp_snapshot **out,
                                ulp_error *err, int *unsure)
{
    ulp_status st;
    *unsure = 0;
    if (out != NULL)
        *out = NULL;
    ulp_error_clear(err);
    if (path == NULL || out == NULL)
        return ulp__error(err, ULP_EINVAL, "ulp_snapshot_open: NULL argument");

    ulp_snapshot *s = calloc(1, sizeof *s);
    if (s == NULL)
        return ulp__error(err, ULP_ENOMEM, "cannot open '%s': out of memory", path);
    s->defer_check = defer;
    s->stream = stream;
    s->fd = -1;
    s->file = -1;
    s->path = strdup(path);
    s->h5 = calloc(1, sizeof *s->h5);
    if (s->h5 != NULL)
        s->h5->dset = -1;
    if (s->path == NULL || s->h5 == NULL || pthread_mutex_init(&s->h5->lock, NULL) != 0) {
        free(s->h5);
        s->h5 = NULL;
        ulp_snapshot_close(s);
        return ulp__error(err, ULP_ENOMEM, "cannot open '%s': out of memory", path);
    }
    if ((st = open_file(s, err)) != ULP_OK) {
        ulp_snapshot_close(s);
        return st;
    }
    /* A sealed file nothing wrote to since: opened from its open map, without HDF5. */
    int mapped = ulp__snapshot_open_map(s);
    if (mapped != 0) {
        s->from_map = mapped == 1;
        if (mapped == 1) {
            *out = s;
            return ULP_OK;
        }
        ulp_snapshot_close(s);
        return ulp__error(err, ULP_ENOMEM, "cannot open '%s': out of memory", path);
    }
    const char *want = getenv("ULPPROF_OPEN_MAP");
    if (want != NULL && strcmp(want, "1") == 0) {
        ulp_snapshot_close(s);
        return ulp__error(err, ULP_EFORMAT,
                          "cannot open '%s' from its open map (ULPPROF_OPEN_MAP=1)", path);
    }
    /* Nothing of HDF5's own may reach stderr: every failure becomes our message. */
    ulp__h5_silence();
    if ((st = open_hdf5(s, err)) != ULP_OK) {
        ulp_snapshot_close(s);
        return st;
    }
    ulp__h5_err_info sticky;
    memset(&sticky, 0, sizeof sticky);
    H5Eset_auto2(H5E_DEFAULT, ulp__h5_err_note, &sticky);
    /*
     * A killed writer's file (its journal has no closed mark) may have any
     * group torn, the root's included: what cannot be read of /run, /env and
     * /trace is left out, and said, instead of refusing the captures.
     */
    ulp__journal_state js;
    char left[2 * ULP_ERROR_MSG_MAX] = "";
    ulp__journal_find(s, &js);
    int unclosed = js.found && !js.closed;
    if ((st = read_root(s, err)) == ULP_OK) {
        st = ulp__attr_read_kv(s, "/run", &s->run, &s->nrun, err);
        if (st != ULP_OK && unclosed)
            st = leave_out(s, &sticky, st, "/run", left, sizeof left, err);
    }
    if (st == ULP_OK) {
        st = ulp__attr_read_kv(s, "/env", &s->env, &s->nenv, err);
        if (st != ULP_OK && unclosed)
            st = leave_out(s, &sticky, st, "/env", left, sizeof left, err);
    }
    if (st == ULP_OK) {
        st = ulp__attr_read_kv(s, "/observed", &s->observed, &s->nobserved, err);
        if (st != ULP_OK && unclosed)
            st = leave_out(s, &sticky, st, "/observed", left, sizeof left, err);
    }
    /* The captures a digest-mode file keeps in /digests join those of /captures. */
    ulp__cap_vec kept = {0};
    const unsigned char **kept_mem = NULL;
    if (st == ULP_OK) {
        st = read_kept(s, &js, unclosed, &sticky, &kept, &kept_mem, left, sizeof left, err);
        s->has_kept = kept.n > 0;
        s->unclosed = unclosed;
    }
    if (st == ULP_OK && (st = ulp__snapshot_read_captures(s, &js, &sticky, err)) == ULP_OK &&
        (st = ulp__snapshot_kept_install(s, &kept, kept_mem, err)) == ULP_OK) {
        st = ulp__snapshot_read_trace(s, err);
        if (st != ULP_OK && (unclosed || s->warning != NULL)) {
            s->nkernels = 0;
            s->nkernel_names = 0;
            s->ngemms = 0;
            st = leave_out(s, &sticky, st, "its kernel trace", left, sizeof left, err);
        }
    }
    if (st == ULP_OK && left[0] != '\0') {
        char msg[4 * ULP_ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s%s",
                 s->warning != NULL ? s->warning : "its writer did not close it (killed?)", left);
        if ((s->warning = ulp__snap_keep(s, strdup(msg))) == NULL)
            st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    }
    free(kept.v);
    free(kept_mem);
    ulp__h5_silence();
    /* What HDF5 could not read for want of memory, it reported as unreadable. */
    if (sticky.nomem && st != ULP_ENOMEM)
        st = ulp__error(err, ULP_ENOMEM, "'%s': out of memory", s->path);
    if (st != ULP_OK && st != ULP_ENOMEM && st != ULP_ETRUNC && sticky.truncated) {
        /* The problem found is a symptom; the cause is a file cut short. */
        char what[ULP_ERROR_MSG_MAX];
        snprintf(what, sizeof what, "%s", err != NULL ? err->msg : "");
        st = ulp__error(err, ULP_ETRUNC, "%s (file is truncated: %s)", what, sticky.desc);
    }
    if (st != ULP_OK) {
        *unsure = ulp__index_check_wait(s) != 1;
        ulp_snapshot_close(s);
        return st;
    }
    *out = s;
    return ULP_OK;
}

ulp_status ulp_snapshot_open(const char *path, ulp_snapshot **out, ulp_error *err)
{
    int unsure;
    return open_snapshot(path, 0, 0, out, err, &unsure);
}

/* ulp_snapshot_open_deferred(), and with `stream` ulp_snapshot_open_stream(). */
static ulp_status open_deferred(const char *path, int stream, ulp_snapshot **out, ulp_error *err)
{
    int unsure;
    ulp_status st = open_snapshot(path, 1, stream, out, err, &unsure);
    /* A failure that a stale index may have caused: the sure way says what it is. */
    if (st != ULP_OK && unsure)
        st = ulp_snapshot_open(path, out, err);
    return st;
}

ulp_status ulp_snapshot_open_deferred(const char *path, ulp_snapshot **out, ulp_error *err)
{
    return open_deferred(path, 0, out, err);
}

ulp_status ulp_snapshot_open_stream(const char *path, ulp_snapshot **out, ulp_error *err)
{
    return open_deferred(path, 1, out, err);
}

ulp_status ulp_snapshot_confirm(ulp_snapshot **s, ulp_error *err)
{
    ulp_error_clear(err);
    if (s == NULL || *s == NULL)
        return ulp__error(err, ULP_EINVAL, "ulp_snapshot_confirm: NULL argument");
    if (ulp__index_check_wait(*s) == 1)
        return ULP_OK;
    /* Read from a stale index: opened again the sure way, which reads the groups. */
    char *path = strdup((*s)->path);
    ulp_snapshot_close(*s);
    *s = NULL;
    if (path == NULL)
        return ulp__error(err, ULP_ENOMEM, "cannot open a snapshot: out of memory");
    ulp_status st = ulp_snapshot_open(path, s, err);
    free(path);
    return st;
}

void ulp_snapshot_close(ulp_snapshot *s)
{
    if (s == NULL)
        return;
    ulp__index_check_wait(s); /* its hash reads s->fd */
    if (s->file >= 0 || (s->h5 != NULL && s->h5->dset >= 0))
        ulp__h5_silence(); /* not to start HDF5 for a file opened from its map */
    if (s->h5 != NULL) {
        if (s->h5->dset >= 0)
            H5Dclose(s->h5->dset);
        pthread_mutex_destroy(&s->h5->lock);
        free(s->h5);
    }
    if (s->file >= 0)
        H5Fclose(s->file);
    if (s->map != NULL)
        munmap((void *)(uintptr_t)s->map, (size_t)s->file_size);
    if (s->fd >= 0)
        close(s->fd);
    for (size_t i = 0; i < s->nstrs; i++)
        free(s->strs[i]);
    free(s->strs);
    free(s->run);
    free(s->env);
    free(s->observed);
    ulp__lazy_free(s->lazy);
    free(s->caps);
    free(s->srcs);
    free(s->by_name);
    free(s->kept_mem);
    free(s->summary);
    free(s->kernels);
    free(s->gemms);
    free(s->kernel_names);
    free(s->label);
    free(s->writer);
    free(s->path);
    free(s);
}

/* --- Accessors ------------------------------------------------------------------- */

const char *ulp_snapshot_path(const ulp_snapshot *s)
{
    return s->path;
}

const char *ulp_snapshot_label(const ulp_snapshot *s)
{
    return s->label;
}

const char *ulp_snapshot_warning(const ulp_snapshot *s)
{
    return s->warning;
}

const char *ulp_snapshot_writer(const ulp_snapshot *s)
{
    return s->writer;
}

int32_t ulp_snapshot_format_version(const ulp_snapshot *s)
{
    return s->format_version;
}

int64_t ulp_snapshot_created_unix_ns(const ulp_snapshot *s)
{
    return s->created_unix_ns;
}

size_t ulp_snapshot_run_count(const ulp_snapshot *s)
{
    return s->nrun;
}

const ulp_kv *ulp_snapshot_run(const ulp_snapshot *s, size_t i)
{
    return i < s->nrun ? &s->run[i] : NULL;
}

size_t ulp_snapshot_env_count(const ulp_snapshot *s)
{
    return s->nenv;
}

const ulp_kv *ulp_snapshot_env(const ulp_snapshot *s, size_t i)
{
    return i < s->nenv ? &s->env[i] : NULL;
}

size_t ulp_snapshot_observed_count(const ulp_snapshot *s)
{
    return s->nobserved;
}

const ulp_kv *ulp_snapshot_observed(const ulp_snapshot *s, size_t i)
{
    return i < s->nobserved ? &s->observed[i] : NULL;
}

const char *ulp_snapshot_run_get(const ulp_snapshot *s, const char *key)
{
    for (size_t i = 0; i < s->nrun; i++)
        if (strcmp(s->run[i].key, key) == 0)
            return s->run[i].value;
    return NULL;
}

size_t ulp_snapshot_capture_count(const ulp_snapshot *s)
{
    return s->ncaps;
}

const ulp_capture_info *ulp_snapshot_capture(const ulp_snapshot *s, size_t i)
{
    return ulp__snap_cap(s, i, NULL);
}

ptrdiff_t ulp_snapshot_find(const ulp_snapshot *s, const char *name, int64_t occurrence)
{
    const size_t *by_name = s->lazy != NULL ? ulp__lazy_by_name(s) : s->by_name;
    size_t lo = 0, hi = by_name != NULL ? s->ncaps : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const ulp_capture_info *c = ulp__snap_cap(s, by_name[mid], NULL);
        int cmp = strcmp(c->name, name);
        if (cmp == 0)
            cmp = (c->occurrence > occurrence) - (c->occurrence < occurrence);
        if (cmp == 0)
            return (ptrdiff_t)by_name[mid];
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

size_t ulp_snapshot_kernel_count(const ulp_snapshot *s)
{
    return s->nkernels;
}

int ulp_snapshot_has_kernel_trace(const ulp_snapshot *s)
{
    return s->has_kernel_trace;
}

size_t ulp_snapshot_gemm_count(const ulp_snapshot *s)
{
    return s->ngemms;
}

const ulp_gemm_info *ulp_snapshot_gemm(const ulp_snapshot *s, size_t i)
{
    return i < s->ngemms ? &s->gemms[i] : NULL;
}

const ulp_gemm_info *ulp_snapshot_kernel_gemm(const ulp_snapshot *s, size_t i)
{
    if (i >= s->nkernels)
        return NULL;
    uint32_t corr = s->kernels[i].correlation_id;
    for (size_t g = 0; corr != 0 && g < s->ngemms; g++)
        if (s->gemms[g].corr_first != 0 && s->gemms[g].corr_first <= corr &&
            corr <= s->gemms[g].corr_last)
            return &s->gemms[g];
    return NULL;
}

const ulp_kernel_info *ulp_snapshot_kernel(const ulp_snapshot *s, size_t i)
{
    return i < s->nkernels ? &s->kernels[i] : NULL;
}

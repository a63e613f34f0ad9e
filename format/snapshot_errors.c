/*
 * The reader's messages: what HDF5's error stack says about a failure
 * (truncated? locked?), and the wording of a capture's problem.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "snapshot_priv.h"

/* --- HDF5 error stack ------------------------------------------------------------ */

static herr_t h5_err_visit(unsigned n, const H5E_error2_t *e, void *data)
{
    ulp__h5_err_info *info = data;
    (void)n;
    if (!info->seen && e->desc != NULL) {
        snprintf(info->desc, sizeof info->desc, "%s", e->desc);
        info->seen = 1;
    }
    /* Open checks the superblock's end-of-file; a later metadata read past
     * the end of the file (its EOF rewritten, or cut at a flush) overflows. */
    if (e->min_num == H5E_TRUNCATED ||
        (e->min_num == H5E_OVERFLOW && e->desc != NULL && strstr(e->desc, "addr overflow")))
        info->truncated = 1;
    if (e->min_num == H5E_CANTLOCKFILE)
        info->locked = 1;
    /* Not every H5E_RESOURCE error is one (CANTLOCK, OBJOPEN, CANTGC are not). */
    if (e->min_num == H5E_CANTALLOC || e->min_num == H5E_NOSPACE)
        info->nomem = 1;
    return 0;
}

/* What HDF5 said about its last failure on this thread. */
void ulp__h5_last_error(ulp__h5_err_info *info)
{
    memset(info, 0, sizeof *info);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_err_visit, info);
    if (!info->seen)
        snprintf(info->desc, sizeof info->desc, "unknown HDF5 error");
}

/*
 * Installed as HDF5's automatic error handler while a file is validated: it
 * prints nothing, and remembers whether any failure came from reading past
 * the end of the file, so that the message can say "truncated", and
 * whether any came from an allocation HDF5 could not make: what it then
 * could not read is not the file's fault, and not to be shown as such.
 */
herr_t ulp__h5_err_note(hid_t estack, void *data)
{
    ulp__h5_err_info *sticky = data, now;
    memset(&now, 0, sizeof now);
    H5Ewalk2(estack, H5E_WALK_UPWARD, h5_err_visit, &now);
    int nomem = sticky->nomem || now.nomem;
    if (now.truncated && !sticky->truncated)
        *sticky = now;
    sticky->nomem = nomem;
    return 0;
}

/* --- Messages -------------------------------------------------------------------- */

ulp_status ulp__cap_error(const ulp_snapshot *s, ulp_error *err, ulp_status st, const char *name,
                          const char *occ, const char *fmt, ...)
{
    char what[ULP_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ulp__error(err, st, "'%s': capture '%s/%s': %s", s->path, name, occ, what);
}

/* The message in `err` without the "'<path>': " that starts it (said once already). */
const char *ulp__snap_without_path(const ulp_snapshot *s, const ulp_error *err)
{
    const char *why = err != NULL ? err->msg : "";
    size_t plen = strlen(s->path);
    if (why[0] == '\'' && strncmp(why + 1, s->path, plen) == 0 &&
        strncmp(why + 1 + plen, "': ", 3) == 0)
        why += plen + 4;
    return why;
}

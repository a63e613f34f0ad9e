/*
 * The compiled hook's key filing for a decode step (capture/torch/keys.c).
 */
#ifndef ULPPROF_CAPTURE_TORCH_KEYS_H
#define ULPPROF_CAPTURE_TORCH_KEYS_H

#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x03080000
#include <Python.h>

/*
 * The ranges a hook filed last: its request's _Runs lists (the request
 * and a new reference to each; NULL before the first).  The runs of a
 * (name, request) are made once and never replaced, so they stay valid.
 */
typedef struct ulp__torch_keys_cache {
    PyObject *request, *lo, *hi;
} ulp__torch_keys_cache;

int ulp__torch_keys_cache_visit(ulp__torch_keys_cache *c, visitproc visit, void *arg);
void ulp__torch_keys_cache_clear(ulp__torch_keys_cache *c);

/*
 * _Keys.file(name, ...)'s quick case in C, under the _Keys' lock taken
 * without waiting: one run of rows (segments, _segments()'s list, has one
 * entry) that starts at or after the last range its name and request
 * have taken.  Returns 1 when it took the range (the rows keep their
 * requests: file() would have returned them as they are), 0 when it is
 * not the quick case or the lock is held (file() decides; nothing was
 * changed), -1 with an exception set.  runs_of is _Keys._runs, lock
 * _Keys._lock; the hook's own cache c keeps name's last lists.
 */
int ulp__torch_keys_take(ulp__torch_keys_cache *c, PyObject *runs_of, PyObject *lock,
                         PyObject *name, PyObject *segments);

#endif

/*
 * The compiled hook's key filing for a decode step: the quick case of
 * _Keys.file() (python/ulpprof/torch.py), without its Python frames.
 *
 * A decode step's capture is one run of rows of one request (batch 1) or
 * a few, at positions past every one its name has filed before: file()
 * then only extends the name's last range, and that is what this does,
 * on the same _Runs lists, under the same lock.  Anything else (several
 * runs, a name or request not seen yet, a range that overlaps, the lock
 * held by another thread) is left to file(), with nothing changed.
 */
#include "keys.h"

#include <stdint.h>

/* o as a long long; 0 and no error when it is not an int that fits. */
static int as_ll(PyObject *o, long long *out)
{
    if (o == NULL || !PyLong_Check(o))
        return 0;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0 || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* Extends the ranges (lo, hi) by [a, b) when it starts at or past the last one:
 * _Runs.take's quick case.  1 taken, 0 not that case, -1 error. */
static int take_after(PyObject *lo, PyObject *hi, long long a, long long b)
{
    Py_ssize_t n = PyList_Size(hi);
    long long last = 0;
    if (n > 0 && !as_ll(PyList_GetItem(hi, n - 1), &last))
        return 0;
    if (n > 0 && a < last) /* overlaps, or before: file() finds out */
        return 0;
    PyObject *end = PyLong_FromLongLong(b);
    if (end == NULL)
        return -1;
    if (n > 0 && last == a) /* the next position: the last range grows */
        return PyList_SetItem(hi, n - 1, end) == 0 ? 1 : -1;
    PyObject *start = PyLong_FromLongLong(a);
    int got = start != NULL && PyList_Append(lo, start) == 0 && PyList_Append(hi, end) == 0;
    Py_XDECREF(start);
    Py_DECREF(end);
    return got ? 1 : -1;
}

int ulp__torch_keys_cache_visit(ulp__torch_keys_cache *c, visitproc visit, void *arg)
{
    Py_VISIT(c->request);
    Py_VISIT(c->lo);
    Py_VISIT(c->hi);
    return 0;
}

void ulp__torch_keys_cache_clear(ulp__torch_keys_cache *c)
{
    Py_CLEAR(c->request);
    Py_CLEAR(c->lo);
    Py_CLEAR(c->hi);
}

/* The _Runs lists of (name, request) into c; 1 found, 0 none yet, -1 error. */
static int runs_of_request(ulp__torch_keys_cache *c, PyObject *runs_of, PyObject *name,
                           PyObject *request)
{
    if (c->request != NULL) {
        int same = PyObject_RichCompareBool(c->request, request, Py_EQ);
        if (same != 0)
            return same; /* 1, or -1: an error */
    }
    PyObject *key = PyTuple_Pack(2, name, request);
    if (key == NULL)
        return -1;
    PyObject *runs = PyDict_GetItemWithError(runs_of, key); /* borrowed */
    Py_DECREF(key);
    if (runs == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *lo = PyObject_GetAttrString(runs, "lo");
    PyObject *hi = lo != NULL ? PyObject_GetAttrString(runs, "hi") : NULL;
    if (hi == NULL || !PyList_Check(lo) || !PyList_Check(hi)) {
        Py_XDECREF(lo);
        Py_XDECREF(hi);
        return hi == NULL ? -1 : 0;
    }
    ulp__torch_keys_cache_clear(c);
    Py_INCREF(request);
    c->request = request;
    c->lo = lo;
    c->hi = hi;
    return 1;
}

/* lock.acquire(False) or lock.release(): 1 done, 0 not (held), -1 error. */
static int lock_call(PyObject *lock, int acquire)
{
    static PyObject *s_acquire, *s_release;
    PyObject **name = acquire ? &s_acquire : &s_release;
    if (*name == NULL &&
        (*name = PyUnicode_InternFromString(acquire ? "acquire" : "release")) == NULL)
        return -1;
    PyObject *r = acquire ? PyObject_CallMethodObjArgs(lock, *name, Py_False, NULL)
                          : PyObject_CallMethodObjArgs(lock, *name, NULL);
    if (r == NULL)
        return -1;
    int done = !acquire || r == Py_True;
    Py_DECREF(r);
    return done;
}

int ulp__torch_keys_take(ulp__torch_keys_cache *c, PyObject *runs_of, PyObject *lock,
                         PyObject *name, PyObject *segments)
{
    if (!PyList_Check(segments) || PyList_Size(segments) != 1 || !PyDict_Check(runs_of))
        return 0;
    PyObject *seg = PyList_GetItem(segments, 0);
    long long s0, s1, a;
    if (seg == NULL || !PyTuple_Check(seg) || PyTuple_Size(seg) != 4 ||
        !as_ll(PyTuple_GetItem(seg, 0), &s0) || !as_ll(PyTuple_GetItem(seg, 1), &s1) ||
        !as_ll(PyTuple_GetItem(seg, 3), &a) || s1 < s0 || a < 0 || a > INT64_MAX - (s1 - s0))
        return 0;
    int got = runs_of_request(c, runs_of, name, PyTuple_GetItem(seg, 2));
    if (got != 1)
        return got;
    got = lock_call(lock, 1);
    if (got == 1) {
        got = take_after(c->lo, c->hi, a, a + (s1 - s0));
        if (lock_call(lock, 0) < 0)
            got = -1;
    }
    return got;
}

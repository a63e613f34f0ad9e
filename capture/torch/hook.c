/*
 * The PyTorch helper's quick lane, compiled: a forward hook that captures a
 * module's output in one C call where ulpprof.torch's Python hook takes
 * some thirty interpreter steps (python/ulpprof/torch.py, Capture._quick).
 *
 * Why: a hook runs right after a layer's GEMMs, with the CPU caches full of
 * weights, so that each Python step (an attribute, a comparison, a ctypes
 * field) comes from far, ~2 us each on a small model's decode step
 * (docs/performance.md).  The same checks and the same library call in C
 * take a few of them.  What the file holds does not change: the hook fills
 * the descriptor Session.bound() made with the very fields the Python lane
 * sets (data, step, positions, requests) and calls ulp_session_capture()
 * through the address ctypes resolved, so one copy of the library serves
 * both; tests/python/test_torch_hook.py checks the files equal.
 *
 * It takes only the quick lane's case (one module at one path, a tensor
 * output -- or a tuple's first, as the Python hook reads it -- contiguous,
 * on the CPU, whose leading axes are the forward call's batch and tokens,
 * with a descriptor the Python lane already made on this thread); anything
 * else goes to the Python hook, which decides as before.  An error after
 * the capture's key was filed is said once through `fail`, as the Python
 * hook says it, and never reaches the model.
 *
 * Built against the stable ABI (Py_LIMITED_API 3.8): one file for every
 * CPython from 3.8 on.  It links nothing: the library comes in as a
 * function pointer.
 */
#include "keys.h" /* Python.h, on the stable ABI */

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <ulpprof/capture.h>

typedef ulp_status (*capture_fn)(ulp_session *s, const ulp_capture_desc *d);

/* Attribute names, interned once. */
static PyObject *s_calls, *s_lane, *s_shape, *s_is_cpu, *s_is_contiguous, *s_dtype, *s_data_ptr;

typedef struct {
    PyObject ob_base;   /* PyObject_HEAD                                                */
    PyObject *fallback; /* the Python hook: fallback(module, inputs, output)          */
    PyObject *local;    /* the Capture's threading.local (its `calls`)               */
    PyObject *name;     /* the capture's name (str)                                   */
    PyObject *keys;     /* the Capture's _Keys                                       */
    PyObject *file;     /* its file(name, pos, req, segments, memo)                   */
    PyObject *runs;     /* its _runs, and its _lock: keys.c's quick case             */
    PyObject *lock;
    PyObject *lane;    /* Capture._lane(call): what the quick lane needs of a call   */
    PyObject *session; /* the Session, whose _alive (two ints in place) ...         */
    int *alive;        /* ... [0] is 0 once it is closed, [1] counts calls in flight */
    PyObject *refused; /* refused(status, tensor, step): the library said no        */
    PyObject *fail;    /* fail(exception): says once that the capture failed        */
    PyObject *tensor;  /* torch.Tensor                                               */
    int first;         /* a tuple output: its first element is the capture          */
    /* The last bound descriptor found, and for what: the thread's dict of
     * them, the shape and the dtype (most calls capture what the one before
     * did: one comparison instead of a key and its lookup). */
    PyObject *c_quick, *c_shape, *c_dtype, *c_bound;
    ulp__torch_keys_cache keys_cache;
    Py_ssize_t taken; /* captures made here (not by the fallback): `taken` */
    long long ns;     /* the time they took, from the hook's start: `ns`            */
} hook;

/* The lane's fields (Capture._lane) and the bound descriptor's (Capture._quick). */
enum {
    LANE_B,
    LANE_S,
    LANE_POS,
    LANE_REQ,
    LANE_SEGMENTS,
    LANE_PP,
    LANE_RP,
    LANE_QUICK,
    LANE_STEP,
    LANE_ROWS,
    LANE_N
};
enum { BOUND_PP = 5, BOUND_RP = 6, BOUND_FN = 7, BOUND_HANDLE = 8, BOUND_DESC = 9, BOUND_N = 10 };

static int hook_traverse(PyObject *self, visitproc visit, void *arg)
{
    hook *h = (hook *)self;
    Py_VISIT(h->fallback);
    Py_VISIT(h->local);
    Py_VISIT(h->name);
    Py_VISIT(h->keys);
    Py_VISIT(h->file);
    Py_VISIT(h->runs);
    Py_VISIT(h->lock);
    Py_VISIT(h->lane);
    Py_VISIT(h->session);
    Py_VISIT(h->refused);
    Py_VISIT(h->fail);
    Py_VISIT(h->tensor);
    Py_VISIT(h->c_quick);
    Py_VISIT(h->c_shape);
    Py_VISIT(h->c_dtype);
    Py_VISIT(h->c_bound);
    ulp__torch_keys_cache_visit(&h->keys_cache, visit, arg);
    return 0;
}

static int hook_clear(PyObject *self)
{
    hook *h = (hook *)self;
    Py_CLEAR(h->fallback);
    Py_CLEAR(h->local);
    Py_CLEAR(h->name);
    Py_CLEAR(h->keys);
    Py_CLEAR(h->file);
    Py_CLEAR(h->runs);
    Py_CLEAR(h->lock);
    Py_CLEAR(h->lane);
    Py_CLEAR(h->session);
    Py_CLEAR(h->refused);
    Py_CLEAR(h->fail);
    Py_CLEAR(h->tensor);
    Py_CLEAR(h->c_quick);
    Py_CLEAR(h->c_shape);
    Py_CLEAR(h->c_dtype);
    Py_CLEAR(h->c_bound);
    ulp__torch_keys_cache_clear(&h->keys_cache);
    return 0;
}

static void hook_dealloc(PyObject *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    hook_clear(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
    tp_free(self);
    Py_DECREF(type);
}

static int hook_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    hook *h = (hook *)self;
    PyObject *fallback, *local, *name, *keys, *lane, *session, *alive, *refused, *fail, *tensor;
    int first;
    if (!PyArg_ParseTuple(args, "OOUOOOOOOOp:Hook", &fallback, &local, &name, &keys, &lane,
                          &session, &alive, &refused, &fail, &tensor, &first))
        return -1;
    if (!PyType_Check(tensor)) {
        PyErr_SetString(PyExc_TypeError, "Hook: tensor must be a type");
        return -1;
    }
    void *at = PyLong_Check(alive) ? PyLong_AsVoidPtr(alive) : NULL;
    if (at == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "Hook: alive must be the address of two ints");
        return -1;
    }
    PyObject *file = PyObject_GetAttrString(keys, "file");
    PyObject *runs = file != NULL ? PyObject_GetAttrString(keys, "_runs") : NULL;
    PyObject *lock = runs != NULL ? PyObject_GetAttrString(keys, "_lock") : NULL;
    if (lock == NULL) {
        Py_XDECREF(file);
        Py_XDECREF(runs);
        return -1;
    }
    PyObject *given[] = {fallback, local, name, keys, lane, session, refused, fail, tensor};
    PyObject **slot[] = {&h->fallback, &h->local,   &h->name, &h->keys,  &h->lane,
                         &h->session,  &h->refused, &h->fail, &h->tensor};
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
        PyObject *old = *slot[i];
        Py_INCREF(given[i]);
        *slot[i] = given[i];
        Py_XDECREF(old);
    }
    PyObject *made[] = {file, runs, lock};
    PyObject **into[] = {&h->file, &h->runs, &h->lock};
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++) {
        PyObject *old = *into[i];
        *into[i] = made[i]; /* new references */
        Py_XDECREF(old);
    }
    h->alive = at;
    h->first = first;
    return 0;
}

/*
 * Clears the error set, if it is an Exception: the Python hook catches
 * those and no others.  A KeyboardInterrupt or SystemExit stays set, and
 * the hook returns it to the model's caller, as the Python hook would.
 */
static void clear_ordinary(void)
{
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception))
        PyErr_Clear();
}

/* An int attribute's value as an address; 0 (and no error) when it is not one. */
static void *address(PyObject *o)
{
    if (o == NULL || !PyLong_Check(o))
        return NULL;
    void *p = PyLong_AsVoidPtr(o);
    if (p == NULL && PyErr_Occurred())
        clear_ordinary();
    return p;
}

/* Whether a new reference v (NULL: an error, cleared as clear_ordinary does) is True. */
static int is_true(PyObject *v)
{
    if (v == NULL) {
        clear_ordinary();
        return 0;
    }
    int yes = v == Py_True;
    Py_DECREF(v);
    return yes;
}

/* The forward call the hook runs in (the Capture's calls[-1]), or NULL. New reference. */
static PyObject *current_call(hook *h)
{
    PyObject *calls = PyObject_GetAttr(h->local, s_calls);
    if (calls == NULL) {
        clear_ordinary();
        return NULL;
    }
    PyObject *call = NULL;
    if (PyList_Check(calls)) {
        Py_ssize_t n = PyList_Size(calls);
        if (n > 0) {
            call = PyList_GetItem(calls, n - 1);
            Py_XINCREF(call);
        }
    }
    Py_DECREF(calls);
    return call;
}

/* The call's lane, made by Capture._lane at its first capture; NULL: none. New reference. */
static PyObject *call_lane(hook *h, PyObject *call)
{
    PyObject *lane = PyObject_GetAttr(call, s_lane);
    if (lane == NULL) {
        clear_ordinary();
        return NULL;
    }
    if (lane == Py_None) {
        Py_DECREF(lane);
        lane = PyObject_CallFunctionObjArgs(h->lane, call, NULL);
        if (lane == NULL) {
            clear_ordinary();
            return NULL;
        }
        if (PyObject_SetAttr(call, s_lane, lane) != 0) {
            clear_ordinary();
            Py_DECREF(lane);
            return NULL;
        }
    }
    if (!PyTuple_Check(lane) || PyTuple_Size(lane) != LANE_N) { /* False: no quick lane */
        Py_DECREF(lane);
        return NULL;
    }
    return lane;
}

/* Sets *slot to a new reference to v, dropping the old one. */
static void keep(PyObject **slot, PyObject *v)
{
    PyObject *old = *slot;
    Py_INCREF(v);
    *slot = v;
    Py_XDECREF(old);
}

/*
 * The bound descriptor of (name, shape, dtype) on this thread, when the
 * tensor is one the quick lane takes; NULL else.  A new reference.
 */
static PyObject *bound_for(hook *h, PyObject *lane, PyObject *t)
{
    PyObject *shape = PyObject_GetAttr(t, s_shape);
    if (shape == NULL) {
        clear_ordinary();
        return NULL;
    }
    PyObject *bound = NULL, *dtype = NULL, *key = NULL;
    if (!PyTuple_Check(shape) || PyTuple_Size(shape) < 2)
        goto out;
    if (!PyLong_Check(PyTuple_GetItem(lane, LANE_B)) ||
        !PyLong_Check(PyTuple_GetItem(lane, LANE_S)))
        goto out;
    if (PyObject_RichCompareBool(PyTuple_GetItem(shape, 0), PyTuple_GetItem(lane, LANE_B), Py_EQ) !=
            1 ||
        PyObject_RichCompareBool(PyTuple_GetItem(shape, 1), PyTuple_GetItem(lane, LANE_S), Py_EQ) !=
            1)
        goto out;
    if (!is_true(PyObject_GetAttr(t, s_is_cpu)) ||
        !is_true(PyObject_CallMethodObjArgs(t, s_is_contiguous, NULL)))
        goto out;
    dtype = PyObject_GetAttr(t, s_dtype);
    if (dtype == NULL)
        goto out;
    PyObject *quick = PyTuple_GetItem(lane, LANE_QUICK);
    if (quick == NULL || !PyDict_Check(quick))
        goto out;
    /* The cache holds its objects: a dict it names is this thread's, not one
     * made since at the same address.  Bounds are only ever added. */
    if (h->c_bound != NULL && h->c_quick == quick && h->c_dtype == dtype) {
        /* Own references first: a shape whose == runs Python code can let
         * another thread's call of this hook replace the cache meanwhile. */
        PyObject *c_shape = h->c_shape, *c_bound = h->c_bound;
        Py_INCREF(c_shape);
        Py_INCREF(c_bound);
        int same = PyObject_RichCompareBool(shape, c_shape, Py_EQ);
        Py_DECREF(c_shape);
        if (same == 1) {
            bound = c_bound;
            goto out;
        }
        Py_DECREF(c_bound);
        if (same < 0)
            goto out;
    }
    key = PyTuple_Pack(3, h->name, shape, dtype);
    if (key == NULL)
        goto out;
    bound = PyDict_GetItemWithError(quick, key);
    if (bound != NULL && (!PyList_Check(bound) || PyList_Size(bound) != BOUND_N))
        bound = NULL;
    if (bound != NULL) {
        Py_INCREF(bound);
        keep(&h->c_quick, quick);
        keep(&h->c_shape, shape);
        keep(&h->c_dtype, dtype);
        keep(&h->c_bound, bound);
    }
out:
    clear_ordinary();
    Py_XDECREF(key);
    Py_XDECREF(dtype);
    Py_DECREF(shape);
    return bound;
}

/* t.data_ptr() as an address; NULL with an error set when it fails. */
static void *data_ptr(PyObject *t, int *failed)
{
    PyObject *v = PyObject_CallMethodObjArgs(t, s_data_ptr, NULL);
    *failed = v == NULL;
    if (v == NULL)
        return NULL;
    void *p = PyLong_AsVoidPtr(v);
    Py_DECREF(v);
    *failed = p == NULL && PyErr_Occurred();
    return p;
}

/* Says once (the Python side's fail) that the capture did not happen; leaves no error,
 * but for one that is not an Exception (clear_ordinary), which it leaves as it is. */
static void failed(hook *h)
{
    if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_Exception))
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *r = PyObject_CallFunctionObjArgs(h->fail, value != NULL ? value : Py_None, NULL);
    Py_XDECREF(r);
    PyErr_Clear();
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

/*
 * Files the capture's keys and captures it.  Called once every check has
 * passed: from here on nothing goes to the Python hook (the keys are
 * filed), and an error is said through `fail`.
 */
static void capture(hook *h, PyObject *call, PyObject *lane, PyObject *bound, PyObject *t)
{
    PyObject *req = PyTuple_GetItem(lane, LANE_REQ);
    PyObject *segments = PyTuple_GetItem(lane, LANE_SEGMENTS);
    PyObject *filed = NULL;
    int quick = ulp__torch_keys_take(&h->keys_cache, h->runs, h->lock, h->name, segments);
    if (quick == 1) {
        filed = req;
        Py_INCREF(filed);
    } else if (quick == 0) {
        filed = PyObject_CallFunctionObjArgs(h->file, h->name, PyTuple_GetItem(lane, LANE_POS), req,
                                             segments, PyTuple_GetItem(lane, LANE_ROWS), NULL);
    }
    if (filed == NULL) {
        failed(h);
        return;
    }
    int bad = 0;
    void *rp = filed == req ? address(PyTuple_GetItem(lane, LANE_RP)) : data_ptr(filed, &bad);
    void *data = bad ? NULL : data_ptr(t, &bad);
    PyObject *step = bad ? NULL : PyTuple_GetItem(lane, LANE_STEP);
    Py_XINCREF(step);
    long long step_v = step != NULL ? PyLong_AsLongLong(step) : -1;
    capture_fn fn = (capture_fn)address(PyList_GetItem(bound, BOUND_FN));
    ulp_session *s = address(PyList_GetItem(bound, BOUND_HANDLE));
    ulp_capture_desc *d = address(PyList_GetItem(bound, BOUND_DESC));
    if (bad || step == NULL || (step_v == -1 && PyErr_Occurred()) || fn == NULL || s == NULL ||
        d == NULL) {
        Py_DECREF(filed);
        Py_XDECREF(step);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "a bound descriptor without its addresses");
        failed(h);
        return;
    }
    d->data = data;
    d->step = (int64_t)step_v;
    d->positions = address(PyTuple_GetItem(lane, LANE_PP));
    d->requests = rp;
    /* The Python lane sets positions and requests only when they differ from
     * the ones it last set: those are no longer known there. */
    for (int i = BOUND_PP; i <= BOUND_RP; i++) {
        if (PyList_GetItem(bound, i) != Py_None) {
            Py_INCREF(Py_None);
            PyList_SetItem(bound, i, Py_None);
        }
    }
    /* As ctypes calls it: without the GIL (the call may wait for room in the queue).
     * Counted in flight, under the GIL, from the check on: Session.close() waits for
     * the count to fall to 0 before the handle goes. */
    ulp_status st = ULP_ECLOSED; /* closed meanwhile (file() may wait, other threads run) */
    if (h->alive[0]) {
        h->alive[1]++;
        PyThreadState *ts = PyEval_SaveThread();
        st = fn(s, d);
        PyEval_RestoreThread(ts);
        h->alive[1]--;
    }
    Py_DECREF(filed); /* the requests the library copied during the call */
    if (st != ULP_OK) {
        PyObject *code = PyLong_FromLong((long)st);
        PyObject *r =
            code != NULL ? PyObject_CallFunctionObjArgs(h->refused, code, t, step, NULL) : NULL;
        Py_XDECREF(code);
        if (r == NULL)
            failed(h);
        Py_XDECREF(r);
    }
    Py_DECREF(step);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static PyObject *hook_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    hook *h = (hook *)self;
    long long t0 = now_ns();
    if (h->fallback == NULL || h->alive == NULL) {
        PyErr_SetString(PyExc_TypeError, "Hook: not initialised");
        return NULL;
    }
    if (kwargs != NULL || !PyTuple_Check(args) || PyTuple_Size(args) != 3)
        return PyObject_Call(h->fallback, args, kwargs);
    PyObject *t = PyTuple_GetItem(args, 2);
    if (h->first && PyTuple_CheckExact(t) && PyTuple_Size(t) > 0)
        t = PyTuple_GetItem(t, 0);
    if (!PyObject_TypeCheck(t, (PyTypeObject *)h->tensor) || *h->alive == 0)
        return PyObject_Call(h->fallback, args, NULL);
    PyObject *call = current_call(h);
    if (call == NULL)
        return PyObject_Call(h->fallback, args, NULL);
    PyObject *lane = call_lane(h, call);
    PyObject *bound = lane != NULL ? bound_for(h, lane, t) : NULL;
    if (bound == NULL) {
        Py_XDECREF(lane);
        Py_DECREF(call);
        /* Nothing done yet: the Python hook decides, but for an error that
         * is not an Exception, which goes to the model's caller. */
        return PyErr_Occurred() ? NULL : PyObject_Call(h->fallback, args, NULL);
    }
    Py_INCREF(t);
    h->taken++;
    capture(h, call, lane, bound, t);
    h->ns += now_ns() - t0;
    Py_DECREF(bound);
    Py_DECREF(t);
    Py_DECREF(lane);
    Py_DECREF(call);
    if (PyErr_Occurred()) /* not an Exception (failed()) */
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *hook_taken(PyObject *self, void *closure)
{
    return PyLong_FromSsize_t(((hook *)self)->taken);
}

static PyObject *hook_ns(PyObject *self, void *closure)
{
    return PyLong_FromLongLong(((hook *)self)->ns);
}

static PyGetSetDef hook_getset[] = {
    {"taken", hook_taken, NULL, "captures this hook made in C (the fallback's not counted)", NULL},
    {"ns", hook_ns, NULL, "nanoseconds those took, each from the hook's call to its end", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* copy.copy() and copy.deepcopy() of a hooked model keep the hook, as
 * they keep a Python function hook: the same object. */
static PyObject *hook_same(PyObject *self, PyObject *args)
{
    Py_INCREF(self);
    return self;
}

static PyMethodDef hook_methods[] = {
    {"__copy__", hook_same, METH_NOARGS, NULL},
    {"__deepcopy__", hook_same, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot hook_slots[] = {
    {Py_tp_doc, "Hook(fallback, local, name, file, lane, session, refused, fail, tensor, first):"
                " a forward hook that captures through the quick lane in C, else calls"
                " fallback(module, inputs, output)."},
    {Py_tp_init, (void *)hook_init},
    {Py_tp_call, (void *)hook_call},
    {Py_tp_getset, hook_getset},
    {Py_tp_methods, hook_methods},
    {Py_tp_traverse, (void *)hook_traverse},
    {Py_tp_clear, (void *)hook_clear},
    {Py_tp_dealloc, (void *)hook_dealloc},
    {Py_tp_new, (void *)PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec hook_spec = {
    "ulpprof._torch_hook.Hook",
    sizeof(hook),
    0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    hook_slots,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "_torch_hook",
    "The PyTorch helper's quick lane, compiled (capture/torch/hook.c).",
    -1,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int intern(PyObject **out, const char *s)
{
    *out = PyUnicode_InternFromString(s);
    return *out != NULL ? 0 : -1;
}

PyMODINIT_FUNC PyInit__torch_hook(void);

PyMODINIT_FUNC PyInit__torch_hook(void)
{
    if (intern(&s_calls, "calls") || intern(&s_lane, "lane") || intern(&s_shape, "shape") ||
        intern(&s_is_cpu, "is_cpu") || intern(&s_is_contiguous, "is_contiguous") ||
        intern(&s_dtype, "dtype") || intern(&s_data_ptr, "data_ptr"))
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *type = PyType_FromSpec(&hook_spec);
    if (type == NULL || PyModule_AddObject(m, "Hook", type) != 0) {
        Py_XDECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    /* What the Python side checks against its ctypes mirror of the descriptor. */
    /* ALIVE_INTS: the session's _alive is [closed flag, calls in flight]. */
    if (PyModule_AddIntConstant(m, "ALIVE_INTS", 2) != 0 ||
        PyModule_AddIntConstant(m, "DESC_BYTES", (long)sizeof(ulp_capture_desc)) != 0 ||
        PyModule_AddIntConstant(m, "DATA_AT", (long)offsetof(ulp_capture_desc, data)) != 0 ||
        PyModule_AddIntConstant(m, "STEP_AT", (long)offsetof(ulp_capture_desc, step)) != 0 ||
        PyModule_AddIntConstant(m, "POSITIONS_AT", (long)offsetof(ulp_capture_desc, positions)) !=
            0 ||
        PyModule_AddIntConstant(m, "REQUESTS_AT", (long)offsetof(ulp_capture_desc, requests)) !=
            0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

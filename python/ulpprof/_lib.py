"""The host capture library (libulpprof_capture.so) through ctypes.

One copy of the library serves the whole process: the first one found is
loaded and kept, and a copy that is already mapped into the process (a C
extension linked to it) is the one used.  Sessions are explicit
(ulp_session_open); at most one is open per file in this process.
"""
import atexit
import ctypes
import os
import threading
import time

__all__ = ["CaptureError", "Session", "library", "library_path", "DTYPE_CODES", "ROLE_CODES"]

# FORMAT.md dtype names -> ulp_dtype values (include/ulpprof/dtype.h).
DTYPE_CODES = {"f64": 0, "f32": 1, "f16": 2, "bf16": 3, "f8e4m3": 4, "f8e5m2": 5,
               "i64": 6, "i32": 7, "i16": 8, "i8": 9, "u8": 10}
DTYPE_SIZES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1,
               "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1}
# Role names -> ulp_role values (include/ulpprof/format.h).
ROLE_CODES = {"activation": 0, "logits": 1, "kv": 2, "input": 3, "weight": 4}
LAYER_NONE = -1
STEP_NONE = -(2 ** 63)
_ULP_EDISABLED = -15
LIB_NAME = "libulpprof_capture.so"


class CaptureError(RuntimeError):
    """A capture session could not be opened or used; the message says why."""


class _Options(ctypes.Structure):
    # ulp_session_options (include/ulpprof/capture.h), whole.  struct_size
    # is this mirror's size: the library reads these fields and takes its
    # defaults for any it has beyond them.
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("path", ctypes.c_char_p), ("label", ctypes.c_char_p),
                ("attrs", ctypes.c_char_p), ("queue_bytes", ctypes.c_size_t),
                ("writer", ctypes.c_char_p), ("record_env", ctypes.c_int),
                ("observed", ctypes.c_char_p), ("capture_mode", ctypes.c_char_p)]


class _Desc(ctypes.Structure):
    # ulp_capture_desc (include/ulpprof/capture.h), whole, read by the
    # library up to this mirror's struct_size as _Options is.  The CUDA
    # collector's fields are not in it (ulp_capture_device_ext).
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("layer", ctypes.c_int32), ("role", ctypes.c_int), ("step", ctypes.c_int64),
                ("time_ns", ctypes.c_int64),
                ("positions", ctypes.c_void_p),  # const int64_t *
                ("requests", ctypes.c_void_p),  # const int64_t *
                ("row_rank", ctypes.c_int32), ("n_inputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(ctypes.c_char_p))]


class _GemmInfo(ctypes.Structure):
    # ulp_gemm_info (include/ulpprof/snapshot.h), whole: one /trace/gemms row.
    # It has no struct_size: ulp_session_trace_gemms() reads an array of them,
    # so its layout is frozen, and Session.trace_gemms() is used only with a
    # library whose ulp_gemm_info_size() equals this mirror's size.
    _fields_ = [("seq", ctypes.c_uint64), ("api", ctypes.c_char * 32),
                ("stream", ctypes.c_uint64), ("m", ctypes.c_int64), ("n", ctypes.c_int64),
                ("k", ctypes.c_int64), ("batch", ctypes.c_int64),
                ("transa", ctypes.c_char * 4), ("transb", ctypes.c_char * 4),
                ("a_type", ctypes.c_char * 12), ("b_type", ctypes.c_char * 12),
                ("c_type", ctypes.c_char * 12), ("d_type", ctypes.c_char * 12),
                ("compute", ctypes.c_char * 24), ("algo", ctypes.c_char * 12),
                ("algo_id", ctypes.c_int32), ("tile", ctypes.c_char * 16),
                ("stages", ctypes.c_char * 16), ("splitk", ctypes.c_int32),
                ("reduction", ctypes.c_char * 12), ("swizzle", ctypes.c_int32),
                ("custom", ctypes.c_int32), ("cluster", ctypes.c_char * 16),
                ("epilogue", ctypes.c_int32), ("workspace", ctypes.c_uint64),
                ("corr_first", ctypes.c_uint32), ("corr_last", ctypes.c_uint32),
                ("status", ctypes.c_int32)]


GEMM_FIELDS = tuple(f for f, _ in _GemmInfo._fields_)


class _DeviceExt(ctypes.Structure):
    # ulp_capture_device_ext (include/ulpprof/capture_device.h), whole, read
    # by the library up to this mirror's struct_size as _Desc is.
    _fields_ = [("struct_size", ctypes.c_size_t), ("has_kernels", ctypes.c_int),
                ("kernels", ctypes.c_int64 * 2), ("device_ptr", ctypes.c_uint64),
                ("stream", ctypes.c_uint64), ("has_gemms", ctypes.c_int),
                ("gemms", ctypes.c_int64 * 2), ("has_graph_replay", ctypes.c_int),
                ("graph_replay", ctypes.c_int64 * 2)]


# sizeof(ulp_capture_desc) / sizeof(ulp_session_options) of the loaded
# library (ulp_capture_desc_size(), ulp_session_options_size()), set by
# library() and checked there against the mirrors above.
_DESC_BYTES = 0
_OPTIONS_BYTES = 0
_MAX_RANK = 8  # ULP_MAX_RANK
_CACHE_MAX = 4096  # names and input lists kept encoded, per session
_lock = threading.RLock()
_lib = None
_lib_path = None
_open_paths = {}  # realpath -> Session, the sessions this process has open


@atexit.register
def _close_at_exit():
    # An explicit session is not closed by the library at exit: close what
    # is still open, so that nothing queued is lost.
    for sess in list(_open_paths.values()):
        sess.close()


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def _mapped_copy(stem):
    """The path of a copy of `stem` (e.g. libulpprof_capture.so) already mapped here."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return None
    if stem not in maps:  # the usual answer, without splitting thousands of lines
        return None
    for line in maps.splitlines():
        path = line.split(" ")[-1]
        if os.path.basename(path).startswith(stem):
            return path
    return None


def candidates():
    """Where the host library is looked for, in order."""
    out = []
    mapped = _mapped_copy(LIB_NAME)
    if mapped:
        out.append(mapped)
    env = os.environ.get("ULPPROF_CAPTURE_LIBRARY")
    if env:
        out.append(env)
    pkg = _package_dir()
    for sub in ("lib", "lib64"):
        d = os.path.join(pkg, sub)
        if os.path.isdir(d):
            for name in sorted(os.listdir(d)):
                if name.startswith(LIB_NAME):
                    out.append(os.path.join(d, name))
    return out


def _declare(lib):
    c = ctypes
    lib.ulp_session_options_init_sized.argtypes = [c.c_void_p, c.c_size_t]
    lib.ulp_session_options_init_sized.restype = c.c_int
    lib.ulp_session_open.argtypes = [c.c_void_p, c.POINTER(c.c_void_p), c.c_void_p]
    lib.ulp_session_open.restype = c.c_int
    lib.ulp_session_path.argtypes = [c.c_void_p]
    lib.ulp_session_path.restype = c.c_char_p
    for fn in (lib.ulp_session_set_run, lib.ulp_session_set_env):
        fn.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p]
        fn.restype = c.c_int
    if hasattr(lib, "ulp_session_set_observed"):  # libraries before /observed lack it
        lib.ulp_session_set_observed.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p]
        lib.ulp_session_set_observed.restype = c.c_int
    if hasattr(lib, "ulp_session_set_capture_mode"):  # libraries before digests lack them
        lib.ulp_session_set_capture_mode.argtypes = [c.c_void_p, c.c_int]
        lib.ulp_session_set_capture_mode.restype = c.c_int
        lib.ulp_session_select_spec.argtypes = [c.c_void_p, c.c_char_p]
        lib.ulp_session_select_spec.restype = c.c_int
        lib.ulp_row_digest.argtypes = [c.c_void_p, c.c_size_t, c.c_int64]
        lib.ulp_row_digest.restype = c.c_uint64
    lib.ulp_session_set_step.argtypes = [c.c_void_p, c.c_int64]
    lib.ulp_session_set_step.restype = c.c_int
    lib.ulp_capture_desc_init_sized.argtypes = [c.c_void_p, c.c_size_t]
    lib.ulp_capture_desc_init_sized.restype = c.c_int
    lib.ulp_session_capture.argtypes = [c.c_void_p, c.c_void_p]
    lib.ulp_session_capture.restype = c.c_int
    lib.ulp_session_flush.argtypes = [c.c_void_p]
    lib.ulp_session_flush.restype = c.c_int
    lib.ulp_session_close.argtypes = [c.c_void_p]
    lib.ulp_session_close.restype = c.c_int
    lib.ulp_status_str.argtypes = [c.c_int]
    lib.ulp_status_str.restype = c.c_char_p
    lib.ulp_capture_session.argtypes = []
    lib.ulp_capture_session.restype = c.c_void_p
    for fn in (lib.ulp_capture_desc_size, lib.ulp_session_options_size):
        fn.argtypes = []
        fn.restype = c.c_size_t
    if hasattr(lib, "ulp_gemm_info_size"):  # libraries before GEMM rows from callers lack it
        lib.ulp_gemm_info_size.argtypes = []
        lib.ulp_gemm_info_size.restype = c.c_size_t
        lib.ulp_session_trace_gemms.argtypes = [c.c_void_p, c.c_void_p, c.c_size_t]
        lib.ulp_session_trace_gemms.restype = c.c_int
    if hasattr(lib, "ulp_session_capture_ext"):
        lib.ulp_capture_device_ext_init_sized.argtypes = [c.c_void_p, c.c_size_t]
        lib.ulp_capture_device_ext_init_sized.restype = c.c_int
        lib.ulp_session_capture_ext.argtypes = [c.c_void_p, c.c_void_p, c.c_void_p]
        lib.ulp_session_capture_ext.restype = c.c_int
        lib.ulp_capture_device_ext_size.argtypes = []
        lib.ulp_capture_device_ext_size.restype = c.c_size_t


def _check_sizes(lib, path):
    """The library's struct sizes, checked against the mirrors here.  Fields
    are only appended to these structs, and the library reads a struct up
    to its struct_size: a larger library struct is a newer library (its
    extra fields take their defaults); a smaller one is an older library
    than this package, refused."""
    desc, opts = int(lib.ulp_capture_desc_size()), int(lib.ulp_session_options_size())
    for what, have, mine in (("ulp_capture_desc", desc, ctypes.sizeof(_Desc)),
                             ("ulp_session_options", opts, ctypes.sizeof(_Options))):
        if have < mine:
            raise OSError("%s is %d bytes in %s, %d in this package: the library is "
                          "older than the package" % (what, have, path, mine))
    return desc, opts


def library():
    """The process's one host capture library (loaded once); CaptureError if none."""
    global _lib, _lib_path, _DESC_BYTES, _OPTIONS_BYTES
    with _lock:
        if _lib is not None:
            return _lib
        tried = candidates()
        errors = []
        for path in tried:
            try:
                lib = ctypes.CDLL(path)
                _declare(lib)
                sizes = _check_sizes(lib, path)
            except (OSError, AttributeError) as e:
                errors.append("%s: %s" % (path, e))
                continue
            _DESC_BYTES, _OPTIONS_BYTES = sizes
            _lib, _lib_path = lib, os.path.realpath(path)
            return _lib
        if not tried:
            raise CaptureError("%s not found: not in this package (%s/lib) and "
                               "ULPPROF_CAPTURE_LIBRARY is not set" % (LIB_NAME, _package_dir()))
        raise CaptureError("cannot load %s: %s" % (LIB_NAME, "; ".join(errors)))


def library_path():
    """The path of the loaded host library, or None before library()."""
    return _lib_path


def status_str(st):
    return library().ulp_status_str(st).decode()


_ECLOSED = -14  # ULP_ECLOSED (ulpprof/status.h)


def _mode_code(mode):
    codes = {"data": 0, "digest": 1, "both": 2}
    if mode not in codes:
        raise ValueError("mode must be 'data', 'digest' or 'both', not %r" % (mode,))
    return codes[mode]


class Session:
    """An explicit capture session on one snapshot file.

    path None means $ULPPROF_OUTPUT (what `ulpprof record -o` sets), label
    None $ULPPROF_LABEL; `run` adds /run attributes (the run's conditions),
    `observed` /observed ones (what was observed about it, never compared as
    a condition: FORMAT.md).  Raises CaptureError when the file cannot be
    created, or when this process already has a session open on it.
    """

    def __init__(self, path=None, label=None, run=None, queue_mb=None, observed=None,
                 mode=None):
        lib = library()
        target = path if path is not None else os.environ.get("ULPPROF_OUTPUT")
        if not target:
            raise CaptureError("no snapshot path: pass one, or run under "
                               "`ulpprof record -o FILE` (ULPPROF_OUTPUT is not set)")
        opts = _Options()
        st = lib.ulp_session_options_init_sized(ctypes.byref(opts), ctypes.sizeof(opts))
        if st != 0:
            raise CaptureError("cannot fill the session options: %s" % status_str(st))
        keep = []
        if path is not None:
            keep.append(os.fsencode(path))
            opts.path = keep[-1]
        if label is not None:
            keep.append(str(label).encode())
            opts.label = keep[-1]
        if queue_mb:
            opts.queue_bytes = int(queue_mb) << 20
        if mode is not None:
            # known at the creation: a digest file is laid out for digests (smaller)
            _mode_code(mode)
            keep.append(mode.encode())
            opts.capture_mode = keep[-1]
        opts.record_env = 1
        handle = ctypes.c_void_p()
        with _lock:
            real = os.path.realpath(target)
            if "%" not in target and real in _open_paths:
                raise CaptureError("'%s' already has a capture session open in this process "
                                   "(one session per file)" % target)
            default = lib.ulp_capture_session()
            if default and os.path.realpath(lib.ulp_session_path(default).decode()) == real:
                raise CaptureError("'%s' is the default session's file (ULPPROF_OUTPUT) of the "
                                   "host library: one session per file" % target)
            st = lib.ulp_session_open(ctypes.byref(opts), ctypes.byref(handle), None)
            if st != 0:
                raise CaptureError("cannot capture to '%s': %s" % (target, status_str(st)))
            self._h = handle
            # Read in place by the compiled hook (capture/torch/hook.c): [0] is 1
            # while open, [1] counts the hook's library calls in flight.
            self._alive = (ctypes.c_int * 2)(1, 0)
            # The threads whose library call (without the GIL) is in flight:
            # close() waits for them, so that no call runs on a freed handle.
            self._calls = []
            self._pid = os.getpid()
            self.path = lib.ulp_session_path(handle).decode()
            self._key = os.path.realpath(self.path)
            _open_paths[self._key] = self
        self._lib = lib
        self._warned = set()
        self._local = threading.local()
        self._names = {}
        self._input_arrays = {}
        self._gemm_rows = 0  # rows passed to trace_gemms(): /trace/gemms' length
        self._due = self._told = None  # step_due(): the step set, the step told the library
        for k, v in (run or {}).items():
            self.set_run(k, v)
        for k, v in (observed or {}).items():
            self.set_observed(k, v)

    def set_run(self, key, value):
        st = self.call(self._lib.ulp_session_set_run, str(key).encode(), str(value).encode())
        if st != 0:
            raise CaptureError("cannot set /run %s: %s" % (key, status_str(st)))

    def set_observed(self, key, value):
        """An /observed attribute: a fact about the run that sets no condition."""
        fn = getattr(self._lib, "ulp_session_set_observed", None)
        if fn is None:
            raise CaptureError("cannot set /observed %s: the capture library is older than "
                               "/observed" % key)
        st = self.call(fn, str(key).encode(), str(value).encode())
        if st != 0:
            raise CaptureError("cannot set /observed %s: %s" % (key, status_str(st)))

    def set_step(self, step):
        self._due = self._told = int(step)
        self.call(self._lib.ulp_session_set_step, int(step))

    def step_due(self, step):
        """Sets the step of the captures that follow, as set_step(), but
        tells the library only when a capture without a step comes (a
        forward call's step: its own captures give theirs; one ctypes call
        less per call).  Two threads that set it at once: the session gets
        the last set, as with set_step()."""
        self._due = step

    def _tell_due(self):
        due = self._due
        if due is not None and due != self._told and self._h is not None:
            self._told = due
            self.call(self._lib.ulp_session_set_step, int(due))

    def set_capture_mode(self, mode):
        """"data" (the default), "digest" (one 64-bit digest per row,
        in /digests, instead of the bytes) or "both".  Given to the
        constructor instead, a digest file is also laid out for digests."""
        code = _mode_code(mode)
        fn = getattr(self._lib, "ulp_session_set_capture_mode", None)
        if fn is None:
            raise CaptureError("the capture library is older than digests")
        st = self.call(fn, code)
        if st != 0:
            raise CaptureError("cannot set the capture mode: %s" % status_str(st))

    def select(self, spec):
        """Restricts the data of later captures to `spec`: the syntax of
        `ulpprof diff`'s "capture next" line (NAME or NAME@REQUEST:FIRST-LAST,
        comma-separated), or a dict {name: [(request, first, last), ...]}
        (an empty list: the whole capture)."""
        if isinstance(spec, dict):
            parts = []
            for name, ranges in spec.items():
                if not ranges:
                    parts.append(str(name))
                for r, a, b in ranges:
                    parts.append("%s@%d:%d-%d" % (name, r, a, b))
            spec = ",".join(parts)
        fn = getattr(self._lib, "ulp_session_select_spec", None)
        if fn is None:
            raise CaptureError("the capture library is older than selections")
        st = self.call(fn, str(spec).encode())
        if st != 0:
            raise CaptureError("cannot select %r: %s" % (spec, status_str(st)))

    def _desc(self):
        """This thread's descriptor, made once: the mirror that
        ulp_capture_desc_init_sized() filled, and room for a shape.  The library copies the descriptor during the call, so
        one per thread serves every capture (a new ctypes buffer, structure
        and arrays per capture cost more than the rest of the call)."""
        mine = getattr(self._local, "desc", None)
        if mine is None:
            d = _Desc()
            st = self._lib.ulp_capture_desc_init_sized(ctypes.byref(d), ctypes.sizeof(d))
            if st != 0:
                raise CaptureError("cannot fill a capture descriptor: %s" % status_str(st))
            shape = (ctypes.c_int64 * _MAX_RANK)()
            mine = self._local.desc = (ctypes.byref(d), d, shape)
        return mine

    def _encoded(self, name):
        b = self._names.get(name)
        if b is None:
            b = name.encode()
            if len(self._names) < _CACHE_MAX:
                self._names[name] = b
        return b

    def _inputs(self, inputs):
        key = tuple(inputs)
        arr = self._input_arrays.get(key)
        if arr is None:
            arr = (ctypes.c_char_p * len(key))(*[s.encode() for s in key])
            if len(self._input_arrays) < _CACHE_MAX:
                self._input_arrays[key] = arr
        return arr

    def trace_gemms(self, rows):
        """Appends GEMM call rows to /trace/gemms (FORMAT.md), in order: what a
        producer that runs its own GEMMs (torch on CPU, a BLAS) records, as
        the CUDA collector records cuBLAS.  Each row is a dict of
        ulp_gemm_info's fields (GEMM_FIELDS: m, n, k, api, a_type, compute,
        algo, tile, splitk, ...); a field left out is 0 or "".  Returns
        (first, last): the rows' range in /trace/gemms, counted over this
        session's calls, which capture(..., gemms=(first, last)) gives the
        capture they computed.  Raises ValueError for an unknown field or a
        string too long for its column, CaptureError when the library
        refuses the rows or is older than GEMM rows from callers."""
        if self._h is None:
            raise CaptureError("trace_gemms on a closed session")
        fn = getattr(self._lib, "ulp_gemm_info_size", None)
        if fn is None:
            raise CaptureError("the capture library is older than ulp_session_trace_gemms")
        if int(fn()) != ctypes.sizeof(_GemmInfo):
            raise CaptureError("ulp_gemm_info is %d bytes in %s, %d in this package: another "
                               "row layout" % (int(fn()), library_path(), ctypes.sizeof(_GemmInfo)))
        rows = list(rows)
        arr = (_GemmInfo * max(len(rows), 1))()
        kinds = dict(_GemmInfo._fields_)
        for i, row in enumerate(rows):
            for key, value in row.items():
                kind = kinds.get(key)
                if kind is None:
                    raise ValueError("GEMM row %d: no field %r (fields: %s)"
                                     % (i, key, ", ".join(GEMM_FIELDS)))
                if hasattr(kind, "_length_"):  # a char array: NUL-terminated text
                    b = value.encode() if isinstance(value, str) else bytes(value)
                    if len(b) >= kind._length_:
                        raise ValueError("GEMM row %d: %s %r is longer than its %d bytes"
                                         % (i, key, value, kind._length_ - 1))
                    setattr(arr[i], key, b)
                else:
                    setattr(arr[i], key, int(value))
        first = self._gemm_rows
        if not rows:
            return (first, first)
        st = self.call(self._lib.ulp_session_trace_gemms, ctypes.byref(arr), len(rows))
        if st != 0:
            raise CaptureError("cannot trace %d GEMM rows: %s" % (len(rows), status_str(st)))
        self._gemm_rows += len(rows)
        return (first, self._gemm_rows)

    def _ext(self, gemms):
        """A ulp_capture_device_ext with `gemms` = [first, last) set."""
        have = int(self._lib.ulp_capture_device_ext_size())
        if have < ctypes.sizeof(_DeviceExt):
            raise CaptureError("ulp_capture_device_ext is %d bytes in %s, %d in this package: "
                               "the library is older than the package"
                               % (have, library_path(), ctypes.sizeof(_DeviceExt)))
        x = _DeviceExt()
        st = self._lib.ulp_capture_device_ext_init_sized(ctypes.byref(x), ctypes.sizeof(x))
        if st != 0:
            raise CaptureError("cannot fill a capture extension: %s" % status_str(st))
        first, last = (int(v) for v in gemms)
        x.has_gemms = 1
        x.gemms[0], x.gemms[1] = first, last
        return x

    def capture(self, name, ptr, dtype, shape, layer=LAYER_NONE, role="activation",
                step=STEP_NONE, positions=None, requests=None, row_rank=0, inputs=None,
                positions_ptr=None, requests_ptr=None, gemms=None):
        """Queues one tensor: `ptr` is the address of its row-major bytes (copied
        during the call).  positions/requests: int64 sequences, one per row of
        the first `row_rank` axes, or instead positions_ptr/requests_ptr: the
        addresses of such int64 arrays (also copied during the call).
        gemms: (first, last), the /trace/gemms rows that computed it (as
        trace_gemms() returns them).  Returns the ulp_status (0 = OK); a
        failure is said once per status on stderr by the library, not
        raised."""
        if self._h is None:
            return _ECLOSED
        if step == STEP_NONE and self._due is not None:
            self._tell_due()  # the library gives the capture its session step
        if positions is None and gemms is None:
            # The common case (a hook's capture): a descriptor made once per
            # (name, dtype, shape, layer, role, rows, inputs) and thread,
            # whose call sets only what changes from call to call.
            key = (name, dtype, tuple(shape), layer, role,
                   row_rank if positions_ptr is not None else -1, requests_ptr is not None,
                   tuple(inputs) if inputs else None)
            descs = getattr(self._local, "descs", None)
            if descs is None:
                descs = self._local.descs = {}
            got = descs.get(key)
            if got is None:
                got = self._made_desc(name, dtype, shape, layer, role, row_rank,
                                      positions_ptr is not None, inputs)
                if got is None:
                    return self._capture(name, ptr, dtype, shape, layer, role, step, None,
                                         None, row_rank, inputs, positions_ptr, requests_ptr,
                                         None)
                if len(descs) < _CACHE_MAX:
                    descs[key] = got
            ref, d = got[0], got[1]
            d.data = ptr
            d.step = step
            if positions_ptr is not None:
                d.positions = positions_ptr
                d.requests = requests_ptr
            return self.call(self._lib.ulp_session_capture, ref)
        return self._capture(name, ptr, dtype, shape, layer, role, step, positions, requests,
                             row_rank, inputs, positions_ptr, requests_ptr, gemms)

    def call(self, fn, *args):
        """fn(handle, *args): a library call on this session from any thread;
        ULP_ECLOSED once close() began.  Counted in flight meanwhile, so that
        close(), on another thread, waits for it before the handle goes."""
        calls, me = self._calls, threading.get_ident()
        calls.append(me)
        try:
            h = self._h
            return fn(h, *args) if h is not None else _ECLOSED
        finally:
            calls.remove(me)  # this thread's own entry: another's may be last

    def bound(self, name, dtype, shape, layer=LAYER_NONE, role="activation", row_rank=0,
              inputs=None):
        """(fn, handle, ref, descriptor, kept) for captures of one (name,
        dtype, shape, layer, role, rows, inputs) on the calling thread, or
        None (closed, or a rank the library refuses: capture() says why).
        Set the descriptor's data, step and, with row_rank > 0, positions
        and requests (int64 addresses), then fn(handle, ref) is capture()
        of those fields in one ctypes call: for a caller that makes the same
        capture step after step (the PyTorch helper's hooks).  `kept` holds
        what the descriptor points to; keep the tuple while using it."""
        if self._h is None:
            return None
        got = self._made_desc(name, dtype, shape, layer, role, row_rank, row_rank > 0, inputs)
        if got is None:
            return None
        return self._lib.ulp_session_capture, self._h, got[0], got[1], got

    def _made_desc(self, name, dtype, shape, layer, role, row_rank, has_positions, inputs):
        """(byref, descriptor, its shape, what it points to) with every field
        of one capture but its data, step, positions and requests; None for a
        rank the library refuses (the general path says why)."""
        n = len(shape)
        if n > _MAX_RANK:
            return None
        d = _Desc()
        st = self._lib.ulp_capture_desc_init_sized(ctypes.byref(d), ctypes.sizeof(d))
        if st != 0:
            raise CaptureError("cannot fill a capture descriptor: %s" % status_str(st))
        c_shape = (ctypes.c_int64 * _MAX_RANK)()
        c_shape[:n] = shape
        d.name = self._encoded(name)
        d.dtype = DTYPE_CODES[dtype]
        d.ndim = n
        d.shape = c_shape
        d.layer = int(layer)
        d.role = ROLE_CODES[role]
        d.positions = d.requests = None
        d.row_rank = int(row_rank) if has_positions else 0
        arr = None
        if inputs:
            arr = self._inputs(inputs)
            d.n_inputs = len(arr)
            d.inputs = arr
        return (ctypes.byref(d), d, c_shape, arr)

    def _capture(self, name, ptr, dtype, shape, layer, role, step, positions, requests,
                 row_rank, inputs, positions_ptr, requests_ptr, gemms):
        buf, d, c_shape = self._desc()
        d.name = self._encoded(name)
        d.data = ptr
        d.dtype = DTYPE_CODES[dtype]
        n = len(shape)
        d.ndim = n
        if n > _MAX_RANK:  # refused by the library, which reads no shape then
            c_shape = (ctypes.c_int64 * n)(*shape)
        else:
            c_shape[:n] = shape
        d.shape = c_shape
        d.layer = int(layer)
        d.role = ROLE_CODES[role]
        d.step = int(step)
        d.positions = d.requests = None
        d.row_rank = d.n_inputs = 0
        d.inputs = None
        keep = []
        if positions is not None:
            keep.append((ctypes.c_int64 * len(positions))(*positions))
            positions_ptr = ctypes.addressof(keep[-1])
            if requests is not None:
                keep.append((ctypes.c_int64 * len(requests))(*requests))
                requests_ptr = ctypes.addressof(keep[-1])
        if positions_ptr is not None:
            d.positions = positions_ptr
            d.row_rank = int(row_rank)
            if requests_ptr is not None:
                d.requests = requests_ptr
        if inputs:
            arr = self._inputs(inputs)
            d.n_inputs = len(arr)
            d.inputs = arr
        if gemms is not None:
            if getattr(self._lib, "ulp_session_capture_ext", None) is None:
                raise CaptureError("the capture library is older than capture extensions")
            x = self._ext(gemms)
            return self.call(self._lib.ulp_session_capture_ext, buf, ctypes.byref(x))
        return self.call(self._lib.ulp_session_capture, buf)

    def flush(self):
        self.call(self._lib.ulp_session_flush)

    def close(self):
        """Writes what is queued and closes the file; returns the first error's
        status (0 = OK).  Closing twice is fine.  Library calls on other
        threads then return ULP_ECLOSED; one in flight is waited for."""
        with _lock:  # a second close() returns once the first one has closed the file
            h = self._h
            if h is None:
                return 0
            self._alive[0] = 0
            self._h = None  # from here on, a call finds the session closed
            me = threading.get_ident()
            interrupted = None
            # In a fork child the calls in flight were the parent's threads': none to wait
            # for (and the library's child copy closes nothing).
            while os.getpid() == self._pid and (
                    self._alive[1] > 0 or any(t != me for t in list(self._calls))):
                try:
                    time.sleep(0.0005)
                except BaseException as e:  # a Ctrl-C: the file is closed all the same
                    interrupted = e
                    break
            st = self._lib.ulp_session_close(h)
            _open_paths.pop(self._key, None)
        if interrupted is not None:
            raise interrupted
        return st

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

"""A snapshot writer over the C capture API (include/ulpprof/capture.h)
through ctypes, for tests that need files the library itself writes:
positions, requests and inputs go through ulp_capture_desc as a program
would pass them.  Only the struct layout is restated here."""
import ctypes
import os

import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
DTYPES = {"f64": 0, "f32": 1, "f16": 2, "bf16": 3, "i64": 6, "u8": 10}
ROLES = {"activation": 0, "logits": 1, "input": 3}


class Options(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("label", ctypes.c_char_p), ("attrs", ctypes.c_char_p),
                ("queue_bytes", ctypes.c_size_t), ("writer", ctypes.c_char_p),
                ("record_env", ctypes.c_int),
                # Room for fields added later: ulp_session_options_init() writes them.
                ("_reserved", ctypes.c_char * 512)]


class Desc(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("layer", ctypes.c_int32), ("role", ctypes.c_int), ("step", ctypes.c_int64),
                ("has_kernels", ctypes.c_int), ("kernels", ctypes.c_int64 * 2),
                ("device_ptr", ctypes.c_uint64), ("stream", ctypes.c_uint64),
                ("time_ns", ctypes.c_int64),
                ("positions", ctypes.POINTER(ctypes.c_int64)),
                ("requests", ctypes.POINTER(ctypes.c_int64)),
                ("row_rank", ctypes.c_int32), ("n_inputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(ctypes.c_char_p)),
                ("has_gemms", ctypes.c_int), ("gemms", ctypes.c_int64 * 2),
                ("has_graph_replay", ctypes.c_int), ("graph_replay", ctypes.c_int64 * 2),
                # Room for fields added later: ulp_capture_desc_init() writes them.
                ("_reserved", ctypes.c_char * 512)]


_lib = None


def lib():
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(os.path.join(BUILD, "collector", "libulpprof_capture.so"))
        _lib.ulp_session_open.argtypes = [ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p),
                                          ctypes.c_void_p]
        _lib.ulp_session_capture.argtypes = [ctypes.c_void_p, ctypes.POINTER(Desc)]
        _lib.ulp_session_close.argtypes = [ctypes.c_void_p]
        _lib.ulp_session_set_run.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        # The library says how big its structs are: the room above must hold them.
        for query, struct in (("ulp_session_options_size", Options), ("ulp_capture_desc_size", Desc)):
            fn = getattr(_lib, query)
            fn.restype = ctypes.c_size_t
            assert fn() <= ctypes.sizeof(struct), (query, fn(), ctypes.sizeof(struct))
    return _lib


def _i64(a):
    a = np.ascontiguousarray(a, dtype=np.int64)
    return a, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))


class Writer:
    def __init__(self, path, label="run", run=None):
        o = Options()
        lib().ulp_session_options_init(ctypes.byref(o))
        o.path, o.label, o.attrs, o.record_env = path.encode(), label.encode(), b"", 0
        self.s = ctypes.c_void_p()
        st = lib().ulp_session_open(ctypes.byref(o), ctypes.byref(self.s), None)
        assert st == 0, st
        for k, v in (run or {}).items():
            lib().ulp_session_set_run(self.s, k.encode(), str(v).encode())

    def capture(self, name, bits, dtype, positions=None, requests=None, inputs=None, layer=-1,
                role="activation", step=None):
        """bits: raw array (uint16 for bf16, float32 for f32); returns the status."""
        bits = np.ascontiguousarray(bits)
        d = Desc()
        lib().ulp_capture_desc_init(ctypes.byref(d))
        keep = []
        shape, d.shape = _i64(bits.shape)
        keep.append(shape)
        d.name, d.data, d.dtype, d.ndim = name.encode(), bits.ctypes.data, DTYPES[dtype], bits.ndim
        d.layer, d.role = layer, ROLES[role]
        if step is not None:
            d.step = step
        if positions is not None:
            p, d.positions = _i64(positions)
            d.row_rank = p.ndim
            keep.append(p)
        if requests is not None:
            assert np.shape(requests) == np.shape(positions), "requests shaped like positions"
            r, d.requests = _i64(requests)
            keep.append(r)
        if inputs:
            arr = (ctypes.c_char_p * len(inputs))(*[i.encode() for i in inputs])
            d.inputs, d.n_inputs = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)), len(inputs)
            keep.append(arr)
        return lib().ulp_session_capture(self.s, ctypes.byref(d))

    def close(self):
        st = lib().ulp_session_close(self.s)
        assert st == 0, st

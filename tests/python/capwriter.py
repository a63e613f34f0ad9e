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


# A prefix of each struct: struct_size (this mirror's size) tells the
# library which fields are here; it takes its defaults for the rest.
class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("path", ctypes.c_char_p), ("label", ctypes.c_char_p), ("attrs", ctypes.c_char_p),
                ("queue_bytes", ctypes.c_size_t), ("writer", ctypes.c_char_p),
                ("record_env", ctypes.c_int)]


class Desc(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("name", ctypes.c_char_p), ("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("ndim", ctypes.c_int), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("layer", ctypes.c_int32), ("role", ctypes.c_int), ("step", ctypes.c_int64),
                ("time_ns", ctypes.c_int64),
                ("positions", ctypes.POINTER(ctypes.c_int64)),
                ("requests", ctypes.POINTER(ctypes.c_int64)),
                ("row_rank", ctypes.c_int32), ("n_inputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(ctypes.c_char_p))]


_lib = None


def lib():
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(os.path.join(BUILD, "capture", "libulpprof_capture.so"))
        _lib.ulp_session_open.argtypes = [ctypes.POINTER(Options), ctypes.POINTER(ctypes.c_void_p),
                                          ctypes.c_void_p]
        _lib.ulp_session_capture.argtypes = [ctypes.c_void_p, ctypes.POINTER(Desc)]
        _lib.ulp_session_close.argtypes = [ctypes.c_void_p]
        _lib.ulp_session_set_run.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
        for fn in (_lib.ulp_session_options_init_sized, _lib.ulp_capture_desc_init_sized):
            fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        # The library says how big its structs are: the mirrors above are a prefix.
        for query, struct in (("ulp_session_options_size", Options), ("ulp_capture_desc_size", Desc)):
            fn = getattr(_lib, query)
            fn.restype = ctypes.c_size_t
            assert fn() >= ctypes.sizeof(struct), (query, fn(), ctypes.sizeof(struct))
    return _lib


def _i64(a):
    a = np.ascontiguousarray(a, dtype=np.int64)
    return a, a.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))


class Writer:
    def __init__(self, path, label="run", run=None, mode=None):
        o = Options()
        assert lib().ulp_session_options_init_sized(ctypes.byref(o), ctypes.sizeof(o)) == 0
        o.path, o.label, o.attrs, o.record_env = path.encode(), label.encode(), b"", 0
        self.s = ctypes.c_void_p()
        st = lib().ulp_session_open(ctypes.byref(o), ctypes.byref(self.s), None)
        assert st == 0, st
        if mode is not None:  # "data", "digest" or "both"
            lib().ulp_session_set_capture_mode.argtypes = [ctypes.c_void_p, ctypes.c_int]
            code = {"data": 0, "digest": 1, "both": 2}[mode]
            assert lib().ulp_session_set_capture_mode(self.s, code) == 0
        for k, v in (run or {}).items():
            lib().ulp_session_set_run(self.s, k.encode(), str(v).encode())

    def capture(self, name, bits, dtype, positions=None, requests=None, inputs=None, layer=-1,
                role="activation", step=None):
        """bits: raw array (uint16 for bf16, float32 for f32); returns the status."""
        bits = np.ascontiguousarray(bits)
        d = Desc()
        assert lib().ulp_capture_desc_init_sized(ctypes.byref(d), ctypes.sizeof(d)) == 0
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

"""Announce a PyTorch model's per-layer tensors to ulpprof.

    import ulpprof_torch
    cap = ulpprof_torch.attach(model)          # forward hooks on model.layers.N etc.
    with torch.no_grad():
        logits = model(tokens)
    cap.detach()

Run the program under `ulpprof record -o run.h5 --label miss -- python prog.py`.

For each hooked module, the helper announces its output tensor after the forward call:

* CUDA tensors get a `ulp1` NVTX mark (collector/cuda/PROTOCOL.md) that carries the
  tensor's address, dtype, shape and the current stream.  The injection library,
  which `ulpprof record` loads, copies the tensor on that stream.  This never
  synchronizes, and it does nothing inside CUDA-graph capture.
* CPU tensors go to the host capture API (`ulp_capture_host` in
  libulpprof_capture.so) through ctypes.  The library is found through
  $ULPPROF_CAPTURE_LIBRARY, or else through the loader's search path.

Every capture is named `<prefix>.<module path>.out`, for example
`model.layers.14.out`.  The layer index comes from the last `.N` component of
the module path.  The module named by `logits` gets the role `logits`.
Non-contiguous outputs are made contiguous first.  Tuples are reduced to
their first tensor.  `select` (a function of the tensor) picks what to keep,
for example one batch row.

Nothing here raises because of ulpprof: when the library is absent or
ULPPROF_OUTPUT is unset, the hooks do nothing.
"""
import ctypes
import ctypes.util
import os
import re

import torch

__all__ = ["attach", "Capture", "DTYPES"]

# torch dtype -> (FORMAT.md name, ulp_dtype value from include/ulpprof/dtype.h)
DTYPES = {
    torch.float64: ("f64", 0),
    torch.float32: ("f32", 1),
    torch.float16: ("f16", 2),
    torch.bfloat16: ("bf16", 3),
    torch.int64: ("i64", 6),
    torch.int32: ("i32", 7),
    torch.int16: ("i16", 8),
    torch.int8: ("i8", 9),
    torch.uint8: ("u8", 10),
}
for _name, _fmt, _val in (("float8_e4m3fn", "f8e4m3", 4), ("float8_e5m2", "f8e5m2", 5)):
    if hasattr(torch, _name):  # torch >= 2.1
        DTYPES[getattr(torch, _name)] = (_fmt, _val)

ROLES = {"activation": 0, "logits": 1, "kv": 2, "input": 3, "weight": 4}
_LAYER = re.compile(r"(?:^|\.)(\d+)$")
_ULP_EDISABLED = -15


def _load_host_library():
    path = os.environ.get("ULPPROF_CAPTURE_LIBRARY") or ctypes.util.find_library("ulpprof_capture")
    if not path:
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    lib.ulp_capture_host.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                     ctypes.POINTER(ctypes.c_int64), ctypes.c_int32, ctypes.c_int]
    lib.ulp_capture_host.restype = ctypes.c_int
    lib.ulp_capture_set_step.argtypes = [ctypes.c_int64]
    lib.ulp_capture_set_step.restype = ctypes.c_int
    lib.ulp_capture_flush.argtypes = []
    lib.ulp_capture_flush.restype = ctypes.c_int
    return lib


def _escape(s):
    return s.replace("\\", "\\\\").replace("|", "\\|")


def _first_tensor(out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


class Capture:
    """Forward hooks that announce module outputs.  See the module docstring."""

    def __init__(self, model, prefix="model", include=r"(^|\.)layers\.\d+$", logits=None,
                 extra=(), select=None):
        self.prefix = prefix
        self.select = select
        self._handles = []
        self._host = None
        self._host_tried = False
        self._warned = set()
        pattern = re.compile(include) if include else None
        names = dict(model.named_modules())
        chosen = [n for n in names if n and pattern and pattern.search(n)]
        chosen += [n for n in extra if n in names and n not in chosen]
        if logits is not None:
            if logits not in names:
                raise KeyError("no module named %r in the model" % logits)
            if logits not in chosen:
                chosen.append(logits)
        for n in chosen:
            role = "logits" if n == logits else "activation"
            m = _LAYER.search(n)
            layer = int(m.group(1)) if m and role != "logits" else -1
            full = "%s.%s.out" % (prefix, n) if role != "logits" else "logits"
            self._handles.append(names[n].register_forward_hook(self._hook(full, layer, role)))

    def _hook(self, name, layer, role):
        def hook(module, inputs, output):
            t = _first_tensor(output)
            if t is not None and self.select is not None:
                t = self.select(t)
            if t is not None:
                self.capture(name, t, layer=layer, role=role)
        return hook

    def _warn_once(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            import sys
            print("ulpprof_torch: " + msg, file=sys.stderr)

    def capture(self, name, t, layer=-1, role="activation"):
        """Announces one tensor (any module's, or your own)."""
        spec = DTYPES.get(t.dtype)
        if spec is None:
            self._warn_once(("dtype", t.dtype), "dtype %s is not in the snapshot format: skipped"
                            % t.dtype)
            return
        t = t.detach()
        if not t.is_contiguous():
            t = t.contiguous()
        shape = list(t.shape)
        if t.is_cuda:
            stream = torch.cuda.current_stream(t.device).cuda_stream
            msg = ("ulp1|name=%s|ptr=0x%x|dtype=%s|shape=%s|layer=%d|role=%s|dev=cuda:%d"
                   "|stream=0x%x|bytes=%d" % (_escape(name), t.data_ptr(), spec[0],
                                              ",".join(map(str, shape)), layer, role,
                                              t.device.index, stream,
                                              t.numel() * t.element_size()))
            torch.cuda.nvtx.mark(msg)
            return
        lib = self._host_library()
        if lib is None:
            return
        c_shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        st = lib.ulp_capture_host(name.encode(), ctypes.c_void_p(t.data_ptr()), spec[1],
                                  len(shape), c_shape, layer, ROLES[role])
        if st not in (0, _ULP_EDISABLED):
            self._warn_once(("status", st), "capture of %s failed (ulp_status %d)" % (name, st))

    def _host_library(self):
        if not self._host_tried:
            self._host_tried = True
            self._host = _load_host_library()
            if self._host is None and os.environ.get("ULPPROF_OUTPUT"):
                self._warn_once("lib", "libulpprof_capture.so not found (set "
                                "ULPPROF_CAPTURE_LIBRARY): CPU tensors are not captured")
        return self._host

    def step(self, n):
        """Sets the step (forward pass / decode step) of the captures that follow."""
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.nvtx.mark("ulp1|ev=step|step=%d" % n)
        lib = self._host_library()
        if lib is not None:
            lib.ulp_capture_set_step(n)

    def flush(self):
        """Waits until the CPU captures so far are in the file."""
        lib = self._host_library()
        if lib is not None:
            lib.ulp_capture_flush()

    def detach(self):
        for h in self._handles:
            h.remove()
        self._handles = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()


def attach(model, prefix="model", include=r"(^|\.)layers\.\d+$", logits=None, extra=(),
           select=None):
    """Registers the hooks and returns the Capture (call .detach() to remove them).

    select: optional function applied to each output before it is captured,
    e.g. `lambda t: t[:1]` to keep batch row 0 only.
    """
    return Capture(model, prefix=prefix, include=include, logits=logits, extra=extra,
                   select=select)

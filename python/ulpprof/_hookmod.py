"""The PyTorch helper's quick lane compiled (capture/torch/hook.c): the
extension `_torch_hook` from beside the loaded host capture library, when
it is there and writes the descriptor fields where this package's ctypes
mirror has them; None else (ulpprof.torch then hooks in Python alone), and
always with ULPPROF_TORCH_HOOK=0."""
import ctypes
import importlib.machinery
import importlib.util
import os

from . import _lib

FILE = "_torch_hook.abi3.so"
_found = {}  # library path -> the module, or None


def module():
    """The compiled hook's module, or None."""
    if os.environ.get("ULPPROF_TORCH_HOOK", "1") == "0":
        return None
    lib = _lib.library_path()
    if lib is None:  # no session has loaded the library yet
        return None
    if lib not in _found:
        _found[lib] = _load(os.path.join(os.path.dirname(lib), FILE))
    return _found[lib]


def _load(path):
    if not os.path.isfile(path):
        return None
    try:
        loader = importlib.machinery.ExtensionFileLoader("ulpprof._torch_hook", path)
        spec = importlib.util.spec_from_file_location("ulpprof._torch_hook", path, loader=loader)
        mod = importlib.util.module_from_spec(spec)
        loader.exec_module(mod)
    except (ImportError, OSError):
        return None
    d = _lib._Desc
    try:
        mine = (mod.ALIVE_INTS, mod.DESC_BYTES, mod.DATA_AT, mod.STEP_AT, mod.POSITIONS_AT,
                mod.REQUESTS_AT)
    except AttributeError:  # an extension from before one of them
        return None
    # Session._alive's ints (closed flag, calls in flight) and the descriptor the
    # mirror here lays out, up to its size; anything else: the Python lane serves.
    if mine != (2, ctypes.sizeof(d), d.data.offset, d.step.offset, d.positions.offset,
                d.requests.offset):
        return None
    return mod

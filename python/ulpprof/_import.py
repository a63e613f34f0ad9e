"""`ulpprof import`: turn tensor dumps written by other tools into a snapshot.

    ulpprof import -o run.h5 [--label L] [--attr K=V]... [--observed K=V]... [--rank R]
                   [--unsafe-pickle] PATH...

PATH is a file or a directory (walked recursively, files in natural order of
their names).  Read:
  .npy            numpy.save; the capture is the file's path below PATH,
                  without the extension, '/' -> '.'
  .npz            numpy.savez; one capture per array, named by its key
  .safetensors    the safetensors format (read by its published layout, so
                  bf16 and fp8 keep their bits); one capture per tensor.  The
                  format keeps no execution order: the captures are ordered
                  embeddings, layers by number, the rest, logits, with a warning
  .pt .pth .bin   torch.save of a tensor, of a dict / list / tuple of tensors,
                  or SGLang's dumper {"value": tensor, "meta": {...}}; loaded
                  with weights_only=True (no arbitrary pickle) on torch >= 2.6,
                  refused on an older torch (whose weights_only loader can run
                  code) unless --unsafe-pickle; a TorchScript archive is always
                  refused (ulpprof/_import_guard.py).  SGLang dumper files
                  (`forward_pass_id=3___rank=0___name=x___layer_id=5.pt`) give
                  the name (`layers.5.x` when a layer_id is given), the layer,
                  the step (forward_pass_id) and the rank (--rank keeps one).
Layer numbers come from `layers.N` / `h.N` / `layer_id`, the role `logits`
from names ending in `logits` or `lm_head`.  Positions: a tensor named
`positions` (1-D integers) in the same forward pass (the SGLang step, else
the same file) gives each capture whose first axis has its length one
position per row, and is itself no capture; a position that does not follow
the previous one starts a new request.
A capture name seen again (another pass) is its next occurrence.  Bad input
exits 2 with one line; the output is written in a private temporary
directory beside it and moved into place only when everything was read, so
an existing file is never half overwritten, and an output that is one of
the inputs is refused.
"""
import argparse
import json
import os
import re
import struct
import sys

from . import _import_guard as guard
from . import _layout
from ._import_guard import BadInput
from ._lib import DTYPE_SIZES, CaptureError, Session

_TORCH_EXT = (".pt", ".pth", ".bin")
_EXTS = (".npy", ".npz", ".safetensors") + _TORCH_EXT
# safetensors dtype -> FORMAT.md dtype
_ST_DTYPES = {"F64": "f64", "F32": "f32", "F16": "f16", "BF16": "bf16", "F8_E4M3": "f8e4m3",
              "F8_E5M2": "f8e5m2", "I64": "i64", "I32": "i32", "I16": "i16", "I8": "i8",
              "U8": "u8", "BOOL": "u8"}
_NP_DTYPES = {"float64": "f64", "float32": "f32", "float16": "f16", "int64": "i64",
              "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "u8"}
_SGL_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


class Tensor:
    """One tensor to write: FORMAT.md dtype, shape, contiguous bytes (a numpy
    array or bytes), and what the source says about it."""

    def __init__(self, name, dtype, shape, data, layer=-1, step=None, rank=None, order=()):
        self.name, self.dtype, self.shape, self.data = name, dtype, tuple(shape), data
        self.layer = layer if layer >= 0 else _layout.layer_of(name)
        self.step, self.rank, self.order = step, rank, order
        self.src = 0  # index of the file it came from (its pass when it has no step)


def _natural(s):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def _files(paths):
    out = []
    for p in paths:
        if os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs.sort(key=_natural)
                for f in files:
                    if f.endswith(_EXTS):
                        found.append((os.path.join(root, f), p))
            if not found:
                raise BadInput("'%s': no .npy, .npz, .safetensors or .pt files in it" % p)
            out += sorted(found, key=lambda x: _natural(os.path.relpath(x[0], x[1])))
        elif os.path.isfile(p):
            if not p.endswith(_EXTS):
                raise BadInput("'%s': not a .npy, .npz, .safetensors or .pt/.pth/.bin file" % p)
            out.append((p, None))
        else:
            raise BadInput("'%s': no such file or directory" % p)
    return out


def _stem_name(path, root):
    rel = os.path.relpath(path, root) if root else os.path.basename(path)
    return os.path.splitext(rel)[0].replace(os.sep, ".")


def _np_tensor(name, arr, where, **kw):
    import numpy as np

    dt = _NP_DTYPES.get(arr.dtype.name)
    if dt is None or arr.dtype.byteorder == ">":
        raise BadInput("'%s': %s has dtype %s, which snapshots do not hold" % (where, name,
                                                                                arr.dtype))
    return Tensor(name, dt, arr.shape, np.ascontiguousarray(arr), **kw)


def _read_npy(path, root):
    import numpy as np

    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as e:  # numpy raises ValueError, OSError, EOFError...
        raise BadInput("'%s': not a readable .npy file (%s)" % (path, _short(e)))
    return [_np_tensor(_stem_name(path, root), arr, path)]


def _read_npz(path, root):
    import numpy as np

    out = []
    try:
        for key, arr in guard.read_npz(path):
            out.append(_np_tensor(key, arr, path))
    except BadInput:
        raise
    except Exception as e:
        raise BadInput("'%s': not a readable .npz file (%s)" % (path, _short(e)))
    return out


def _read_safetensors(path, root):
    """The safetensors layout: u64 LE header length, a JSON header
    {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
    then the data; offsets are relative to the data."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise BadInput("'%s': cannot read: %s" % (path, e.strerror))
    if len(blob) < 8:
        raise BadInput("'%s': not a safetensors file (too short)" % path)
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise BadInput("'%s': not a safetensors file (header of %d bytes in a %d-byte file)"
                       % (path, n, len(blob)))
    try:
        header = json.loads(blob[8:8 + n].decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError("the header is not an object")
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput("'%s': not a safetensors file (header: %s)" % (path, _short(e)))
    except RecursionError:
        raise BadInput("'%s': not a safetensors file (header: JSON nested too deep)" % path)
    data = memoryview(blob)[8 + n:]
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dt = _ST_DTYPES[info["dtype"]]
            shape = [int(x) for x in info["shape"]]
            b, e = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise BadInput("'%s': tensor %s: dtype %r is not held by snapshots, or its entry "
                           "is malformed" % (path, name, info.get("dtype") if isinstance(
                               info, dict) else info))
        count = 1
        for x in shape:
            count *= x
        if min(shape + [0]) < 0 or not 0 <= b <= e <= len(data) or e - b != count * DTYPE_SIZES[dt]:
            raise BadInput("'%s': tensor %s: its bytes [%d, %d) do not match shape %s %s in %d "
                           "bytes of data" % (path, name, b, e, shape, info["dtype"], len(data)))
        out.append(Tensor(name, dt, shape, bytes(data[b:e])))
    return _execution_order(out, path)


_EMBED = re.compile(r"(embed|wte|wpe|tok|input)", re.I)


def _execution_order(tensors, path):
    """safetensors keeps no order (its writers sort the tensors by name):
    the likely order of execution, from the names -- embeddings, then the
    layers by number, then the other unnumbered ones (final norm), then the
    logits -- and a warning that it was guessed, so that a first divergence
    read from it is read with care."""
    def rank(t):
        if re.search(r"(logits|lm_head)$", t.name):
            return (3, 0)
        if t.layer >= 0:
            return (1, t.layer)
        return (0, 0) if _EMBED.search(t.name) else (2, 0)

    if len(tensors) > 1:
        sys.stderr.write("ulpprof: import: warning: '%s': safetensors keeps no execution order; "
                         "ordered by name (embeddings, layers by number, the rest, logits): "
                         "a first divergence between its captures may be misplaced\n"
                         % guard.shown(path))
    return sorted(tensors, key=rank)


def _sglang_fields(path):
    """{key: value} of an SGLang dumper file name, or None."""
    base = os.path.splitext(os.path.basename(path))[0]
    parts = base.split("___")
    fields = {}
    for p in parts:
        m = _SGL_FIELD.match(p)
        if not m:
            return None
        fields[m.group(1)] = m.group(2)
    return fields if "name" in fields else None


def _torch_tensors(obj, name):
    """(name, tensor) pairs of a torch.save'd object."""
    import torch

    if torch.is_tensor(obj):
        return [(name, obj)]
    if isinstance(obj, dict):
        if "value" in obj and torch.is_tensor(obj["value"]) and set(obj) <= {"value", "meta"}:
            return [(name, obj["value"])]
        out = []
        for k, v in obj.items():
            out += _torch_tensors(v, "%s.%s" % (name, k) if name else str(k))
        return out
    if isinstance(obj, (list, tuple)):
        out = []
        for i, v in enumerate(obj):
            out += _torch_tensors(v, "%s.%d" % (name, i) if name else str(i))
        return out
    return []


def _read_torch(path, root, unsafe):
    try:
        import torch
    except ImportError:
        raise BadInput("'%s': reading torch.save files needs torch (pip install torch)" % path)
    from .torch import DTYPES

    guard.check_torch_file(path, unsafe, torch.__version__)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=not unsafe)
    except Exception as e:
        msg = _short(e)
        if not unsafe and ("weights_only" in msg or "Unpickler" in msg or "GLOBAL" in msg):
            raise BadInput("'%s': holds more than tensors (pickled objects); refused under "
                           "weights_only=True (--unsafe-pickle loads it, if you trust it)" % path)
        raise BadInput("'%s': not a readable torch.save file (%s)" % (path, msg))
    sgl = _sglang_fields(path)
    kw = {}
    if sgl is not None:
        base = sgl["name"]
        layer = sgl.get("layer_id")
        if layer is not None and layer.isdigit():
            base = "layers.%s.%s" % (layer, base)
            kw["layer"] = int(layer)
        if sgl.get("forward_pass_id", "").isdigit():
            kw["step"] = int(sgl["forward_pass_id"])
        if sgl.get("rank", "").isdigit():
            kw["rank"] = int(sgl["rank"])
        kw["order"] = (kw.get("step", 0), int(sgl.get("dump_index", "0") or 0)
                       if sgl.get("dump_index", "0").isdigit() else 0)
    else:
        base = _stem_name(path, root) if not isinstance(obj, dict) else ""
    pairs = _torch_tensors(obj, base)
    if not pairs:
        raise BadInput("'%s': holds no tensors" % path)
    out = []
    for name, t in pairs:
        name = name or _stem_name(path, root)
        dt = DTYPES.get(t.dtype) or ("u8" if t.dtype == torch.bool else None)
        if dt is None:
            raise BadInput("'%s': %s has dtype %s, which snapshots do not hold" % (path, name,
                                                                                    t.dtype))
        t = t.detach().contiguous()
        raw = t.view(torch.uint8) if t.dtype == torch.bool else t
        if raw.dim() == 0:
            raw = raw.reshape(1)
        # The bytes as they are (bf16 and fp8 too): through a same-width integer view.
        width = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        arr = raw.view(width).numpy()
        out.append(Tensor(name, dt, t.shape, arr, **kw))
    return out


def _short(e):
    s = str(e).strip().splitlines()
    return (s[0] if s else type(e).__name__)[:200]


def _pass_of(t):
    """The forward pass a tensor belongs to: its step, else the file it came from."""
    return ("step", t.step) if t.step is not None else ("file", t.src)


def _is_positions(t):
    return t.name.rsplit(".", 1)[-1] == "positions" and len(t.shape) == 1 and t.dtype in (
        "i64", "i32")


def _rows(tensors):
    """The tensors to capture (a `positions` tensor is not one) and the
    positions and requests of each, by its index in that list, from the
    `positions` tensor of the same pass (see the module docstring)."""
    import numpy as np

    pos_by_pass = {}
    for t in tensors:
        if _is_positions(t):
            pos_by_pass[_pass_of(t)] = np.frombuffer(bytes(t.data), dtype="<" + (
                "i8" if t.dtype == "i64" else "i4")).astype(np.int64)
    kept = [t for t in tensors if not _is_positions(t)]
    out = {}
    for i, t in enumerate(kept):
        pos = pos_by_pass.get(_pass_of(t))
        if pos is None or not t.shape or t.shape[0] != len(pos):
            continue
        if (pos < 0).any():
            continue
        req = np.cumsum(np.concatenate([[0], (pos[1:] != pos[:-1] + 1).astype(np.int64)]))
        out[i] = (pos.tolist(), req.tolist())
    return kept, out


def _load(files, unsafe, rank):
    tensors = []
    for src, (path, root) in enumerate(files):
        if path.endswith(".npy"):
            got = _read_npy(path, root)
        elif path.endswith(".npz"):
            got = _read_npz(path, root)
        elif path.endswith(".safetensors"):
            got = _read_safetensors(path, root)
        else:
            got = _read_torch(path, root, unsafe)
        for t in got:
            guard.check_name(path, t.name)
            t.src = src
        tensors += got
    ranks = sorted({t.rank for t in tensors if t.rank is not None})
    if rank is not None:
        tensors = [t for t in tensors if t.rank in (None, rank)]
        if rank not in ranks:
            raise BadInput("no tensors of rank %d (ranks found: %s)" % (rank, ranks or "none"))
    elif len(ranks) > 1:
        raise BadInput("the dumps hold ranks %s: import one per snapshot with --rank R"
                       % ", ".join(map(str, ranks)))
    if any(t.order for t in tensors):
        tensors.sort(key=lambda t: t.order)
    return tensors


def _write(tensors, out, label, attrs, observed=None):
    """Writes the snapshot; returns the number of captures in it."""
    import numpy as np

    tensors, rows = _rows(tensors)
    tmpdir = guard.temp_dir(out)
    tmp = os.path.join(tmpdir, "snapshot.h5")
    sess = None
    try:
        sess = Session(tmp, label=label, run=attrs, observed=observed)
        # How the file was made is no condition of the run (FORMAT.md /observed).
        sess.set_observed("imported", "ulpprof import")
        for i, t in enumerate(tensors):
            buf = t.data if isinstance(t.data, np.ndarray) else np.frombuffer(t.data, np.uint8)
            role = "logits" if re.search(r"(logits|lm_head)$", t.name) else "activation"
            pos, req = rows.get(i, (None, None))
            st = sess.capture(t.name, buf.ctypes.data if buf.size else None, t.dtype,
                              list(t.shape), layer=t.layer, role=role,
                              step=t.step if t.step is not None else -(2 ** 63),
                              positions=pos, requests=req, row_rank=1 if pos else 0)
            if st != 0:
                raise BadInput("'%s': cannot write capture %s (status %d)" % (out, t.name, st))
        if sess.close() != 0:
            raise BadInput("'%s': the snapshot could not be written" % out)
        os.replace(tmp, out)
    except OSError as e:
        raise BadInput("'%s': cannot write it: %s" % (guard.shown(out), e.strerror or e))
    finally:
        if sess is not None:
            sess.close()
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.rmdir(tmpdir)
    return len(tensors)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line, as every ulpprof usage error.
        sys.stderr.write("ulpprof: import: %s; see 'ulpprof import --help'\n" % message)
        sys.exit(2)


def main(argv):
    ap = _Parser(prog="ulpprof import", description=__doc__.split("\n")[0],
                                 epilog="exit status: 0 written, 2 error")
    ap.add_argument("paths", nargs="+", metavar="PATH")
    ap.add_argument("-o", "--output", required=True, help="snapshot to write")
    ap.add_argument("-l", "--label", default="import", help="run label (default: import)")
    ap.add_argument("-a", "--attr", action="append", default=[], metavar="K=V",
                    help="a /run attribute (repeatable), e.g. cache=hit")
    ap.add_argument("--observed", action="append", default=[], metavar="K=V",
                    help="an /observed attribute (repeatable): a fact about the run that "
                         "sets no condition")
    ap.add_argument("--rank", type=int, help="keep the tensors of this rank (SGLang dumps)")
    ap.add_argument("--unsafe-pickle", action="store_true",
                    help="load .pt files with full pickle (runs code they contain: only "
                         "for files you trust)")
    try:
        a = ap.parse_args(argv)
    except SystemExit as e:
        return 0 if e.code == 0 else 2
    attrs = {}
    for kv in a.attr:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            print("ulpprof: import: --attr '%s' is not KEY=VALUE" % kv, file=sys.stderr)
            return 2
        attrs[k] = v
    observed = {}
    for kv in a.observed:
        k, sep, v = kv.partition("=")
        if not sep or not k:
            print("ulpprof: import: --observed '%s' is not KEY=VALUE" % kv, file=sys.stderr)
            return 2
        observed[k] = v
    outdir = os.path.dirname(os.path.abspath(a.output))
    if not os.path.isdir(outdir):
        print("ulpprof: import: cannot write '%s': no directory '%s'" % (a.output, outdir),
              file=sys.stderr)
        return 2
    try:
        files = _files(a.paths)
        guard.check_output(a.output, [p for p, _ in files])
        n = _write(_load(files, a.unsafe_pickle, a.rank), a.output, a.label, attrs, observed)
    except (BadInput, CaptureError) as e:
        print("ulpprof: import: %s" % e, file=sys.stderr)
        return 2
    except ImportError as e:
        print("ulpprof: import: needs %s in %s (pip install numpy; torch for .pt files)"
              % (e.name or e, sys.executable), file=sys.stderr)
        return 2
    print("ulpprof import: %d captures -> %s" % (n, a.output))
    return 0

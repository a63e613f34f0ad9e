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
  .json           Polygraphy's `run --save-outputs` RunResults (one runner;
                  iteration i is step i)
  .pt .pth .bin   torch.save of a tensor, of a dict / list / tuple of tensors,
                  or SGLang's dumper {"value": tensor, "meta": {...}}; loaded
                  with weights_only=True (no arbitrary pickle) on torch >= 2.6,
                  refused on an older torch (whose weights_only loader can run
                  code) unless --unsafe-pickle; a TorchScript archive is always
                  refused (ulpprof/_import_guard.py).  SGLang dumper files
                  (`step=3___rank=0___dump_index=7___name=x___layer_id=5.pt`,
                  older `forward_pass_id=3`) give the name (`layers.5.x` when a
                  layer_id is given; non-intrusive names are the module path),
                  the layer, the step and the rank (--rank keeps one); their
                  input_ids are token ids (role input), their positions,
                  seq_lens, req_pool_indices and rids token metadata.
Names: '/' becomes '.' (ONNX exporter paths), a leading '/' is dropped.
Layer numbers come from `layers.N` / `h.N` / `layer_id`, the role `logits`
from names ending in `logits` or `lm_head`.  Positions: a tensor named
`positions` (1-D integers) in the same forward pass (the SGLang step, else
the same file) gives each capture whose first axis has its length one
position per row, and is itself no capture; a pass of as many rows as
requests (seq_lens, rids) is one row each, else a position that does not
follow the previous one starts a new request; rids number the requests.
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
_EXTS = (".npy", ".npz", ".safetensors", ".json") + _TORCH_EXT
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

    def __init__(self, name, dtype, shape, data, layer=-1, step=None, rank=None, order=(),
                 role=None):
        self.name, self.dtype, self.shape, self.data = name, dtype, tuple(shape), data
        self.layer = layer if layer >= 0 else _layout.layer_of(name)
        self.step, self.rank, self.order, self.role = step, rank, order, role
        self.src = 0  # index of the file it came from (its pass when it has no step)
        self.meta = None  # a non-tensor value (SGLang's rids): read, never captured


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
                raise BadInput("'%s': no .npy, .npz, .safetensors, .json or .pt files in it"
                               % p)
            out += sorted(found, key=lambda x: _natural(os.path.relpath(x[0], x[1])))
        elif os.path.isfile(p):
            if not p.endswith(_EXTS):
                raise BadInput("'%s': not a .npy, .npz, .safetensors, .json or .pt/.pth/.bin "
                               "file" % p)
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


def _pg_array(path, name, obj):
    """The numpy array of one Polygraphy output: {"polygraphy_class":
    "LazyArray", "values": ndarray} or the ndarray itself, {"polygraphy_class":
    "ndarray", "array": base64 of the .npy bytes}."""
    import base64
    import binascii
    import io

    import numpy as np

    if isinstance(obj, dict) and obj.get("polygraphy_class") == "LazyArray":
        obj = obj.get("values")
    if not isinstance(obj, dict) or obj.get("polygraphy_class") != "ndarray" or not isinstance(
            obj.get("array"), str):
        raise BadInput("'%s': output %s is not an array as Polygraphy writes one "
                       "(polygraphy_class ndarray)" % (path, name))
    try:
        return np.load(io.BytesIO(base64.b64decode(obj["array"], validate=True)),
                       allow_pickle=False)
    except (ValueError, OSError, EOFError, binascii.Error) as e:
        raise BadInput("'%s': output %s: not a base64 .npy array (%s)" % (path, name, _short(e)))


def _read_polygraphy(path, root):
    """Polygraphy's `run --save-outputs` JSON: {"polygraphy_class":
    "RunResults", "lst": [[runner name, [IterationResult {"outputs": {name:
    array}}, ...]], ...]}.  One runner per file (each is a run); iteration i
    is step i, its outputs in the order the runner returned them."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except OSError as e:
        raise BadInput("'%s': cannot read: %s" % (path, e.strerror))
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput("'%s': not a JSON file (%s)" % (path, _short(e)))
    except RecursionError:
        raise BadInput("'%s': not a Polygraphy file (JSON nested too deep)" % path)
    if not isinstance(doc, dict) or doc.get("polygraphy_class") != "RunResults" or \
            not isinstance(doc.get("lst"), list):
        raise BadInput("'%s': not a Polygraphy RunResults file (polygraphy run "
                       "--save-outputs)" % path)
    runners = [r for r in doc["lst"] if isinstance(r, list) and len(r) == 2]
    if len(runners) != len(doc["lst"]) or not runners:
        raise BadInput("'%s': RunResults holds no [runner, iterations] pairs" % path)
    if len(runners) > 1:
        raise BadInput("'%s': results of %d runners (%s): one runner is one run; save each "
                       "runner's outputs to a file of its own" % (
                           path, len(runners), ", ".join(str(r[0]) for r in runners)))
    out = []
    iterations = runners[0][1] if isinstance(runners[0][1], list) else None
    if iterations is None:
        raise BadInput("'%s': runner %s has no list of iterations" % (path, runners[0][0]))
    for step, it in enumerate(iterations):
        outputs = it.get("outputs") if isinstance(it, dict) else None
        if not isinstance(outputs, dict):
            raise BadInput("'%s': iteration %d has no outputs" % (path, step))
        for i, (name, obj) in enumerate(outputs.items()):
            arr = _pg_array(path, name, obj)
            out.append(_np_tensor(name, arr, path, step=step, order=(step, i)))
    if not out:
        raise BadInput("'%s': holds no outputs" % path)
    return out


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


_NON_INTRUSIVE = "non_intrusive__"
# SGLang's token metadata: read for the rows of the pass, never activations.
_SGL_AUX = ("positions", "seq_lens", "req_pool_indices", "rids")


def _sglang_name(fields):
    """(capture name, layer) of an SGLang dumper file's fields.  The
    non-intrusive hooks name a module's tensors `non_intrusive__<module
    path>.output` / `.inputs.<i>`; the module path is the capture name
    (`.output` dropped: the module's output, as `ulpprof.torch` names it),
    and a layer_id already in it (`model.layers.0`) is not put in front
    again."""
    name = fields["name"]
    layer = fields.get("layer_id")
    layer = int(layer) if layer is not None and layer.isdigit() else -1
    if name.startswith(_NON_INTRUSIVE):
        name = name[len(_NON_INTRUSIVE):]
        if name.endswith(".output"):
            name = name[:-len(".output")]
        name = name or "model"
        if layer >= 0 and ("layers.%d." % layer) not in name + ".":
            name = "layers.%d.%s" % (layer, name)
    elif layer >= 0:
        name = "layers.%d.%s" % (layer, name)
    return name, layer


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
        base, layer = _sglang_name(sgl)
        if layer >= 0:
            kw["layer"] = layer
        # The pass: `step=` (SGLang 0.5.x), `forward_pass_id=` (older releases).
        for key in ("step", "forward_pass_id"):
            if sgl.get(key, "").isdigit():
                kw["step"] = int(sgl[key])
                break
        if sgl.get("rank", "").isdigit():
            kw["rank"] = int(sgl["rank"])
        kw["order"] = (kw.get("step", 0), int(sgl.get("dump_index", "0") or 0)
                       if sgl.get("dump_index", "0").isdigit() else 0)
        if sgl["name"] == "input_ids":
            kw["role"] = "input"
        value = obj.get("value") if isinstance(obj, dict) and set(obj) <= {"value", "meta"} \
            else obj
        if not torch.is_tensor(value):
            # A value that is no tensor (the request ids `rids`, a list of
            # strings): metadata of the pass, never a capture.
            t = Tensor(base, "u8", (0,), b"", **kw)
            t.meta = value
            return [t]
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


def _aux(t):
    """The token-metadata kind of t (`positions`, `seq_lens`, ...), or None:
    a 1-D integer tensor of that name, or a non-tensor value."""
    kind = t.name.rsplit(".", 1)[-1]
    if t.meta is not None:
        return kind
    if kind in _SGL_AUX and len(t.shape) == 1 and t.dtype in ("i64", "i32"):
        return kind
    return None


def _ints(t):
    import numpy as np

    return np.frombuffer(bytes(t.data), dtype="<" + (
        "i8" if t.dtype == "i64" else "i4")).astype(np.int64)


def _requests(pos, seq_lens, rids, numbers):
    """The request of each of a pass's rows.  The rows of a request are
    consecutive; a pass of n requests (len(seq_lens), or len(rids)) with n
    rows is one row each (decode), else the requests start where a position
    does not follow the previous one.  With rids, a request is numbered by
    its rid (`numbers`: rid -> number, in order of first appearance), so that
    it keeps its number from pass to pass; else by its place in the pass."""
    import numpy as np

    n = len(rids) if rids is not None else len(seq_lens) if seq_lens is not None else None
    if n is not None and n == len(pos):
        seg = np.arange(len(pos), dtype=np.int64)
    else:
        seg = np.cumsum(np.concatenate([[0], (pos[1:] != pos[:-1] + 1).astype(np.int64)]))
    if rids is not None and len(seg) and int(seg[-1]) + 1 == len(rids):
        ids = [numbers.setdefault(str(r), len(numbers)) for r in rids]
        return np.array(ids, dtype=np.int64)[seg]
    return seg


def _rows(tensors):
    """The tensors to capture (token metadata -- `positions`, `seq_lens`,
    `rids`, ... -- is not one) and the positions and requests of each, by
    its index in that list, from the metadata of the same pass (see the
    module docstring)."""
    import numpy as np

    aux = {}
    for t in tensors:
        kind = _aux(t)
        if kind is not None:
            if t.meta is not None:
                aux.setdefault(_pass_of(t), {})[kind] = t.meta if isinstance(
                    t.meta, (list, tuple)) else None
            else:
                aux.setdefault(_pass_of(t), {})[kind] = _ints(t)
    skipped = sorted({t.name for t in tensors if t.meta is not None})
    if skipped:
        sys.stderr.write("ulpprof: import: note: values that are not tensors are not captured "
                         "(%s); rids number the requests\n" % ", ".join(skipped))
    kept = [t for t in tensors if _aux(t) is None]
    numbers = {}
    reqs = {}
    for key in sorted(aux, key=lambda k: (k[0], k[1])):
        a = aux[key]
        pos = a.get("positions")
        if pos is None or len(pos) == 0 or (pos < 0).any():
            continue
        rids = a.get("rids")
        reqs[key] = (pos, _requests(pos, a.get("seq_lens"), rids, numbers))
    out = {}
    for i, t in enumerate(kept):
        got = reqs.get(_pass_of(t))
        if got is None or not t.shape or t.shape[0] != len(got[0]):
            continue
        out[i] = (got[0].tolist(), got[1].tolist())
    return kept, out


def _capture_name(path, name, seen):
    """A capture name for a tensor name: '/' may not be in one, and the ONNX
    exporter's names are paths (`/model/layers.0/self_attn/MatMul_output_0`):
    the leading '/' is dropped and each other '/' becomes '.'
    (`model.layers.0.self_attn.MatMul_output_0`, layer 0).  Two names of one
    file that map to one capture name are refused."""
    if "/" not in name:
        mapped = name
    else:
        mapped = ".".join(p for p in name.split("/") if p) or "_"
    other = seen.setdefault(mapped, name)
    if other != name:
        raise BadInput("'%s': tensor names %r and %r both map to capture name %r ('/' becomes "
                       "'.')" % (guard.shown(path), other, name, mapped))
    return mapped


def _load(files, unsafe, rank):
    tensors = []
    for src, (path, root) in enumerate(files):
        if path.endswith(".npy"):
            got = _read_npy(path, root)
        elif path.endswith(".npz"):
            got = _read_npz(path, root)
        elif path.endswith(".safetensors"):
            got = _read_safetensors(path, root)
        elif path.endswith(".json"):
            got = _read_polygraphy(path, root)
        else:
            got = _read_torch(path, root, unsafe)
        seen = {}
        for t in got:
            guard.check_name(path, t.name)
            t.name = _capture_name(path, t.name, seen)
            if t.layer < 0:
                t.layer = _layout.layer_of(t.name)
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
            role = t.role or ("logits" if re.search(r"(logits|lm_head)$", t.name)
                              else "activation")
            pos, req = rows.get(i, (None, None))
            if role == "input" and pos is None:
                role = "activation"  # token ids without positions pair nothing
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

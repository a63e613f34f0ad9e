"""Capture a PyTorch model's per-layer tensors into an ulpprof snapshot.

    import ulpprof.torch
    with ulpprof.torch.capture(model, "miss.h5", label="miss", run={"cache": "miss"}):
        model(input_ids)

What is captured (HF-style decoder models: `model.layers.N`, `transformer.h.N`,
`gpt_neox.layers.N`, ...): the input embeddings, each decoder layer's output
and its attention and MLP outputs, the final norm and the logits.  Names are
the modules' paths in the model (`model.layers.3.mlp`, `lm_head`), with
`prefix` in front when given (two models in one file: `draft.`); a
sub-module of layer N has layer N; the logits module has role `logits`.

Tuple outputs: HF layers return `(hidden_states, attn_weights?, cache?)`
and attention modules `(attn_output, attn_weights, cache)`.  By default
(`outputs="first"`) the first tensor is captured; `outputs="all"` captures
every tensor of the tuple, element i > 0 as `<name>.<i>` (non-tensors such
as a Cache object are skipped).  `kv=True` also captures each attention's
key and value projections (`...self_attn.k_proj`, role `kv`): the new
tokens' keys (before RoPE) and values; earlier positions' were captured by
the pass that computed them.

Tokens: every capture whose leading axes are (batch, tokens) of the forward
call (or whose first axis is the tokens of the engines' forward(input_ids[T],
positions[T]), T = 1 included: a decode step of one request) records, per row, its token position and request (FORMAT.md): the
position from the call's `position_ids`, else `cache_position`, else the
cache length + 0, 1, ...; the request is the batch row, or `requests[row]`
when given, or what `cap.request(ids)` says for the calls inside its `with`
block.  Padded tokens (attention_mask 0) are left out.  So a cache miss
and a hit, or batch 1 and batch 4, pair position by position.  Each call of
the model's forward is one step (0, 1, ...).  The call's token ids are
captured too, as `input_ids` (role `input`, one element per token, with
its position and request; `prefix` in front): `ulpprof diff` pairs the
requests of two runs by them (the prompt in batch row 2 with the same
prompt alone) and reports a token fed differently as a parted stream,
never as a numeric divergence.

Several prompts in one capture(): give each its request ids, so that
`ulpprof diff` pairs them with another run's (in any order):

    with ulpprof.torch.capture(model, "a.h5") as cap:
        for i, prompt in enumerate(prompts):
            with cap.request(i):      # an int, or one id per batch row
                model.generate(prompt, max_new_tokens=8)

A token computed again under the same name (a warm-up pass, generate(
use_cache=False), a module run twice in one forward) gets a key of its
own: its k-th recomputation is filed as request + 1,000,000 * k, so the
file's keys never repeat (which diff refuses), and each run's first
computation of a token pairs with the other run's.  Threads: each thread's
forward calls carry their own positions, requests (cap.request() is per
thread) and steps; threads that run the same request ids at once are filed
in the order they capture, so give them different ones.  A layer list that
repeats one module (layers sharing weights) is captured per call: the k-th
run of the module in a forward call is `layers.k`.

What the model computes never changes: the hooks only read, and the forward
wrapper keeps the model's signature (HF generate() reads it to choose the
arguments it passes).  A second capture() on a file that an earlier,
closed capture() of this process wrote is refused (CaptureError): nothing
is lost; captures open on one file at once share it.

`select` says what to keep: None keeps every batch row (and every token);
an int, a list of ints or a slice keeps those batch rows of the tensors whose
leading axis is the batch (their request ids stay the row numbers, or
`requests`); `match` (a regular expression) keeps only the captures whose
names it finds.  Token rows beyond what the format holds (16,000 per
capture) are dropped, not the tensor (said once).

Where the bytes go: CPU tensors go to the host capture library shipped in
this package (libulpprof_capture, through ctypes).  Under `ulpprof record`
with a CUDA build of torch, every tensor is announced by an NVTX mark
(capture/cuda/PROTOCOL.md; CPU tensors as `dev=host`) to the CUDA
collector that `record` loads, which copies on the tensor's stream without
synchronizing; the file is then record's `-o` (pass path=None).  Outside
`record`, CUDA tensors are copied to the host (this synchronizes).  One
capture library serves the process, and captures on one file share one
session.  ULPPROF_TORCH_MODE=host|nvtx overrides the choice.  A capture that
fails is said once on stderr and never fails the model's forward.  The
hooks' common case runs compiled where the package has the extension
(capture/torch/hook.c; ULPPROF_TORCH_HOOK=0 keeps it all in Python), with
the same result (docs/pytorch-helper.md).
"""
import bisect
import contextlib
import ctypes
import functools
import itertools
import operator
import os
import re
import socket
import sys
import threading

import torch as _torch

from . import _hookmod, _layout
from ._lib import STEP_NONE as _lib_step_none
from ._lib import CaptureError, Session, _mapped_copy

__all__ = ["capture", "Capture", "CaptureError", "DTYPES"]

# torch dtype -> FORMAT.md dtype name
DTYPES = {_torch.float64: "f64", _torch.float32: "f32", _torch.float16: "f16",
          _torch.bfloat16: "bf16", _torch.int64: "i64", _torch.int32: "i32",
          _torch.int16: "i16", _torch.int8: "i8", _torch.uint8: "u8"}
for _n, _f in (("float8_e4m3fn", "f8e4m3"), ("float8_e5m2", "f8e5m2")):
    if hasattr(_torch, _n):  # torch >= 2.1
        DTYPES[getattr(_torch, _n)] = _f

_shared = {}  # realpath -> [Session, users, _Keys]: captures on one file share a session
_written = set()  # realpaths of the files this process's closed captures wrote
_REPEAT = 1000000  # request offset of a token's k-th recomputation: request + k * _REPEAT
_MARK_MAX = 8192  # bytes of one NVTX mark (PROTOCOL.md)
_EINVAL = -1  # ULP_EINVAL
_ECLOSED = -14  # ULP_ECLOSED
_SMALL_ROWS = 64  # rows a call's token bookkeeping handles in Python lists, not tensor ops
_ABSENT = object()  # no instance attribute


def _esc(s):
    return s.replace("\\", "\\\\").replace("|", "\\|")


def _ranges(values):
    """[0, 1, 2, 5] -> '0-2,5' (PROTOCOL.md's list syntax)."""
    out = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append("%d" % values[i] if i == j else "%d-%d" % (values[i], values[j]))
        i = j + 1
    return ",".join(out)


def _warn(msg):
    print("ulpprof.torch: " + msg, file=sys.stderr)


def _mode():
    """'nvtx' when the CUDA collector is (or will be) this process's capture
    library, else 'host'.  Decided per capture, the same way every time;
    ULPPROF_TORCH_MODE=host|nvtx overrides (nvtx needs a CUDA build of torch,
    not a GPU: CPU tensors go as dev=host marks)."""
    forced = os.environ.get("ULPPROF_TORCH_MODE", "")
    if forced in ("host", "nvtx"):
        return forced
    if _mapped_copy("libulpprof_cuda.so"):
        return "nvtx"
    inj = os.environ.get("NVTX_INJECTION64_PATH", "")
    if "ulpprof_cuda" in os.path.basename(inj) and _torch.cuda.is_available():
        return "nvtx"
    return "host"


def _cache_length(kwargs):
    """The KV cache length of a call (its past_key_values', or transformers
    5's cache's; 0 without one)."""
    pkv = kwargs.get("past_key_values")
    return _past_length(pkv if pkv is not None else kwargs.get("cache"))  # transformers 5


def _past_length(pkv):
    if pkv is None:
        return 0
    get = getattr(pkv, "get_seq_length", None)
    if callable(get):
        return int(get())
    try:
        return int(pkv[0][0].shape[-2])
    except (TypeError, IndexError, AttributeError):
        return 0


def _restarts(pos):
    """Request ids of flattened tokens: a position that does not follow the
    previous one starts the next request (vLLM / SGLang batches)."""
    step = _torch.ones_like(pos)
    if pos.numel() > 1:
        step[1:] = (pos[1:] != pos[:-1] + 1).to(pos.dtype)
    step[0] = 0
    return _torch.cumsum(step, 0)


def _token_context(args, kwargs, requests, lease=None):
    """(positions[b, s], requests[b, s], keep[b, s] or None, flat, segments)
    of a forward call, int64 / bool on the CPU, or None when the call has
    no tokens.  flat: False, or T for the engines' forward(input_ids[T],
    positions[T]), whose every [T, ...] tensor has one row per token (b is
    1), T = 1 included.  segments: _segments(positions, requests) when
    known as made (the rows of a decode step from the cache length), else
    None.
    requests: None (row i is request i), an int n (row i is n + i) or one
    id per batch row.  lease: None, or lease(b, s) -> (positions, requests,
    their flat memoryviews), tensors to fill for a call of at most
    _SMALL_ROWS tokens (Capture._lease)."""
    ids = kwargs.get("input_ids")
    if ids is None and args and _torch.is_tensor(args[0]):
        ids = args[0]
    emb = kwargs.get("inputs_embeds")
    flat = kwargs.get("positions")
    if flat is None and len(args) > 1 and _torch.is_tensor(args[1]):
        flat = args[1]
    if ids is not None and ids.dim() == 1 and _torch.is_tensor(flat) and flat.shape == ids.shape:
        # The engines' convention: forward(input_ids[T], positions[T], ...).
        pos = flat.detach().to("cpu", _torch.int64).view(1, -1)
        req = _restarts(pos[0]).view(1, -1)
        req = req + requests if isinstance(requests, int) else req
        return pos, req, None, ids.shape[0], None
    if ids is not None and ids.dim() == 2:
        b, s = ids.shape
    elif emb is not None and emb.dim() == 3:
        b, s = emb.shape[:2]
    else:
        return None
    pos = kwargs.get("position_ids")
    if pos is None and kwargs.get("cache_position") is not None:
        pos = kwargs["cache_position"].view(1, -1)
    if isinstance(requests, int):
        rows = range(requests, requests + b)
    else:
        rows = list(requests) if requests is not None and len(requests) == b else range(b)
    if b * s <= _SMALL_ROWS:
        got = _small_context(kwargs, pos, b, s, rows, lease)
        if got is not None:
            return got
    if pos is None:
        past = _cache_length(kwargs)
        pos = _torch.arange(past, past + s).view(1, -1)
    pos = pos.detach().to("cpu", _torch.int64)
    if pos.dim() != 2 or pos.shape[-1] != s or pos.shape[0] not in (1, b):
        return None
    # Contiguous once per call, so that each capture passes them as they are.
    pos = pos.expand(b, s).contiguous()
    req = _torch.tensor(rows, dtype=_torch.int64).view(b, 1).expand(b, s).contiguous()
    return pos, req, _keep(kwargs.get("attention_mask"), b, s), False, None


def _small_context(kwargs, given, b, s, rows, lease):
    """_token_context of a call of at most _SMALL_ROWS tokens (a decode
    step) from Python lists, or None (given positions of another shape or
    dtype: the tensor way says).  A tensor op from Python costs ~20 us here
    with the caches cold (the wrapper runs right after the previous call's
    logits): the positions are read with one tolist(), and the tensors come
    from lease (filled through memoryviews) or from one torch.tensor each."""
    if given is None:
        past = _cache_length(kwargs)
        at = [range(past, past + s)] * b
    else:
        if given.dim() != 2 or given.shape[-1] != s or given.shape[0] not in (1, b) \
                or given.dtype not in (_torch.int64, _torch.int32):
            return None
        at = given.tolist()
        at = at * b if len(at) == 1 else at
    keep = _keep(kwargs.get("attention_mask"), b, s)
    if lease is None:
        pos = _torch.tensor([list(a) for a in at], dtype=_torch.int64).view(b, s)  # b = 0 too
        req = _torch.tensor([[r] * s for r in rows], dtype=_torch.int64).view(b, s)
        return pos, req, keep, False, None
    pos, req, pv, rv = lease(b, s)
    k = 0
    for r, a in zip(rows, at):
        for p in a:
            pv[k] = p
            rv[k] = r
            k += 1
    # Known when made here: each batch row one run of consecutive positions.
    segments = [(i * s, i * s + s, r, a[0]) for i, (r, a) in enumerate(zip(rows, at))] \
        if given is None and s > 0 else None
    return pos, req, keep, False, segments


def _keep(mask, b, s):
    """The rows of real tokens (bool [b, s]) under an attention mask that
    pads some, or None.  For at most _SMALL_ROWS tokens the mask's last s
    columns are read with one tolist() and the bool tensor is made only
    when a row is padded (a tensor op costs ~20 us with the caches cold)."""
    if mask is not None and mask.dim() == 2 and mask.shape[0] == b and mask.shape[1] >= s:
        tail = mask[:, mask.shape[1] - s:]
        if b * s <= _SMALL_ROWS:
            if all(v for row in tail.tolist() for v in row):
                return None
            return tail.detach().to("cpu") != 0
        m = tail.detach().to("cpu") != 0
        if not bool(m.all()):
            return m
    return None


def _tensors(output, outputs):
    """(suffix, tensor) pairs of a module output."""
    if _torch.is_tensor(output):
        return [("", output)]
    if isinstance(output, (tuple, list)):
        if outputs != "all":
            return [("", output[0])] if output and _torch.is_tensor(output[0]) else []
        return [("" if i == 0 else ".%d" % i, t) for i, t in enumerate(output)
                if _torch.is_tensor(t)]
    t = getattr(output, "last_hidden_state", None)
    if t is None:
        t = getattr(output, "logits", None)
    return [("", t)] if _torch.is_tensor(t) else []


def _expanded(pattern, label):
    """The path the capture library makes of `pattern` (%p %r %h %l %%, a
    value's '/' as '_', a value '.' or '..' as '_' or '__'), or None when it
    would refuse the pattern (it says why)."""
    if "%" not in pattern:
        return pattern
    rank = next((os.environ[v] for v in ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK")
                 if os.environ.get(v)), "0")
    label = label if label is not None else os.environ.get("ULPPROF_LABEL") or "run"
    values = {"p": str(os.getpid()), "r": rank, "h": socket.gethostname(), "l": str(label)}
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c != "%":
            out.append(c)
        elif pattern[i + 1:i + 2] == "%":
            out.append("%")
            i += 1
        elif pattern[i + 1:i + 2] in values:
            v = values[pattern[i + 1]]
            out.append("_" * len(v) if v in (".", "..") else v.replace("/", "_"))
            i += 1
        else:
            return None
        i += 1
    return "".join(out)


class _Runs:
    """Disjoint [lo, hi) ranges of token positions, sorted."""

    def __init__(self):
        self.lo, self.hi = [], []

    def overlaps(self, a, b):
        i = bisect.bisect_right(self.lo, b - 1)
        return i > 0 and self.hi[i - 1] > a

    def take(self, a, b):
        """Adds [a, b) and returns True when it overlaps none of them; else
        False, nothing added.  A range after the last one (the next decode
        step) is the quick case."""
        hi = self.hi
        if not hi or a >= hi[-1]:
            if hi and hi[-1] == a:
                hi[-1] = b
            else:
                self.lo.append(a)
                hi.append(b)
            return True
        if self.overlaps(a, b):
            return False
        self.add(a, b)
        return True

    def gaps(self, a, b):
        """The free [lo, hi) ranges within [a, b), in order."""
        out = []
        i = bisect.bisect_right(self.lo, a) - 1
        cur = max(a, self.hi[i]) if i >= 0 else a
        i += 1
        while cur < b:
            if i < len(self.lo) and self.lo[i] < b:
                if self.lo[i] > cur:
                    out.append((cur, self.lo[i]))
                cur = max(cur, self.hi[i])
                i += 1
            else:
                out.append((cur, b))
                break
        return out

    def add(self, a, b):  # [a, b) overlaps none of them
        i = bisect.bisect_left(self.lo, a)
        if i > 0 and self.hi[i - 1] == a:
            self.hi[i - 1] = b
            if i < len(self.lo) and self.lo[i] == b:
                self.hi[i - 1] = self.hi[i]
                del self.lo[i], self.hi[i]
        elif i < len(self.lo) and self.lo[i] == b:
            self.lo[i] = a
        else:
            self.lo.insert(i, a)
            self.hi.insert(i, b)


def _segments(pos, req):
    """[(first row, end row, request, first position)]: the runs of
    consecutive rows of one request at consecutive positions."""
    n = pos.numel()
    if n == 0:
        return []
    if n <= _SMALL_ROWS:
        # A decode step's few rows: Python lists beat five tensor ops.
        ps, qs = pos.reshape(-1).tolist(), req.reshape(-1).tolist()
        out, s0 = [], 0
        for i in range(1, n):
            if qs[i] != qs[i - 1] or ps[i] != ps[i - 1] + 1:
                out.append((s0, i, qs[s0], ps[s0]))
                s0 = i
        out.append((s0, n, qs[s0], ps[s0]))
        return out
    p, q = pos.reshape(-1), req.reshape(-1)
    cut = _torch.ones(n, dtype=_torch.bool)
    if n > 1:
        cut[1:] = (q[1:] != q[:-1]) | (p[1:] != p[:-1] + 1)
    starts = _torch.nonzero(cut).view(-1)
    firsts = _torch.stack([q[starts], p[starts]], 1).tolist()
    starts = starts.tolist() + [n]
    return [(s0, s1, r, a) for s0, s1, (r, a) in zip(starts[:-1], starts[1:], firsts)]


class _Keys:
    """The (request, position) keys filed per capture name in one file, so
    that a token computed again (a warm-up pass, generate(use_cache=False),
    a module run twice in one forward) gets a key of its own: its k-th
    recomputation is filed under request + k * 1,000,000 (or the next k
    free).  The first computation keeps its key, so runs that compute a
    token a different number of times still pair their first ones, and a
    run's keys never repeat (which `ulpprof diff` refuses).

    Each row gets the least k whose key is free at its position.  Rows of
    one segment (one request, consecutive positions) are filed range by
    range, not row by row, and `_full` remembers, per (name, request,
    segment), how many levels k are taken over the whole segment: keys are
    only ever taken, never given back, so those levels stay taken and the
    next recomputation starts its search above them (a pass repeated N
    times costs O(1) per capture, not O(N) per row)."""

    def __init__(self):
        self._runs = {}
        self._full = {}
        self._lock = threading.Lock()

    def file(self, name, pos, req, segments=None, memo=None):
        """req, with the rows whose key `name` already has moved to free keys.
        segments: _segments(pos, req) when the caller has them; memo: a dict
        that keeps the moved requests tensors of one call's captures (they
        repeat from name to name: a pass run again moves every name alike)."""
        if segments is None:
            segments = _segments(pos, req)
        runs_of = self._runs
        if len(segments) == 1:  # one run its name's ranges take (a decode step): at once
            s0, s1, r, a = segments[0]
            with self._lock:
                runs = runs_of.get((name, r))
                if runs is not None and runs.take(a, a + s1 - s0):
                    return req
        moved = None
        with self._lock:
            for s0, s1, r, a in segments:
                b = a + s1 - s0
                runs = runs_of.get((name, r))
                if runs is None:
                    runs = runs_of[(name, r)] = _Runs()
                if runs.take(a, b):
                    continue
                if moved is None:
                    moved = []
                self._refile(name, r, a, b, s0, moved)
        if moved is None:
            return req
        key = ("moved", id(req), tuple(moved))
        out = memo.get(key) if memo is not None else None
        if out is None:
            out = req.reshape(-1).clone()
            for i0, i1, k in moved:
                out[i0:i1] = k
            out = out.view(req.shape)
            if memo is not None:
                memo[key] = out
        return out

    def _refile(self, name, r, a, b, s0, moved):
        """Files positions [a, b) of request r, whose level 0 is (partly)
        taken, each at its least free level; appends (first row, end row,
        key) to `moved` for the rows filed under another key."""
        hint = (name, r, a, b)
        k = self._full.get(hint, 0)
        full = k
        todo = [(a, b)]  # positions still without a key
        while todo:
            key = r + k * _REPEAT
            runs = self._runs.get((name, key))
            if runs is None:
                runs = self._runs[(name, key)] = _Runs()
            whole = todo == [(a, b)]
            left = []
            for x, y in todo:
                at = x
                for u, v in runs.gaps(x, y):
                    if u > at:
                        left.append((at, u))
                    runs.add(u, v)
                    if k:
                        moved.append((s0 + u - a, s0 + v - a, key))
                    at = v
                if at < y:
                    left.append((at, y))
            if whole:
                full = k + 1  # the whole segment is taken at level k now
            todo = left
            k += 1
        self._full[hint] = full


class _Call:
    """One forward call of the model, on the thread that made it: its step,
    its tokens (_token_context), how often each shared module ran in it, and
    the token rows its captures share (Capture._rows_of), made once."""

    __slots__ = ("step", "tokens", "runs", "produces", "rows", "lane")

    def __init__(self, step, tokens, produces=None):
        self.step, self.tokens, self.runs = step, tokens, {}
        self.produces = produces  # rows(): which rows' logits emit a token
        self.rows = {}
        self.lane = None  # Capture._lane


_nvtx_keys = _Keys()  # under `ulpprof record`: every capture goes to record's file


class Capture:
    """Hooks on a model that capture its tensors into one snapshot.  Made by
    capture(); close() (or leaving the `with` block) removes the hooks and
    closes the file."""

    def __init__(self, model, path=None, label=None, run=None, prefix="", select=None,
                 match=None, requests=None, outputs="first", kv=False, layers=None,
                 sublayers=True, queue_mb=None, observed=None, tokens=False, mode="data",
                 flat_tokens=None):
        self._produced_on = bool(tokens)
        self._flat_tokens = flat_tokens
        if mode not in ("data", "digest", "both"):
            raise ValueError("mode must be 'data', 'digest' or 'both', not %r" % (mode,))
        # select as a string or dict is a selection of (name, request,
        # positions) to capture in full (the diff's "capture next" line);
        # an int or a list keeps batch rows, as before.
        selection = select if isinstance(select, (str, dict)) else None
        if selection is not None:
            select = None
        if outputs not in ("first", "all"):
            raise ValueError("outputs must be 'first' or 'all', not %r" % (outputs,))
        self.model = model
        self._rows = select
        self._prefix = prefix
        self._match = re.compile(match) if match else None
        try:
            self._requests = [operator.index(r) for r in requests] if requests is not None \
                else None
        except TypeError:
            raise TypeError("requests: one int per batch row, not %r" % (requests,)) from None
        self._outputs = outputs
        self._handles = []
        self._local = threading.local()  # .calls: this thread's forward calls; .requests
        self._keys = _nvtx_keys
        self._pass = -1
        self._passes = itertools.count()  # next(): atomic under the GIL, no lock
        self._closed = False
        self._paused = False
        self._wrapper = None
        self._warned = set()
        self._session = None
        self._key = None
        self.mode = _mode()
        self._path = os.environ.get("ULPPROF_OUTPUT")
        self.specs = _layout.discover(model, layers=layers, prefix=prefix, sublayers=sublayers,
                                      kv=kv)
        if self._match:
            self.specs = [s for s in self.specs if self._match.search(s.name)]
        if self.mode == "nvtx":
            out = os.environ.get("ULPPROF_OUTPUT")
            if path is not None and (not out or os.path.realpath(path) != os.path.realpath(out)):
                raise CaptureError("under `ulpprof record` with CUDA the snapshot is record's "
                                   "-o file (%s): pass path=None" % out)
            if label is not None or run or observed:
                _warn("under `ulpprof record`, the label, /run and /observed come from its "
                      "--label and --attr and ULPPROF_OBSERVED")
            if mode != "data" or selection is not None:
                _warn("mode and a selection apply to the host capture library only")
        else:
            self._open(path, label, run, queue_mb, observed, mode)
            if mode != "data":
                self._session.set_capture_mode(mode)  # a file shared with an earlier capture()
            if selection is not None:
                self._session.select(selection)
        self._install()

    # --- session ------------------------------------------------------------
    def _open(self, path, label, run, queue_mb, observed=None, mode="data"):
        target = path if path is not None else os.environ.get("ULPPROF_OUTPUT", "")
        where = _expanded(target, label) if target else None
        key = os.path.realpath(where) if where else None
        if key not in _shared and key in _written and os.path.exists(key):
            raise CaptureError("'%s' holds the captures of an earlier capture() in this "
                               "process, which a new one would replace: capture every pass "
                               "under one capture() (cap.request() keeps prompts apart), or "
                               "pass another path" % where)
        if key in _shared:
            entry = _shared[key]
            entry[1] += 1
            self._session = entry[0]
            for k, v in (run or {}).items():
                self._session.set_run(k, v)
            for k, v in (observed or {}).items():
                self._session.set_observed(k, v)
        else:
            # The default ("data") given as no mode: ULPPROF_CAPTURE_MODE then decides, as
            # it did before the mode was given at the open.
            self._session = Session(path, label=label, run=run, queue_mb=queue_mb,
                                    observed=observed, mode=None if mode == "data" else mode)
            key = os.path.realpath(self._session.path)
            _shared[key] = [self._session, 1, _Keys()]
        self._key = key
        self._keys = _shared[key][2]
        self._path = self._session.path

    @property
    def path(self):
        """The snapshot's path (% expansions done; record's -o under nvtx)."""
        return self._path

    # --- hooks --------------------------------------------------------------
    def _install(self):
        self._wrap()
        self._add_hooks()

    def _wrap(self):
        """Wraps model.forward, as it is now, in this capture's wrapper."""
        model = self.model
        orig = model.forward
        self._orig_forward = orig
        cap = self

        # functools.wraps keeps the model's signature visible (inspect follows
        # __wrapped__): HF generate() reads it to decide which arguments to
        # pass (attention_mask, position_ids), so hiding it changes the run.
        @functools.wraps(orig)
        def forward(*args, **kwargs):
            if cap._closed or cap._paused:  # another wrapper sits on top of this one
                return orig(*args, **kwargs)
            calls = cap._calls()
            n = cap._pass = next(cap._passes)
            mark = len(cap._leases()[1])
            try:
                calls.append(_Call(n, cap._context(args, kwargs)))
            except BaseException:
                cap._give_back(mark)
                raise
            try:
                if cap.mode == "nvtx":
                    cap.step(n)
                elif cap._session is not None:  # told when a capture without one comes
                    cap._session.step_due(n)
                cap._capture_ids(args, kwargs)
                return orig(*args, **kwargs)
            finally:
                calls.pop()
                cap._give_back(mark)

        forward._ulpprof = (self, orig, "forward" in model.__dict__)  # closed-check, unwrap
        self._wrapper = forward
        model.forward = forward

    def _add_hooks(self):
        # One module listed at several paths (a layer list that repeats one
        # layer): one hook, whose k-th run in a forward call is the k-th path.
        groups = {}
        for spec in self.specs:
            module = self.model.get_submodule(spec.path)
            groups.setdefault(id(module), (module, []))[1].append(spec)
        compiled = _hookmod.module() if self._session is not None else None
        for module, specs in groups.values():
            hook = self._hook(specs)
            if compiled is not None and len(specs) == 1 and specs[0].role != "logits":
                hook = self._compiled(compiled, specs[0], hook)
            self._handles.append(module.register_forward_hook(hook))

    def _compiled(self, compiled, spec, hook):
        """The compiled quick lane (capture/torch/hook.c) of one spec's
        hook, which it calls for whatever the quick lane does not take."""
        def refused(st, t, step):
            self._refused(st, spec.name, t, DTYPES[t.dtype], spec.layer, spec.role, step,
                          spec.inputs, True)

        def fail(e):
            self._warn_once(("hook", spec.name), "%s not captured: %s: %s"
                            % (spec.name, type(e).__name__, e))

        session = self._session
        return compiled.Hook(hook, self._local, spec.name, self._keys, self._lane, session,
                             ctypes.addressof(session._alive), refused, fail, _torch.Tensor,
                             self._outputs == "first")

    @contextlib.contextmanager
    def paused(self):
        """Runs the model inside the `with` block as if it were not captured,
        on every thread: the hooks are off and, unless another wrapper sits
        on top of ours, model.forward is the one from before capture() (a
        warm-up pass kept out of the file, or the bare side of a cost
        measurement on the same model).  Forward calls inside it count no
        step.  Leaving it puts the hooks back in their places among other
        tools' hooks, and the wrapper back on top, or on top of a wrapper put
        on the model inside the block."""
        if self._closed or self._paused:
            yield self
            return
        model = self.model
        own = self._wrapper._ulpprof[2]
        mine = model.__dict__.get("forward") is self._wrapper
        saved = self._hooks_off()
        self._paused = True
        if mine:
            if own:
                model.forward = self._orig_forward
            else:
                del model.forward
        try:
            yield self
        finally:
            self._paused = False
            if not self._closed:  # close() inside the block: nothing to restore
                if mine:
                    left = self._orig_forward if own else _ABSENT
                    if model.__dict__.get("forward", _ABSENT) is left:
                        model.forward = self._wrapper
                    else:  # wrapped inside the block: ours goes on top of that
                        self._wrap()
                self._hooks_on(saved)

    def _hooks_off(self):
        """Takes this capture's hooks out of their modules' hook dicts and
        says where each stood: [(dict, key, hook, keys after it)]; the hooks
        of a torch without RemovableHandle.hooks_dict_ref are removed
        (None: _hooks_on registers them again, last)."""
        saved = []
        for h in self._handles:
            ref = getattr(h, "hooks_dict_ref", None)
            d = ref() if callable(ref) else None
            if d is None or getattr(h, "id", None) not in d:
                saved = None
                break
            keys = list(d)
            at = keys.index(h.id)
            saved.append((d, h.id, d.pop(h.id), keys[at + 1:]))
        if saved is None:
            for h in self._handles:
                h.remove()
            self._handles = []
        return saved

    def _hooks_on(self, saved):
        """Puts the hooks _hooks_off took out back, each before the first of
        the hooks that followed it that is still there (their order is the
        order they run in, and a hook may replace the output)."""
        if saved is None:
            self._add_hooks()
            return
        for d, key, hook, after in reversed(saved):
            nxt = next((k for k in after if k in d), None)
            if nxt is None:
                d[key] = hook
                continue
            items = list(d.items())
            at = [k for k, _ in items].index(nxt)
            items.insert(at, (key, hook))
            d.clear()
            d.update(items)

    def _capture_ids(self, args, kwargs):
        """The call's token ids as `input_ids` (role input, one element per
        (request, position)): `ulpprof diff` pairs requests by them and
        tells a token fed differently from a numeric divergence."""
        call = self._call()
        if call is None or call.tokens is None:
            return
        ids = kwargs.get("input_ids")
        if ids is None and args and _torch.is_tensor(args[0]):
            ids = args[0]
        if not _torch.is_tensor(ids) or ids.dtype not in (_torch.int64, _torch.int32) \
                or ids.dim() not in (1, 2):
            return
        name = self._prefix + "input_ids"
        if self._match and not self._match.search(name):
            return
        try:
            if not self._quick(call, name, ids, -1, "input", None):
                self.capture(name, ids, role="input", tokens=True)
        except Exception as e:  # noqa: BLE001
            self._warn_once(("hook", name), "%s not captured: %s: %s" % (name, type(e).__name__, e))

    def _context(self, args, kwargs):
        """The token context of a forward call (_token_context), from
        flat_tokens when it knows the call's tokens."""
        if self._flat_tokens is not None:
            got = self._flat_tokens(args, kwargs)
            if got is not None:
                pos, req, width = got
                return pos.view(1, -1), req.view(1, -1), None, width, None
        return _token_context(args, kwargs, self._request_ids(), self._lease)

    def _leases(self):
        """(free, taken) of this thread: free[(b, s)] the position and
        request tensors ready for a call of b x s tokens; taken, those the
        thread's forward calls hold now, innermost last."""
        got = getattr(self._local, "leases", None)
        if got is None:
            got = self._local.leases = ({}, [])
        return got

    def _lease(self, b, s):
        """Position and request tensors [b, s] (int64) for this thread's
        forward call, with flat memoryviews to fill them: made once, and
        given back when the call ends (_give_back), so that a decode step
        makes no tensor for its rows.  Nothing keeps them past the call:
        the library copies positions and requests during each capture, and
        _Keys.file clones what it moves."""
        free, taken = self._leases()
        spare = free.get((b, s))
        got = spare.pop() if spare else None
        if got is None:
            pos = _torch.empty((b, s), dtype=_torch.int64)
            req = _torch.empty((b, s), dtype=_torch.int64)
            got = (pos, req, memoryview(pos.view(-1).numpy()), memoryview(req.view(-1).numpy()))
        taken.append(((b, s), got))
        return got

    def _give_back(self, mark):
        """Gives the tensors leased since len(taken) was `mark` back."""
        free, taken = self._leases()
        while len(taken) > mark:
            key, got = taken.pop()
            spare = free.setdefault(key, [])
            if len(spare) < 4:
                spare.append(got)

    @contextlib.contextmanager
    def rows(self, positions, requests, produces=None):
        """Gives the captures made inside the `with` block, on this thread,
        the tokens positions[i] / requests[i] (1-D int64) as their rows, at
        the step of the last forward call: for what an engine computes from
        the forward's output after it returns (vLLM's compute_logits, one
        row per request).  produces: a 1-D bool tensor, the rows whose
        logits emit a token (tokens=True records those rows only; an engine
        discards what a partial prefill's logits emit); None: every row."""
        calls = self._calls()
        pos = positions.detach().to("cpu", _torch.int64).reshape(1, -1)
        req = requests.detach().to("cpu", _torch.int64).reshape(1, -1)
        if produces is not None:
            produces = produces.detach().to("cpu", _torch.bool).reshape(-1)
        calls.append(_Call(self._pass, (pos, req, None, pos.shape[1], None), produces))
        try:
            yield self
        finally:
            calls.pop()

    def _calls(self):
        """This thread's forward calls of the model, innermost last."""
        calls = getattr(self._local, "calls", None)
        if calls is None:
            calls = self._local.calls = []
        return calls

    def _call(self):
        calls = getattr(self._local, "calls", None)
        return calls[-1] if calls else None

    def _request_ids(self):
        mine = getattr(self._local, "requests", None)
        return mine if mine is not None else self._requests

    def _hook(self, specs):
        local, first = self._local, self._outputs == "first"
        is_tensor = _torch.is_tensor

        def hook(module, inputs, output):
            # The model's run must not fail because of a capture: say it once.
            spec = specs[0]
            try:
                calls = getattr(local, "calls", None)
                call = calls[-1] if calls else None
                if len(specs) > 1 and call is not None:
                    k = call.runs.get(id(specs), 0)
                    call.runs[id(specs)] = k + 1
                    spec = specs[k % len(specs)]
                # _tensors(), its common cases first (a hook's every step costs)
                if first and type(output) is tuple and output and is_tensor(output[0]):
                    tensors = (("", output[0]),)
                elif is_tensor(output):
                    tensors = (("", output),)
                else:
                    tensors = _tensors(output, self._outputs)
                for suffix, t in tensors:
                    name = spec.name + suffix if suffix else spec.name
                    if not self._quick(call, name, t, spec.layer, spec.role, spec.inputs):
                        self.capture(name, t, layer=spec.layer, role=spec.role,
                                     inputs=spec.inputs, tokens=True)
                    if self._produced_on and spec.role == "logits" and suffix == "":
                        self._produced(t)
            except Exception as e:  # noqa: BLE001
                self._warn_once(("hook", spec.name), "%s not captured: %s: %s"
                                % (spec.name, type(e).__name__, e))

        return hook

    def _warn_once(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            _warn(msg)

    def _quick(self, call, name, t, layer, role, inputs):
        """capture(name, t, layer, role, inputs, tokens=True) in fewer steps,
        for what the hooks capture call after call: a contiguous CPU tensor
        whose leading axes are the call's (batch, tokens), no padding left
        out, no select rows, the host library.  A hook runs with the CPU
        caches full of the model's weights, so that every step of Python,
        ctypes and C code it takes comes from far (2 us a step on the
        benchmark's machine, where capture() took 24 us of a decode step's
        hook against 3 us hot): one lookup of a descriptor made once per
        (thread, name, shape, dtype), the call's rows, one ctypes call.
        False when it does not apply (capture() does it then)."""
        session = self._session
        if call is None or session is None or session._h is None:  # closed: capture() says so
            return False
        lane = call.lane
        if lane is None:
            lane = call.lane = self._lane(call)
        if lane is False:
            return False
        b, s, pos, req, segments, pp, rp, quick = lane[:8]
        shape = t.shape
        if len(shape) < 2 or shape[0] != b or shape[1] != s or not t.is_cpu \
                or not t.is_contiguous():
            return False
        key = (name, shape, t.dtype)
        bound = quick.get(key)
        if bound is None:
            dtype = DTYPES.get(t.dtype)
            if dtype is None:
                return False
            bound = session.bound(name, dtype, tuple(shape), layer, role, 2, inputs)
            if bound is None:
                return False
            # + the positions and requests last set, and the addresses the
            # compiled lane calls with: the library's function, the
            # session's handle, the descriptor.
            bound = list(bound) + [None, None, ctypes.cast(bound[0], ctypes.c_void_p).value,
                                   bound[1].value, ctypes.addressof(bound[3])]
            if len(quick) < 4096:
                quick[key] = bound
        filed = self._keys.file(name, pos, req, segments, call.rows)
        if filed is not req:  # a recomputation: its rows moved to free keys
            rp = filed.data_ptr()
        d = bound[3]
        d.data = t.data_ptr()
        d.step = call.step
        if pp != bound[5]:  # a leased tensor's address stays: set once
            d.positions = bound[5] = pp
        if rp != bound[6]:
            d.requests = bound[6] = rp
        # Closed meanwhile (file() may wait on another thread's lock): the
        # handle is gone, and call() says so; a close on another thread waits
        # for the call.
        st = session.call(bound[0], bound[2])
        if st != 0:
            self._refused(st, name, t, DTYPES[t.dtype], layer, role, call.step, inputs, True)
        return True

    def _lane(self, call):
        """What _quick needs of a call, found at its first capture: (b, s,
        positions, requests, their runs and addresses, this thread's
        descriptors, the call's step and rows), or False when the quick lane
        does not apply to it (no tokens, flattened tokens, padding left
        out, select rows)."""
        ctx = call.tokens
        if ctx is None or ctx[2] is not None or ctx[3] or self._rows is not None:
            return False
        b, s = ctx[0].shape
        pos, req, _, segments = call.rows.get(s) or self._rows_of(call, s)
        quick = getattr(self._local, "quick", None)
        if quick is None:
            quick = self._local.quick = {}
        return (b, s, pos, req, segments, pos.data_ptr(), req.data_ptr(), quick, call.step,
                call.rows)

    # --- rows and tokens ------------------------------------------------------
    def _token_rows(self, t, role, call):
        """(tensor, rows) for t in `call`, the current call (or None): rows
        is None, or (positions, requests, row_rank, segments) with positions
        and requests contiguous int64 CPU tensors of the rows (any shape) and
        segments their _segments(), shared by every capture of the call that
        has the same rows (made once per call, not per capture)."""
        ctx = call.tokens if call is not None else None
        if ctx is None:
            return t, None
        pos, req, keep, flat, _ = ctx
        b, s = pos.shape
        if flat and t.dim() >= 1 and (t.shape[0] == s or t.shape[0] == flat > s):
            # A tensor whose first axis is the call's tokens (decode steps of
            # batch 1 too: [1, H]); a longer one (padded to a captured size)
            # keeps its first T rows, those of real tokens.  Others ([1, T,
            # H] inside a layer) are read as below.
            if self._rows is not None:
                self._warn_once("flat", "select does not apply to flattened tokens")
            return t[:s], self._rows_of(call, 0)
        if t.dim() >= 2 and t.shape[0] == b and t.shape[1] == s:
            n = s
        elif role == "logits" and t.dim() >= 2 and t.shape[0] == b and 0 < t.shape[1] < s:
            n = t.shape[1]  # logits of the last tokens only (generate)
            keep = keep[:, s - n:] if keep is not None else None
        elif t.dim() >= 1 and t.shape[0] == b * s and (b > 1 or s > 1):
            t = t.reshape((b, s) + tuple(t.shape[1:]))  # flattened tokens
            if b == 1:  # the engines' [T, ...]: rows are tokens, one axis
                if self._rows is not None:
                    self._warn_once("flat", "select does not apply to flattened tokens")
                return t[0], self._rows_of(call, 0)
            n = s
        else:
            return t, None
        if self._rows is not None:
            rows = self._rows
            rows = [rows] if isinstance(rows, int) else rows
            t = t[rows]
            keep = keep[rows] if keep is not None else None
        if keep is not None:
            t = t[keep]
        return t, self._rows_of(call, n)

    def _rows_of(self, call, n):
        """The rows of the call's tokens: n = 0, one axis of flattened tokens
        (positions[0]); else (batch rows, the last n tokens), select and the
        attention mask applied.  Made once per call and n."""
        got = call.rows.get(n)
        if got is not None:
            return got
        pos, req, keep, _, segments = call.tokens
        if segments is not None and keep is None and self._rows is None and n == pos.shape[1]:
            got = call.rows[n] = (pos, req, 2, segments)  # contiguous as made
            return got
        if n == 0:
            pos, req, rank = pos[0], req[0], 1
        else:
            s = pos.shape[1]
            if n != s:
                pos, req = pos[:, s - n:], req[:, s - n:]
                keep = keep[:, s - n:] if keep is not None else None
            rank = 2
            if self._rows is not None:
                rows = [self._rows] if isinstance(self._rows, int) else self._rows
                pos, req = pos[rows], req[rows]
                keep = keep[rows] if keep is not None else None
            if keep is not None:
                pos, req, rank = pos[keep], req[keep], 1
        pos, req = pos.contiguous(), req.contiguous()
        got = call.rows[n] = (pos, req, rank, _segments(pos, req))
        return got

    def _produced(self, logits):
        """The `tokens` capture (FORMAT.md "Produced tokens"): per batch row, the
        token the last position's logits emit (argmax, ties to the lowest id)
        and its top-1 minus top-2 margin, at that position and request.  An
        engine's logits [rows, vocab] given rows by rows() (vLLM's
        compute_logits: one row per request) emit one token per row that
        produces one."""
        call = self._call()
        if call is None or call.tokens is None or not _torch.is_tensor(logits) \
                or not logits.is_floating_point() or logits.shape[-1] < 2:
            return
        pos, req, _, flat, _ = call.tokens
        if flat and logits.dim() == 2 and logits.shape[0] == pos.shape[1]:
            last, p, r = logits.detach(), pos[0], req[0]
            if call.produces is not None and call.produces.shape[0] == p.shape[0]:
                last, p, r = last[call.produces], p[call.produces], r[call.produces]
            keep_rows = False  # select does not apply to flattened tokens
        elif not flat and logits.dim() == 3 and logits.shape[0] == pos.shape[0]:
            last, p, r = logits.detach()[:, -1, :], pos[:, -1], req[:, -1]
            keep_rows = self._rows is not None
        else:
            return
        if last.shape[0] == 0:
            return
        # Each tensor op costs ~20 us with the caches cold: top-2 and argmax in
        # the logits' own dtype (f32 and f64 order and tie as their f64 values
        # do; others are made f64 first), the margin subtracted in Python's
        # f64, as torch's f64 would; two tolist() calls.
        if not last.is_cpu:
            last = last.to("cpu")
        if last.dtype not in (_torch.float32, _torch.float64):
            last = last.to(_torch.float64)
        values = _torch.topk(last, 2, dim=-1).values.tolist()
        toks = _torch.argmax(last, dim=-1).tolist()
        rows = [(float(t), a - b) for t, (a, b) in zip(toks, values)]
        p, r = p.tolist(), r.tolist()
        if keep_rows:
            keep = [self._rows] if isinstance(self._rows, int) else self._rows
            rows, p, r = [rows[i] for i in keep], [p[i] for i in keep], [r[i] for i in keep]
        if self.mode == "nvtx":
            self._mark("tokens", _torch.tensor(rows, dtype=_torch.float64).view(-1, 2), "f64", -1,
                       "activation", p, r, 1, None, call.step)
            return
        flat_rows = (ctypes.c_double * (2 * len(rows)))(*[v for row in rows for v in row])
        self._session.capture("tokens", ctypes.addressof(flat_rows), "f64", [len(rows), 2],
                              role="activation", step=call.step, positions=p, requests=r,
                              row_rank=1)

    # --- the public methods ---------------------------------------------------
    def capture(self, name, t, layer=-1, role="activation", inputs=None, tokens=False):
        """Captures one tensor (any module's, or your own).  tokens=True gives it
        the positions and requests of the current forward call when its leading
        axes are (batch, tokens)."""
        if not _torch.is_tensor(t):
            return
        dtype = DTYPES.get(t.dtype)
        if dtype is None:
            self._warn_once(("dtype", t.dtype), "%s: dtype %s is not in the snapshot format: "
                            "not captured" % (name, t.dtype))
            return
        if t.requires_grad:
            t = t.detach()
        pos = req = None
        rank = 0
        call = self._call()
        if tokens:
            t, got = self._token_rows(t, role, call)
            if got is not None:
                # Contiguous (_rows_of; file() returns them so).
                pos, req, rank, segments = got
                req = self._keys.file(name, pos, req, segments, call.rows)
        elif self._rows is not None and t.dim() >= 1:
            rows = [self._rows] if isinstance(self._rows, int) else self._rows
            t = t[rows]
        step = call.step if call is not None else _lib_step_none  # none: the session's
        if self.mode == "nvtx":
            if pos is not None:
                pos, req = pos.reshape(-1).tolist(), req.reshape(-1).tolist()
            self._mark(name, t.contiguous(), dtype, layer, role, pos, req, rank, inputs, step)
            return
        if not t.is_cpu:
            if t.is_cuda:
                self._warn_once("cuda", "not under `ulpprof record`: CUDA tensors are copied "
                                "to the host (this synchronizes)")
            t = t.to("cpu")
        if not t.is_contiguous():
            t = t.contiguous()
        pp = rp = None
        if pos is not None:
            # The library copies them during the call, from these addresses.
            pp, rp = pos.data_ptr(), req.data_ptr()
        st = self._session.capture(name, t.data_ptr(), dtype, t.shape, layer=layer,
                                   role=role, step=step, positions_ptr=pp, requests_ptr=rp,
                                   row_rank=rank, inputs=inputs)
        if st != 0:
            self._refused(st, name, t, dtype, layer, role, step, inputs, pos is not None)

    def _refused(self, st, name, t, dtype, layer, role, step, inputs, rows):
        """After the library refused a capture (status st) of t with token
        rows or without (rows): says so once; rows refused (more than a
        positions attribute holds, 16,000, or a repeated (request,
        position)) keep the tensor, captured without them."""
        if st == _EINVAL and rows:
            self._warn_once(("rows", name), "%s: token rows refused (see above): captured "
                            "without them" % name)
            st = self._session.capture(name, t.data_ptr(), dtype, t.shape, layer=layer,
                                       role=role, step=step, inputs=inputs)
        if st != 0:
            self._warn_once(("status", st), "capture of %s failed (ulp_status %d); see the "
                            "library's message above" % (name, st))

    def _mark(self, name, t, dtype, layer, role, pos=None, req=None, rank=0, inputs=None,
              step=None):
        """A `ulp1` NVTX mark (capture/cuda/PROTOCOL.md) for the collector."""
        shape = ",".join(str(n) for n in t.shape)
        nbytes = t.numel() * t.element_size()
        if t.is_cuda:
            stream = _torch.cuda.current_stream(t.device).cuda_stream
            where = "dev=cuda:%d|stream=0x%x" % (t.device.index, stream)
        else:
            where = "dev=host"
        msg = "ulp1|name=%s|ptr=0x%x|dtype=%s|shape=%s|layer=%d|role=%s|%s|bytes=%d" % (
            _esc(name), t.data_ptr(), dtype, shape, layer, role, where, nbytes)
        if step is not None and step != _lib_step_none:
            msg += "|step=%d" % step
        tokens = ""
        if pos is not None:
            reqs = "%d" % req[0] if len(set(req)) == 1 else ",".join(str(r) for r in req)
            tokens = "|rows=%d|pos=%s|req=%s" % (rank, _ranges(pos), reqs)
        if inputs and not any("," in n for n in inputs):
            tokens += "|in=" + _esc(",".join(inputs))
        if len(msg) + len(tokens) <= _MARK_MAX:
            msg += tokens
        elif tokens:
            self._warn_once("marklen", "%s: token rows do not fit in one NVTX mark (%d bytes): "
                            "captured without them" % (name, _MARK_MAX))
        _torch.cuda.nvtx.mark(msg)

    def step(self, n):
        """Sets the step (forward pass, decode step) of the captures that follow;
        each forward call of the model sets it to its call number."""
        if self.mode == "nvtx":
            _torch.cuda.nvtx.mark("ulp1|ev=step|step=%d" % int(n))
        elif self._session is not None:
            self._session.set_step(n)

    @contextlib.contextmanager
    def request(self, ids):
        """Files the forward calls made inside the `with` block, on this
        thread, under request ids of your choice: an int n (batch row i is
        request n + i; with flattened tokens, the k-th request of the call is
        n + k) or one int per batch row.  Several prompts in one capture()
        (one per pass, or one per thread) then keep apart:

            with ulpprof.torch.capture(model, "a.h5") as cap:
                for i, prompt in enumerate(prompts):
                    with cap.request(i):
                        model.generate(prompt, ...)

        and run B, made the same way, pairs request by request."""
        if isinstance(ids, bool) or not isinstance(ids, int) and not (
                isinstance(ids, (list, tuple)) and ids
                and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)):
            raise TypeError("request ids: an int or a non-empty list of ints, not %r" % (ids,))
        prev = getattr(self._local, "requests", None)
        self._local.requests = ids if isinstance(ids, int) else list(ids)
        try:
            yield self
        finally:
            self._local.requests = prev

    def flush(self):
        """Waits until the captures so far are in the file (host library)."""
        if self._session is not None:
            self._session.flush()

    def close(self):
        """Removes the hooks and, for the last capture on its file, closes it."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._closed = True
        if self._wrapper is not None and self.model.__dict__.get("forward") is self._wrapper:
            # Unwrap ours and any closed capture's below it; stop at a live one.
            _, inner, own = self._wrapper._ulpprof
            while own and getattr(inner, "_ulpprof", (None,))[0] is not None \
                    and inner._ulpprof[0]._closed:
                _, inner, own = inner._ulpprof
            if own:
                self.model.forward = inner  # a wrapper from before ours
            else:
                del self.model.forward  # the class's forward again
        self._wrapper = self._orig_forward = None
        if self._session is not None:
            entry = _shared.get(self._key)
            if entry is not None and entry[0] is self._session:
                entry[1] -= 1
                if entry[1] == 0:
                    del _shared[self._key]
                    self._session.close()
                    _written.add(self._key)
            self._session = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def capture(model, path=None, label=None, run=None, **options):
    """Hooks `model` and returns a Capture (a context manager).

    path: the snapshot to write; None: $ULPPROF_OUTPUT (`ulpprof record -o`).
    label: the run's label (e.g. "miss"); run: /run attributes, e.g.
    {"cache": "miss", "batch_size": 1}, what `ulpprof diff` names as the
    condition that differs; observed: /observed attributes, facts about the
    run that set no condition (a timing, the kernel a library picked), shown
    but never compared as one.  options: prefix, select, match, requests,
    outputs ("first" / "all"), kv, layers (path of the layer list when it is
    not found), sublayers (False: layer outputs only), queue_mb, tokens
    (True: also the `tokens` capture of each step's produced token and its
    top-2 margin, FORMAT.md "Produced tokens", for `ulpprof streams`), mode
    ("data", the default; "digest": one 64-bit digest per (request,
    position) row instead of the bytes; "both"), flat_tokens (a callable
    (args, kwargs) -> (positions[T], requests[T], width) or None: the
    tokens of an engine's forward call, int64 tensors, when it knows them
    better than position restarts; a tensor of `width` rows keeps its first
    T; ulpprof.engines gives vLLM's).  select as a string
    ("NAME@REQUEST:FIRST-LAST,...", as `ulpprof diff` prints it for digest
    runs) or a dict {name: [(request, first, last)]} captures only those
    rows in full.  The
    module's docstring says what each means.
    """
    return Capture(model, path, label=label, run=run, **options)

"""ulpprof.torch (the package in python/ulpprof) on CPU with Debian's torch:
forward hooks -> the host capture library through ctypes -> a snapshot that
h5py reads.  Every captured tensor is compared bit for bit with the same
modules run by hand, without hooks, in the same process before the capture
(one thread: the same kernels).  Also: names, layers, roles, steps, tuple
outputs, row selection, the package's library lookup, one session per file,
and the errors.  Skipped, loudly, without torch (Debian: python3-torch)."""
import os
import subprocess
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIPPED: test_pytorch_helper needs torch (apt-get install python3-torch)")
    sys.exit(0)
import h5py
import numpy as np

BUILD = os.environ["ULPPROF_BUILD_DIR"]
SRC = os.environ["ULPPROF_SOURCE_DIR"]
LIB = os.path.join(BUILD, "capture", "libulpprof_capture.so")
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = LIB
sys.path.insert(0, os.path.join(SRC, "python"))
sys.path.insert(0, os.path.join(SRC, "samples", "pytorch"))
import tiny_model  # noqa: E402
import ulpprof.torch  # noqa: E402
from ulpprof import _lib  # noqa: E402

torch.set_num_threads(1)
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def raw(ds):
    """The dataset's bits as unsigned integers: memory type = file type."""
    width = ds.id.get_type().get_size()
    out = np.empty(ds.shape, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ds.id.get_type())
    return out


def bits(t):
    t = t.contiguous()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[t.element_size()]
    return t.view(view).numpy().view(u)


def by_hand(model, ids):
    """{name: tensor} of every module the helper hooks, run without hooks."""
    out = {}
    with torch.no_grad():
        x = model.model.embed_tokens(ids)
        out["model.embed_tokens"] = x
        for i, layer in enumerate(model.model.layers):
            a = layer.self_attn(layer.input_layernorm(x))
            h = x + a
            m = layer.mlp(layer.post_attention_layernorm(h))
            x = h + m
            out["model.layers.%d.self_attn" % i] = a
            out["model.layers.%d.mlp" % i] = m
            out["model.layers.%d" % i] = x
        n = model.model.norm(x)
        out["model.norm"] = n
        out["lm_head"] = model.lm_head(n)
    return out


NAMES = (["model.embed_tokens"] + ["model.layers.%d%s" % (i, sub) for i in range(2)
                                   for sub in (".self_attn", ".mlp", "")]
         + ["model.norm", "lm_head"])

with tempfile.TemporaryDirectory() as tmp:
    # 1. Bits, names, layers, roles, steps: two dtypes, two batch sizes, two passes.
    for dtype, fmt in (("float32", "f32"), ("bfloat16", "bf16")):
        for batch in (1, 3):
            model, ids = tiny_model.make(batch, tokens=6, layers=2, dtype=dtype)
            want = by_hand(model, ids)
            path = os.path.join(tmp, "%s-bs%d.h5" % (dtype, batch))
            with torch.no_grad(), ulpprof.torch.capture(
                    model, path, label="bs%d" % batch, run={"batch_size": batch}) as cap:
                check([sp.name for sp in cap.specs] == NAMES, "specs %s" % cap.specs)
                model(ids)
                model(ids)
            check(_lib.library_path() == os.path.realpath(LIB), "library %s" % _lib.library_path())
            with h5py.File(path, "r") as f:
                check(sorted(f["captures"]) == sorted(NAMES + ["input_ids"]),
                      "%s: %s" % (path, list(f["captures"])))
                # The token ids: each call's ids, role input, one per (request, position).
                for occ in range(2):
                    ds = f["captures"]["input_ids"][str(occ)]
                    check(np.array_equal(ds[()], ids.numpy()) and s(ds.attrs["role"]) == "input"
                          and s(ds.attrs["dtype"]) == "i64" and int(ds.attrs["step"]) == occ,
                          "%s input_ids/%d: %s" % (path, occ, ds[()]))
                    want_pos = np.tile(np.arange(ids.shape[1]), (batch, 1))
                    want_req = np.repeat(np.arange(batch)[:, None], ids.shape[1], axis=1)
                    if occ == 1:  # the same tokens computed again: filed apart (+1,000,000)
                        want_req = want_req + 1000000
                    check(np.array_equal(ds.attrs["positions"], want_pos)
                          and np.array_equal(ds.attrs["requests"], want_req),
                          "%s input_ids/%d: positions %s requests %s"
                          % (path, occ, ds.attrs["positions"], ds.attrs["requests"]))
                check(s(f.attrs["label"]) == "bs%d" % batch, "%s: label" % path)
                check(s(f["run"].attrs["batch_size"]) == str(batch), "%s: /run" % path)
                for name in NAMES:
                    for occ in range(2):
                        ds = f["captures"][name][str(occ)]
                        w = want[name]
                        check(s(ds.attrs["dtype"]) == fmt and ds.shape == tuple(w.shape),
                              "%s %s: %s %s" % (path, name, s(ds.attrs["dtype"]), ds.shape))
                        check(np.array_equal(raw(ds), bits(w)),
                              "%s %s/%d: bits differ from the modules run by hand"
                              % (path, name, occ))
                        check(int(ds.attrs["step"]) == occ, "%s %s: step" % (path, name))
                        layer = int(ds.attrs.get("layer", -1))
                        wl = int(name.split(".")[2]) if name.startswith("model.layers.") else -1
                        check(layer == wl, "%s %s: layer %d" % (path, name, layer))
                        role = s(ds.attrs.get("role", "activation"))
                        check(role == ("logits" if name == "lm_head" else "activation"),
                              "%s %s: role %s" % (path, name, role))

    # 2. select keeps batch rows; match keeps names; outputs="all" takes the
    #    tuple's other tensors (here None: nothing more).
    model, ids = tiny_model.make(3, tokens=5, layers=2)
    want = by_hand(model, ids)
    path = os.path.join(tmp, "sel.h5")
    with torch.no_grad(), ulpprof.torch.capture(model, path, select=[0, 2],
                                                match=r"layers\.1$|lm_head", outputs="all"):
        model(ids)
    with h5py.File(path, "r") as f:
        check(sorted(f["captures"]) == ["lm_head", "model.layers.1"], list(f["captures"]))
        for name in ("lm_head", "model.layers.1"):
            check(np.array_equal(raw(f["captures"][name]["0"]), bits(want[name][[0, 2]])),
                  "select: %s rows 0, 2" % name)

    # 3. One session per file: a second capture on an open file shares it.
    m1, ids1 = tiny_model.make(1, tokens=4, layers=2)
    m2, _ = tiny_model.make(1, tokens=4, layers=2, seed=5)
    path = os.path.join(tmp, "two.h5")
    with torch.no_grad(), ulpprof.torch.capture(m1, path), \
            ulpprof.torch.capture(m2, path, prefix="draft."):
        m1(ids1)
        m2(ids1)
    with h5py.File(path, "r") as f:
        check("draft.lm_head" in f["captures"] and "lm_head" in f["captures"],
              "shared file: %s" % list(f["captures"]))
    try:
        with _lib.Session(path) as one:
            _lib.Session(path)
        fails.append("a second session on one file was opened")
    except _lib.CaptureError as e:
        check("one session per file" in str(e), str(e))

    # %r in the path: one file per rank (torch.distributed sets RANK).
    os.environ["RANK"] = "3"
    with torch.no_grad(), ulpprof.torch.capture(m1, os.path.join(tmp, "tp-%r.h5")) as cap:
        m1(ids1)
    del os.environ["RANK"]
    check(cap.path == os.path.join(tmp, "tp-3.h5") and os.path.exists(cap.path),
          "%%r: %s" % cap.path)

    # More token rows than a positions attribute holds: captured without them.
    big, big_ids = tiny_model.make(1, tokens=16001, layers=1)
    big.model.layers = torch.nn.ModuleList()  # no layers: embeddings, norm, logits
    pbig = os.path.join(tmp, "big.h5")
    with torch.no_grad(), ulpprof.torch.capture(big, pbig, layers="model.layers",
                                                match="embed"):
        big(big_ids)
    with h5py.File(pbig, "r") as f:
        ds = f["captures"]["model.embed_tokens"]["0"]
        check(ds.shape == (1, 16001, 64) and "positions" not in ds.attrs, "16001 rows: %s %s"
              % (ds.shape, list(ds.attrs)))

    # Two captures on one model, closed out of order: each stops at its close.
    pa, pb = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    ca = ulpprof.torch.capture(m1, pa)
    cb = ulpprof.torch.capture(m1, pb, match="lm_head")
    with torch.no_grad():
        m1(ids1)
        ca.close()
        m1(ids1)
        cb.close()
        m1(ids1)
    with h5py.File(pa, "r") as fa, h5py.File(pb, "r") as fb:
        check(len(fa["captures"]["lm_head"]) == 1 and len(fb["captures"]["lm_head"]) == 2,
              "out-of-order close: %d %d" % (len(fa["captures"]["lm_head"]),
                                              len(fb["captures"]["lm_head"])))

    # 4. Errors: an unwritable path, a model without layers, hooks removed.
    try:
        ulpprof.torch.capture(m1, os.path.join(tmp, "no", "such", "dir.h5"))
        fails.append("capture into a missing directory did not raise")
    except ulpprof.torch.CaptureError as e:
        check("cannot capture to" in str(e), str(e))
    try:
        ulpprof.torch.capture(torch.nn.Linear(2, 2), os.path.join(tmp, "x.h5"))
        fails.append("a model without layers did not raise")
    except ValueError as e:
        check("no decoder layers" in str(e), str(e))
    check(not any(m._forward_hooks for m in m1.modules()), "hooks left after close")
    check("forward" not in m1.__dict__, "forward wrapper left after close")

    # 5. One library per process: a copy already loaded (here from another
    #    path, as a C extension would) is the one used, not the named one.
    import shutil
    copy = os.path.join(tmp, "libulpprof_capture.so.0")
    shutil.copy(LIB, copy)
    p = subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1]); "
                        "from ulpprof import _lib; _lib.library(); print(_lib.library_path())",
                        copy], env=dict(os.environ, PYTHONPATH=os.path.join(SRC, "python")),
                       capture_output=True, text=True, timeout=300)
    check(p.stdout.strip() == os.path.realpath(copy), "mapped copy: %r %r" % (p.stdout, p.stderr))

    # 6. The sample program under `ulpprof record` (path from -o).
    out = os.path.join(tmp, "rec.h5")
    env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"))
    env.pop("ULPPROF_CAPTURE_LIBRARY")
    p = subprocess.run([ULPPROF, "record", "--no-cuda", "-o", out, "--label", "bs2", "--",
                        sys.executable, os.path.join(SRC, "samples", "pytorch", "tiny_model.py"),
                        "--batch", "2", "--device", "cpu", "--layers", "2"],
                       env=env, capture_output=True, text=True, timeout=300)
    check(p.returncode == 0 and p.stderr == "", "record: %d %r" % (p.returncode, p.stderr))
    if p.returncode == 0:
        with h5py.File(out, "r") as f:
            check(sorted(f["captures"]) == sorted(NAMES + ["input_ids"]), list(f["captures"]))
            check(f["captures"]["lm_head"]["0"].shape == (1, 16, 512), "select=[0] in the sample")
            check(s(f.attrs["label"]) == "bs2", "record's label")

for f in fails:
    print("FAIL:", f)
if not fails:
    print("test_pytorch_helper: all passed")
sys.exit(1 if fails else 0)

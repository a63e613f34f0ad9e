"""samples/pytorch/ulpprof_torch.py on CPU: forward hooks -> host capture API
(ctypes) -> snapshot, run under `ulpprof record`.  The captured bits are
compared with the same model recomputed here with plain torch (no hooks),
so a capture of the wrong tensor, shape, dtype or bytes fails.  Skipped,
loudly, without torch (Debian: python3-torch)."""
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
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
LIB = os.path.join(BUILD, "collector", "libulpprof_capture.so")
SAMPLE = os.path.join(SRC, "samples", "pytorch")
sys.path.insert(0, SAMPLE)
import tiny_model  # noqa: E402

fails = []


def raw(ds):
    """The dataset's bits as unsigned integers: memory type = file type."""
    width = ds.id.get_type().get_size()
    out = np.empty(ds.shape, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ds.id.get_type())
    return out


def bits(t):
    t = t.contiguous()
    width = t.element_size()
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[width]
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width]
    return t.view(view).numpy().view(u)


def expected(batch, dtype, layers=4, tokens=16, seed=0):
    """Layer outputs (row 0) and logits (row 0), recomputed without hooks."""
    torch.manual_seed(seed)
    model = tiny_model.TinyLM(n_layers=layers).to("cpu", getattr(torch, dtype)).eval()
    g = torch.Generator().manual_seed(seed + 1)
    tok = torch.randint(0, 512, (batch, tokens), generator=g)
    tok[0] = torch.randint(0, 512, (tokens,), generator=torch.Generator().manual_seed(99))
    outs = []
    with torch.no_grad():
        x = model.embed(tok)
        for layer in model.layers:
            x = layer(x)
            outs.append(x[:1].clone())
        logits = model.lm_head(model.norm(x))
    return outs, logits[:1].clone()


torch.set_num_threads(1)
env = dict(os.environ, ULPPROF_CAPTURE_LIBRARY=LIB, OMP_NUM_THREADS="1")
with tempfile.TemporaryDirectory() as tmp:
    for dtype, fmt in (("float32", "f32"), ("bfloat16", "bf16")):
        for batch in (1, 3):
            path = os.path.join(tmp, "%s-bs%d.h5" % (dtype, batch))
            p = subprocess.run([ULPPROF, "record", "--no-cuda", "-o", path, "--label",
                                "bs%d" % batch, "--attr", "batch_size=%d" % batch, "--",
                                sys.executable, os.path.join(SAMPLE, "tiny_model.py"),
                                "--device", "cpu", "--batch", str(batch), "--dtype", dtype],
                               env=env, capture_output=True, text=True, timeout=600)
            if p.returncode != 0 or p.stderr:
                fails.append("%s: exit %d, stderr %r" % (path, p.returncode, p.stderr))
                continue
            outs, logits = expected(batch, dtype)
            with h5py.File(path, "r") as f:
                caps = f["captures"]
                names = ["model.layers.%d.out" % i for i in range(4)] + ["logits"]
                if sorted(caps) != sorted(names):
                    fails.append("%s: captures %s" % (path, sorted(caps)))
                    continue
                for i, name in enumerate(names):
                    ds = caps[name]["0"]
                    want = outs[i] if name != "logits" else logits
                    dt = ds.attrs["dtype"]
                    dt = dt.decode() if isinstance(dt, bytes) else dt
                    if dt != fmt or tuple(ds.shape) != tuple(want.shape):
                        fails.append("%s %s: dtype %s shape %s, want %s %s"
                                     % (path, name, dt, ds.shape, fmt, tuple(want.shape)))
                        continue
                    if not np.array_equal(raw(ds), bits(want)):
                        fails.append("%s %s: bits differ from the recomputation" % (path, name))
                    role = ds.attrs.get("role", b"activation")
                    role = role.decode() if isinstance(role, bytes) else role
                    if role != ("logits" if name == "logits" else "activation"):
                        fails.append("%s %s: role %s" % (path, name, role))
                    layer = int(ds.attrs.get("layer", -1))
                    if layer != (i if name != "logits" else -1):
                        fails.append("%s %s: layer %d" % (path, name, layer))
                    if int(ds.attrs.get("step", -99)) != 0:
                        fails.append("%s %s: step" % (path, name))
                run = f["run"].attrs["batch_size"]
                if (run.decode() if isinstance(run, bytes) else run) != str(batch):
                    fails.append("%s: /run batch_size" % path)

for f in fails:
    print("FAIL:", f)
if not fails:
    print("test_pytorch_helper: all passed")
sys.exit(1 if fails else 0)

"""`ulpprof import` on dumps written by the real libraries: numpy.save /
savez, safetensors (torch and numpy front ends, bf16 included), torch.save
of tensors and dicts, SGLang's dumper layout (file names, {"value", "meta"},
positions).  Every capture's bits are compared with the arrays as the
writing library reads them back; names, layers, roles, steps, positions and
requests with what the files say.  `ulpprof diff` of two imported dumps
names the changed tensor.  Bad files: exit 2, one line naming the file; an
existing output is left as it was.  Runs under the .ci/pyenv interpreter
(safetensors), started here when this one lacks it."""
import os
import subprocess
import sys
import tempfile

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("safetensors", "torch")
import h5py  # noqa: E402
import numpy as np
import safetensors.numpy  # noqa: E402
import safetensors.torch  # noqa: E402
import torch  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
ENV = dict(os.environ, ULPPROF_PYTHON=sys.executable, PYTHONPATH=os.path.join(SRC, "python"),
           ULPPROF_CAPTURE_LIBRARY=os.path.join(BUILD, "capture", "libulpprof_capture.so"))
# torch's weights_only loader is trusted from 2.6 on; before, .pt files need --unsafe-pickle.
UNSAFE = ["--unsafe-pickle"] if tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 6) \
    else []
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def run(*args):
    return subprocess.run([ULPPROF] + list(args), env=ENV, capture_output=True, text=True,
                          timeout=300)


def raw(ds):
    width = ds.id.get_type().get_size()
    out = np.empty(ds.shape, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ds.id.get_type())
    return out


def tbits(t):
    u = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[t.element_size()]
    v = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.contiguous().view(v).numpy().view(u)


def nbits(a):
    return np.ascontiguousarray(a).view({1: np.uint8, 2: np.uint16, 4: np.uint32,
                                         8: np.uint64}[a.dtype.itemsize])


def write_dumps(d, bump=False):
    """A directory of every kind; returns {capture name: [(bits, dtype, layer, role, step)]}."""
    os.makedirs(os.path.join(d, "np", "layers.1"))
    os.makedirs(os.path.join(d, "sgl"))
    g = torch.Generator().manual_seed(7)
    want = {}

    def add(name, bits, dtype, layer=-1, role="activation", step=None):
        want.setdefault(name, []).append((bits, dtype, layer, role, step))

    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    np.save(os.path.join(d, "np", "layers.1", "mlp.npy"), a)
    add("np.layers.1.mlp", nbits(a), "f32", 1)
    z = {"model.layers.2.self_attn": np.linspace(-1, 1, 6, dtype=np.float16).reshape(2, 3),
         "tokens": np.array([3, 1, 4], dtype=np.int64)}
    np.savez(os.path.join(d, "np", "b.npz"), **z)
    for k, v in z.items():
        add(k, nbits(v), {"float16": "f16", "int64": "i64"}[v.dtype.name], 2 if "layers" in k
            else -1)
    st = {"model.layers.0": torch.randn(2, 5, generator=g).to(torch.bfloat16),
          "lm_head.logits": torch.randn(2, 9, generator=g)}
    if bump:
        st["lm_head.logits"][1, 3] += 1e-3
    safetensors.torch.save_file(st, os.path.join(d, "c.safetensors"))
    add("model.layers.0", tbits(st["model.layers.0"]), "bf16", 0)
    add("lm_head.logits", tbits(st["lm_head.logits"]), "f32", -1, "logits")
    n = {"transformer.h.3": np.ones((2, 2), np.float64)}
    safetensors.numpy.save_file(n, os.path.join(d, "d.safetensors"))
    add("transformer.h.3", nbits(n["transformer.h.3"]), "f64", 3)
    t = torch.randn(4, 3, generator=g).to(torch.float16)
    torch.save(t, os.path.join(d, "e.pt"))
    add("e", tbits(t), "f16")
    dd = {"hidden": torch.randn(2, 2, generator=g), "layers": [torch.arange(3, dtype=torch.int32)]}
    torch.save(dd, os.path.join(d, "f.pt"))
    add("hidden", tbits(dd["hidden"]), "f32")
    add("layers.0", tbits(dd["layers"][0]), "i32", 0)
    # SGLang's dumper: two forward passes of 5 tokens (two requests: 3 + 2).
    for p in (1, 2):
        pos = torch.tensor([0, 1, 2, 0, 1]) + (0 if p == 1 else torch.tensor([3, 3, 3, 2, 2]))
        base = os.path.join(d, "sgl", "forward_pass_id=%d___rank=0___name=%%s___dump_index=%%d%%s"
                            ".pt" % p)
        torch.save(pos, base % ("positions", 10 * p, ""))  # the rows' positions, no capture
        for layer in (0, 1):
            h = torch.randn(5, 4, generator=g).to(torch.bfloat16)
            torch.save({"value": h, "meta": {"layer_id": layer, "name": "hidden_states"}},
                       base % ("hidden_states", 10 * p + 1 + layer, "___layer_id=%d" % layer))
            add("layers.%d.hidden_states" % layer, tbits(h), "bf16", layer, "activation", p)
    return want


with tempfile.TemporaryDirectory() as tmp:
    want = write_dumps(os.path.join(tmp, "a"))
    out = os.path.join(tmp, "a.h5")
    p = run("import", "-o", out, "--label", "miss", "--attr", "cache=miss", os.path.join(tmp, "a"))
    if UNSAFE:
        errs = [ln for ln in p.stderr.splitlines() if "warning:" not in ln]
        check(p.returncode == 2 and len(errs) == 1 and "--unsafe-pickle" in p.stderr,
              "import without --unsafe-pickle: %d %r" % (p.returncode, p.stderr))
    p = run("import", "-o", out, "--label", "miss", "--attr", "cache=miss", *UNSAFE,
            os.path.join(tmp, "a"))
    # One warning: c.safetensors (two tensors) keeps no execution order.
    check(p.returncode == 0 and p.stderr.count("\n") == 1 and "warning" in p.stderr
          and "c.safetensors" in p.stderr, "import: %d %r" % (p.returncode, p.stderr))
    n_caps = sum(len(v) for v in want.values())
    check(p.stdout.strip() == "ulpprof import: %d captures -> %s" % (n_caps, out), p.stdout)
    if p.returncode == 0:
        with h5py.File(out, "r") as f:
            check(s(f.attrs["label"]) == "miss" and s(f["run"].attrs["cache"]) == "miss",
                  "label / run")
            check(sorted(f["captures"]) == sorted(want), "names %s" % sorted(f["captures"]))
            for name, occs in want.items():
                if name not in f["captures"]:
                    continue
                check(sorted(f["captures"][name]) == [str(i) for i in range(len(occs))],
                      "%s: occurrences %s" % (name, list(f["captures"][name])))
                for i, (bits, dtype, layer, role, step) in enumerate(occs):
                    ds = f["captures"][name][str(i)]
                    check(s(ds.attrs["dtype"]) == dtype, "%s: dtype %s" % (name, ds.attrs["dtype"]))
                    check(np.array_equal(raw(ds), bits), "%s/%d: bits" % (name, i))
                    check(int(ds.attrs.get("layer", -1)) == layer, "%s: layer" % name)
                    check(s(ds.attrs.get("role", "activation")) == role, "%s: role" % name)
                    if step is not None:
                        check(int(ds.attrs["step"]) == step, "%s: step" % name)
            for occ, first in ((0, 0), (1, 3)):
                ds = f["captures"]["layers.1.hidden_states"][str(occ)]
                pos = [first, first + 1, first + 2] + ([0, 1] if occ == 0 else [2, 3])
                check(ds.attrs["positions"].tolist() == pos, "positions %s" % ds.attrs["positions"])
                check(ds.attrs["requests"].tolist() == [0, 0, 0, 1, 1],
                      "requests %s" % ds.attrs["requests"])
            check("positions" not in f["captures"]["e"]["0"].attrs, "positions on e")

    # diff: the same dumps -> identical; one logit bumped -> exit 1 there.
    write_dumps(os.path.join(tmp, "b"))
    write_dumps(os.path.join(tmp, "c"), bump=True)
    for name, code in (("b", 0), ("c", 1)):
        p = run("import", "-o", os.path.join(tmp, name + ".h5"), *UNSAFE, os.path.join(tmp, name))
        check(p.returncode == 0, "import %s: %s" % (name, p.stderr))
        p = run("diff", "-f", "json", out, os.path.join(tmp, name + ".h5"))
        check(p.returncode == code, "diff a %s: exit %d %s" % (name, p.returncode, p.stderr))
        if code == 1:
            import json
            rep = json.loads(p.stdout)
            check(rep["first_divergence"]["name"] == "lm_head.logits",
                  "first divergence %s" % rep["first_divergence"])

    # Bad files: exit 2, one line naming the file, the output untouched.
    bad = os.path.join(tmp, "bad")
    os.makedirs(bad)
    good = open(out, "rb").read()
    np.save(os.path.join(bad, "t.npy"), np.arange(100.0))
    cut = open(os.path.join(bad, "t.npy"), "rb").read()[:90]
    cases = {
        "t.npy": cut,
        "g.safetensors": b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!",
        "h.safetensors": b"\xff" * 8 + b"{}",
        "o.safetensors": b'\x40\x00\x00\x00\x00\x00\x00\x00{"x":{"dtype":"F32","shape":[4],'
                         b'"data_offsets":[0,16]}}        ',
        "u.npz": b"PK\x03\x04 this is no zip",
        "z.pt": b"\x80\x02garbage",
    }
    # In this process (ulpprof._import.main, what the command runs), to spare
    # an interpreter start per case; the cases above and below run the command.
    import contextlib
    import io
    sys.path.insert(0, os.path.join(SRC, "python"))
    os.environ["ULPPROF_CAPTURE_LIBRARY"] = ENV["ULPPROF_CAPTURE_LIBRARY"]
    from ulpprof import _import
    for fname, blob in cases.items():
        path = os.path.join(bad, fname)
        with open(path, "wb") as fh:
            fh.write(blob)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = _import.main(["-o", out, path])
        err = err.getvalue()
        check(rc == 2 and err.count("\n") == 1 and path in err
              and err.startswith("ulpprof: import: "), "%s: exit %d, stderr %r" % (fname, rc, err))
        check(open(out, "rb").read() == good, "%s: the existing output was changed" % fname)
    # A pickle that is more than tensors: refused without --unsafe-pickle.
    import fractions
    pk = os.path.join(tmp, "pk.pt")
    torch.save({"w": torch.ones(2), "scale": fractions.Fraction(1, 3)}, pk)
    p = run("import", "-o", os.path.join(tmp, "pk.h5"), pk)
    check(p.returncode == 2 and "weights_only" in p.stderr and p.stderr.count("\n") == 1,
          "pickle: %d %r" % (p.returncode, p.stderr))
    check(not os.path.exists(os.path.join(tmp, "pk.h5")), "pickle: output written")
    p = run("import", "--unsafe-pickle", "-o", os.path.join(tmp, "pk.h5"), pk)
    check(p.returncode == 0, "--unsafe-pickle: %d %r" % (p.returncode, p.stderr))
    # Two ranks in one directory need --rank.
    rk = os.path.join(tmp, "ranks")
    os.makedirs(rk)
    for r in (0, 1):
        torch.save(torch.ones(2) * r, os.path.join(rk, "forward_pass_id=1___rank=%d___name=x.pt" % r))
    p = run("import", "-o", os.path.join(tmp, "r.h5"), *UNSAFE, rk)
    check(p.returncode == 2 and "--rank" in p.stderr, "ranks: %d %r" % (p.returncode, p.stderr))
    p = run("import", "--rank", "1", "-o", os.path.join(tmp, "r.h5"), *UNSAFE, rk)
    check(p.returncode == 0, "--rank 1: %r" % p.stderr)
    # Usage and missing paths.
    for args in (["import"], ["import", "-o", os.path.join(tmp, "x.h5"), os.path.join(tmp, "nope")],
                 ["import", "-o", os.path.join(tmp, "x.h5"), os.path.join(tmp, "bad", "..", "e")],
                 ["import", "-o", os.path.join(tmp, "no", "dir.h5"), pk]):
        p = run(*args)
        check(p.returncode == 2 and p.stderr.count("\n") == 1, "%s: %d %r" % (args, p.returncode,
                                                                              p.stderr))
    check(run("import", "--help").returncode == 0, "import --help")
    # The C command without the package on the interpreter's path: one line.
    p = subprocess.run([ULPPROF, "import", "-o", os.path.join(tmp, "y.h5"), pk],
                       env=dict(ENV, PYTHONPATH="", ULPPROF_PYTHON="/usr/bin/python3"),
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 2 and p.stderr.count("\n") == 1
          and "needs the Python package ulpprof" in p.stderr, "no package: %r" % p.stderr)
    p = subprocess.run([ULPPROF, "import", "-o", os.path.join(tmp, "y.h5"), pk],
                       env=dict(ENV, ULPPROF_PYTHON=os.path.join(tmp, "no-python")),
                       capture_output=True, text=True, timeout=300)
    check(p.returncode == 2 and "ULPPROF_PYTHON" in p.stderr, "no python: %r" % p.stderr)

for f in fails:
    print("FAIL:", f)
if not fails:
    print("test_import: all passed")
sys.exit(1 if fails else 0)

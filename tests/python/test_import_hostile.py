#!/usr/bin/python3
"""`ulpprof import` on careless and hostile input: one line, exit 2, nothing
left behind, no code run, no file outside the output written.

  - a TorchScript archive is refused before torch sees it (with and without
    --unsafe-pickle; its __setstate__ would print a marker), and a torch older
    than 2.6 needs --unsafe-pickle for any .pt (checked on version strings);
  - a symlink planted where the old temporary name was is not followed;
  - `-o` naming an input, or a directory, is refused;
  - safetensors headers with a name that is not UTF-8 or holds a NUL, or
    nested 100,000 deep; a .npy whose file name is not UTF-8; a .npz whose
    members declare more than they hold or more than the limit;
  - a directory of plain torch.save files, one per pass: each file's
    `positions` go to that file's tensors, and are no capture;
  - a safetensors file (no execution order): the captures in the order of
    the layers, with a warning, so the first divergence is the right one;
  - `ulpprof import --help` prints without the Python package.
Names, positions and order are checked with h5py against what was written."""
import contextlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

import h5py
import numpy as np
import torch

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
LIB = os.path.join(BUILD, "capture", "libulpprof_capture.so")
ENV = dict(os.environ, ULPPROF_PYTHON=sys.executable, PYTHONPATH=os.path.join(SRC, "python"),
           ULPPROF_CAPTURE_LIBRARY=LIB)
OLD_TORCH = tuple(int(x) for x in torch.__version__.split(".")[:2]) < (2, 6)
UNSAFE = ["--unsafe-pickle"] if OLD_TORCH else []
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def run(*args, env=ENV):
    return subprocess.run([ULPPROF] + list(args), env=env, capture_output=True, timeout=300)


def one_line(p, path, tag, word=None):
    err = p.stderr.decode("utf-8", "replace")
    check(p.returncode == 2 and err.count("\n") == 1 and err.startswith("ulpprof: import: ")
          and "Traceback" not in err and (word is None or word in err)
          and os.fsencode(path).decode("utf-8", "backslashreplace") in err,
          "%s: exit %d, stderr %r" % (tag, p.returncode, err[-600:]))


def safetensors_blob(tensors, names=None):
    """The safetensors layout, written here: u64 header length, JSON, data.
    tensors: [(name, dtype, shape, bytes)] in the order given."""
    header, data = {}, b""
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": list(shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode() if names is None else names
    return struct.pack("<Q", len(text)) + text + data


def listing(d):
    return sorted(os.listdir(d))


sys.path.insert(0, os.path.join(SRC, "python"))
os.environ["ULPPROF_CAPTURE_LIBRARY"] = LIB
from ulpprof import _import  # noqa: E402


def main_in_process(args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = _import.main(args)
    return rc, err.getvalue()


with tempfile.TemporaryDirectory() as tmp:
    # --- TorchScript: refused before loading, flag or not. -------------------------
    class Sneaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.ones(2)

        @torch.jit.export
        def __getstate__(self):
            return (self.w, self.training)

        @torch.jit.export
        def __setstate__(self, state: tuple[torch.Tensor, bool]):
            print("SETSTATE-RAN")
            self.w = state[0]
            self.training = state[1]

        def forward(self, x):
            return x + self.w

    ts = os.path.join(tmp, "script.pt")
    torch.jit.save(torch.jit.script(Sneaky()), ts)
    for flags in ([], ["--unsafe-pickle"]):
        out = os.path.join(tmp, "ts.h5")
        p = run("import", "-o", out, *flags, ts)
        one_line(p, ts, "torchscript %s" % flags, "TorchScript")
        check(b"SETSTATE-RAN" not in p.stdout + p.stderr, "torchscript %s: its code ran" % flags)
        check(not os.path.exists(out), "torchscript: output written")
    # The version gate, on version strings.
    plain = os.path.join(tmp, "plain.pt")
    torch.save({"layers.0": torch.ones(2)}, plain)
    try:
        from ulpprof import _import_guard as guard
    except ImportError:
        guard = None
        check(False, "no ulpprof._import_guard")
    for version, unsafe, ok in (("1.13.0a0", False, False), ("2.5.1+cu121", False, False),
                                ("2.6.0", False, True), ("2.10.0", False, True),
                                ("1.13.0", True, True), ("garbage", False, False)):
        if guard is None:
            break
        try:
            guard.check_torch_file(plain, unsafe, version)
            got = True
        except guard.BadInput as e:
            got = False
            check("--unsafe-pickle" in str(e) and plain in str(e), "gate message %r" % str(e))
        check(got == ok, "torch %s unsafe=%s: allowed %s" % (version, unsafe, got))
    if OLD_TORCH:
        p = run("import", "-o", os.path.join(tmp, "plain.h5"), plain)
        one_line(p, plain, "old torch without --unsafe-pickle", "--unsafe-pickle")

    # --- A symlink planted at the old temporary name is not followed. ----------------
    victim = os.path.join(tmp, "victim")
    with open(victim, "w") as f:
        f.write("precious")
    npy = os.path.join(tmp, "in.npy")
    np.save(npy, np.arange(4, dtype=np.float32))
    out = os.path.join(tmp, "sym.h5")
    os.symlink(victim, "%s.import-%d.tmp" % (out, os.getpid()))
    rc, err = main_in_process(["-o", out, npy])
    got = open(victim, "rb").read()
    check(rc == 0 and got == b"precious", "symlink: %d %r, victim %r" % (rc, err, got[:20]))
    if os.path.lexists("%s.import-%d.tmp" % (out, os.getpid())):
        os.unlink("%s.import-%d.tmp" % (out, os.getpid()))
    check(listing(tmp) == sorted(["victim", "in.npy", "sym.h5", "script.pt", "plain.pt"]),
          "left behind: %s" % listing(tmp))

    # --- The output is an input, or a directory. --------------------------------------
    before = open(npy, "rb").read()
    p = run("import", "-o", npy, npy)
    one_line(p, npy, "-o input", "also an input")
    check(open(npy, "rb").read() == before, "-o input: the input was replaced")
    link = os.path.join(tmp, "link.npy")
    os.symlink(npy, link)
    p = run("import", "-o", link, npy)
    one_line(p, link, "-o a link to the input", "also an input")
    os.unlink(link)
    outdir = os.path.join(tmp, "outdir")
    os.makedirs(outdir)
    p = run("import", "-o", outdir, npy)
    one_line(p, outdir, "-o directory", "directory")
    check(listing(outdir) == [] and not any(".import-" in n for n in listing(tmp)),
          "-o directory: left behind %s" % listing(tmp))

    # --- Hostile headers and names. -------------------------------------------------
    bad = os.path.join(tmp, "bad")
    os.makedirs(bad)
    f4 = np.arange(2, dtype=np.float32).tobytes()
    cases = {
        "surrogate.safetensors": safetensors_blob([("x", "F32", [2], f4)],
                                                  names=b'{"a\\udcff":{"dtype":"F32","shape":[2],'
                                                  b'"data_offsets":[0,8]}}'),
        "rawbyte.safetensors": safetensors_blob([("x", "F32", [2], f4)],
                                                names=b'{"a\xff":{"dtype":"F32","shape":[2],'
                                                b'"data_offsets":[0,8]}}'),
        "nul.safetensors": safetensors_blob([("a\0b", "F32", [2], f4)]),
        "deep.safetensors": safetensors_blob([], names=b"[" * 100000 + b"]" * 100000),
    }
    for fname, blob in cases.items():
        path = os.path.join(bad, fname)
        with open(path, "wb") as f:
            f.write(blob)
        out = os.path.join(tmp, "bad.h5")
        p = run("import", "-o", out, path)
        one_line(p, path, fname)
        check(not os.path.exists(out) and not any(".import-" in n for n in listing(tmp)),
              "%s: left behind %s" % (fname, listing(tmp)))
        os.unlink(path)
    # A .npy whose file name is not UTF-8 (the capture is named after it).
    raw = os.path.join(os.fsencode(bad), b"l\xff.npy")
    with open(raw, "wb") as f:
        np.save(f, np.ones(2, np.float32))
    p = run("import", "-o", os.path.join(tmp, "bad.h5"), bad)
    one_line(p, raw, "non-UTF-8 .npy name", "UTF-8")
    os.unlink(raw)
    # .npz: a member that declares more than it holds; one past the limit.
    hdr = io.BytesIO()
    np.lib.format.write_array_header_1_0(hdr, {"descr": "<f8", "fortran_order": False,
                                               "shape": (1 << 37,)})
    liar = os.path.join(bad, "liar.npz")
    with zipfile.ZipFile(liar, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.npy", hdr.getvalue() + b"\0" * 4096)
    p = run("import", "-o", os.path.join(tmp, "bad.h5"), liar)
    one_line(p, liar, "npz declaring more than it holds", "declares")
    os.unlink(liar)
    bomb = os.path.join(bad, "bomb.npz")
    zeros = np.zeros(1 << 22, np.uint8)  # 4 MiB of zeros: about 4 KiB deflated
    np.savez_compressed(bomb, x=zeros, y=zeros)
    for limit, ok in ((6 << 20, False), (16 << 20, True)) if guard is not None else ():
        try:
            got = guard.read_npz(bomb, limit=limit)
            check(ok and [k for k, _ in got] == ["x", "y"]
                  and all(np.array_equal(a, zeros) for _, a in got), "bomb under the limit")
        except guard.BadInput as e:
            check(not ok and "inflate" in str(e), "bomb over the limit: %s" % e)
    os.unlink(bomb)

    # --- Plain torch.save files, one per pass. --------------------------------------
    def passes(d, bump):
        """Three decode steps after a 3-token prefill; bump: layer 1's output
        moves at position 4 (the second decode step) and everything after it."""
        os.makedirs(d)
        g = torch.Generator().manual_seed(3)
        want = []
        for k, pos in enumerate(([0, 1, 2], [3], [4], [5])):
            n = len(pos)
            t = {"positions": torch.tensor(pos),
                 "model.layers.0": torch.randn(n, 4, generator=g),
                 "model.layers.1": torch.randn(n, 4, generator=g),
                 "lm_head": torch.randn(n, 6, generator=g)}
            if bump and pos[0] >= 4:
                t["model.layers.1"][0, 1] += 0.5
                t["lm_head"][0, 2] += 0.25
            torch.save(t, os.path.join(d, "pass%d.pt" % k))
            want.append(pos)
        return want

    want = passes(os.path.join(tmp, "pa"), False)
    passes(os.path.join(tmp, "pb"), True)
    for side in ("pa", "pb"):
        p = run("import", "-o", os.path.join(tmp, side + ".h5"), *UNSAFE, os.path.join(tmp, side))
        check(p.returncode == 0, "passes %s: %d %r" % (side, p.returncode, p.stderr))
    with h5py.File(os.path.join(tmp, "pa.h5"), "r") as f:
        caps = f["captures"]
        check(sorted(caps) == ["lm_head", "model.layers.0", "model.layers.1"],
              "passes: captures %s" % sorted(caps))
        for name in ("model.layers.0", "lm_head"):
            if name in caps:
                got = [caps[name][str(i)].attrs["positions"].tolist()
                       if "positions" in caps[name][str(i)].attrs else None
                       for i in range(len(want)) if str(i) in caps[name]]
                check(got == want, "passes: %s positions %s" % (name, got))
    p = run("diff", "--format", "json", os.path.join(tmp, "pa.h5"), os.path.join(tmp, "pb.h5"))
    check(p.returncode == 1, "passes diff: %d %r" % (p.returncode, p.stderr[-300:]))
    if p.returncode == 1:
        rep = json.loads(p.stdout)
        fd = rep.get("first_divergence") or {}
        check(fd.get("name") == "model.layers.1", "passes: first divergence %s" % fd)
        check(not any(r.get("status") == "shape_mismatch" for r in rep["rows"]),
              "passes: shape mismatches")

    # --- safetensors: the order of the layers, and a warning. -----------------------
    rng = np.random.default_rng(5)
    base = {n: rng.standard_normal((2, 4)).astype(np.float32) for n in
            ("model.embed_tokens", "model.layers.0", "model.layers.1", "model.layers.10",
             "model.layers.2", "model.norm", "lm_head")}
    order = ["model.embed_tokens", "model.layers.0", "model.layers.1", "model.layers.2",
             "model.layers.10", "model.norm", "lm_head"]
    for side in ("sa", "sb"):
        t = {k: v.copy() for k, v in base.items()}
        if side == "sb":  # layer 2 moves, and what follows it
            for k in ("model.layers.2", "model.layers.10", "model.norm", "lm_head"):
                t[k][1, 1] += 0.125
        # Sorted by name, as the safetensors writers store them.
        blob = safetensors_blob([(k, "F32", t[k].shape, t[k].tobytes()) for k in sorted(t)])
        with open(os.path.join(tmp, side + ".safetensors"), "wb") as f:
            f.write(blob)
        p = run("import", "-o", os.path.join(tmp, side + ".h5"),
                os.path.join(tmp, side + ".safetensors"))
        err = p.stderr.decode()
        check(p.returncode == 0 and err.count("\n") == 1 and "warning" in err
              and "order" in err, "safetensors %s: %d %r" % (side, p.returncode, err))
    with h5py.File(os.path.join(tmp, "sa.h5"), "r") as f:
        seqs = sorted((int(f["captures"][n]["0"].attrs["seq"]), n) for n in f["captures"])
        check([n for _, n in seqs] == order, "safetensors order %s" % seqs)
    p = run("diff", "--format", "json", os.path.join(tmp, "sa.h5"), os.path.join(tmp, "sb.h5"))
    if p.returncode == 1:
        fd = json.loads(p.stdout).get("first_divergence") or {}
        check(fd.get("name") == "model.layers.2", "safetensors: first divergence %s" % fd)
    else:
        check(False, "safetensors diff: %d %r" % (p.returncode, p.stderr[-300:]))

    # --- --help without the package. ------------------------------------------------
    p = run("import", "--help", env=dict(ENV, PYTHONPATH="", ULPPROF_PYTHON="/nonexistent"))
    check(p.returncode == 0 and p.stdout.startswith(b"usage: ulpprof import")
          and b"--unsafe-pickle" in p.stdout, "--help: %d %r" % (p.returncode, p.stderr))

for f in fails:
    print("FAIL:", f)
if not fails:
    print("test_import_hostile: all passed")
sys.exit(1 if fails else 0)

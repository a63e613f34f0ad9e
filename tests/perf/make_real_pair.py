"""Writes the realistic benchmark pair of tests/perf/bench_diff.sh: what a
32-layer model's dump looks like, not an easy case.

Per layer L (0..31), three captures of [T, HIDDEN] elements:
  model.layers.L.attn_out  bf16   N(0,1)-like values
  model.layers.L.mlp_out   bf16   N(0,1)-like values
  model.layers.L.out       f32    the residual stream, N(0,4)-like
then lm_head.logits, f32 [T/4, 151936] (role logits).  In B a fraction of
the elements is moved by 1..4 ULP, growing with depth from 1% (layer 0) to
9% (the last layer and the logits); every 8th logits row has its top two
tokens one ULP apart in A and swapped in B, so its argmax flips.

T is chosen so that a file holds about SIZE_MIB MiB.  The numbers come from
numpy's generator with a fixed seed: the same arguments give the same files.

The files are written as users' snapshots are, by ulpprof's own writer
(libulpprof_capture, through the pip package's ctypes binding), when
$ULPPROF_CAPTURE_LIBRARY names the built library (bench_diff.sh sets it):
they then carry the capture index that writer adds.  Otherwise h5py writes
them, as another tool would (the reader then opens every dataset).

Usage: make_real_pair.py DIR SIZE_MIB [HIDDEN]   (writes DIR/a.h5, DIR/b.h5)
"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import diffsnap as ds  # noqa: E402

LAYERS = 32
VOCAB = 151936


def to_bf16(x):
    """float32 -> bf16 bits, round to nearest even (no NaN among the inputs)."""
    u = x.view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def moved(rng, bits, frac, sign_bit):
    """A copy of `bits` with about `frac` of its elements moved by 1..4 ULP
    (towards zero only where the magnitude leaves room)."""
    out = bits.copy()
    flat = out.reshape(-1)
    idx = np.flatnonzero(rng.random(bits.size, dtype=np.float32) < frac)
    step = rng.integers(1, 5, idx.size).astype(bits.dtype)
    mag = flat[idx] & (sign_bit - 1)
    down = (rng.random(idx.size) < 0.5) & (mag > 8)
    flat[idx] = np.where(down, flat[idx] - step, flat[idx] + step)
    return out


def flip_rows(rng, la, lb, every):
    """Every `every`-th row: the two top tokens one ULP apart in A, swapped in B."""
    for r in range(0, la.shape[0], every):
        za = la[r].view(np.float32)
        j1, j2 = np.argsort(za)[-2:][::-1]
        top = la[r, j1]  # positive: the largest of 151936 normal draws
        la[r, j2] = top - 1
        lb[r, j1] = top
        lb[r, j2] = top + 1


def ulpprof_writer(out):
    """put(name, dtype, (a_bits, b_bits), layer, role) through two capture
    sessions, and close(); None when the library is not given."""
    if not os.environ.get("ULPPROF_CAPTURE_LIBRARY"):
        return None
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    from ulpprof import _lib  # noqa: E402

    sessions = []
    for n, cache in (("a", "miss"), ("b", "hit")):
        path = os.path.join(out, n + ".h5")
        if os.path.exists(path):
            os.remove(path)
        sessions.append(_lib.Session(path, label=n, run={"cache": cache}))

    def put(name, dtype, pair, layer, role=None):
        for s, bits in zip(sessions, pair):
            bits = np.ascontiguousarray(bits)
            st = s.capture(name, bits.ctypes.data, dtype, bits.shape,
                           layer=_lib.LAYER_NONE if layer is None else layer,
                           role=role or "activation")
            if st != 0:
                sys.exit("make_real_pair: capture %s failed: %s" % (name, _lib.status_str(st)))

    def close():
        for s in sessions:
            st = s.close()
            if st != 0:
                sys.exit("make_real_pair: closing a snapshot failed: %s" % _lib.status_str(st))
    return put, close


def main():
    out = sys.argv[1]
    size_mib = float(sys.argv[2])
    hidden = int(sys.argv[3]) if len(sys.argv) > 3 else 4096
    per_token = LAYERS * hidden * (2 + 2 + 4) + VOCAB * 4 / 4
    tokens = max(4, int(round(size_mib * 2**20 / per_token / 4)) * 4)
    rng = np.random.default_rng(11)
    writer = ulpprof_writer(out)
    files = [] if writer else [h5py.File(os.path.join(out, n), "w") for n in ("a.h5", "b.h5")]
    for f, label in zip(files, ("a", "b")):
        f.attrs["format"] = "ulpprof-snapshot"
        f.attrs["format_version"] = np.int32(1)
        f.attrs["label"] = label
        f.create_group("run").attrs["cache"] = "miss" if label == "a" else "hit"
        f.create_group("captures")
    seq = 0

    def h5py_put(name, dtype, pair, layer, role=None):
        nonlocal seq
        tid = ds.h5_file_type(dtype)
        for f, bits in zip(files, pair):
            g = f["captures"].create_group(name)
            space = h5py.h5s.create_simple(bits.shape)
            dsid = h5py.h5d.create(g.id, b"0", tid, space)
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=tid)
            d = h5py.Dataset(dsid)
            d.attrs["dtype"] = dtype
            d.attrs["seq"] = np.int64(seq)
            if layer is not None:
                d.attrs["layer"] = np.int32(layer)
            if role:
                d.attrs["role"] = role
        seq += 1

    put = writer[0] if writer else h5py_put
    shape = (tokens, hidden)
    for layer in range(LAYERS):
        frac = 0.01 + 0.08 * layer / (LAYERS - 1)
        for part in ("attn_out", "mlp_out"):
            a = to_bf16(rng.standard_normal(shape, dtype=np.float32))
            put("model.layers.%d.%s" % (layer, part), "bf16", (a, moved(rng, a, frac, 0x8000)),
                layer)
        a = (rng.standard_normal(shape, dtype=np.float32) * 4).view(np.uint32)
        put("model.layers.%d.out" % layer, "f32", (a, moved(rng, a, frac, 0x80000000)), layer)
    la = (rng.standard_normal((tokens // 4, VOCAB), dtype=np.float32) * 3).view(np.uint32)
    lb = moved(rng, la, 0.09, 0x80000000)
    flip_rows(rng, la, lb, 8)
    put("lm_head.logits", "f32", (la, lb), None, "logits")
    for f in files:
        f.close()
    if writer:
        writer[1]()
    print("make_real_pair: %d layers x 3 captures of [%d, %d] + logits [%d, %d], %.0f MiB a file"
          % (LAYERS, tokens, hidden, tokens // 4, VOCAB,
             os.path.getsize(os.path.join(out, "a.h5")) / 2**20))


if __name__ == "__main__":
    main()

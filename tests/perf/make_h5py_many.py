"""Writes a pair of snapshots of many small captures with h5py alone, as an
independent writer following format/FORMAT.md would (no capture index, no
journal, no open map): the case where the reader describes every capture
from its dataset's own header.

N captures of bf16[ELEMENTS] (default 16,384: 32 KiB each), names
"model.layers.L.out" for L in 0..NAMES-1, occurrences 0.. in turn (seq =
the order written), attributes dtype, seq, layer, role "activation".  The
values are bf16 bit patterns from numpy's generator (fixed seed: the same
arguments give the same files).  B equals A except that captures
seq N-DIFFER .. N-1 have element (seq % ELEMENTS) moved by 1 + seq % 3
ULP (bf16 bit patterns of one sign are ordered: +k on the bits is k ULP).
With TOKENS > 0 (it must divide ELEMENTS) each capture is shaped
[TOKENS, ELEMENTS / TOKENS] and carries `positions` (int64, occ * TOKENS
+ 0 .. TOKENS-1), as an engine's or a user's capture of a prompt does;
0 (the default) writes 1-D captures without them.

Usage: make_h5py_many.py DIR N [ELEMENTS [NAMES [DIFFER [TOKENS]]]]
       (writes DIR/a.h5, DIR/b.h5; prints what it wrote)
"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import diffsnap as ds  # noqa: E402


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    elements = int(sys.argv[3]) if len(sys.argv) > 3 else 16384
    names = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    differ = int(sys.argv[5]) if len(sys.argv) > 5 else 10
    tokens = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    assert tokens >= 0 and (tokens == 0 or elements % tokens == 0)
    shape = (tokens, elements // tokens) if tokens else (elements,)
    rng = np.random.default_rng(7)
    # A pool of bit patterns (normal bf16 values of either sign, exponent 100..150):
    # each capture is a window of it, so writing 10,000 costs no generator time.
    pool = ((rng.integers(100, 151, 2 * elements, dtype=np.uint16) << 7)
            | rng.integers(0, 128, 2 * elements, dtype=np.uint16)
            | (rng.integers(0, 2, 2 * elements, dtype=np.uint16) << 15)).astype(np.uint16)
    tid = ds.h5_file_type("bf16")
    space = h5py.h5s.create_simple(shape)
    files = [h5py.File(os.path.join(out, f), "w") for f in ("a.h5", "b.h5")]
    groups = []
    for f, label in zip(files, ("a", "b")):
        f.attrs["format"] = "ulpprof-snapshot"
        f.attrs["format_version"] = np.int32(1)
        f.attrs["label"] = label
        f.attrs["writer"] = "make_h5py_many.py"
        f.attrs["created_unix_ns"] = np.int64(0)
        f.create_group("run").attrs["cache"] = "miss" if label == "a" else "hit"
        f.create_group("env")
        caps = f.create_group("captures")
        groups.append([caps.create_group("model.layers.%d.out" % k) for k in range(names)])
    for seq in range(n):
        layer, occ = seq % names, seq // names
        start = (seq * 37) % elements
        a = pool[start:start + elements]
        for side, (f, g) in enumerate(zip(files, groups)):
            bits = a
            if side == 1 and seq >= n - differ:
                bits = a.copy()
                bits[seq % elements] += 1 + seq % 3
            dsid = h5py.h5d.create(g[layer].id, str(occ).encode(), tid, space)
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, bits.reshape(shape), mtype=tid)
            d = h5py.Dataset(dsid)
            d.attrs["dtype"] = "bf16"
            d.attrs["seq"] = np.int64(seq)
            d.attrs["layer"] = np.int32(layer)
            d.attrs["role"] = "activation"
            if tokens:
                d.attrs["positions"] = np.arange(occ * tokens, (occ + 1) * tokens, dtype=np.int64)
    for f in files:
        f.close()
    print("make_h5py_many: %d captures of bf16%s (%d names), %d differ in one element, "
          "%.0f MiB a file" % (n, list(shape), names, differ,
                               os.path.getsize(os.path.join(out, "a.h5")) / 2**20))


if __name__ == "__main__":
    main()

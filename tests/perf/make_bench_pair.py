"""Writes the benchmark pair of tests/perf/bench_diff.sh: NLAYERS captures of
NELEM bf16 each (N(0,1) values, rounded to nearest even), and in B about
1% of the elements moved by 1..3 ULP.  Usage: make_bench_pair.py DIR [NLAYERS NELEM]"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import diffsnap as ds  # noqa: E402


def main():
    out = sys.argv[1]
    nl = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    ne = int(sys.argv[3]) if len(sys.argv) > 3 else 4 << 20
    rng = np.random.default_rng(7)
    files = [h5py.File(os.path.join(out, n), "w") for n in ("a.h5", "b.h5")]
    for f, label in zip(files, ("a", "b")):
        f.attrs["format"] = "ulpprof-snapshot"
        f.attrs["format_version"] = np.int32(1)
        f.attrs["label"] = label
        f.create_group("run").attrs["cache"] = "miss" if label == "a" else "hit"
        f.create_group("captures")
    tid = ds.h5_file_type("bf16")
    for layer in range(nl):
        x = rng.standard_normal(ne, dtype=np.float32).view(np.uint32)
        a = ((x + 0x7fff + ((x >> 16) & 1)) >> 16).astype(np.uint16)
        b = a.copy()
        idx = rng.choice(ne, ne // 100, replace=False)
        b[idx] = (b[idx].astype(np.int32) + rng.integers(1, 4, idx.size)).astype(np.uint16)
        for f, bits in zip(files, (a, b)):
            g = f["captures"].create_group("model.layers.%d.out" % layer)
            space = h5py.h5s.create_simple(bits.shape)
            dsid = h5py.h5d.create(g.id, b"0", tid, space)
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=tid)
            d = h5py.Dataset(dsid)
            d.attrs["dtype"] = "bf16"
            d.attrs["seq"] = np.int64(layer)
            d.attrs["layer"] = np.int32(layer)
    for f in files:
        f.close()


if __name__ == "__main__":
    main()

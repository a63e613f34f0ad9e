"""The numpy + h5py baseline of tests/perf/bench_diff.sh: the same per-layer
counts as `ulpprof diff` (differing elements, max ULP, max |a - b|) for bf16
snapshots, with raw reads (memory type = file type, no HDF5 conversion) and
vectorized numpy.  Usage: diff_numpy.py A.h5 B.h5"""
import sys

import h5py
import numpy as np


def raw(d):
    out = np.empty(d.shape, np.uint16)
    d.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=d.id.get_type())
    return out


def ordered(u):
    mag = (u & 0x7fff).astype(np.int32)
    return np.where(u & 0x8000, -mag, mag)


def main():
    fa, fb = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
    for name in fa["captures"]:
        for occ in fa["captures"][name]:
            a = raw(fa["captures"][name][occ]).ravel()
            b = raw(fb["captures"][name][occ]).ravel()
            diff = int(np.count_nonzero(a != b))
            fin = ((a & 0x7fff) < 0x7f80) & ((b & 0x7fff) < 0x7f80)
            ulp = np.abs(ordered(a) - ordered(b))[fin]
            va = (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            vb = (b.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
            mad = float(np.abs(va - vb)[fin].max()) if fin.any() else 0.0
            print("%s/%s differing %d max_ulp %d max_abs_diff %g" % (
                name, occ, diff, int(ulp.max()) if ulp.size else 0, mad))


if __name__ == "__main__":
    main()

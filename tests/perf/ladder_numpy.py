"""The baseline of bench_ladder.sh: numpy + h5py, every file read into
memory once, then every pair of runs compared capture by capture (the
identical/differs matrix only).  Prints the number of differing pairs."""
import os
import sys

import h5py
import numpy as np


def load(path):
    out = {}
    with h5py.File(path, "r") as f:
        for name, grp in f["captures"].items():
            for occ, d in grp.items():
                out[(name, occ)] = np.array(d[()]).view(np.uint8)
    return out


def main():
    d = sys.argv[1]
    runs = [load(os.path.join(d, f)) for f in sorted(os.listdir(d)) if f.endswith(".h5")]
    differ = 0
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            a, b = runs[i], runs[j]
            same = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
            differ += not same
    print(differ)


if __name__ == "__main__":
    main()

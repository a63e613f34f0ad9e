"""Writes N ladder runs that fall into K classes of bitwise-identical runs.

    make_ladder_runs.py DIR N K [--layers L] [--tokens T] [--hidden H] [--seed S]

Class k's file is written once with h5py (tests/python/diffsnap.py): L
activation captures of [T, H] f32 and a [T, 64] logits capture, all drawn
from one seed, with class k > 0 differing from class 0 in one element of
layer (k - 1) % L (a few ULPs up, at a row of its own).  The other runs of a
class are byte copies of it, so runs and classes are mixed in name order
(run i's class is drawn at random, every class at least once).  Every run's
/run is {"repeat": i}: each pair is a repeat.  DIR/classes.json lists each
run's file name and class, for a test to check -- but a test should
recompute the grouping from the files, not trust this list.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import diffsnap as ds  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("n", type=int)
    ap.add_argument("k", type=int)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    assert 1 <= a.k <= a.n
    rng = np.random.default_rng(a.seed)
    base = [rng.standard_normal((a.tokens, a.hidden)).astype(np.float32).view(np.uint32)
            for _ in range(a.layers)]
    logits = rng.standard_normal((a.tokens, 64)).astype(np.float32).view(np.uint32)
    cls = np.concatenate([np.arange(a.k), rng.integers(0, a.k, a.n - a.k)])
    rng.shuffle(cls)
    os.makedirs(a.dir, exist_ok=True)
    proto = os.path.join(a.dir, ".proto")
    os.makedirs(proto, exist_ok=True)
    for k in range(a.k):
        caps = []
        for layer in range(a.layers):
            bits = base[layer].copy()
            if k > 0 and (k - 1) % a.layers == layer:
                row = ((k - 1) // a.layers) % a.tokens
                bits[row, k % a.hidden] += np.uint32(1 + k % 5)
            caps.append({"name": "layers.%d" % layer, "bits": bits, "dtype": "f32",
                         "layer": layer, "positions": np.arange(a.tokens)})
        caps.append({"name": "lm_head", "bits": logits, "dtype": "f32", "role": "logits",
                     "layer": a.layers, "positions": np.arange(a.tokens)})
        ds.write_snapshot(os.path.join(proto, "%d.h5" % k), caps, label="class%d" % k)
    names = []
    width = len(str(a.n - 1))
    for i, k in enumerate(cls):
        name = "run%0*d.h5" % (width, i)
        shutil.copyfile(os.path.join(proto, "%d.h5" % k), os.path.join(a.dir, name))
        names.append(name)
    shutil.rmtree(proto)
    # /run differs per run: set after the copy (h5py, attributes only).
    import h5py
    for i, name in enumerate(names):
        with h5py.File(os.path.join(a.dir, name), "r+") as f:
            f["run"].attrs["repeat"] = str(i)
    with open(os.path.join(a.dir, "classes.json"), "w") as f:
        json.dump({"runs": names, "class": [int(k) for k in cls]}, f)


if __name__ == "__main__":
    main()

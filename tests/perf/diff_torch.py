"""The torch baseline of tests/perf/bench_diff.sh: what a user would
otherwise write with torch -- both files' tensors loaded through h5py into
torch tensors, compared with vectorized torch operations on torch's default
threads (here 1; 2 made each operation 3-10x slower on the busy 2-core
machine the benchmark was written on) --
printing the numbers `ulpprof diff` prints, in diff_numpy.py's JSON lines
(check_numpy.py compares them with ulpprof's JSON report):

  {"name", "occurrence", "differing", "max_ulp", "mean_ulp", "max_abs_diff",
   "max_abs", "nonfinite_mismatch"}                      every shared capture
  {"logits", "argmax_a", "argmax_b", "margin_a", "margin_b",
   "max_perturbation", "flips"}                          role = logits

Raw bits come in as signed integers of the same width (torch 1.13 has no
uint16 / uint32), values as torch's own bfloat16 / float16 / float32 views
of them, widened to float64 for the differences (exact for these formats).
The per-element ULP work runs on the differing elements only.

Formats: bf16, f16 and f32 (the benchmarks' pairs).
Usage: diff_torch.py A.h5 B.h5"""
import json
import sys

import h5py
import numpy as np
import torch

# dtype -> (raw numpy type, torch float view, sign bit, smallest non-finite magnitude)
FORMATS = {
    "bf16": (np.int16, torch.bfloat16, 0x8000, 0x7F80),
    "f16": (np.int16, torch.float16, 0x8000, 0x7C00),
    "f32": (np.int32, torch.float32, 0x80000000, 0x7F800000),
}


def raw(d, t):
    """The dataset's bits as a torch integer tensor (no HDF5 conversion)."""
    out = np.empty(d.shape, t)
    if out.size:
        d.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=d.id.get_type())
    return torch.from_numpy(out)


def compare(name, occ, dtype, a, b):
    _, fview, sign, nf = FORMATS[dtype]
    a = a.reshape(-1)
    b = b.reshape(-1)
    # Magnitudes on the bits, in their own width (the mask clears the sign bit).
    ma, mb = a & (sign - 1), b & (sign - 1)
    fin_a, fin_b = ma < nf, mb < nf
    max_mag = max([int(m[f].max()) for m, f in ((ma, fin_a), (mb, fin_b)) if bool(f.any())] or [0])
    idx = torch.nonzero(a != b).reshape(-1)
    fin = (fin_a & fin_b)[idx]
    # Ordered values of the differing elements, widened (a negative bit pattern is a set sign bit).
    xa, xb, ya, yb = a[idx], b[idx], ma[idx].long(), mb[idx].long()
    oa = torch.where(xa < 0, -ya, ya)[fin]
    ob = torch.where(xb < 0, -yb, yb)[fin]
    ulp = (oa - ob).abs()
    va = a[idx][fin].view(fview).double()
    vb = b[idx][fin].view(fview).double()
    absd = (va - vb).abs()
    top = torch.tensor([max_mag], dtype=a.dtype).view(fview).double()
    return {"name": name, "occurrence": occ, "differing": int(idx.numel()),
            "max_ulp": int(ulp.max()) if ulp.numel() else 0,
            "mean_ulp": float(ulp.sum().double() / ulp.numel()) if ulp.numel() else 0.0,
            "max_abs_diff": float(absd.max()) if absd.numel() else 0.0,
            "max_abs": float(top[0]),
            "nonfinite_mismatch": int(idx.numel() - int(fin.sum()))}


def logits(name, dtype, a, b):
    _, fview, _, _ = FORMATS[dtype]
    va = a.view(fview).double().reshape(-1, a.shape[-1])
    vb = b.view(fview).double().reshape(-1, b.shape[-1])
    out = {"logits": name}
    for side, v in (("a", va), ("b", vb)):
        top2 = torch.topk(v, 2, dim=1).values
        out["argmax_" + side] = v.argmax(dim=1).tolist()
        out["margin_" + side] = (top2[:, 0] - top2[:, 1]).tolist()
    out["max_perturbation"] = (va - vb).abs().max(dim=1).values.tolist()
    out["flips"] = int((torch.tensor(out["argmax_a"]) != torch.tensor(out["argmax_b"])).sum())
    return out


def attr(d, key, default):
    v = d.attrs.get(key, default)
    return v.decode() if isinstance(v, bytes) else str(v)


def main():
    fa, fb = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
    for name in fa["captures"]:
        for occ in fa["captures"][name]:
            da = fa["captures"][name][occ]
            db = fb["captures"][name][occ]
            dtype = attr(da, "dtype", "")
            a, b = raw(da, FORMATS[dtype][0]), raw(db, FORMATS[dtype][0])
            print(json.dumps(compare(name, int(occ), dtype, a, b)))
            if attr(da, "role", "activation") == "logits":
                print(json.dumps(logits(name, dtype, a, b)))


if __name__ == "__main__":
    main()

"""`ulpprof diff` of tensors larger than its chunks, read in place from the
files' mappings, gives numpy's numbers whatever the threads and
the chunk size.

The pair holds tensors of 9 MiB (several 2 MiB spans of the mapping, at
offsets that are not span-aligned, so that every pair has a short head
chunk; runs under 8 MiB are always copied), a chunked and deflated one
(not mapped: read through HDF5 into buffers), and four logits captures,
whose rows the element pass takes as it reads the chunks (rows across
chunks, chunks smaller than a row): f32 of many rows per chunk, f32 of rows
larger than a chunk (9.2 MiB, mapped), bf16 and f16 of odd vocabularies.
Each run -- the default, one thread, three threads with 4 MiB chunks, four
threads with 1000-element chunks; each reading in place from the mapping
and copying; and one with a temperature, whose logits take a pass of their
own -- must print the same rows and logits, and those must be numpy's
(tests/perf/diff_numpy.py, checked by check_numpy.py).
"""
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import diffsnap as ds  # noqa: E402
import diff_runs  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
rng = np.random.default_rng(1616)


def moved(bits, frac, big):
    """A copy with about `frac` of the elements moved by 1..4 ULP, and `big` by up to 2^12."""
    out = bits.copy().reshape(-1)
    idx = np.flatnonzero(rng.random(out.size) < frac)
    out[idx] += rng.integers(1, 5, idx.size).astype(out.dtype)
    far = rng.integers(0, out.size, big)
    out[far] += rng.integers(1, 1 << 12, big).astype(out.dtype)
    return out.reshape(bits.shape)


def bf16(shape):
    x = rng.standard_normal(shape).astype(np.float32).view(np.uint32)
    return (x >> 16).astype(np.uint16) & np.uint16(0x7EFF)  # finite, away from inf


def f32(shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).view(np.uint32)


def logits_pair(rows, vocab, dtype="f32"):
    """f32 / bf16 / f16 logits bits: moved elements, and every 3rd row's top
    two one ULP apart in A and swapped in B (a flip)."""
    a = f32((rows, vocab), 4.0)
    if dtype == "bf16":
        a = (a >> 16).astype(np.uint16)
    elif dtype == "f16":
        a = a.view(np.float32).astype(np.float16).view(np.uint16)
    b = moved(a, 0.05, 8)
    for r in range(0, rows, 3):  # the top two one ULP apart in A, swapped in B
        j1, j2 = np.argsort(ds.decode(dtype, a[r]))[-2:][::-1]
        top = max(a[r, j1], b[r, j1])
        a[r, j1], a[r, j2] = top, top - 1
        b[r, j1], b[r, j2] = top, top + 1
    return a, b


def main():
    tmp = tempfile.mkdtemp(prefix="ulpdiff-chunks-")
    try:
        caps_a, caps_b = [], []

        def add(name, a, b, dtype, **kw):
            caps_a.append(dict(name=name, bits=a, dtype=dtype, **kw))
            caps_b.append(dict(name=name, bits=b, dtype=dtype, **kw))

        x = bf16((7, 5))
        add("model.layers.0.small", x, moved(x, 0.3, 1), "bf16", layer=0)
        x = bf16((1503, 3001))
        add("model.layers.1.attn_out", x, moved(x, 0.05, 40), "bf16", layer=1)
        x = f32((1101, 1999))
        add("model.layers.1.out", x, moved(x, 0.09, 40), "f32", layer=1)
        x = bf16((1500, 2001))
        add("model.layers.2.mlp_out", x, moved(x, 0.02, 40), "bf16", layer=2,
            chunks=(100, 2001))
        la, lb = logits_pair(37, 50021)
        add("lm_head", la, lb, "f32", role="logits")
        la, lb = logits_pair(8, 300007)  # 9.2 MiB: mapped in place when mapped reads are asked
        add("lm_head_wide", la, lb, "f32", role="logits")
        # Formats narrower than f32, odd vocabularies (widened as the element pass reads them).
        la, lb = logits_pair(9, 30011, "bf16")
        add("lm_head_bf16", la, lb, "bf16", role="logits")
        la, lb = logits_pair(7, 4099, "f16")
        add("lm_head_f16", la, lb, "f16", role="logits")
        pa, pb = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
        ds.write_snapshot(pa, caps_a)
        ds.write_snapshot(pb, caps_b)

        runs = {"default": [], "j1": ["-j", "1"], "j3-4MiB": ["-j", "3", "--chunk-elements",
                                                              "2097152"],
                "j4-1000": ["-j", "4", "--chunk-elements", "1000"]}
        # Both ways of reading (analyzer/diff_read.c): in place from the
        # mapping, and copied; the probe would copy files this small.
        runs = {"%s-%s" % (tag, way): (args, way) for tag, args in runs.items()
                for way in ("map", "copy")}
        # With temperatures the logits take a pass of their own, not the
        # element pass's chunks (analyzer/logits_fuse.c): the same numbers.
        runs["temperature-copy"] = (["-j", "3", "-t", "1.0"], "copy")
        reports = diff_runs.json_reports(ULPPROF, runs, pa, pb, tmp)
        if reports is None:
            return 1
        for rep in reports.values():
            for lg in rep["logits"]:
                lg.pop("sampling")
        reports = {tag: (rep["rows"], rep["logits"]) for tag, rep in reports.items()}
        fails = [t for t in runs if reports[t] != reports["default-map"]]
        if fails:
            print("FAIL: rows or logits differ from the default mapped run's in", fails)
            return 1
        rows, logits = reports["default-map"]
        if len(rows) != 8 or sum(r["differing"] for r in rows) == 0 or \
                [lg["argmax_flips"] for lg in logits][:2] != [13, 3] or \
                min(lg["argmax_flips"] for lg in logits) < 3:
            print("FAIL: not the pair written:", [(r["name"], r["differing"]) for r in rows],
                  [lg["argmax_flips"] for lg in logits])
            return 1
        if not diff_runs.agrees(pa, pb, os.path.join(tmp, "default-map.json"), tmp):
            return 1
        print("ok: %d runs agree with each other and with numpy" % len(runs))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

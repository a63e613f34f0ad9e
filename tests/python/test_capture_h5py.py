#!/usr/bin/python3
"""A snapshot written by the host capture API, read back by h5py.

Runs `test_capture --fixture` (tests/unit/test_capture.c: write_fixture) with
the environment that opens the default session, then checks the file with
h5py and numpy only -- independent of ulpprof's own reader:
  - root attributes, /run from ULPPROF_ATTR and ulp_capture_set_run, /env;
  - every dtype: the bits h5py reads raw equal a numpy computation of the
    pattern the fixture wrote (all 65,536 16-bit and all 256 8-bit patterns);
  - bf16 read by h5py as float32 values equals (u16 << 16) viewed as
    float32; f16 read by h5py equals numpy float16 (NaN for NaN);
  - dataset attributes, occurrence numbering, steps, shapes (rank 0, empty).
"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

DTYPES = ["f64", "f32", "f16", "bf16", "f8e4m3", "f8e5m2", "i64", "i32", "i16", "i8", "u8"]
SIZE = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1,
        "i64": 8, "i32": 4, "i16": 2, "i8": 1, "u8": 1}
UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def expected_bits(dtype):
    """The fixture's pattern: element i = i for 8/16-bit types, else
    (i + 1) * 0x9E3779B97F4A7C15 truncated to the element width."""
    size = SIZE[dtype]
    n = 256 if size == 1 else 65536
    i = np.arange(n, dtype=np.uint64)
    if size <= 2:
        return i.astype(UINT[size])
    with np.errstate(over="ignore"):
        full = (i + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)
    return (full & np.uint64((1 << (8 * size)) - 1)).astype(UINT[size])


def raw_bits(ds):
    """The dataset's bits, read with memory type = file type (no conversion)."""
    size = ds.id.get_type().get_size()
    out = np.empty(ds.shape, dtype=UINT[size])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ds.id.get_type())
    return out


def same_values(a, b):
    """Equal as values, NaN matching NaN (h5py's conversion drops payloads)."""
    a = np.asarray(a)
    b = np.asarray(b)
    both_nan = np.isnan(a) & np.isnan(b)
    return a.shape == b.shape and bool(np.all(both_nan | (a == b)))


def main():
    build = os.environ.get("ULPPROF_BUILD_DIR")
    if not build:
        print("ULPPROF_BUILD_DIR is not set", file=sys.stderr)
        return 2
    exe = os.path.join(build, "tests", "test_capture")
    with tempfile.TemporaryDirectory(prefix="ulpprof-h5py-") as tmp:
        env = dict(os.environ)
        env.update({
            "ULPPROF_OUTPUT": os.path.join(tmp, "snap-%l-r%r.h5"),
            "ULPPROF_LABEL": "miss",
            "ULPPROF_ATTR": "cache=miss,batch_size=1,prompt=hello\\, world",
            "RANK": "2",
            "OPENBLAS_NUM_THREADS": "1",
        })
        env.pop("ULPPROF_QUEUE_MB", None)
        proc = subprocess.run([exe, "--fixture"], env=env, capture_output=True, text=True)
        check(proc.returncode == 0, "fixture exit status %d: %s" % (proc.returncode, proc.stderr))
        check(proc.stderr == "", "fixture wrote to stderr: %r" % proc.stderr)
        path = os.path.join(tmp, "snap-miss-r2.h5")
        check(os.path.exists(path), "no file at %s" % path)
        if failures:
            return 1
        with h5py.File(path, "r") as f:
            check_file(f, proc)
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("ok: h5py reads the host API's snapshot")
    return 0


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def check_file(f, proc):
    a = f.attrs
    check(s(a["format"]) == "ulpprof-snapshot", "format")
    check(int(a["format_version"]) == 1 and a["format_version"].dtype == np.int32,
          "format_version")
    check(s(a["label"]) == "miss", "label")
    check(s(a["writer"]).startswith("ulpprof-capture "), "writer")
    check(a["created_unix_ns"].dtype == np.int64 and int(a["created_unix_ns"]) > 1.6e18,
          "created_unix_ns")

    run = {k: s(v) for k, v in f["run"].attrs.items()}
    check(run == {"cache": "miss", "batch_size": "1", "prompt": "hello, world",
                  "model": "fixture"}, "/run is %r" % run)
    envs = {k: s(v) for k, v in f["env"].attrs.items()}
    check(envs.get("rank") == "2", "/env rank")
    check(envs.get("hostname") == os.uname().nodename, "/env hostname %r" % envs.get("hostname"))
    check(envs.get("pid", "").isdigit(), "/env pid")
    check(envs.get("env:OPENBLAS_NUM_THREADS") == "1", "/env env:OPENBLAS_NUM_THREADS")

    caps = f["captures"]
    seqs = []
    for k, dt in enumerate(DTYPES):
        ds = caps["all.%s/0" % dt]
        want = expected_bits(dt)
        check(ds.shape == (want.size // 256, 256), "%s shape %r" % (dt, ds.shape))
        got = raw_bits(ds).reshape(-1)
        check(np.array_equal(got, want), "%s raw bits differ" % dt)
        check(s(ds.attrs["dtype"]) == dt, "%s dtype attribute" % dt)
        check(int(ds.attrs["layer"]) == k and ds.attrs["layer"].dtype == np.int32,
              "%s layer" % dt)
        check(s(ds.attrs["role"]) == "activation", "%s role" % dt)
        check("step" not in ds.attrs, "%s has no step" % dt)
        seqs.append(int(ds.attrs["seq"]))

        # Values as h5py converts them, against numpy's own decoding.
        values = ds[()].reshape(-1)
        if dt == "bf16":
            check(values.dtype == np.float32, "bf16 reads as float32, got %s" % values.dtype)
            ref = (want.astype(np.uint32) << 16).view(np.float32)
            check(same_values(values, ref), "bf16 values differ from (u16 << 16) as float32")
        elif dt == "f16":
            check(values.dtype == np.float16, "f16 reads as float16, got %s" % values.dtype)
            ref = want.view(np.float16)
            check(same_values(values, ref), "f16 values differ from numpy float16")
        elif dt in ("f32", "f64"):
            ref = want.view(np.float32 if dt == "f32" else np.float64)
            check(same_values(values, ref), "%s values" % dt)
        elif dt in ("f8e4m3", "f8e5m2", "u8"):
            check(values.dtype == np.uint8 and np.array_equal(values, want), "%s as uint8" % dt)
        else:
            signed = {"i64": np.int64, "i32": np.int32, "i16": np.int16, "i8": np.int8}[dt]
            check(values.dtype == signed and np.array_equal(values, want.view(signed)),
                  "%s values" % dt)

    lg = caps["logits/0"]
    check(lg.dtype == np.float32 and lg.shape == (2, 5), "logits shape/dtype")
    check(np.array_equal(lg[()], np.array([[0.5, 2.0, -1.0, 2.0, 0.0],
                                            [3.0, 1.0, 2.5, -3.0, 0.25]], np.float32)),
          "logits values")
    check(s(lg.attrs["role"]) == "logits" and "layer" not in lg.attrs, "logits attributes")
    sc = caps["scalar/0"]
    check(sc.shape == () and sc[()] == np.float64(3.141592653589793), "scalar f64")
    check(s(sc.attrs["role"]) == "input", "scalar role")
    em = caps["empty/0"]
    check(em.shape == (0, 4) and s(em.attrs["dtype"]) == "bf16", "empty bf16 [0, 4]")
    check(s(em.attrs["role"]) == "kv" and int(em.attrs["layer"]) == 5, "empty attributes")
    seqs += [int(lg.attrs["seq"]), int(sc.attrs["seq"]), int(em.attrs["seq"])]

    check(sorted(caps["repeat"].keys()) == ["0", "1", "2"], "repeat occurrences")
    for occ in range(3):
        r = caps["repeat/%d" % occ]
        check(np.array_equal(r[()], np.array([occ, 10 * occ, 100 * occ], np.int32)),
              "repeat/%d values" % occ)
        check(int(r.attrs["step"]) == occ and r.attrs["step"].dtype == np.int64,
              "repeat/%d step" % occ)
        seqs.append(int(r.attrs["seq"]))
        check(int(r.attrs["time_ns"]) > 1.6e18, "repeat/%d time_ns" % occ)
    # seq: the capture order, dense from 0.
    check(seqs == list(range(len(seqs))), "seq order %r" % seqs)


if __name__ == "__main__":
    sys.exit(main())

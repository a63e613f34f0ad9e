"""The comparison kernels give the same report at every instruction-set level.

ULPPROF_ISA forces the level (x86-64-v4, x86-64-v3, baseline).  At each
level this CPU has:
- test_diff_numpy.py runs whole: every number of its report is recomputed
  there with numpy, for every dtype, with NaN payloads, infinities, -0,
  subnormals and zero crossings, so each level is checked on its own;
- a larger pair (many blocks of every float dtype: sparse ones, dense ones,
  distances past the 4-ULP bins, specials scattered through, logits rows
  longer than a block) gives byte-identical table, JSON and CSV reports.
A level the CPU lacks, and a name that is not a level, are refused with one
line and exit 2; `ulpprof --version` names the level in use.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffsnap as ds  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
HERE = os.path.dirname(os.path.abspath(__file__))
LEVELS = ["baseline", "x86-64-v3", "x86-64-v4"]
FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


def run(args, isa=None):
    env = dict(os.environ)
    env.pop("ULPPROF_ISA", None)
    if isa is not None:
        env["ULPPROF_ISA"] = isa
    return subprocess.run([ULPPROF] + args, capture_output=True, env=env)


def level_in_use(isa=None):
    p = run(["--version"], isa)
    lines = p.stdout.decode().splitlines()
    assert p.returncode == 0 and len(lines) == 2, p
    prefix = "comparison kernels: "
    assert lines[1].startswith(prefix), lines
    return lines[1][len(prefix):]


def perturbed(rng, dtype, n, share, spread):
    """Bits of a finite-looking tensor and a copy with `share` of them moved by
    up to `spread` ordered steps (sign crossings included), plus specials."""
    raw, size = ds.STORAGE[dtype]
    w = 8 * size
    mag_max = {"bf16": 0x7f7f, "f16": 0x7bff, "f32": 0x7f7fffff,
               "f8e4m3": 0x7e, "f8e5m2": 0x7b}[dtype]
    mag = rng.integers(0, mag_max // 2, size=n, dtype=np.int64)
    sign = rng.integers(0, 2, size=n, dtype=np.int64)
    o = np.where(sign == 1, -mag, mag)                    # ordered values
    move = rng.random(n) < share
    step = rng.integers(-spread, spread + 1, size=n, dtype=np.int64)
    ob = np.clip(np.where(move, o + step, o), -mag_max, mag_max)

    def bits(v):
        u = np.where(v < 0, (1 << (w - 1)) | -v, v)
        return u.astype(np.uint64).astype(raw)

    a, b = bits(o), bits(ob)
    # Specials scattered through: NaN, inf, -0, subnormals, on either side.
    nan, inf = {"bf16": (0x7fc1, 0x7f80), "f16": (0x7e01, 0x7c00),
                "f32": (0x7fc00001, 0x7f800000), "f8e4m3": (0x7f, 0x7f),
                "f8e5m2": (0x7e, 0x7c)}[dtype]
    neg0 = 1 << (w - 1)
    for k, (x, y) in enumerate([(nan, 0), (0, inf), (neg0, 0), (1, neg0 | 1),
                                (inf, inf | neg0), (nan, nan), (3, 2)]):
        at = rng.integers(0, n, size=5)
        a[at] = x
        b[at] = y
    return a, b


def make_pair(tmp):
    rng = np.random.default_rng(33)
    caps_a, caps_b = [], []
    cases = [(0.0005, 2), (0.02, 4), (0.3, 3), (0.05, 300), (0.9, 40000)]
    for dt in ["bf16", "f16", "f32", "f8e4m3", "f8e5m2"]:
        for k, (share, spread) in enumerate(cases):
            n = 3 * 1024 * 7 + 333                       # blocks and a tail
            spread = min(spread, 60) if dt.startswith("f8") else spread
            a, b = perturbed(rng, dt, n, share, spread)
            name = "model.layers.%d.%s" % (k, dt)
            caps_a.append(dict(name=name, bits=a,
                               dtype=dt, layer=k))
            caps_b.append(dict(name=name, bits=b, dtype=dt, layer=k))
    # Logits rows longer than a block, with a flip and ties.
    za = rng.standard_normal((4, 5000)).astype(np.float32)
    zb = za + (rng.standard_normal((4, 5000)) * 1e-3).astype(np.float32)
    za[0, 10], zb[0, 4000] = 9.0, 9.5
    za[1, 7] = za[1, 4500] = zb[1, 7] = zb[1, 4500] = 8.0
    caps_a.append(dict(name="lm_head", bits=za.view(np.uint32), dtype="f32", role="logits"))
    caps_b.append(dict(name="lm_head", bits=zb.view(np.uint32), dtype="f32", role="logits"))
    pa, pb = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
    ds.write_snapshot(pa, caps_a, label="a")
    ds.write_snapshot(pb, caps_b, label="b")
    return pa, pb


def main():
    best = level_in_use()
    check(best in LEVELS, "--version names a level: %r" % best)
    have = LEVELS[:LEVELS.index(best) + 1]
    print("levels here:", " ".join(have))
    for isa in have:
        check(level_in_use(isa) == isa, "ULPPROF_ISA=%s is the level in use" % isa)
    for bad in LEVELS[len(have):] + ["x86-64-v9", "avx2"]:
        p = run(["--version"], bad)
        err = p.stderr.decode()
        check(p.returncode == 2 and p.stdout == b"" and err.count("\n") == 1 and
              ("ULPPROF_ISA=%s" % bad) in err, "ULPPROF_ISA=%s refused: %r" % (bad, p))

    for isa in have:
        env = dict(os.environ, ULPPROF_ISA=isa)
        p = subprocess.run([sys.executable, os.path.join(HERE, "test_diff_numpy.py")], env=env,
                           capture_output=True, text=True)
        check(p.returncode == 0, "test_diff_numpy.py at %s: %s" % (isa, p.stdout[-2000:]))

    with tempfile.TemporaryDirectory(prefix="ulpdiff-isa-") as tmp:
        pa, pb = make_pair(tmp)
        ref = {}
        for isa in have:
            for fmt in ["table", "json", "csv"]:
                p = run(["diff", "--format", fmt, pa, pb], isa)
                check(p.returncode == 1, "%s %s exit %d: %r" % (isa, fmt, p.returncode, p.stderr))
                if fmt in ref:
                    check(p.stdout == ref[fmt], "%s report at %s differs from %s's" %
                          (fmt, isa, have[0]))
                else:
                    ref[fmt] = p.stdout
                    check(len(p.stdout) > 1000, "%s report is not empty" % fmt)

    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok: the same reports at %s" % ", ".join(have))


if __name__ == "__main__":
    main()

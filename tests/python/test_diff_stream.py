"""`ulpprof diff` streams its rows: the comparison hands them to
the report in batches (ulp_diff_stream, ulp_report_stream_*) and keeps only
those the summary points at, so that its memory does not grow with the
captures.  The report must be byte for byte the one written from a whole
result (ulp_diff_run, ulp_report_write: ULPPROF_DIFF_STREAM=0), whatever
the batch (ULPPROF_DIFF_BATCH=1, 2, 5 and the default) and where the rows
wait (memory, or a temporary file: ULPPROF_SPOOL_KB) -- in all four
formats, in colour, to --out, with --rows, --match (one selecting nothing:
the same error) and temperatures.

The pairs put what the summary gathers from all rows across batches: the
first divergence and the amplification's rows in later batches (the last
one moving on), NaN/inf mismatches, sign changes in more and in fewer than
5 captures, logits rows in two batches, shape and dtype mismatches,
captures only in A and only in B, names the table and Markdown escape or
cut, and captures with positions on one side (then one batch).  The
numbers themselves are checked against numpy elsewhere (test_diff_numpy,
test_diff_chunks): here, that streaming changes no byte.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import diffsnap as ds  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
rng = np.random.default_rng(1617)


def bf16(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint16)


def logits(rows, vocab):
    za = rng.standard_normal((rows, vocab)).astype(np.float32)
    zb = za.copy()
    top = za.argmax(axis=1)
    zb[0, (top[0] + 1) % vocab] = za[0, top[0]] + 1.0  # row 0 flips
    return za.view(np.uint32), zb.view(np.uint32)


def pair(signs, positions):
    """Captures of A and B: `signs` rows with a sign change; positions on one side."""
    a, b = [], []

    def add(name, xa, xb, dtype="bf16", only=None, **kw):
        if only != "b":
            a.append(dict(name=name, bits=xa, dtype=dtype, **kw))
        if only != "a":
            b.append(dict(name=name, bits=xb, dtype=dtype, **kw))

    for i in range(12):
        x = bf16((4, 8))
        y = x.copy()
        if i >= 3:  # diverges from layer 3 on, more each layer
            y.reshape(-1)[: i * 2] += np.uint16(i)
        if 4 <= i < 4 + signs:
            y.reshape(-1)[5] ^= np.uint16(0x8000)
        add("model.layers.%d.out" % i, x, y, layer=i)
        if i == 6:
            za, zb = logits(3, 50)
            add("lm_head", za, zb, "f32", role="logits")
        if i == 9:
            z = bf16((2, 4))
            w = z.copy()
            w[1, 2] = 0x7FC0  # NaN
            add("model.layers.9.attn`x|y\nz", z, w, layer=9)
            add("model.layers.9." + "very_long_name_" * 8, z, z, layer=9)
    za, zb = logits(2, 40)
    add("lm_head", za, zb, "f32", role="logits", occurrence=1)
    add("model.layers.12.out", bf16((4, 8)), bf16((4, 9)), layer=12)
    x = bf16((4, 8))
    a.append(dict(name="dt", bits=x, dtype="bf16"))
    b.append(dict(name="dt", bits=x, dtype="f16"))
    add("only_a", bf16((3,)), None, only="a")
    add("only_b", None, bf16((3,)), only="b")
    if positions:
        x = bf16((2, 8))
        a.append(dict(name="pos", bits=x, dtype="bf16", positions=[0, 1]))
        b.append(dict(name="pos", bits=x, dtype="bf16"))
    return a, b


def run(args, env_extra, tmp):
    out = os.path.join(tmp, "out.txt")
    env = dict(os.environ, **env_extra)
    env.pop("NO_COLOR", None)
    if "-o" in args:
        args = [out if x == "@OUT" else x for x in args]
        if os.path.exists(out):
            os.unlink(out)
    p = subprocess.run([ULPPROF, "diff"] + args, capture_output=True, env=env)
    body = open(out, "rb").read() if "-o" in args and os.path.exists(out) else None
    return p.returncode, p.stdout, p.stderr, body


def spool_full(tmp):
    """The temporary file cannot take the rows (a full /tmp; here a file
    size limit, which a pipe to stdout escapes): the report must still be
    the whole result's, exit 1, nothing on stderr -- the diff falls back to
    keeping the rows -- never exit 2 or a truncated --out file."""
    import resource
    import signal
    ca, cb = [], []
    for i in range(400):
        x = bf16((16,))
        y = x.copy()
        y[i % 16] ^= np.uint16(i % 3)
        ca.append(dict(name="model.layers.%d.mlp.out" % i, bits=x, dtype="bf16", layer=i))
        cb.append(dict(name="model.layers.%d.mlp.out" % i, bits=y, dtype="bf16", layer=i))
    pa, pb = os.path.join(tmp, "full-a.h5"), os.path.join(tmp, "full-b.h5")
    ds.write_snapshot(pa, ca)
    ds.write_snapshot(pb, cb)

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past it fail (EFBIG)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))

    fails = []
    for fmt in ("table", "markdown", "csv", "json"):
        env = dict(os.environ, ULPPROF_DIFF_STREAM="0")
        ref = subprocess.run([ULPPROF, "diff", "-f", fmt, pa, pb], capture_output=True, env=env)
        if ref.returncode != 1 or len(ref.stdout) < 4 * 8192:
            fails.append("%s: reference exit %d, %d bytes" % (fmt, ref.returncode, len(ref.stdout)))
        # The spool spills to the file at once (0), after a few rows (4 KiB),
        # or never (memory holds the rows).
        for batch, spool in (("1", "0"), ("64", "0"), (None, "0"), ("1", "4"), (None, None)):
            env = dict(os.environ)
            env.pop("ULPPROF_DIFF_STREAM", None)
            env.pop("ULPPROF_SPOOL_KB", None)
            if batch:
                env["ULPPROF_DIFF_BATCH"] = batch
            if spool:
                env["ULPPROF_SPOOL_KB"] = spool
            got = subprocess.run([ULPPROF, "diff", "-f", fmt, pa, pb], capture_output=True,
                                 env=env, preexec_fn=limit)
            if (got.returncode, got.stdout, got.stderr) != (ref.returncode, ref.stdout, ref.stderr):
                fails.append("%s batch %s spool %s KiB, temporary file full: exit %d, %s" % (
                    fmt, batch, spool, got.returncode,
                    got.stderr.decode(errors="replace").strip()))
    return fails


def main():
    tmp = tempfile.mkdtemp(prefix="ulpdiff-stream-")
    fails, n = [], 0
    try:
        fails += spool_full(tmp)
        for tag, signs, positions in (("signs6", 6, False), ("signs2", 2, False),
                                      ("positions", 3, True)):
            ca, cb = pair(signs, positions)
            pa, pb = os.path.join(tmp, tag + "-a.h5"), os.path.join(tmp, tag + "-b.h5")
            ds.write_snapshot(pa, ca)
            ds.write_snapshot(pb, cb)
            for args in ([], ["-f", "markdown"], ["-f", "csv"], ["-f", "json"],
                         ["--color", "always"], ["-f", "json", "-o", "@OUT"],
                         ["-o", "@OUT"], ["--rows", "head:2", "-f", "markdown"],
                         ["-m", "model.layers.*"], ["-m", "nomatch"], ["--rows", "100:200"], ["-t", "0.7", "-t", "2"],
                         ["-f", "markdown", "-t", "0.7"]):
                full = args + [pa, pb]
                ref = run(full, {"ULPPROF_DIFF_STREAM": "0"}, tmp)
                if ref[0] not in (1, 2):
                    fails.append("%s %s: exit %d" % (tag, args, ref[0]))
                # The spool in memory, in its file from the first row (0 KiB),
                # and spilled to it after a few batches (1 KiB).
                for batch, spool in (("1", None), ("2", "1"), ("5", "0"), (None, None)):
                    env = {"ULPPROF_DIFF_BATCH": batch} if batch else {}
                    if spool:
                        env["ULPPROF_SPOOL_KB"] = spool
                    got = run(full, env, tmp)
                    n += 1
                    if got != ref:
                        fails.append("%s %s batch %s spool %s KiB: differs from the whole "
                                     "result's report" % (tag, args, batch, spool))
        if fails:
            print("FAIL:\n  " + "\n  ".join(fails[:20]))
            return 1
        print("ok: %d streamed reports byte-identical to the whole result's" % n)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

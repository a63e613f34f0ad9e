"""Digest capture against an HF model's forward on CPU: what
ulpprof.torch.capture(mode="digest") adds to the forward, beside no capture
and mode="data" (the full tensors).

    tests/perf/bench_digest_torch.py [BUILD_DIR] [--rounds R] [--passes N]
        [--tokens T] [--hidden H] [--layers L] [--vocab V] [--threads K]
        [--sublayers] [--dir DIR]

A random Llama (HF transformers from .ci/pyenv, which this script
re-executes under when this interpreter lacks it; float32) runs N forward
passes of T tokens, three ways, interleaved round by round (the order
rotates, so a neighbour's load falls on every way alike):
  bare    the model alone;
  digest  under capture(model, FILE, mode="digest"): a 64-bit digest per
          (request, position) row of every capture, no tensor data;
  data    under capture(model, FILE) (mode="data", the default).
Each capturing way's clock stops after the file is closed.  Printed: per way
the median [min-max] wall and process CPU time (the writer thread's too),
then per round what digest and data add to bare, as the median [min-max]
of the round's ratio (way / bare - 1) -- a ratio measured within one round,
so that a loaded machine shifts both sides alike -- and the files' sizes.
Checked: the digest file holds /digests for every captured name and no
tensor data; exit 1 if not.  A benchmark, not a test: nothing passes or
fails on time.
"""
import atexit
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchbench as tb  # noqa: E402

ap = tb.parser()
ap.add_argument("--rounds", type=int, default=9)
ap.add_argument("--passes", type=int, default=10)
ap.add_argument("--tokens", type=int, default=128)
ap.add_argument("--hidden", type=int, default=512)
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--vocab", type=int, default=8192)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--sublayers", action="store_true", help="also capture attention and MLP")
ap.add_argument("--dir", default=None)
args = ap.parse_args()
tb.setup(args.build, args.threads)
import h5py  # noqa: E402
import ulpprof.torch  # noqa: E402

model = tb.llama(args.vocab, args.hidden, 3 * args.hidden, args.layers, 8, 2,
                 max(64, args.tokens))
ids = tb.token_ids(args.vocab, args.tokens)
tmp = tempfile.mkdtemp(prefix="bench_digest.", dir=args.dir)
atexit.register(shutil.rmtree, tmp, True)


def passes():
    tb.forwards(model, ids, args.passes)


def way_bare(r):
    passes()


def captured(mode):
    def way(r):
        path = os.path.join(tmp, "%s.%d.h5" % (mode, r))
        with ulpprof.torch.capture(model, path, label="bench", mode=mode,
                                   sublayers=args.sublayers):
            passes()
        return path
    return way


def check_digest(path):
    with h5py.File(path, "r") as f:
        names = set(f["digests"].keys()) if "digests" in f else set()
        data = [n for n in f["captures"].keys() if len(f["captures"][n])] if "captures" in f \
            else []
    bad = []
    if not names:
        bad.append("%s: no /digests" % path)
    if [n for n in data if n not in ("tokens", "input_ids")]:
        bad.append("%s: tensor data in digest mode: %s" % (path, data))
    return bad, len(names)


ways = [("bare", way_bare), ("digest", captured("digest")), ("data", captured("data"))]
for name, fn in ways:  # warm up
    p = fn(-1)
    if p:
        os.unlink(p)
fails, sizes, nnames = [], {}, 0


def after_way(r, name, p):
    global nnames
    if p:
        sizes[name] = os.path.getsize(p)
        if name == "digest":
            bad, nnames = check_digest(p)
            fails.extend(bad)
        os.unlink(p)


wall, cpu, _ = tb.rounds(ways, args.rounds, after_way=after_way)
med = tb.spread


print("bench_digest_torch: Llama hidden %d, %d layers, vocab %d, %d tokens, %d passes a round, "
      "%d rounds, %d thread(s), %s; %d captured names" % (
          args.hidden, args.layers, args.vocab, args.tokens, args.passes, args.rounds,
          args.threads, "sublayers" if args.sublayers else "layer outputs", nnames))
for w, _ in ways:
    print("  %-7s wall %s   cpu %s" % (w, med(wall[w], " s"), med(cpu[w], " s")))
for w in ("digest", "data"):
    for clock, t in (("wall", wall), ("cpu", cpu)):
        ratios = [100.0 * (a / b - 1.0) for a, b in zip(t[w], t["bare"])]
        print("  %-6s adds %6.2f%% [%.2f..%.2f] to the forward (%s, per-round ratio)" % (
            w, statistics.median(ratios), min(ratios), max(ratios), clock))
print("  file size: digest %d B, data %d B (%.0fx smaller)" % (
    sizes["digest"], sizes["data"], sizes["data"] / max(1, sizes["digest"])))
for f in fails:
    print("FAIL: " + f)
sys.exit(1 if fails else 0)

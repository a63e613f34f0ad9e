"""Digest capture against an HF model's forward on CPU: what
ulpprof.torch.capture(mode="digest") adds to each forward pass, beside no
capture and mode="data" (the full tensors).

    tests/perf/bench_digest_torch.py [BUILD_DIR] [--passes N] [--block B]
        [--tokens T] [--hidden H] [--layers L] [--vocab V] [--threads K]
        [--sublayers] [--decode] [--dir DIR]

A random Llama (HF transformers from .ci/pyenv, which this script
re-executes under when this interpreter lacks it; float32) runs under two
captures at once: capture(model, FILE, mode="digest") (a 64-bit digest
per (request, position) row of every capture, no tensor) and
capture(model, FILE2) (mode="data", the default: the full tensors).
A way pauses the captures it does not use (Capture.paused(): no hooks,
the model's own forward), so every way runs on the very same weights: a
copy of the model sits at other addresses, and a pass right after some on
another copy's weights ran up to 20% slower here for three or four
passes, far more than the effect measured.  The ways:
  bare, bare2  both captures paused (bare2 is the A/A control: what a way
               "adds" when it adds nothing, i.e. the noise floor);
  digest       the digest capture on, the data one paused;
  data         the data capture on, the digest one paused;
  digest_py    (--python-lane) a third capture, digest mode with the
               hooks in Python alone (ULPPROF_TORCH_HOOK=0): what the
               compiled hook (capture/torch/hook.c) saves.
Each pass is a forward of the TOKENS prompt, or with --decode one decode
step on the way's own KV cache (positions TOKENS, TOKENS + 1, ...), fed
the token its previous step emitted, as generate() runs it.
The captures stay open for the whole run, as in a real one, and the N
passes a way run in blocks: each way in turn runs B passes in a row, in
an order drawn anew every round (a way that always ran after the same
other one would inherit its leftovers: the A/A control read -1.2% when
the order only rotated).  In a row, because a captured pass shares the machine with the
writer thread's work on the pass before, as under a real capture; the
writers are flushed before each block, outside the timing, so that no way
pays for another's.  Each pass is timed alone: wall clock and the calling
thread's CPU time (the forward and the capture hooks; the writer thread's
own CPU is read from /proc at the end and given per pass).  Printed per
way: the median and minimum per pass; what it adds to bare as the median
of the per-pass ratios (way / bare - 1, bare's pass of the same round and
place in the block), in ms, and as the ratio of the minima (noise only
ever adds time, so the minima are the least disturbed figures).  Then,
from N / 4 more passes of each way with the capture calls timed
(perf_counter; apart, so that its clock reads are in no pass above): the
time a pass spends in Capture.capture(), the hooks' quick lane and the
compiled hooks (which time themselves).  The opening and closing of each
file, once per run, apart; the files' sizes.
Checked: the digest file holds /digests for every captured name and no
tensor data, and every way's logits are bitwise bare's (a capture must not
change what it measures); exit 1 if not.  A benchmark, not a test:
nothing passes or fails on time.
"""
import argparse
import atexit
import contextlib
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchbench  # noqa: E402

ap = torchbench.parser()
ap.add_argument("--passes", type=int, default=60)
ap.add_argument("--rounds", type=int, default=None, help=argparse.SUPPRESS)  # the old form
ap.add_argument("--block", type=int, default=4, help="passes of one way in a row")
ap.add_argument("--tokens", type=int, default=128)
ap.add_argument("--hidden", type=int, default=512)
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--vocab", type=int, default=8192)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--sublayers", action="store_true", help="also capture attention and MLP")
ap.add_argument("--dir", default=None)
ap.add_argument("--decode", action="store_true",
                help="each pass is one decode step on the KV cache of a TOKENS prefill")
ap.add_argument("--python-lane", action="store_true",
                help="add the way digest_py: digest mode with the hooks in Python alone "
                     "(ULPPROF_TORCH_HOOK=0), beside the compiled hook's")
args = ap.parse_args()
args.passes = args.rounds or args.passes
args.passes = -(-args.passes // args.block) * args.block  # whole blocks
torch, transformers = torchbench.setup(args.build, args.threads)
import h5py  # noqa: E402
import ulpprof.torch  # noqa: E402

hook_passes = max(1, args.passes // 4)
model = torchbench.llama(args.vocab, args.hidden, 3 * args.hidden, args.layers, 8, 2,
                         max(64, args.tokens + (args.passes + hook_passes + 2
                                                if args.decode else 0)))
ids = torchbench.token_ids(args.vocab, args.tokens)
tmp = tempfile.mkdtemp(prefix="bench_digest.", dir=args.dir)
atexit.register(shutil.rmtree, tmp, True)


def tids():
    return set(os.listdir("/proc/self/task"))


def task_cpu(tid):
    """utime + stime of one thread of this process, in seconds."""
    with open("/proc/self/task/%s/stat" % tid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


in_capture = {}  # Capture instance -> seconds its capture() and _quick() calls took
_capture, _quick = ulpprof.torch.Capture.capture, ulpprof.torch.Capture._quick


def timed(f):
    def timed_f(self, *a, **k):
        t0 = time.perf_counter()
        try:
            return f(self, *a, **k)
        finally:
            in_capture[id(self)] = in_capture.get(id(self), 0.0) + time.perf_counter() - t0
    return timed_f


caps, writers, setup = {}, {}, {}
for mode in ("digest", "data") + (("digest_py",) if args.python_lane else ()):
    before = tids()
    w0 = time.perf_counter()
    os.environ["ULPPROF_TORCH_HOOK"] = "0" if mode == "digest_py" else "1"
    caps[mode] = ulpprof.torch.capture(model, os.path.join(tmp, mode + ".h5"), label="bench",
                                       mode=mode.split("_")[0], sublayers=args.sublayers)
    setup[mode] = [time.perf_counter() - w0]
    writers[mode] = sorted(tids() - before)
os.environ.pop("ULPPROF_TORCH_HOOK")
compiled = sum(type(h).__name__ == "Hook" for m in model.modules()
               for h in m._forward_hooks.values())
ways = {"bare": None, "bare2": None, "digest": "digest", "data": "data"}  # its capture
if args.python_lane:
    ways["digest_py"] = "digest_py"
names = list(ways)
wall = {w: [] for w in names}
cpu = {w: [] for w in names}
logits = {}
cache = {}  # --decode: way -> (its KV cache, the token it feeds next)
fed = {w: [] for w in names}


@contextlib.contextmanager
def way(w):
    """The model as way w runs it: the captures it does not use paused."""
    with contextlib.ExitStack() as paused:
        for mode, c in caps.items():
            if mode != ways[w]:
                paused.enter_context(c.paused())
        yield


def one_pass(w):
    """One forward of way w (inside way(w)): the prompt again, or
    (--decode) the next decode step on the way's own KV cache, fed the
    token its last step emitted."""
    if not args.decode:
        return model(ids)
    pkv, nxt = cache[w]
    out = model(nxt, past_key_values=pkv, use_cache=True)
    cache[w] = (out.past_key_values, out.logits[:, -1:].argmax(-1))
    fed[w].append(int(nxt))
    return out


with torch.no_grad():
    for w in names:  # warm up, and the logits every way must give
        with way(w):
            out = model(ids, use_cache=args.decode)
        logits[w] = out.logits.clone()
        if args.decode:
            cache[w] = (out.past_key_values, out.logits[:, -1:].argmax(-1))
    for c in caps.values():
        c.flush()  # the first pass's file setup in the writer, apart
    writer0 = {m: sum(task_cpu(t) for t in writers[m]) for m in caps}
    order = random.Random(0)
    for r in range(args.passes // args.block):
        for w in order.sample(names, len(names)):
            for c in caps.values():
                c.flush()  # no writer work of another way's block in this one
            with way(w):
                for p in range(args.block):
                    w0, c0 = time.perf_counter(), time.thread_time()
                    one_pass(w)
                    cpu[w].append(time.thread_time() - c0)
                    wall[w].append(time.perf_counter() - w0)
    for c in caps.values():
        c.flush()
    writer_cpu = {m: sum(task_cpu(t) for t in writers[m]) - writer0[m] for m in caps}
    # capture() timed apart: the wrapper's clock reads are in no pass above.
    # The compiled hooks time themselves (capture/torch/hook.c: `ns`).
    ulpprof.torch.Capture.capture, ulpprof.torch.Capture._quick = timed(_capture), timed(_quick)
    for w in names:
        with way(w):
            hooks = [h for m in model.modules() for h in m._forward_hooks.values()
                     if type(h).__name__ == "Hook"]
            ns0 = sum(h.ns for h in hooks)
            for p in range(hook_passes):
                one_pass(w)
            if ways[w] is not None:
                in_capture[id(caps[ways[w]])] = in_capture.get(id(caps[ways[w]]), 0.0) + \
                    1e-9 * (sum(h.ns for h in hooks) - ns0)
    ulpprof.torch.Capture.capture, ulpprof.torch.Capture._quick = _capture, _quick
    if args.decode:  # the last step's logits: every way must give bare's
        for w in names:
            with way(w):
                logits[w] = model(cache[w][1], past_key_values=cache[w][0]).logits.clone()
for mode, c in caps.items():
    c.flush()
    w0 = time.perf_counter()
    c.close()
    setup[mode].append(time.perf_counter() - w0)


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


fails, nnames = check_digest(os.path.join(tmp, "digest.h5"))
if args.python_lane:
    fails += check_digest(os.path.join(tmp, "digest_py.h5"))[0]
for w in names:
    if not torch.equal(logits[w], logits["bare"]):
        fails.append("%s: its logits are not bitwise bare's" % w)
    if fed[w] != fed["bare"]:
        fails.append("%s: its decode fed other tokens than bare's" % w)
sizes = {m: os.path.getsize(os.path.join(tmp, m + ".h5")) for m in caps}


def ms(xs):
    return "%7.2f ms median, %7.2f min" % (1e3 * statistics.median(xs), 1e3 * min(xs))


print("bench_digest_torch: Llama hidden %d, %d layers, vocab %d, %s, %d passes a way "
      "(in blocks of %d), %d thread(s), %s; %d captured names (%d compiled hooks a capture); "
      "load %s" % (
          args.hidden, args.layers, args.vocab,
          "1-token decode steps after a %d-token prefill" % args.tokens if args.decode
          else "%d tokens" % args.tokens, args.passes, args.block, args.threads,
          "sublayers" if args.sublayers else "layer outputs", nnames,
          compiled // 2,  # digest's and data's; digest_py has none
          " ".join(open("/proc/loadavg").read().split()[:3])))
for w in names:
    print("  %-7s wall %s   cpu %s" % (w, ms(wall[w]), ms(cpu[w])))
b = "bare"
for w in names[1:]:
    for clock, t in (("wall", wall), ("cpu", cpu)):
        r = [100.0 * (x / y - 1.0) for x, y in zip(t[w], t[b])]
        d = [1e3 * (x - y) for x, y in zip(t[w], t[b])]
        print("  %-6s adds %6.2f%% (median of per-pass ratios, quartiles %.2f..%.2f; %.3f ms), "
              "%6.2f%% (ratio of minima) (%s)" % (
                  w, statistics.median(r), *statistics.quantiles(r, n=4)[::2],
                  statistics.median(d), 100.0 * (min(t[w]) / min(t[b]) - 1.0), clock))
for m in caps:
    hooks = in_capture.get(id(caps[m]), 0.0) / hook_passes
    print("  %-6s capture() calls %.3f ms a pass (%.2f%% of bare's median wall; %d timed "
          "passes apart; the compiled hooks' time included), on the forward's thread" % (
              m, 1e3 * hooks, 100.0 * hooks / statistics.median(wall["bare"]), hook_passes))
    print("  %-6s writer thread %.2f ms a pass (%.2f%% of bare's median cpu); open %.1f ms, "
          "close %.1f ms once a run" % (
              m, 1e3 * writer_cpu[m] / args.passes,
              100.0 * writer_cpu[m] / args.passes / statistics.median(cpu["bare"]),
              1e3 * setup[m][0], 1e3 * setup[m][1]))
print("  file size: digest %d B, data %d B (%.0fx smaller)" % (
    sizes["digest"], sizes["data"], sizes["data"] / max(1, sizes["digest"])))
for f in fails:
    print("FAIL: " + f)
sys.exit(1 if fails else 0)

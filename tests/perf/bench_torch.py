"""The PyTorch helper against torch.save: what ulpprof.torch adds
to a small real model's forward passes, beside hooks that torch.save the
same tensors.

    /usr/bin/python3 tests/perf/bench_torch.py [BUILD_DIR] [--rounds R]
        [--passes N] [--tokens T] [--hidden H] [--layers L] [--vocab V]
        [--threads K] [--dir DIR]

A random Qwen2 (HF transformers from .ci/pyenv, which this script re-executes
under when /usr/bin/python3 lacks it; CPU, float32) runs N forward passes of
T tokens, three ways, interleaved round by round (the order rotates):
  bare     the model alone;
  ulpprof  under ulpprof.torch.capture(model, FILE) -- the snapshot closed,
           so every capture is in the file, before the clock stops;
  save     forward hooks on the same modules that torch.save() each
           captured tensor to its own file (name.step.pt) in DIR;
  save1    the same hooks keep the tensors in a dict, and one torch.save()
           writes it after the last pass (what a careful user would do).
Printed: per way, the median [min-max] wall time and process CPU time
(every thread: the writer's too); then the median [min-max] of what each
way adds to bare per round, and ulpprof's addition over save's and save1's
(the ratio of the medians, and its range over the rounds).  Checked every round: the
snapshot holds N x captures with the right names and shapes, and in the
last round every tensor of the snapshot equals, bit for bit, the tensor
torch.save wrote for it (h5py, torch.load).  Exit 1 on a mismatch.
A benchmark, not a test: nothing passes or fails on time.
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
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--passes", type=int, default=20)
ap.add_argument("--tokens", type=int, default=64)
ap.add_argument("--hidden", type=int, default=256)
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--vocab", type=int, default=8192)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--dir", default=None)
args = ap.parse_args()
torch, _ = tb.setup(args.build, args.threads)
import h5py  # noqa: E402
import ulpprof.torch  # noqa: E402
from ulpprof import _layout  # noqa: E402

model = tb.qwen2(args.vocab, args.hidden, 3 * args.hidden, args.layers, 8, 2)
ids = tb.token_ids(args.vocab, args.tokens)
specs = _layout.discover(model)
modules = dict(model.named_modules())
tmp = tempfile.mkdtemp(prefix="bench_torch.", dir=args.dir)
atexit.register(shutil.rmtree, tmp, True)  # whatever happens


def forward_passes():
    tb.forwards(model, ids, args.passes)


def way_bare(r):
    forward_passes()


def way_ulpprof(r):
    path = os.path.join(tmp, "cap.%d.h5" % r)
    with ulpprof.torch.capture(model, path, label="bench"):
        forward_passes()
    return path


def hooked_passes(take):
    """The forward passes with a hook on every captured module that calls
    take(name, pass, tensor) with its output, as the user's hooks would."""
    step = [0]
    handles = []

    def hook_for(name):
        def hook(module, inputs, output):
            t = output[0] if isinstance(output, (tuple, list)) else output
            if not torch.is_tensor(t):
                t = getattr(output, "logits", None)
            take(name, step[0], t.detach())
        return hook

    for s in specs:
        handles.append(modules[s.path].register_forward_hook(hook_for(s.name)))
    try:
        with torch.no_grad():
            for i in range(args.passes):
                step[0] = i
                model(ids)
    finally:
        for h in handles:
            h.remove()


def way_save(r):
    out = os.path.join(tmp, "save.%d" % r)
    os.mkdir(out)
    hooked_passes(lambda name, i, t: torch.save(t, os.path.join(out, "%s.%d.pt" % (name, i))))
    return out


def way_save_once(r):
    """What a careful user may do instead: keep the tensors, one torch.save at the end."""
    out = os.path.join(tmp, "once.%d.pt" % r)
    kept = {}
    hooked_passes(lambda name, i, t: kept.__setitem__("%s.%d" % (name, i), t))
    torch.save(kept, out)
    return out


def check_snapshot(path, saved):
    """The snapshot's captures: names, counts, shapes, and (saved given) bits."""
    bad = []
    with h5py.File(path, "r") as f:
        caps = f["captures"]
        names = sorted(k for k in caps.keys() if k != "input_ids")  # the helper's token ids
        want = sorted(s.name for s in specs)
        if names != want:
            bad.append("captures %s, expected %s" % (names, want))
            return bad
        for s in specs:
            g = caps[s.name]
            if len(g) != args.passes:
                bad.append("%s: %d occurrences, expected %d" % (s.name, len(g), args.passes))
                continue
            if saved is None:
                continue
            for i in range(args.passes):
                ds = g[str(i)]
                ref = torch.load(os.path.join(saved, "%s.%d.pt" % (s.name, i)))
                ref = ref.contiguous().numpy()
                got = ds[()]
                if got.shape != ref.shape or got.tobytes() != ref.tobytes():
                    bad.append("%s occurrence %d: shape %s vs %s or bytes differ"
                               % (s.name, i, got.shape, ref.shape))
    return bad


ways = [("bare", way_bare), ("ulpprof", way_ulpprof), ("save", way_save),
        ("save1", way_save_once)]
fails = []
# Warm up: the allocator, the file system, the library loaded.
shutil.rmtree(way_save(-1))
os.unlink(way_save_once(-1))
os.unlink(way_ulpprof(-1))


def after_round(r, results):
    last = r == args.rounds - 1
    fails.extend(check_snapshot(results["ulpprof"], results["save"] if last else None))
    if not last:  # new files every round, the old ones deleted outside the clock
        os.unlink(results["ulpprof"])
        os.unlink(results["save1"])
        shutil.rmtree(results["save"])


wall, cpu, results = tb.rounds(ways, args.rounds, after_round=after_round)
captured = sum(1 for _ in specs) * args.passes
nbytes = 0
with h5py.File(results["ulpprof"], "r") as f:
    for s in specs:
        nbytes += f["captures"][s.name]["0"].nbytes * args.passes
shutil.rmtree(tmp, ignore_errors=True)
if fails:
    for m in fails[:10]:
        print("bench_torch: MISMATCH: " + m)
    sys.exit(1)


rng = tb.spread


print("bench_torch: Qwen2 hidden %d, %d layers, vocab %d, %d tokens, f32, %d thread(s); "
      "%d passes x %d captures = %d captures, %.1f MiB per round; %d rounds, load %s"
      % (args.hidden, args.layers, args.vocab, args.tokens, args.threads, args.passes,
         len(specs), captured, nbytes / 2**20, args.rounds,
         " ".join("%.1f" % x for x in os.getloadavg())))
for name, _ in ways:
    print("  %-8s wall %s s   CPU %s s" % (name, rng(wall[name]), rng(cpu[name])))
for what, v in (("wall", wall), ("CPU", cpu)):
    ours = [v["ulpprof"][i] - v["bare"][i] for i in range(args.rounds)]
    print("  %-4s added by ulpprof: %s s, %.0f us per capture"
          % (what, rng(ours), 1e6 * statistics.median(ours) / captured))
    for other in ("save", "save1"):
        save = [v[other][i] - v["bare"][i] for i in range(args.rounds)]
        med = statistics.median(save)
        # Per round where the other way added time at all (on a busy
        # machine a round of it can come out faster than bare).
        ratio = [o / s for o, s in zip(ours, save) if s > 0]
        print("  %-4s added by %-5s: %s s, %.0f us per capture; ulpprof/%s %s, per round %s"
              % (what, other, rng(save), 1e6 * med / captured, other,
                 "%.2f" % (statistics.median(ours) / med) if med > 0 else "-",
                 rng(ratio) if ratio else "-"))
print("  checked: every round's snapshot holds %d captures of the right names; the last "
      "round's equal torch.save's bit for bit" % captured)

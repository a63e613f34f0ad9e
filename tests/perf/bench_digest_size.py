"""How much smaller a digest-mode file is than a data-mode one, on the flow
a thousand-run user runs: greedy model.generate() of a small random HF
Llama (float32, tests/perf/torchbench.py) under
ulpprof.torch.capture(model, FILE, mode=MODE, tokens=True), one file per
mode and per generation length, written as a run writes it (flushed only
at the close; a digest file is then rewritten tight, FORMAT.md "A digest
file's close", unless ULPPROF_COMPACT=0).  Printed per length: each
file's size, the ratio, and the digest file's bytes per generated token;
then what its datasets and HDF5's own metadata take (h5py storage sizes;
the rest is object headers, B-tree nodes, heaps and, in the writer's
file, the unused end of its last 32 KiB metadata block,
docs/performance.md "File size").

    tests/perf/bench_digest_size.py [BUILD_DIR] [--tokens N,N,...]
        [--prompt P] [--hidden H] [--layers L] [--vocab V] [--sublayers]
        [--keep DIR]   (the files stay in DIR, to look at)

The data grows with the model's width and depth, the digests with neither:
`--hidden 2048` (a few minutes on one CPU thread; `--layers 2` for a quick
look, with fewer names) shows what users' real widths give.

Checked: both modes generate the same tokens (a capture must not change
what it measures), the digest file holds no tensor in /captures and keeps
every generated token; exit 1 if not.  A benchmark, not a test: nothing
passes or fails on size.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torchbench  # noqa: E402

ap = torchbench.parser()
ap.add_argument("--tokens", default="32,128,512")
ap.add_argument("--prompt", type=int, default=16)
ap.add_argument("--hidden", type=int, default=512)
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--vocab", type=int, default=8192)
ap.add_argument("--sublayers", action="store_true", help="also capture attention and MLP")
ap.add_argument("--keep", default=None, help="write the files there and keep them")
args = ap.parse_args()
torch, transformers = torchbench.setup(args.build, 1)
import h5py  # noqa: E402
import ulpprof.torch  # noqa: E402

sys.path.insert(0, os.path.join(torchbench.SRC, "tests", "python"))
import digests_h5  # noqa: E402

lengths = [int(t) for t in args.tokens.split(",")]
model = torchbench.llama(args.vocab, args.hidden, 3 * args.hidden, args.layers, 8, 2,
                         args.prompt + max(lengths) + 8)
ids = torchbench.token_ids(args.vocab, args.prompt)
tmp = args.keep or tempfile.mkdtemp(prefix="bench_digest_size.")
os.makedirs(tmp, exist_ok=True)
fails = []


def generate(path, mode, n):
    with ulpprof.torch.capture(model, path, label="size", mode=mode, tokens=True,
                               sublayers=args.sublayers):
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
    return out[0, args.prompt:].tolist()


def storage(path):
    """{dataset's last name: bytes stored}, the object headers' bytes (of the
    linked objects), the produced tokens kept."""
    got = {}
    with h5py.File(path, "r") as f:
        heads = [h5py.h5o.get_info(f["/"].id).hdr.space.total]

        def visit(name, obj):
            heads.append(h5py.h5o.get_info(obj.id).hdr.space.total)
            if isinstance(obj, h5py.Dataset):
                # packed-1: digests/<name>/<table>; packed-2: digests/<table>, value/<name>
                k = ("value" if name.startswith("digests/value/") else name.split("/")[-1]) \
                    if name.startswith("digests/") else name.split("/")[0]
                got[k] = got.get(k, 0) + obj.id.get_storage_size()
        f.visititems(visit)
        data = [n for n in f["captures"]] if "captures" in f else []
        kept = digests_h5.captures(f, "tokens")
        rows = sum(int(c.shape[0]) for c in kept)
    return got, sum(heads), data, rows


print("bench_digest_size: Llama hidden %d, %d layers, vocab %d, a %d-token prompt, greedy "
      "generate(), tokens=True%s" % (args.hidden, args.layers, args.vocab, args.prompt,
                                     ", sublayers" if args.sublayers else ""))
for n in lengths:
    paths = {m: os.path.join(tmp, "%s-%d.h5" % (m, n)) for m in ("digest", "data")}
    toks = {m: generate(paths[m], m, n) for m in paths}
    if toks["digest"] != toks["data"]:
        fails.append("%d tokens: digest mode generated other tokens" % n)
    size = {m: os.path.getsize(p) for m, p in paths.items()}
    got, heads, data, rows = storage(paths["digest"])
    if data:
        fails.append("%d tokens: digest file's /captures holds %s" % (n, data))
    if rows != n:
        fails.append("%d tokens: the digest file keeps %d produced tokens" % (n, rows))
    raw = sum(got.values())
    print("  %4d tokens: digest %8d B, data %10d B: %6.1fx smaller; %5.0f B a token"
          % (n, size["digest"], size["data"], size["data"] / size["digest"],
             size["digest"] / n))
    print("              digest datasets %d B (%s), HDF5 metadata %d B (object headers %d B; "
          "the rest B-trees, heaps, the unused end of a metadata block)"
          % (raw, ", ".join("%s %d" % kv for kv in sorted(got.items(), key=lambda t: -t[1])),
             size["digest"] - raw, heads))
if not args.keep:
    shutil.rmtree(tmp)
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)

"""ulpprof.torch never changes what it measures, and writes files that
`ulpprof diff` pairs whatever the model does: real HF transformers models
(GPT-2, Llama, Qwen2, Mixtral; small random configs, CPU, no download).
  1. forward() and generate() (left-padded batch, attention_mask) under
     capture give the tokens and logits of the same calls without it, bit
     for bit; the model's signature stays visible; generate()'s captures
     carry the positions HF computes (pads not counted);
  2. a second capture() on a closed capture's file is refused, the first
     file kept;
  3. cap.request(): several prompts in one capture() pair with another run
     that made them in another order;
  4. two threads running forward at once under one capture(): each capture
     carries its own call's positions and requests;
  5. tokens computed twice (a warm-up, generate(use_cache=False), a module
     run twice per forward): `diff` pairs the files (exit 0, never 2);
  6. a layer list that repeats one layer: each call is its own layer, bit
     for bit against output_hidden_states.
Run under .ci/pyenv's interpreter (transformers 4.44) when this one lacks
transformers, and by test_hf_invariance_new.py under .ci/pyenv-new's
(the newest torch and transformers)."""
import inspect
import json
import os
import subprocess
import sys
import tempfile
import threading

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("transformers")
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture",
                                                     "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
import ulpprof.torch  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
print("transformers %s, torch %s" % (transformers.__version__, torch.__version__))
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def raw(ds):
    width = ds.id.get_type().get_size()
    out = np.empty(ds.shape, dtype={1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[width])
    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out, mtype=ds.id.get_type())
    return out


def bits(t):
    return t.detach().contiguous().view(torch.int32).numpy().view(np.uint32)


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(bits(a), bits(b))


def small(arch, layers=2):
    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=layers, n_head=4,
                                      n_positions=64, attn_implementation="eager")
        return transformers.GPT2LMHeadModel(cfg).eval()
    kw = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              attn_implementation="eager")
    if arch == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kw)).eval()
    if arch == "mixtral":
        cfg = transformers.MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **kw)
        return transformers.MixtralForCausalLM(cfg).eval()
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw)).eval()


def attrs(f, name, occ=0):
    return f["captures"][name][str(occ)].attrs


def diff(a, b):
    """(exit status, {name: JSON row}, stderr) of `ulpprof diff --format json`."""
    p = subprocess.run([ULPPROF, "diff", "--format", "json", a, b], capture_output=True,
                       text=True, timeout=300)
    rows = {}
    if p.returncode in (0, 1):
        for r in json.loads(p.stdout)["rows"]:
            rows[r["name"]] = r
    return p.returncode, rows, p.stderr.strip()


def generate(model, ids, mask, **kw):
    return model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False,
                          pad_token_id=0, return_dict_in_generate=True, output_logits=True,
                          **kw)


ids = torch.randint(1, 96, (2, 7), generator=torch.Generator().manual_seed(3))
mask = torch.ones(2, 7, dtype=torch.long)
mask[1, :3] = 0  # row 1 is left-padded: 4 tokens
ARCHS = ("gpt2", "llama", "qwen2", "mixtral")
model = small("qwen2")  # sections 2-5


def section1():
    # 1. A run under capture is the run without it, bit for bit.
    for arch in ARCHS:
        model = small(arch)
        sig = inspect.signature(model.forward)
        want_fwd = model(ids, attention_mask=mask).logits
        want_gen = generate(model, ids, mask)
        try:
            with ulpprof.torch.capture(model, P("fwd-" + arch)) as cap:
                check(inspect.signature(model.forward) == sig,
                      "%s: the signature under capture is %s, not %s"
                      % (arch, inspect.signature(model.forward), sig))
                got_fwd = model(ids, attention_mask=mask).logits
            with ulpprof.torch.capture(model, P("gen-" + arch)):
                got_gen = generate(model, ids, mask)
        except Exception as e:  # noqa: BLE001
            fails.append("%s: under capture: %s: %s" % (arch, type(e).__name__, e))
            continue
        check(same(got_fwd, want_fwd), "%s: forward logits move under capture" % arch)
        check(torch.equal(got_gen.sequences, want_gen.sequences),
              "%s: generate() tokens %s under capture, %s without"
              % (arch, got_gen.sequences.tolist(), want_gen.sequences.tolist()))
        check(len(got_gen.logits) == len(want_gen.logits)
              and all(same(a, b) for a, b in zip(got_gen.logits, want_gen.logits)),
              "%s: generate() logits move under capture" % arch)
        layer = "transformer.h.1" if arch == "gpt2" else "model.layers.1"
        with h5py.File(P("gen-" + arch), "r") as f:
            occ = f["captures"][layer]
            got = [occ[str(i)].attrs["positions"].tolist() for i in range(len(occ))]
            # Pads are left out; row 1's 4 tokens are positions 0-3, as HF counts them.
            want = [list(range(7)) + list(range(4))] + [[[7 + k], [4 + k]] for k in range(3)]
            check(got == want, "%s: generate() positions %s, want %s" % (arch, got, want))


def section2():
    want11 = model(ids[:1]).logits
    # 2. A second capture() on the same path: refused, the first file kept.
    with ulpprof.torch.capture(model, P("once")):
        model(ids[:1])
    try:
        with ulpprof.torch.capture(model, P("once")):
            model(ids[1:])
        fails.append("a second capture() on one path was not refused")
    except ulpprof.torch.CaptureError as e:
        check("earlier capture()" in str(e), str(e))
    check("forward" not in model.__dict__ and not model.lm_head._forward_hooks,
          "the refused capture() left its hooks")
    with h5py.File(P("once"), "r") as f:
        check(len(f["captures"]["lm_head"]) == 1
              and np.array_equal(raw(f["captures"]["lm_head"]["0"]), bits(want11[:1])),
              "the first capture's file was replaced")


def section3():
    # 3. Several prompts in one capture(), kept apart by cap.request().
    prompts = [ids[:1, :5], ids[1:, :7], ids[:1, 2:]]
    for name, order in (("req-a", (0, 1, 2)), ("req-b", (2, 0, 1))):
        with ulpprof.torch.capture(model, P(name)) as cap:
            for i in order:
                with cap.request(i):
                    model(prompts[i])
    st, rows, err = diff(P("req-a"), P("req-b"))
    check(st == 0, "diff of prompts in two orders: exit %d %s" % (st, err))
    if st == 0:
        r = rows["lm_head"]
        check(r["positions_compared"] == 5 + 7 + 5 and r["positions_only_in_a"] == 0,
              "request pairing: %s" % r)
    with h5py.File(P("req-b"), "r") as f:
        check(attrs(f, "lm_head", 0)["requests"].tolist() == [[2] * 5], "request ids")
    with ulpprof.torch.capture(model, P("req-list")) as cap, cap.request([40, 41]):
        model(ids[:, :3])
    with h5py.File(P("req-list"), "r") as f:
        check(attrs(f, "lm_head")["requests"].tolist() == [[40] * 3, [41] * 3],
              "request list %s" % attrs(f, "lm_head")["requests"].tolist())


def section4():
    # 4. Two threads in forward at once: both are inside (the barriers hold
    #    them) while every layer is captured.  With cap.request() per thread,
    #    and without (positions still each call's own).
    lens = {10: 4, 20: 6}
    ref = {r: model(ids[:1, :n]) for r, n in lens.items()}
    for tagged in (False, True):
        inside = threading.Barrier(2, timeout=60)

        def hold(*args):
            inside.wait()  # returns None: the hook changes nothing

        hooks = [model.model.layers[0].register_forward_pre_hook(hold),
                 model.model.norm.register_forward_hook(hold)]
        errors = []
        path = P("threads-%d" % tagged)
        with ulpprof.torch.capture(model, path) as cap:
            def work(r):
                try:
                    with torch.no_grad():
                        if tagged:
                            with cap.request(r):
                                model(ids[:1, :lens[r]])
                        else:
                            model(ids[:1, :lens[r]])
                except Exception as e:  # noqa: BLE001
                    errors.append("%s: %s" % (type(e).__name__, e))
                    inside.abort()

            threads = [threading.Thread(target=work, args=(r,)) for r in lens]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for h in hooks:
            h.remove()
        check(not errors, "threads: %s" % errors)
        with h5py.File(path, "r") as f:
            for name in ("model.layers.0", "model.layers.1", "lm_head"):
                occ = f["captures"].get(name, {})
                check(len(occ) == 2, "threads: %s has %d captures" % (name, len(occ)))
                for i in range(len(occ)):
                    a = occ[str(i)].attrs
                    n = occ[str(i)].shape[1]
                    r = next((r for r, m in lens.items() if m == n), None)
                    check(r is not None and "positions" in a
                          and a["positions"].tolist() == [list(range(n))]
                          and (not tagged or a["requests"].tolist() == [[r] * n]),
                          "threads (request ids %s): %s/%d (%d tokens) has positions %s, "
                          "requests %s" % (tagged, name, i, n, a.get("positions"),
                                           a.get("requests")))
                    if name == "lm_head" and r is not None:
                        check(np.array_equal(raw(occ[str(i)]), bits(ref[r].logits)),
                              "threads: lm_head bits of request %d" % r)


def section5():
    # 5. Tokens computed twice: a warm-up pass, generate(use_cache=False).
    for name in ("warm-a", "warm-b"):
        with ulpprof.torch.capture(model, P(name)):
            model(ids[:1])
            model(ids[:1])
    st, rows, err = diff(P("warm-a"), P("warm-b"))
    check(st == 0, "warm-up pass: diff exit %d %s" % (st, err))
    if st == 0:
        check(rows["lm_head"]["positions_compared"] == 2 * 7, "warm-up: %s" % rows["lm_head"])
    with h5py.File(P("warm-a"), "r") as f:
        check(attrs(f, "lm_head", 1)["requests"].tolist() == [[1000000] * 7],
              "warm-up pass requests %s" % attrs(f, "lm_head", 1)["requests"].tolist())
    for name, cache in (("nocache", False), ("cache", True)):
        with ulpprof.torch.capture(model, P(name)):
            model.generate(ids[:1, :5], max_new_tokens=3, do_sample=False, pad_token_id=0,
                           use_cache=cache)
    st, rows, err = diff(P("nocache"), P("cache"))
    check(st in (0, 1), "generate(use_cache=False) vs True: diff exit %d %s" % (st, err))
    if st in (0, 1):
        # Positions 0-6 once each in both; the no-cache run recomputed 0-4, 0-5.
        r = rows["model.layers.1"]
        check(r["positions_compared"] == 7 and r["positions_only_in_a"] == 5 + 6
              and r["positions_only_in_b"] == 0, "use_cache=False: %s" % r)

    #    A module run twice per forward: an outer model that calls the HF model twice.
    class Twice(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            self.inner(x)
            return self.inner(x).logits

    twice = Twice(model)
    for name in ("twice-a", "twice-b"):
        with ulpprof.torch.capture(twice, P(name)) as cap:
            check(any(s.name == "inner.model.layers.1" for s in cap.specs), str(cap.specs))
            twice(ids[:1])
    st, rows, err = diff(P("twice-a"), P("twice-b"))
    check(st == 0, "module run twice per forward: diff exit %d %s" % (st, err))


def section6():
    # 6. One layer listed twice: [L0, L0, L2]; HF's hidden states say what each call gave.
    tied = small("llama", layers=3)
    tied.model.layers = torch.nn.ModuleList([tied.model.layers[0], tied.model.layers[0],
                                             tied.model.layers[2]])
    want = tied(ids[:1], use_cache=False, output_hidden_states=True)
    try:
        with ulpprof.torch.capture(tied, P("tied")):
            got = tied(ids[:1], use_cache=False, output_hidden_states=True)
        check(same(got.logits, want.logits), "tied layers: logits move under capture")
        with h5py.File(P("tied"), "r") as f:
            c = f["captures"]
            for i in range(2):
                check(np.array_equal(raw(c["model.layers.%d" % i]["0"]),
                                     bits(want.hidden_states[i + 1])),
                      "tied layers: model.layers.%d is not call %d of the shared layer" % (i, i))
                check(len(c["model.layers.%d" % i]) == 1, "tied layers: captures per call")
                for sub in ("", ".mlp", ".self_attn"):
                    n = "model.layers.%d%s" % (i, sub)
                    check(n in c and int(c[n]["0"].attrs["layer"]) == i, "tied layers: %s" % n)
    except Exception as e:  # noqa: BLE001
        fails.append("tied layers: %s: %s" % (type(e).__name__, e))


def P(name):
    return os.path.join(TMP, name + ".h5")


with tempfile.TemporaryDirectory() as TMP, torch.no_grad():
    for fn in (section1, section2, section3, section4, section5, section6):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            fails.append("%s: %s: %s" % (fn.__name__, type(e).__name__, e))

for f in fails:
    print("FAIL:", f)
if not fails:
    print("test_hf_invariance: all passed")
sys.exit(1 if fails else 0)

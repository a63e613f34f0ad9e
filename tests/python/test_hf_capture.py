"""ulpprof.torch on real HF transformers models (transformers 4.44.2 from
.ci/pyenv, small random configs, CPU): the captures found for Qwen2, Llama
and GPT-2 and their names; every captured tensor bit for bit against what
the model itself returns (output_hidden_states, logits) in the same call;
token positions and requests for a cache miss, a hit (prefix pass + suffix
pass), batch 4, left padding and generate(); `ulpprof diff` of miss vs hit
and bs1 vs bs4 runs (exit 0 or 1, not 2); the engines' flattened-token
convention (forward(input_ids[T], positions[T])); kv and outputs="all".
Started under the .ci/pyenv interpreter when this one lacks transformers."""
import os
import subprocess
import sys
import tempfile

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("transformers")
import h5py  # noqa: E402
import transformers  # noqa: E402
import numpy as np
import torch

os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture",
                                                     "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
import ulpprof.torch  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
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


def small(arch):
    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4,
                                      n_positions=64, attn_implementation="eager")
        return transformers.GPT2LMHeadModel(cfg).eval()
    kw = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              attn_implementation="eager")
    if arch == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kw)).eval()
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw)).eval()


NAMES = {
    "qwen2": ["model.embed_tokens"] + ["model.layers.%d%s" % (i, x) for i in range(2)
                                       for x in (".self_attn", ".mlp", "")]
             + ["model.norm", "lm_head"],
    "gpt2": ["transformer.wte"] + ["transformer.h.%d%s" % (i, x) for i in range(2)
                                   for x in (".attn", ".mlp", "")]
            + ["transformer.ln_f", "lm_head"],
}
NAMES["llama"] = NAMES["qwen2"]
ids = torch.randint(0, 96, (4, 11), generator=torch.Generator().manual_seed(3))


def attrs(f, name, occ=0):
    return f["captures"][name][str(occ)].attrs


with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
    # 1. Names, layers, roles, inputs, and bits against the model's own outputs.
    for arch in ("qwen2", "llama", "gpt2"):
        model = small(arch)
        path = os.path.join(tmp, arch + ".h5")
        with ulpprof.torch.capture(model, path, label=arch) as cap:
            check([sp.name for sp in cap.specs] == NAMES[arch], "%s: %s" % (arch, cap.specs))
            out = model(ids[:1], output_hidden_states=True)
        hs = out.hidden_states
        with h5py.File(path, "r") as f:
            check(sorted(f["captures"]) == sorted(NAMES[arch] + ["input_ids"]),
                  "%s: %s" % (arch, list(f["captures"])))
            got_ids = f["captures"]["input_ids"]["0"]
            check(np.array_equal(got_ids[()], ids[:1].numpy())
                  and np.array_equal(got_ids.attrs["positions"],
                                     np.arange(ids.shape[1])[None, :]),
                  "%s input_ids: %s" % (arch, got_ids[()]))
            layers = [n for n in NAMES[arch] if n.count(".") == 2 and n[-1].isdigit()]
            for i, name in enumerate(layers):
                # HF's last hidden state is after the final norm (GPT-2 and Llama alike).
                want = hs[i + 1] if i + 1 < len(layers) else None
                if want is not None:
                    check(np.array_equal(raw(f["captures"][name]["0"]), bits(want)),
                          "%s %s: bits differ from output_hidden_states" % (arch, name))
                check(int(attrs(f, name)["layer"]) == i, "%s %s: layer" % (arch, name))
            norm = NAMES[arch][-2]
            check(np.array_equal(raw(f["captures"][norm]["0"]), bits(hs[-1])),
                  "%s: final norm bits" % arch)
            check(np.array_equal(raw(f["captures"]["lm_head"]["0"]), bits(out.logits)),
                  "%s: logits bits" % arch)
            a = attrs(f, "lm_head")
            check(a["role"] in (b"logits", "logits"), "%s: logits role" % arch)
            check([x.decode() if isinstance(x, bytes) else x for x in a["inputs"]] == [norm],
                  "%s: logits inputs %s" % (arch, a["inputs"]))
            sub = NAMES[arch][2]  # layers.0.mlp
            check(int(attrs(f, sub)["layer"]) == 0, "%s: sub-module layer" % arch)
            check(attrs(f, sub)["positions"].tolist() == [list(range(11))],
                  "%s: positions %s" % (arch, attrs(f, sub)["positions"]))

    # 2. Miss, hit, batch 4, left padding, generate: positions and requests.
    model = small("qwen2")
    runs = {}
    with ulpprof.torch.capture(model, os.path.join(tmp, "miss.h5"), label="miss",
                               run={"cache": "miss"}):
        runs["miss"] = model(ids[:1]).logits
    with ulpprof.torch.capture(model, os.path.join(tmp, "hit.h5"), label="hit",
                               run={"cache": "hit"}):
        pre = model(ids[:1, :8], use_cache=True)
        runs["hit"] = model(ids[:1, 8:], past_key_values=pre.past_key_values,
                            use_cache=True).logits
    with ulpprof.torch.capture(model, os.path.join(tmp, "bs4.h5"), label="bs4",
                               run={"batch_size": 4}):
        model(ids)
    mask = torch.ones(2, 11, dtype=torch.long)
    mask[1, :3] = 0
    pos_ids = (mask.cumsum(-1) - 1).clamp(min=0)
    with ulpprof.torch.capture(model, os.path.join(tmp, "pad.h5"), requests=[7, 9]):
        model(ids[:2], attention_mask=mask, position_ids=pos_ids)
    with ulpprof.torch.capture(model, os.path.join(tmp, "gen.h5"), match=r"^model\.layers\.1$"):
        model.generate(ids[:1, :5], max_new_tokens=3, do_sample=False, pad_token_id=0)
    with h5py.File(os.path.join(tmp, "miss.h5"), "r") as f:
        a = attrs(f, "model.layers.1")
        check(a["positions"].tolist() == [list(range(11))], "miss positions")
        check(a["requests"].tolist() == [[0] * 11], "miss requests")
    with h5py.File(os.path.join(tmp, "hit.h5"), "r") as f:
        check(attrs(f, "model.layers.1", 0)["positions"].tolist() == [list(range(8))], "hit 0")
        check(attrs(f, "model.layers.1", 1)["positions"].tolist() == [[8, 9, 10]], "hit 1")
        check(int(attrs(f, "model.layers.1", 1)["step"]) == 1, "hit step")
    with h5py.File(os.path.join(tmp, "bs4.h5"), "r") as f:
        check(attrs(f, "lm_head")["requests"].tolist() == [[r] * 11 for r in range(4)],
              "bs4 requests")
    with h5py.File(os.path.join(tmp, "pad.h5"), "r") as f:
        ds = f["captures"]["model.layers.0"]["0"]
        check(ds.shape == (19, 32), "left padding: %s rows kept, want 19" % (ds.shape,))
        check(ds.attrs["positions"].tolist() == list(range(11)) + list(range(8)),
              "padding positions %s" % ds.attrs["positions"])
        check(ds.attrs["requests"].tolist() == [7] * 11 + [9] * 8, "padding requests")
    with h5py.File(os.path.join(tmp, "gen.h5"), "r") as f:
        occ = f["captures"]["model.layers.1"]
        got = [occ[str(i)].attrs["positions"].tolist() for i in range(len(occ))]
        check(got == [[[0, 1, 2, 3, 4]], [[5]], [[6]]], "generate positions %s" % got)

    # 3. ulpprof diff reads every pair (0 identical, 1 different; never 2).
    for a, b in (("miss", "hit"), ("miss", "bs4"), ("qwen2", "llama")):
        p = subprocess.run([ULPPROF, "diff", os.path.join(tmp, a + ".h5"),
                            os.path.join(tmp, b + ".h5")], capture_output=True, text=True)
        check(p.returncode in (0, 1), "diff %s %s: exit %d %s" % (a, b, p.returncode, p.stderr))

    # 4. The engines' convention: forward(input_ids[T], positions[T]) with two
    #    requests flattened; rows are tokens, requests restart with positions.
    class Flat(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.model = inner.model
            self.lm_head = inner.lm_head

        def forward(self, input_ids, positions):
            x = self.model.embed_tokens(input_ids)
            for layer in self.model.layers:
                x = layer(x[None], position_ids=positions[None], output_attentions=True)[0][0]
            return self.lm_head(self.model.norm(x))

    flat = Flat(model)
    toks = torch.cat([ids[0, :6], ids[1, :4]])
    positions = torch.tensor([0, 1, 2, 3, 4, 5, 0, 1, 2, 3])
    with ulpprof.torch.capture(flat, os.path.join(tmp, "flat.h5"), kv=True,
                               outputs="all") as cap:
        flat(toks, positions)
    with h5py.File(os.path.join(tmp, "flat.h5"), "r") as f:
        for name in ("model.embed_tokens", "lm_head"):  # [T, H], [T, V]
            a = attrs(f, name)
            check(a["positions"].tolist() == positions.tolist(), "flat positions %s" % a["positions"])
            check(a["requests"].tolist() == [0] * 6 + [1] * 4, "flat requests %s" % a["requests"])
        a = attrs(f, "model.layers.0.mlp")  # [1, T, H] inside the layers here
        check(a["positions"].tolist() == [positions.tolist()], "flat [1, T] %s" % a["positions"])
        k = attrs(f, "model.layers.1.self_attn.k_proj")
        check(k["role"] in (b"kv", "kv") and int(k["layer"]) == 1, "kv capture")
        check("model.layers.0.self_attn.1" in f["captures"],
              "outputs='all': attention weights %s" % list(f["captures"]))
        if "model.layers.0.self_attn.1" in f["captures"]:  # [1, heads, T, T]: no token rows
            check("positions" not in attrs(f, "model.layers.0.self_attn.1"), "weights' rows")
    # A decode step of one request: T = 1, [1, H] rows still carry the position.
    with ulpprof.torch.capture(flat, os.path.join(tmp, "flat1.h5")):
        flat(toks[:1], torch.tensor([0]))  # (4.44's rotary cache holds T positions)
    with h5py.File(os.path.join(tmp, "flat1.h5"), "r") as f:
        for name in ("input_ids", "model.embed_tokens", "lm_head"):  # [1], [1, H], [1, V]
            a = attrs(f, name)
            check("positions" in a and a["positions"].tolist() == [0]
                  and a["requests"].tolist() == [0], "decode of one: %s rows %s" % (
                      name, a.get("positions")))

    # 5. ulpprof.engines: attach() keeps every tuple output; vllm_model() says
    #    what it did not find.
    import ulpprof.engines
    cap = ulpprof.engines.attach(flat, os.path.join(tmp, "eng.h5"))
    flat(toks, positions)
    cap.close()
    with h5py.File(os.path.join(tmp, "eng.h5"), "r") as f:
        check("model.layers.1.self_attn.1" in f["captures"], "attach: %s" % list(f["captures"]))
    try:
        ulpprof.engines.vllm_model(object())
        fails.append("vllm_model found a model in object()")
    except LookupError as e:
        check("VLLM_ENABLE_V1_MULTIPROCESSING" in str(e), str(e))

    # 6. A model shaped as vLLM's Qwen2ForCausalLM (same module names; each
    #    layer returns (mlp_out, residual); logits from logits_processor),
    #    built from the HF model's modules: attach() names it like HF, and
    #    model.layers.N + model.layers.N.1 is the residual stream, bit for bit
    #    against the layers run by hand without hooks.
    class VLayer(torch.nn.Module):
        def __init__(self, hf):
            super().__init__()
            self.input_layernorm, self.self_attn = hf.input_layernorm, hf.self_attn
            self.post_attention_layernorm, self.mlp = hf.post_attention_layernorm, hf.mlp

        def forward(self, positions, x):
            attn = self.self_attn(hidden_states=self.input_layernorm(x)[None],
                                  position_ids=positions[None])[0][0]
            residual = x + attn
            return self.mlp(self.post_attention_layernorm(residual)), residual

    class VBody(torch.nn.Module):
        def __init__(self, hf):
            super().__init__()
            self.embed_tokens, self.norm = hf.embed_tokens, hf.norm
            self.layers = torch.nn.ModuleList(VLayer(x) for x in hf.layers)

    class LogitsProcessor(torch.nn.Module):
        def forward(self, head, x):
            return torch.nn.functional.linear(x, head.weight)

    class VModel(torch.nn.Module):
        def __init__(self, hf):
            super().__init__()
            self.model, self.lm_head = VBody(hf.model), hf.lm_head
            self.logits_processor = LogitsProcessor()

        def forward(self, input_ids, positions):
            x = self.model.embed_tokens(input_ids)
            for layer in self.model.layers:
                mlp, residual = layer(positions, x)
                x = residual + mlp
            return self.logits_processor(self.lm_head, self.model.norm(x))

    vm = VModel(model)
    stream, x, pos11 = [], vm.model.embed_tokens(ids[0]), torch.arange(11)
    for layer in vm.model.layers:
        mlp, residual = layer(pos11, x)
        x = residual + mlp
        stream.append(x)
    cap = ulpprof.engines.attach(vm, os.path.join(tmp, "vllm.h5"))
    check([sp.name for sp in cap.specs] == NAMES["qwen2"][:-1] + ["logits_processor"],
          "vLLM-shaped names %s" % cap.specs)
    vlogits = vm(ids[0], pos11)
    cap.close()
    with h5py.File(os.path.join(tmp, "vllm.h5"), "r") as f:
        c = f["captures"]
        for i in range(2):
            a = c["model.layers.%d" % i]["0"][()]
            r = c["model.layers.%d.1" % i]["0"][()]
            check(np.array_equal(bits(torch.from_numpy(r) + torch.from_numpy(a)),
                                 bits(stream[i])),
                  "vLLM-shaped layer %d: mlp + residual is not the residual stream" % i)
            check(c["model.layers.%d" % i]["0"].attrs["positions"].tolist() == list(range(11)),
                  "vLLM-shaped positions")
        check(np.array_equal(raw(c["logits_processor"]["0"]), bits(vlogits)), "logits_processor")
        check(c["logits_processor"]["0"].attrs["role"] in (b"logits", "logits"), "logits role")

for f in fails:
    print("FAIL:", f)
if not fails:
    print("test_hf_capture: all passed")
sys.exit(1 if fails else 0)

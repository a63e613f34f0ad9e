"""One run of test_ladder_impl.py: a small decoder on the weights in an .npz
file, captured with the torch helper (ulpprof.torch) into a snapshot whose
/run names its implementation.

    python impl_run.py WEIGHTS.npz IDS OUT.h5 hf-eager|hf-sdpa|plain
    python impl_run.py --weights WEIGHTS.npz SEED   # makes the weights

`hf-eager` / `hf-sdpa`: HF transformers' Qwen2ForCausalLM with that
attention (needs transformers and, for sdpa, torch >= 2.1.1).  `plain`: the
same decoder written in plain torch (embedding, RMSNorm, attention with
RoPE, SwiGLU MLP), which any torch runs, so that two torch builds (MKL and
OpenBLAS) compute the same code.  Both have HF's module names and shapes.
One thread, float32.  /run: `engine` (rung 6), `vendor` (rung 7: the torch
build and its BLAS), `model` (HF against plain is no rung's pair)."""
import os
import re
import sys

import numpy as np
import torch

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
os.environ.setdefault("ULPPROF_CAPTURE_LIBRARY",
                      os.path.join(BUILD, "capture", "libulpprof_capture.so"))
sys.path.insert(0, os.path.join(SRC, "python"))
import ulpprof.torch  # noqa: E402

# The shapes (Qwen2-like, tiny): test_ladder_impl.py makes the weights.
VOCAB, HIDDEN, INTER, LAYERS, HEADS, KV_HEADS = 96, 32, 64, 2, 4, 2
HEAD = HIDDEN // HEADS
THETA = 10000.0
EPS = 1e-6


def vendor():
    """The torch build and the BLAS it calls: PyPI's links MKL, Debian's the
    system libblas.so.3 (OpenBLAS, whose kernels OPENBLAS_CORETYPE picks)."""
    cfg = torch.__config__.show()
    m = re.search(r"BLAS_INFO=(\w+)", cfg)
    blas = m.group(1) if m else "unknown"
    if blas == "generic":
        with open("/proc/self/maps") as f:
            libs = sorted({ln.split()[-1] for ln in f if "/" in ln and
                           "blas" in os.path.basename(ln.split()[-1]).lower()})
        blas = ",".join(os.path.basename(p) for p in libs) or "generic"
        core = os.environ.get("OPENBLAS_CORETYPE")
        if core:
            blas += " (OPENBLAS_CORETYPE=%s)" % core
    return "torch %s, BLAS %s" % (torch.__version__, blas)


class RMSNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(HIDDEN))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + EPS))


def rope(x, pos):
    inv = 1.0 / (THETA ** (torch.arange(0, HEAD, 2, dtype=torch.float32) / HEAD))
    f = pos[:, None].float() * inv[None, :]
    emb = torch.cat([f, f], -1)
    cos, sin = emb.cos(), emb.sin()
    x1, x2 = x[..., :HEAD // 2], x[..., HEAD // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = torch.nn.Linear(HIDDEN, HEADS * HEAD)
        self.k_proj = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD)
        self.v_proj = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD)
        self.o_proj = torch.nn.Linear(HEADS * HEAD, HIDDEN, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        pos = torch.arange(t)
        q = rope(self.q_proj(x).view(b, t, HEADS, HEAD).transpose(1, 2), pos)
        k = rope(self.k_proj(x).view(b, t, KV_HEADS, HEAD).transpose(1, 2), pos)
        v = self.v_proj(x).view(b, t, KV_HEADS, HEAD).transpose(1, 2)
        k = k.repeat_interleave(HEADS // KV_HEADS, 1)
        v = v.repeat_interleave(HEADS // KV_HEADS, 1)
        s = q @ k.transpose(-1, -2) / HEAD ** 0.5
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        o = torch.softmax(s, -1) @ v
        return self.o_proj(o.transpose(1, 2).reshape(b, t, HIDDEN))


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.down_proj = torch.nn.Linear(INTER, HIDDEN, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm()
        self.self_attn = Attention()
        self.post_attention_layernorm = RMSNorm()
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Body(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm()

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Body()
        self.lm_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids):
        return self.lm_head(self.model(input_ids))


def hf(attn):
    import transformers
    cfg = transformers.Qwen2Config(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER,
                                   num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                   num_key_value_heads=KV_HEADS, max_position_embeddings=64,
                                   rms_norm_eps=EPS, tie_word_embeddings=False)
    cfg._attn_implementation = attn
    return transformers.Qwen2ForCausalLM(cfg).eval(), "transformers %s %s" % (
        transformers.__version__, attn)


def make_weights(path, seed):
    """Every weight N(0, 0.2), the norms' too (HF leaves them at 1), from
    numpy's generator: the same file whichever torch writes it."""
    rng = np.random.default_rng(seed)
    state = Plain().state_dict()
    np.savez(path, **{k: rng.normal(0, 0.2, size=tuple(v.shape)).astype(np.float32)
                      for k, v in state.items()})


def main():
    if sys.argv[1] == "--weights":
        make_weights(sys.argv[2], int(sys.argv[3]))
        return
    weights, ids, out, kind = sys.argv[1:5]
    torch.set_num_threads(1)
    if kind in ("hf-eager", "hf-sdpa"):
        model, engine = hf(kind[3:])
        what = "Qwen2ForCausalLM (transformers)"
    elif kind == "plain":
        model, engine, what = Plain().eval(), "plain torch", "plain torch decoder"
    else:
        sys.exit("impl_run.py: unknown kind %r" % kind)
    w = np.load(weights)
    state = {k: torch.from_numpy(np.ascontiguousarray(w[k])) for k in w.files}
    missing, unexpected = model.load_state_dict(state, strict=False)
    # HF keeps rotary inv_freq as a buffer, not a weight: nothing else may be left out.
    assert not unexpected and all("rotary" in k for k in missing), (missing, unexpected)
    ids = torch.tensor([[int(t) for t in ids.split(",")]])
    run = {"engine": engine, "vendor": vendor(), "model": what, "threads": "1"}
    with ulpprof.torch.capture(model, out, label=os.path.basename(out)[:-3], run=run):
        with torch.no_grad():
            if kind == "plain":
                model(ids)
            else:
                model(input_ids=ids, use_cache=False)
    print(run["engine"], "|", run["vendor"])


if __name__ == "__main__":
    main()

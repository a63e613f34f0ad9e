"""A tiny decoder language model laid out like HF transformers' models
(model.embed_tokens, model.layers.N.{self_attn,mlp}, model.norm, lm_head),
captured with the ulpprof package.  CPU or CUDA, no download:

    python3 tiny_model.py -o bs1.h5 --batch 1
    python3 tiny_model.py -o bs4.h5 --batch 4
    ulpprof diff bs1.h5 bs4.h5

Row 0 of the batch is the request compared across batch sizes; the rows
beside it should not change its bits, but a GEMM that picks its kernel or
blocking by M may.  Under `ulpprof record -o run.h5 -- python3 tiny_model.py`
leave -o out: the file is record's.
"""
import argparse

import torch

import ulpprof.torch


class Attention(torch.nn.Module):
    """Causal single-head self-attention."""

    def __init__(self, d):
        super().__init__()
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.o_proj = torch.nn.Linear(d, d, bias=False)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        s = x.shape[1]
        scores = (q @ k.transpose(1, 2)) / float(x.shape[-1]) ** 0.5
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        return self.o_proj(torch.softmax(scores.float(), dim=-1).to(x.dtype) @ v)


class MLP(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.up_proj = torch.nn.Linear(d, 4 * d, bias=False)
        self.down_proj = torch.nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        return self.down_proj(torch.nn.functional.gelu(self.up_proj(x)))


class DecoderLayer(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.input_layernorm = torch.nn.LayerNorm(d, elementwise_affine=False)
        self.self_attn = Attention(d)
        self.post_attention_layernorm = torch.nn.LayerNorm(d, elementwise_affine=False)
        self.mlp = MLP(d)

    def forward(self, x):
        h = x + self.self_attn(self.input_layernorm(x))
        return (h + self.mlp(self.post_attention_layernorm(h)), None)  # HF-style tuple


class Body(torch.nn.Module):
    def __init__(self, vocab, d, n_layers):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(vocab, d)
        self.layers = torch.nn.ModuleList(DecoderLayer(d) for _ in range(n_layers))
        self.norm = torch.nn.LayerNorm(d, elementwise_affine=False)


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=512, d=64, n_layers=4):
        super().__init__()
        self.model = Body(vocab, d, n_layers)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        x = self.model.embed_tokens(input_ids)
        for layer in self.model.layers:
            x = layer(x)[0]
        return self.lm_head(self.model.norm(x))


def make(batch, tokens=16, layers=4, dtype="float32", device="cpu", seed=0):
    """The model and a batch whose row 0 is the same prompt at every batch size."""
    torch.manual_seed(seed)
    model = TinyLM(n_layers=layers).to(device, getattr(torch, dtype)).eval()
    ids = torch.randint(0, 512, (batch, tokens), generator=torch.Generator().manual_seed(seed + 1))
    ids[0] = torch.randint(0, 512, (tokens,), generator=torch.Generator().manual_seed(99))
    return model, ids.to(device)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-o", "--output", help="snapshot to write (default: ulpprof record's -o)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    model, ids = make(a.batch, a.tokens, a.layers, a.dtype, a.device)
    with torch.no_grad(), ulpprof.torch.capture(model, a.output, label="bs%d" % a.batch,
                                                run={"batch_size": a.batch}, select=[0]):
        logits = model(ids)
    print("argmax of row 0, last token:", int(logits[0, -1].argmax()))


if __name__ == "__main__":
    main()

"""A tiny residual MLP language model to try ulpprof_torch on (CPU or CUDA).

    ulpprof record -o run.h5 --label bs1 -- python3 tiny_model.py --batch 1
    ulpprof record -o run8.h5 --label bs8 -- python3 tiny_model.py --batch 8
    ulpprof diff run.h5 run8.h5

Only row 0 of the batch is the "request" being compared, and each row is
independent, so the rows computed alongside it should not change its bits.
A GEMM that picks a different kernel or blocking by M may still change them.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ulpprof_torch  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d, elementwise_affine=False)
        self.up = torch.nn.Linear(d, 4 * d, bias=False)
        self.down = torch.nn.Linear(4 * d, d, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class TinyLM(torch.nn.Module):
    def __init__(self, vocab=512, d=128, n_layers=4):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d)
        self.layers = torch.nn.ModuleList(Block(d) for _ in range(n_layers))
        self.norm = torch.nn.LayerNorm(d, elementwise_affine=False)
        self.lm_head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    model = TinyLM(n_layers=a.layers).to(a.device, getattr(torch, a.dtype)).eval()
    g = torch.Generator().manual_seed(a.seed + 1)
    tokens = torch.randint(0, 512, (a.batch, a.tokens), generator=g).to(a.device)
    tokens[0] = torch.randint(0, 512, (a.tokens,), generator=torch.Generator().manual_seed(99))
    # Row 0 is the request compared across batch sizes.
    cap = ulpprof_torch.attach(model, logits="lm_head", select=lambda t: t[:1])
    with torch.no_grad():
        cap.step(0)
        logits = model(tokens)
    cap.detach()
    cap.flush()
    print("argmax of row 0, last token:", int(logits[0, -1].argmax()))


if __name__ == "__main__":
    main()

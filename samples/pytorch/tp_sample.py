"""A tensor-parallel transformer on torch.distributed, captured per rank.

    ULPPROF_CAPTURE_LIBRARY=build/capture/libulpprof_capture.so \\
    torchrun --redirects 1 --tee 1 --nproc_per_node 2 tp_sample.py --out tp/tp2
    ...  (1, 2 and 4 ranks: samples/pytorch/tp_ladder.sh runs them all)
    ulpprof ladder tp/                  # rung 4: TP1 vs TP2 vs TP4
    ulpprof diff tp/tp1 tp/tp2          # rank by rank

A Llama-shaped decoder (RMSNorm, multi-head causal attention, SwiGLU MLP,
modules named as HF names them) whose linears are sharded over the ranks of
the process group as Megatron-LM and vLLM shard them:

* column-parallel (Q, K, V, gate, up, and the vocabulary of lm_head): rank r
  holds a slice of the output columns -- its attention heads, its part of the
  MLP -- and computes them from the whole input;
* row-parallel (attention output, MLP down): rank r holds the matching rows
  of the weight, computes a partial product over its slice of K, and an
  all-reduce (SUM) adds the partials of every rank;
* the logits: each rank's vocabulary slice, all-gathered.

The full weights come from one seed on every rank and are then sliced, so
TP1, TP2 and TP4 compute the same function; only the order of the K-sums
of the row-parallel GEMMs changes (one GEMM over K, or R GEMMs over K/R
added by the all-reduce).  `ulpprof.torch.capture` hooks the modules whose
outputs are replicated on every rank -- each layer's `self_attn` and `mlp`
(their row-parallel projection ends in the all-reduce), the layer, the
final norm, `lm_head` (gathered) -- with their token positions, into
DIR/%r.h5 (one file per rank, /run tp=R), so that `ulpprof ladder` and
`ulpprof diff` pair rank r of one run with rank r of another.

On torch 1.13 gloo cannot all-reduce bf16: a bf16 model all-reduces its
partials upcast to fp32 and rounds the sum to bf16 (one rounding, as an
fp32-accumulating all-reduce would).  torch.set_num_threads(1) keeps each
rank's GEMMs in one order from run to run.

Debian's torch 1.13 under Python 3.11: torchrun's default `--redirects 0`
and `--tee 0` are parsed as None (IntFlag iteration skips 0) and it stops
with "'NoneType' object has no attribute 'get'"; `--redirects 1 --tee 1`
avoids it.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # a source tree's package


class TP:
    """The tensor-parallel group: this rank, the degree, and the collectives."""

    def __init__(self, rank, world, dtype):
        self.rank, self.world, self.dtype = rank, world, dtype

    def shard(self, n):
        if n % self.world:
            raise SystemExit("tp_sample: %d ranks do not divide %d" % (self.world, n))
        k = n // self.world
        return slice(self.rank * k, (self.rank + 1) * k)

    def all_reduce(self, partial):
        if self.world == 1:
            return partial
        t = partial.float()  # gloo (torch 1.13) reduces no bf16
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        return t.to(self.dtype)

    def all_gather(self, local):
        if self.world == 1:
            return local
        parts = [torch.empty_like(local) for _ in range(self.world)]
        dist.all_gather(parts, local.contiguous())
        return torch.cat(parts, dim=-1)


class ColumnParallelLinear(nn.Module):
    """y[:, cols of this rank] = x W[:, cols]: its output columns, from the whole input."""

    def __init__(self, w, tp):
        super().__init__()
        self.weight = nn.Parameter(w[:, tp.shard(w.shape[1])].contiguous(), requires_grad=False)

    def forward(self, x):
        return x @ self.weight


class RowParallelLinear(nn.Module):
    """y = all_reduce(x[:, K of this rank] W[K of this rank, :]): the partial sums added."""

    def __init__(self, w, tp):
        super().__init__()
        self.tp = tp
        self.weight = nn.Parameter(w[tp.shard(w.shape[0]), :].contiguous(), requires_grad=False)

    def forward(self, x):
        return self.tp.all_reduce(x @ self.weight)


class RMSNorm(nn.Module):
    def forward(self, x, eps=1e-6):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, w, heads, tp):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj = (ColumnParallelLinear(w[k], tp)
                                                 for k in ("wq", "wk", "wv"))
        self.o_proj = RowParallelLinear(w["wo"], tp)
        self.heads = heads // tp.world  # this rank's heads
        self.hd = w["wq"].shape[0] // heads

    def forward(self, x):
        b, t, _ = x.shape

        def split(y):
            return y.view(b, t, self.heads, self.hd).transpose(1, 2).float()

        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        s = q @ k.transpose(-1, -2) / self.hd ** 0.5
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        ctx = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(b, t, self.heads * self.hd)
        return self.o_proj(ctx.to(x.dtype))


class MLP(nn.Module):
    def __init__(self, w, tp):
        super().__init__()
        self.gate_proj = ColumnParallelLinear(w["wg"], tp)
        self.up_proj = ColumnParallelLinear(w["wu"], tp)
        self.down_proj = RowParallelLinear(w["wd"], tp)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, w, heads, tp):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(), RMSNorm()
        self.self_attn = Attention(w, heads, tp)
        self.mlp = MLP(w, tp)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, embed, layers, heads, tp):
        super().__init__()
        self.embed_tokens = nn.Embedding.from_pretrained(embed)
        self.layers = nn.ModuleList(DecoderLayer(w, heads, tp) for w in layers)
        self.norm = RMSNorm()

    def forward(self, tokens):
        x = self.embed_tokens(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class VocabParallelHead(nn.Module):
    """This rank's slice of the vocabulary, all-gathered: every rank has all logits."""

    def __init__(self, w, tp):
        super().__init__()
        self.tp = tp
        self.weight = nn.Parameter(w[:, tp.shard(w.shape[1])].contiguous(), requires_grad=False)

    def forward(self, x):
        return self.tp.all_gather((x @ self.weight).float())


class TPForCausalLM(nn.Module):
    """Weights generated whole from `seed` on every rank, then sliced for this rank."""

    def __init__(self, seed, vocab, hidden, layers, heads, mlp, tp):
        super().__init__()
        g = torch.Generator().manual_seed(seed)

        def w(n_in, n_out):
            return (torch.randn(n_in, n_out, generator=g) / n_in ** 0.5).to(tp.dtype)

        embed = torch.randn(vocab, hidden, generator=g).to(tp.dtype)
        ws = [{"wq": w(hidden, hidden), "wk": w(hidden, hidden), "wv": w(hidden, hidden),
               "wo": w(hidden, hidden), "wg": w(hidden, mlp), "wu": w(hidden, mlp),
               "wd": w(mlp, hidden)} for _ in range(layers)]
        self.model = Decoder(embed, ws, heads, tp)
        self.lm_head = VocabParallelHead(w(hidden, vocab), tp)

    def forward(self, tokens):
        return self.lm_head(self.model(tokens))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="run directory: one snapshot per rank, "
                   "DIR/<rank>.h5")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--tokens", type=int, default=24)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--mlp", type=int, default=768)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    a = p.parse_args()
    import ulpprof.torch

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    torch.set_num_threads(1)
    if world > 1:
        dist.init_process_group("gloo")
    tp = TP(rank, world, getattr(torch, a.dtype))
    lm = TPForCausalLM(a.seed, a.vocab, a.hidden, a.layers, a.heads, a.mlp, tp).eval()
    tokens = torch.randint(0, a.vocab, (1, a.tokens),
                           generator=torch.Generator().manual_seed(a.seed + 1))
    os.makedirs(a.out, exist_ok=True)
    with torch.no_grad(), ulpprof.torch.capture(lm, os.path.join(a.out, "%r.h5"),
                                                label="tp%d" % world,
                                                run={"tp": world, "model": "tp_sample"}):
        logits = lm(tokens)
    if rank == 0:
        print("tp_sample: tp=%d, %d tokens, greedy tokens %s" % (
            world, a.tokens, logits[0].argmax(-1)[-4:].tolist()))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

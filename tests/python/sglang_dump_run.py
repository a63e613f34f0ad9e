"""Writes an SGLang dump the way SGLang 0.5.23 writes it: its own
debug_utils/dumper.py (from the wheel, put on sys.path by the caller with
the three serving-stack modules it imports stubbed), non-intrusive mode
"all" on a tiny engine-shaped model (forward(input_ids[T], positions[T]),
token-major rows), plus `seq_lens` and `rids` as SGLang's ForwardBatch
hands them to the dumper.  Run under torch >= 2 (the dumper needs it).

    python sglang_dump_run.py STUBS OUTDIR BATCH

BATCH 1: prompt P alone; 4: prompts Q, R, P, S (P in row 2).  Two passes:
the prefill, then one decode step (each request fed token 20 + its row).
Layer 1 of the batch-4 run adds 2^-20 at positions >= 2, a stand-in for a
batch-dependent kernel: the divergence the diff must find."""
import os
import sys

stubs, outdir, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, stubs)
os.environ.update(DUMPER_ENABLE="1", DUMPER_DIR=outdir, DUMPER_NON_INTRUSIVE_MODE="all",
                  DUMPER_ENABLE_OUTPUT_CONSOLE="0")
import torch  # noqa: E402
from sglang.srt.debug_utils.dumper import dumper  # noqa: E402

P, Q, R, S = [5, 9, 2, 7], [5, 11, 3], [1, 4, 4, 8, 6], [5, 9, 2, 30]
H, V = 8, 32


class Layer(torch.nn.Module):
    def __init__(self, i):
        super().__init__()
        self.layer_id = i
        self.proj = torch.nn.Linear(H, H)

    def forward(self, positions, x):
        h = x + torch.tanh(self.proj(x))
        if self.layer_id == 1 and batch > 1:
            h = h + (positions >= 2).to(h.dtype)[:, None] * 2.0 ** -20
        return h


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(V, H)
        self.layers = torch.nn.ModuleList([Layer(0), Layer(1)])
        self.norm = torch.nn.LayerNorm(H)

    def forward(self, input_ids, positions):
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(positions, x)
        return self.norm(x)


class ForCausalLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Model()
        self.lm_head = torch.nn.Linear(H, V, bias=False)

    def forward(self, input_ids, positions):
        return self.lm_head(self.model(input_ids, positions))


torch.manual_seed(0)
m = ForCausalLM()
dumper.register_non_intrusive_dumper(m)
prompts = [P] if batch == 1 else [Q, R, P, S]
rids = ["rid-%s" % "PQRS"[[P, Q, R, S].index(p)] for p in prompts]
fed = [20] if batch == 1 else [21, 22, 20, 23]
with torch.no_grad():
    ids = torch.tensor(sum(prompts, []))
    pos = torch.tensor(sum([list(range(len(p))) for p in prompts], []))
    dumper.dump("seq_lens", torch.tensor([len(p) for p in prompts]))
    dumper.dump("rids", rids)
    m(input_ids=ids, positions=pos)
    dumper.step()
    dumper.dump("seq_lens", torch.tensor([len(p) + 1 for p in prompts]))
    dumper.dump("rids", rids)
    m(input_ids=torch.tensor(fed), positions=torch.tensor([len(p) for p in prompts]))
    dumper.step()

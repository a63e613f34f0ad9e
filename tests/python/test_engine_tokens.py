"""tokens=True under ulpprof.engines.attach for an engine's 2-D logits, with
no engine installed: a model shaped as vLLM's (forward(input_ids[T],
positions[T]), compute_logits(hidden[rows]) through `logits_processor`)
driven by a loop that batches as vLLM's V1 runner does, with the runner's
input batch (req_ids, num_prompt_tokens, query_start_loc) beside it.
Request A (5 prompt tokens) is prefilled whole; request B (6) in two
chunks, so its first step's logits emit no token.  The `tokens` rows, read
with h5py, must be one per (request, step that emits), at the last fed
position, with numpy's argmax and top-1 minus top-2 of the logits the
loop itself got back; and `ulpprof streams` over this run and one whose
head is nudged must part where numpy's tokens part."""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
import ulpprof.engines  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
torch.set_num_threads(1)
fails = []
V = 37


def check(cond, msg):
    if not cond:
        fails.append(msg)


class LogitsProcessor(torch.nn.Module):
    def forward(self, head, x):
        return head(x)


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(V, 16)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(16, 16)])

    def forward(self, input_ids, positions):
        x = self.embed_tokens(input_ids) + positions[:, None].float() * 0.01
        return torch.tanh(self.layers[0](x))


class EngineModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Inner()
        self.lm_head = torch.nn.Linear(16, V, bias=False)
        self.logits_processor = LogitsProcessor()

    def forward(self, input_ids, positions):
        return self.model(input_ids, positions)

    def compute_logits(self, hidden):
        return self.logits_processor(self.lm_head, hidden)


class QSL:
    def __init__(self):
        self.np = np.zeros(8, dtype=np.int32)


class Batch:
    def __init__(self):
        self.req_ids, self.num_reqs = [], 0
        self.num_prompt_tokens = np.zeros(8, dtype=np.int32)


class Runner:
    def __init__(self):
        self.input_batch, self.query_start_loc = Batch(), QSL()


PROMPTS = {"A": [3, 9, 1, 30, 7], "B": [11, 2, 25, 4, 19, 8]}
# Per step: (request, first position fed, tokens fed this step).
SCHEDULE = [[("A", 0, 5), ("B", 0, 3)], [("A", 5, 1), ("B", 3, 3)], [("A", 6, 1), ("B", 6, 1)],
            [("A", 7, 1), ("B", 7, 1)]]


def run(model, path):
    """The engine loop; returns {request: [(position, token, margin)]} from numpy."""
    runner = Runner()
    cap = ulpprof.engines.attach(model, path, runner=runner, tokens=True)
    seqs = {r: list(p) for r, p in PROMPTS.items()}
    want = {}
    with torch.no_grad():
        for step in SCHEDULE:
            ib = runner.input_batch
            ib.req_ids, ib.num_reqs = [r for r, _, _ in step], len(step)
            ids, pos, ends = [], [], [0]
            for i, (r, first, n) in enumerate(step):
                ib.num_prompt_tokens[i] = len(PROMPTS[r])
                ids += seqs[r][first:first + n]
                pos += list(range(first, first + n))
                ends.append(ends[-1] + n)
            runner.query_start_loc.np[:len(ends)] = ends
            hidden = model(torch.tensor(ids), torch.tensor(pos))
            logits = model.compute_logits(hidden[torch.tensor(ends[1:]) - 1]).numpy()
            for i, (r, first, n) in enumerate(step):
                last = first + n - 1
                if last < len(PROMPTS[r]) - 1:
                    continue  # a partial prefill: its token is discarded
                row = logits[i].astype(np.float64)
                tok = int(np.argmax(row))
                top = np.sort(row)[::-1]
                want.setdefault(r, []).append((last, tok, top[0] - top[1]))
                seqs[r].append(tok)
    cap.close()
    return want


def read_tokens(path):
    out = []
    with h5py.File(path, "r") as f:
        g = f["captures"].get("tokens", {})
        for occ in sorted(g, key=int):
            ds = g[occ]
            for (tok, m), p, q in zip(ds[()], ds.attrs["positions"], ds.attrs["requests"]):
                out.append((int(q), int(p), tok, m))
    return sorted(out)


with tempfile.TemporaryDirectory() as tmp:
    torch.manual_seed(0)
    model = EngineModel().eval()
    runs = []
    for k in range(2):
        if k == 1:  # another head: another completion (where is numpy's to say)
            with torch.no_grad():
                model.lm_head.weight.add_(torch.randn(V, 16, generator=torch.Generator()
                                                      .manual_seed(5)))
        path = os.path.join(tmp, "run%d.h5" % k)
        want = run(model, path)
        runs.append((path, want))
        got = read_tokens(path)
        # Requests are numbered in order of first appearance: A 0, B 1.
        flat = sorted((q, p, float(t), m) for q, r in enumerate("AB") for p, t, m in want[r])
        check([x[:3] for x in got] == [x[:3] for x in flat],
              "run %d: tokens rows %s, want %s" % (k, [x[:3] for x in got],
                                                    [x[:3] for x in flat]))
        check(all(abs(a[3] - b[3]) <= 1e-6 * max(1.0, abs(b[3])) for a, b in zip(got, flat)),
              "run %d: margins %s, want %s" % (k, [x[3] for x in got], [x[3] for x in flat]))
        check(not any(q == 1 and p == 2 for q, p, _, _ in got),
              "run %d: a partial prefill emitted a token" % k)
    # streams over the two runs: A parts where numpy's tokens part.
    ta, tb = ([t for _, t, _ in w["A"]] for _, w in runs)
    part = next((i for i, (x, y) in enumerate(zip(ta, tb)) if x != y), None)
    check(part is not None, "the nudge did not part A's completion: %s, %s" % (ta, tb))
    p = subprocess.run([ULPPROF, "streams", "-f", "json", runs[0][0], runs[1][0]],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 1, "streams exit %d: %s" % (p.returncode, p.stderr))
    if p.returncode in (0, 1):
        doc = json.loads(p.stdout)
        req = {q["request"]: q for q in doc["requests"]}
        comps = req.get(0, {}).get("completions", [])
        check(len(comps) == 2 and sorted(c["tokens"] for c in comps) == sorted([ta, tb]),
              "streams request 0: %s" % comps)
        other = [c for c in comps if not c["common"]]
        check(len(other) == 1 and other[0]["part_step"] == part,
              "streams request 0: part %s, want %s" % (other and other[0]["part_step"], part))
for f in fails:
    print("FAIL:", f)
print("ok" if not fails else "%d failures" % len(fails))
sys.exit(1 if fails else 0)

"""The digests-first flow where the parting is engineered in the model.

test_streams_flow_hf leaves the parting to the BLAS, so on a CPU whose
kernels do not depend on the batch size nothing parts and only its
"nothing parts" branch runs.  Here the same flow runs on a model built so
that a known subset of runs parts at a known step, layer and position, on
any CPU:

- Batch invariance: every nn.Linear computes its batch rows one at a time
  (the same GEMM shape whatever the batch), and every prompt has the
  prompt's length (no padding), so request 0's arithmetic is the same, bit
  for bit, whatever else is in the batch.  The test checks it: the runs
  that are not perturbed all have the same digests.
- The perturbation: a forward hook on decoder layer LAYER, for runs whose
  batch has more than K other prompts, adds DELTA * u to request 0's hidden
  state at the forward of step STEP (position P = len(PROMPT) - 1 + STEP),
  u the unit vector along (w_b - w_a), a and b the winner and the runner-up
  of the unperturbed run's logits there (lm_head rows w_a, w_b).  DELTA is
  derived from that run's hidden state at that position (numpy: the
  smallest multiple of u that makes b win after the final RMSNorm and
  lm_head, found by bisection, times 1.5, where b still wins), so the margin provably changes
  sign, and earlier steps are untouched.

So the runs with more than K others give one completion, the others
another; they part at STEP; request 0's activations first differ at
decoder layer LAYER's output (capture model.layers.LAYER), position P; the
select spec is that capture at P alone (later positions were fed another
token); the re-capture's diff finds the streams part at P + 1 and the first
divergence at model.layers.LAYER, position P.  Every number `ulpprof streams
--activations` prints is checked by test_streams_flow_hf.check_flow against
generate()'s sequences and scores and h5py/numpy over the files, and here
against those known values as well.
Started under the .ci/pyenv interpreter when this one lacks transformers."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_streams_flow_hf as flow  # noqa: E402  (re-executes under .ci/pyenv if needed)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

RUNS = int(os.environ.get("ULPPROF_FLOW_RUNS", "16"))
K = 5  # runs with more than K other prompts are perturbed (a quarter)
LAYER = 1
STEP = 6
P = len(flow.PROMPT) - 1 + STEP  # the position whose forward produces step STEP's logits


def row_by_row(linear):
    def forward(x):
        return torch.cat([F.linear(x[i:i + 1], linear.weight, linear.bias)
                          for i in range(x.shape[0])])
    return forward


class Perturb:
    """Forward hook on model.layers[LAYER]: counts the forward calls of a
    generate() (reset() before each) and at call STEP adds delta * u to row
    0's last position when the batch has more than K other prompts."""

    def __init__(self, u):
        self.u, self.delta, self.calls, self.seen = u, 0.0, 0, None

    def reset(self):
        self.calls = 0

    def __call__(self, module, inputs, output):
        call, self.calls = self.calls, self.calls + 1
        h = output[0]
        if call == STEP and self.seen is not None:
            self.seen.append(h[0, -1].detach().double().numpy().copy())
        if call != STEP or h.shape[0] - 1 <= K or self.delta == 0.0:
            return None
        h = h.clone()
        h[0, -1] += (self.delta * self.u).to(h.dtype)
        return (h,) + tuple(output[1:])


def make_model():
    model = flow.make_model()
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.forward = row_by_row(m)
    return model


def batch_of(run):
    """Run i's batch: the prompt in row 0, then 0-7 random prompts of its length."""
    rng = np.random.default_rng(2000 + run)
    rows = [flow.PROMPT] + [list(rng.integers(1, 128, len(flow.PROMPT)))
                            for _ in range(run % 8)]
    ids = torch.tensor(rows, dtype=torch.long)
    return ids, torch.ones_like(ids)


def logits_of(model, h):
    """numpy: lm_head(final RMSNorm(h)) in float64."""
    norm = model.model.norm
    x = h / np.sqrt(np.mean(h * h) + norm.variance_epsilon) * norm.weight.detach().double().numpy()
    return model.lm_head.weight.detach().double().numpy() @ x


def tune(model, hook):
    """The unperturbed run's hidden state at step STEP, the winner a and the
    runner-up b there, and DELTA: 1.5 x the smallest multiple of u = (w_b -
    w_a)/|w_b - w_a| that makes b win (bisection over numpy's logits)."""
    hook.seen = []
    hook.reset()
    ids, mask = batch_of(0)
    with torch.no_grad():
        out = model.generate(ids, attention_mask=mask, max_new_tokens=STEP + 1, do_sample=False,
                             output_scores=True, return_dict_in_generate=True, pad_token_id=0)
    h, hook.seen = hook.seen[0], None
    z = logits_of(model, h)
    top = np.argsort(-z)[:2]
    a, b = int(top[0]), int(top[1])
    flow.check(int(out.sequences[0, ids.shape[1] + STEP]) == a, "numpy's winner is generate()'s")
    w = model.lm_head.weight.detach().double().numpy()
    u = (w[b] - w[a]) / np.linalg.norm(w[b] - w[a])

    def b_wins(d):
        zz = logits_of(model, h + d * u)
        return int(np.argmax(zz)) == b

    lo, hi = 0.0, 1e-3
    while not b_wins(hi):
        hi *= 2
        assert hi < 1e6, "no multiple of u makes the runner-up win"
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if b_wins(mid) else (mid, hi)
    hook.u = torch.tensor(u)
    hook.delta = 1.5 * hi
    assert b_wins(hook.delta), "1.5 x the threshold makes another token win"
    return a, b


def main():
    model = make_model()
    hook = Perturb(None)
    model.model.layers[LAYER].register_forward_hook(hook)
    a, b = tune(model, hook)
    print("step %d: %d leads %d; delta %.4g along w_%d - w_%d" % (STEP, a, b, hook.delta, b, a))
    orig = model.generate

    def generate(*args, **kw):
        hook.reset()
        return orig(*args, **kw)

    model.generate = generate
    perturbed = [i for i in range(RUNS) if i % 8 > K]
    with tempfile.TemporaryDirectory() as tmp:
        gens, rep, parted = flow.check_flow(model, tmp, RUNS, batch_of)
        groups = flow.expected_groups(gens)
        # The engineering did what it says: two completions, the perturbed runs the other one.
        flow.check(len(groups) == 2 and groups[1][1] == perturbed,
                   "completions %s, want the perturbed %s apart" % ([g[1] for g in groups],
                                                                   perturbed))
        common = groups[0][0]
        flow.check(common[STEP] == a and all(t[STEP] == b for t, _ in gens if tuple(t) != common),
                   "step %d: %d in the common completion, %d in the other" % (STEP, a, b))
        d = os.path.join(tmp, "runs")
        first = flow.digest_rows(os.path.join(d, "run%03d.h5" % groups[0][1][0]))
        for i in groups[0][1][1:]:
            rows = flow.digest_rows(os.path.join(d, "run%03d.h5" % i))
            flow.check(all({k: v for k, v in rows[n][2].items() if k[0] == 0} ==
                           {k: v for k, v in first[n][2].items() if k[0] == 0} for n in first),
                       "batch invariance: run %d's request 0 digests are the first run's" % i)
        req0 = [q for q in rep["requests"] if q["request"] == 0][0]
        flow.check(len(parted) == 1, "one parted completion re-captured")
        for g, want, ref in parted:
            act = g["activations"]
            flow.check(g["part_step"] == STEP and g["token_common"] == a and g["token"] == b,
                       "parts at step %d, %d vs %d: %s" % (STEP, a, b, g))
            flow.check(g["margin_common"] > 0 and g["margin"] > 0, "both margins positive")
            last = P  # the positions after it were fed another token
            name = "model.layers.%d" % LAYER
            flow.check(act["capture"] == name and act["layer"] == LAYER and act["position"] == P
                       and act["last_position"] == last and
                       act["select"] == "%s@0:%d-%d" % (name, P, last),
                       "activations part at %s position %d (to %d): %s" % (name, P, last, act))
            flow.check(ref is not None and ref > 0, "the re-capture differs")
        flow.check(req0["parting_steps"] == [{"step": STEP, "runs": len(perturbed)}],
                   "parting steps %s" % req0["parting_steps"])
    if flow.FAILS:
        print("%d failures" % len(flow.FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

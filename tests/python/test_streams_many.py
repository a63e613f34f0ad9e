"""`ulpprof streams` over generations written by the PyTorch helper (a small
random HF Llama, greedy generate() on CPU) and by the C API (the `tokens`
capture through ulp_session_capture, tests/python/capwriter.py).

Expected completions, groups, parting steps, tokens and margins are
computed here: from generate()'s own scores (output_scores=True: argmax and
top-1 minus top-2 of each step's logits) for the helper's runs, and from
the arrays written for the C API's, never from ulpprof's output.
Started under the .ci/pyenv interpreter when this one lacks transformers."""
import collections
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("transformers")
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

SRC = os.environ.get("ULPPROF_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capwriter  # noqa: E402
import ulpprof.torch  # noqa: E402

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL: " + what)


def expected(gens):
    """gens: list of (tokens, margins) per run -> groups as ulpprof should give."""
    by = collections.OrderedDict()
    for i, (t, m) in enumerate(gens):
        by.setdefault(tuple(t), []).append(i)
    groups = sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[1][0]))
    common = list(groups[0][0])
    out = []
    for toks, runs in groups:
        toks = list(toks)
        k = 0
        while k < min(len(toks), len(common)) and toks[k] == common[k]:
            k += 1
        m = gens[runs[0]][1]
        mc = gens[groups[0][1][0]][1]
        out.append({"runs": runs, "tokens": toks, "part": k,
                    "token": toks[k] if k < len(toks) else None,
                    "token_common": common[k] if k < len(common) else None,
                    "margin": m[k] if k < len(m) else None,
                    "margin_common": mc[k] if k < len(mc) else None})
    return out


def streams(paths):
    p = subprocess.run([ULPPROF, "streams", "-f", "json"] + paths, capture_output=True, text=True)
    check(p.returncode in (0, 1), "streams exit %d: %s" % (p.returncode, p.stderr))
    return json.loads(p.stdout), p.returncode


def compare(got_req, want, what):
    got = got_req["completions"]
    check(len(got) == len(want), "%s: %d completions, want %d" % (what, len(got), len(want)))
    for g, w in zip(got, want):
        check(g["runs"] == w["runs"], "%s: runs %s vs %s" % (what, g["runs"], w["runs"]))
        check(g["tokens"] == w["tokens"], "%s: tokens" % what)
        if g["common"]:
            continue
        check(g["part_step"] == w["part"], "%s: part %s vs %s" % (what, g["part_step"], w["part"]))
        check(g["token"] == w["token"] and g["token_common"] == w["token_common"],
              "%s: tokens at the part" % what)
        for key in ("margin", "margin_common"):
            check((g[key] is None) == (w[key] is None) and
                  (g[key] is None or abs(g[key] - w[key]) <= 1e-6 * max(1.0, abs(w[key]))),
                  "%s: %s %s vs %s" % (what, key, g[key], w[key]))
    hist = collections.Counter()
    for w in want[1:]:
        hist[w["part"]] += len(w["runs"])
    check({h["step"]: h["runs"] for h in got_req["parting_steps"]} == dict(hist),
          "%s: histogram %s vs %s" % (what, got_req["parting_steps"], dict(hist)))


def hf_runs(tmp):
    cfg = transformers.LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    base = transformers.LlamaForCausalLM(cfg).eval()
    prompt = torch.tensor([[5, 17, 42, 8]])
    paths, gens = [], []
    # Runs 0, 1, 3: the model; run 2 and 4: its lm_head nudged (another completion).
    for i, nudge in enumerate([0.0, 0.0, 0.5, 0.0, 0.5]):
        model = transformers.LlamaForCausalLM(cfg).eval()
        model.load_state_dict(base.state_dict())
        if nudge:
            with torch.no_grad():
                model.lm_head.weight[7] += nudge
        path = os.path.join(tmp, "hf%d.h5" % i)
        with torch.no_grad(), ulpprof.torch.capture(model, path, sublayers=False, tokens=True):
            out = model.generate(prompt, max_new_tokens=10, do_sample=False, output_scores=True,
                                 return_dict_in_generate=True, pad_token_id=0)
        toks = out.sequences[0, prompt.shape[1]:].tolist()
        margins = []
        for s in out.scores:
            v = torch.topk(s[0].double(), 2).values
            margins.append(float(v[0] - v[1]))
        paths.append(path)
        gens.append((toks, margins))
    return paths, gens


def capi_runs(tmp):
    rng = np.random.default_rng(5)
    common = rng.integers(0, 1000, 12)
    variants = {0: common, 1: common.copy(), 2: common.copy(), 3: common[:9]}
    variants[1][4] += 1
    variants[2][7] += 3
    plan = [0, 1, 0, 2, 0, 3, 1, 0]  # run -> variant
    paths, gens = [], []
    for i, v in enumerate(plan):
        toks = variants[v]
        margins = rng.random(len(toks)) + i  # each run's margins its own
        path = os.path.join(tmp, "c%d.h5" % i)
        w = capwriter.Writer(path)
        # Two requests: request 3 gets the plan, request 9 the same tokens in every run.
        for req, tk in ((3, toks), (9, common)):
            rows = np.stack([np.asarray(tk, np.float64), margins[:len(tk)] if req == 3
                             else np.ones(len(tk))], axis=1)
            pos = np.arange(6, 6 + len(tk))
            st = w.capture("tokens", rows, "f64", positions=pos, requests=np.full(len(tk), req))
            assert st == 0, st
        w.close()
        paths.append(path)
        gens.append((list(int(x) for x in toks), list(margins[:len(toks)])))
    return paths, gens


def main():
    with tempfile.TemporaryDirectory() as tmp:
        paths, gens = hf_runs(tmp)
        check(len(set(tuple(g[0]) for g in gens)) == 2, "the nudge gives a second completion")
        rep, rc = streams(paths)
        check(rc == 1, "parted completions: exit 1")
        check(len(rep["requests"]) == 1 and rep["requests"][0]["request"] == 0, "one request 0")
        compare(rep["requests"][0], expected(gens), "hf")

        paths, gens = capi_runs(tmp)
        rep, rc = streams(paths)
        check([r["request"] for r in rep["requests"]] == [3, 9], "requests 3 and 9")
        compare(rep["requests"][0], expected(gens), "capi request 3")
        check(len(rep["requests"][1]["completions"]) == 1, "capi request 9: one completion")
        p = subprocess.run([ULPPROF, "streams", paths[0]], capture_output=True, text=True)
        check(p.returncode == 0, "one run: exit 0")
        bad = os.path.join(tmp, "bad.h5")
        w = capwriter.Writer(bad)
        w.capture("x", np.zeros((2, 2), np.float32), "f32")
        w.close()
        p = subprocess.run([ULPPROF, "streams", bad], capture_output=True, text=True)
        check(p.returncode == 2 and "bad.h5" in p.stderr and len(p.stderr.splitlines()) == 1,
              "no tokens: exit 2, one line naming the file: %r" % p.stderr)
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

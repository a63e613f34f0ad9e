#!/usr/bin/python3
"""Token alignment on a real HF `transformers` model (4.44.2 from
.ci/pyenv; Qwen2 and Llama, small random configs, float32, CPU torch, one
thread): the runs are captured with the ulpprof.torch helper exactly as a
user would, `ulpprof diff` runs with no flags, and every aligned row of its
report -- positions compared and on one side, elements, max ULP, the first
differing position, the runs of differing positions and where each was
introduced -- is checked against aligned_ref.py, a recomputation from
FORMAT.md with h5py and numpy.

Pairs: a cache miss (104 tokens in one pass) against a hit (the 96-token
prefix in its own earlier pass, then the 8-token suffix over its KV cache),
the same hit with the prefix in chunks of 32, the hit with only its suffix
captured (the report must say the difference entered through rows it never
captured, and what to capture), batch 1 against batch 4 with the request in
row 2, and 8 greedy decode steps at batch 1 and batch 4.

Runs under the .ci/pyenv interpreter when this one lacks transformers, and
fails when no interpreter with transformers can be made (pyenv_reexec.py).
"""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("ULPPROF_BUILD_DIR", os.path.join(SRC, "build"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("transformers")
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.join(SRC, "python"))
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
import aligned_ref  # noqa: E402
import ulpprof.torch  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
HASWELL = os.environ.get("OPENBLAS_CORETYPE", "").lower() == "haswell"
torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def model_of(arch):
    torch.manual_seed(0)
    kw = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              attn_implementation="eager")
    if arch == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kw)).eval()
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw)).eval()


def diff(a, b, tag):
    p = subprocess.run([ULPPROF, "diff", "--format", "json", a, b], capture_output=True,
                       text=True)
    if p.returncode not in (0, 1):
        fails.append("%s: ulpprof diff exit %d: %s" % (tag, p.returncode, p.stderr))
        return None
    doc = json.loads(p.stdout)
    bad, rows, org = aligned_ref.check_report(a, b, doc)
    for x in bad:
        fails.append("%s: %s" % (tag, x))
    return doc


def run(tmp, arch):
    model = model_of(arch)
    ids = torch.randint(0, 128, (4, 104), generator=torch.Generator().manual_seed(3))
    b4 = ids.clone()
    b4[2] = ids[0]
    P = lambda n: os.path.join(tmp, "%s-%s.h5" % (arch, n))  # noqa: E731
    with torch.no_grad():
        with ulpprof.torch.capture(model, P("miss"), label="miss", run={"cache": "miss"}):
            model(ids[:1])
        with ulpprof.torch.capture(model, P("hit"), label="hit", run={"cache": "hit"}):
            pre = model(ids[:1, :96], use_cache=True)
            model(ids[:1, 96:], past_key_values=pre.past_key_values, use_cache=True)
        if arch != "qwen2":
            return P, None
        with ulpprof.torch.capture(model, P("hit32"), label="hit32", run={"cache": "hit"}):
            pkv = None
            for lo in range(0, 96, 32):
                pkv = model(ids[:1, lo:lo + 32], past_key_values=pkv, use_cache=True)
                pkv = pkv.past_key_values
            model(ids[:1, 96:], past_key_values=pkv, use_cache=True)
        pre = model(ids[:1, :96], use_cache=True)
        with ulpprof.torch.capture(model, P("suffix"), label="suffix", run={"cache": "hit"}):
            model(ids[:1, 96:], past_key_values=pre.past_key_values, use_cache=True)
        with ulpprof.torch.capture(model, P("bs4"), label="bs4", run={"batch_size": "4"},
                                   requests=[10, 11, 0, 13]):
            model(b4)
        with ulpprof.torch.capture(model, P("gen1"), label="gen1", run={"batch_size": "1"}):
            g1 = model.generate(ids[:1, :16], max_new_tokens=8, do_sample=False)
        with ulpprof.torch.capture(model, P("gen4"), label="gen4", run={"batch_size": "4"},
                                   requests=[10, 11, 0, 13]):
            g4 = model.generate(b4[:, :16], max_new_tokens=8, do_sample=False)
    return P, (g1, g4)


def main():
    with tempfile.TemporaryDirectory(prefix="ulpprof-align-hf-") as tmp:
        for arch in ("qwen2", "llama"):
            P, gen = run(tmp, arch)
            doc = diff(P("miss"), P("hit"), arch + " miss/hit")
            # With OpenBLAS's Haswell kernels (CI's) GEMM bits depend on M: the
            # hit's passes differ from the miss's (generic kernels may not).
            if doc is not None and HASWELL:
                check(doc["first_divergence"] is not None, arch + ": miss and hit identical")
            if doc is not None and doc["first_divergence"] is not None:
                fd = doc["first_divergence"]
                # Every position of both passes captured: the difference is
                # found where it starts, and the report says so in words.
                check(fd["origin"] == "introduced", "%s: origin %s" % (arch, fd["origin"]))
                run0 = doc["rows"][fd["row"]]["differing_positions"][0]
                words = ("position %d" % run0["first"] if run0["first"] == run0["last"]
                         else "positions %d-%d" % (run0["first"], run0["last"]))
                check(words in fd["text"], "%s: text %r lacks %r" % (arch, fd["text"], words))
                check(doc["rows"][fd["row"]]["positions_compared"] == 104, arch + ": 104 keys")
            if gen is None:
                continue
            diff(P("miss"), P("hit32"), "hit in chunks of 32")
            doc = diff(P("miss"), P("suffix"), "suffix only")
            if doc is not None and doc["first_divergence"] is not None:
                fd = doc["first_divergence"]
                row = doc["rows"][fd["row"]]
                check(row["positions_only_in_a"] == 96, "suffix only: 96 keys only in A")
                check(fd["origin"] == "not_captured", "suffix only: origin %s" % fd["origin"])
                check(row["capture_next"] is not None and
                      (row["capture_next"]["first"], row["capture_next"]["last"]) == (0, 95),
                      "suffix only: capture next %r" % row["capture_next"])
            elif doc is not None and HASWELL:
                fails.append("suffix only: identical")
            doc = diff(P("miss"), P("bs4"), "bs1/bs4")
            if doc is not None:
                r = [x for x in doc["rows"] if x["name"] == "model.layers.0"][0]
                check((r["positions_compared"], r["positions_only_in_b"]) == (104, 3 * 104),
                      "bs1/bs4 keys %r" % ((r["positions_compared"], r["positions_only_in_b"]),))
            diff(P("gen1"), P("gen4"), "decode bs1/bs4")
            g1, g4 = gen
            check(g1.shape[1] == 24 and g4.shape[1] == 24, "8 greedy steps")
    for f in fails:
        print("FAIL:", f)
    if not fails:
        print("test_align_hf: all passed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

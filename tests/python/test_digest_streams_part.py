"""Digest-only runs keep their fed token ids in full (FORMAT.md "Digests"),
so that `ulpprof diff` of two digest-only runs whose token streams part
says where: request, position, the step and the token each run fed.

Two runs of one tiny HF Llama (from .ci/pyenv) under capture(mode="digest"):
a prompt, then decode steps fed by hand from two lists that agree up to
one index.  Expected figures come from those lists and the prompt's
length, and from the files read with h5py, never from ulpprof's output."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("transformers")
import digests_h5  # noqa: E402  (h5py alone: /captures, and what /digests keeps)
import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BUILD = os.environ.get("ULPPROF_BUILD_DIR", os.path.join(SRC, "build"))
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
import ulpprof.torch  # noqa: E402

fails = []


def check(cond, what):
    if not cond:
        fails.append(what)
        print("FAIL: " + what)


transformers.logging.set_verbosity_error()
torch.manual_seed(0)
cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                               num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                               max_position_embeddings=64)
model = transformers.LlamaForCausalLM(cfg).eval()
PROMPT = torch.randint(0, 64, (1, 5))
FEED_A = [3, 4, 5, 6, 7]
FEED_B = [3, 4, 9, 6, 7]  # parts at index 2
PART = 2


def run(path, feed):
    with torch.no_grad(), ulpprof.torch.capture(model, path, mode="digest", tokens=True):
        out = model(PROMPT, use_cache=True)
        cache = out.past_key_values
        for t in feed:
            out = model(torch.tensor([[t]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values


with tempfile.TemporaryDirectory() as d:
    a, b = os.path.join(d, "a.h5"), os.path.join(d, "b.h5")
    run(a, FEED_A)
    run(b, FEED_B)
    with h5py.File(a, "r") as f:
        caps = sorted(f["captures"].keys()) if "captures" in f else []
        kept = sorted(digests_h5.kept(f))
        check(caps == [] and kept == ["input_ids", "tokens"], "digest-mode /captures holds %s "
              "and /digests keeps %s, not nothing and input_ids, tokens" % (caps, kept))
        got = []
        for occ in digests_h5.captures(f, "input_ids"):
            got += list(zip(np.asarray(occ.attrs["positions"]).reshape(-1).tolist(),
                            np.asarray(occ[()]).reshape(-1).tolist()))
        want = list(enumerate(PROMPT[0].tolist())) + [(5 + i, t) for i, t in enumerate(FEED_A)]
        check(sorted(got) == want, "input_ids kept in full: %s, want %s" % (sorted(got), want))
        check("model.layers.0" in digests_h5.read(f) and "model.layers.0" not in caps and
              "model.layers.0" not in kept, "layer outputs are digests only")
    # capture(mode="digest") gives the mode at the open: the file is made for digests, and
    # so rewritten tight at its close, without the journal (FORMAT.md "Digests", "A digest
    # file's close"; a file whose mode was set after the open keeps it).
    with h5py.File(a, "r") as f:
        check("journal" not in f, "capture(mode='digest') file not rewritten at its close: %s"
              % sorted(f))
    # ULPPROF_CAPTURE_MODE decides when capture() is given no mode (its default, "data").
    e = os.path.join(d, "env.h5")
    os.environ["ULPPROF_CAPTURE_MODE"] = "digest"
    try:
        with torch.no_grad(), ulpprof.torch.capture(model, e, tokens=True):
            model(PROMPT, use_cache=True)
    finally:
        del os.environ["ULPPROF_CAPTURE_MODE"]
    with h5py.File(e, "r") as f:
        caps = sorted(f["captures"].keys()) if "captures" in f else []
        check(caps == [] and "model.layers.0" in digests_h5.read(f) and "journal" not in f,
              "ULPPROF_CAPTURE_MODE=digest, capture() without a mode: /captures %s, root %s"
              % (caps, sorted(f)))
    ulpprof_bin = os.path.join(BUILD, "programs", "ulpprof")
    p = subprocess.run([ulpprof_bin, "diff", "-f", "json", a, b], capture_output=True, text=True)
    check(p.returncode == 1, "diff exit %d, want 1: %s" % (p.returncode, p.stderr))
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    check(doc.get("format") == "ulpprof-digest-diff", "the digest comparison: %s"
          % doc.get("format"))
    # Step 0 is the prompt's forward; decode step i + 1 feeds FEED[i] at position 5 + i.
    want = [{"source": "input_ids", "request": 0, "position": 5 + PART,
             "token_a": FEED_A[PART], "token_b": FEED_B[PART], "step_a": PART + 1,
             "step_b": PART + 1}]
    check(doc.get("streams_part") == want, "streams_part %s, want %s"
          % (doc.get("streams_part"), want))
    p = subprocess.run([ulpprof_bin, "diff", a, b], capture_output=True, text=True)
    line = ("token streams part at request 0, position %d (step %d in A): A fed token %d, "
            "B fed token %d (recorded in input_ids)" % (5 + PART, PART + 1, FEED_A[PART],
                                                        FEED_B[PART]))
    check(line in p.stdout, "table says %r:\n%s" % (line, p.stdout))
    # Two digest-only runs fed alike: no part, and the stream entry is empty.
    c = os.path.join(d, "c.h5")
    run(c, FEED_A)
    p = subprocess.run([ulpprof_bin, "diff", "-f", "json", a, c], capture_output=True, text=True)
    doc = json.loads(p.stdout) if p.stdout.strip() else {}
    check(doc.get("streams_part") == [], "same feed: streams_part %s" % doc.get("streams_part"))
    check(p.returncode == 0 and doc.get("identical") is True,
          "same feed: exit %d, identical %s" % (p.returncode, doc.get("identical")))

print("FAIL" if fails else "ok")
sys.exit(1 if fails else 0)

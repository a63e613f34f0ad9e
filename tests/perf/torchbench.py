"""What the PyTorch benchmarks in tests/perf/ (bench_capture_call.py,
bench_digest_torch.py, bench_torch.py) share: the build-directory argument,
the environment (thread counts before torch loads, the .ci/pyenv
interpreter for transformers, the capture library of that build), the
random HF models, the forward passes and the round-by-round timing of
several ways of running them.  Not a benchmark itself.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "tests", "python"))
import pyenv_reexec  # noqa: E402


def parser():
    """An ArgumentParser that takes the build directory (default
    $ULPPROF_BUILD_DIR, else the checkout's build/)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.environ.get("ULPPROF_BUILD_DIR",
                                                               os.path.join(SRC, "build")))
    return ap


def setup(build, threads):
    """Sets the thread counts before torch loads (OpenBLAS and OpenMP threads
    that spin between GEMMs would count as CPU time of every way alike),
    re-executes under .ci/pyenv when this interpreter lacks transformers,
    points ulpprof at `build`'s capture library and seeds torch.  Returns
    (torch, transformers)."""
    os.environ["OMP_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    pyenv_reexec.unless("transformers")
    import torch
    import transformers
    os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(os.path.abspath(build), "capture",
                                                         "libulpprof_capture.so")
    sys.path.insert(0, os.path.join(SRC, "python"))
    torch.set_num_threads(threads)
    transformers.logging.set_verbosity_error()
    torch.manual_seed(0)
    return torch, transformers


def llama(vocab, hidden, intermediate, layers, heads, kv_heads, max_positions):
    """A random float32 Llama in eval mode."""
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=vocab, hidden_size=hidden,
                                   intermediate_size=intermediate, num_hidden_layers=layers,
                                   num_attention_heads=heads, num_key_value_heads=kv_heads,
                                   max_position_embeddings=max_positions)
    return transformers.LlamaForCausalLM(cfg).eval()


def qwen2(vocab, hidden, intermediate, layers, heads, kv_heads):
    """A random float32 Qwen2 in eval mode."""
    import transformers
    cfg = transformers.Qwen2Config(vocab_size=vocab, hidden_size=hidden,
                                   intermediate_size=intermediate, num_hidden_layers=layers,
                                   num_attention_heads=heads, num_key_value_heads=kv_heads)
    return transformers.Qwen2ForCausalLM(cfg).eval()


def token_ids(vocab, tokens):
    """One request of `tokens` random token ids."""
    import torch
    return torch.randint(0, vocab, (1, tokens))


def forwards(model, ids, n):
    """n forward passes without gradients."""
    import torch
    with torch.no_grad():
        for _ in range(n):
            model(ids)


def rounds(ways, n, after_way=None, after_round=None):
    """Runs every (name, fn) of `ways` once a round for n rounds, the order
    rotating so that a neighbour's load falls on every way alike; fn(r) is
    timed by the wall clock and the process CPU clock (every thread's).
    after_way(r, name, result) and after_round(r, results) run outside the
    clocks.  Returns ({name: [wall s]}, {name: [cpu s]}, the last round's
    results)."""
    wall = {w: [] for w, _ in ways}
    cpu = {w: [] for w, _ in ways}
    results = {}
    for r in range(n):
        order = ways[r % len(ways):] + ways[:r % len(ways)]
        results = {}
        for name, fn in order:
            w0, c0 = time.perf_counter(), time.process_time()
            results[name] = fn(r)
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
            if after_way:
                after_way(r, name, results[name])
        if after_round:
            after_round(r, results)
    return wall, cpu, results


def spread(xs, unit=""):
    """The median [min-max] of xs."""
    return "%.3f%s [%.3f-%.3f]" % (statistics.median(xs), unit, min(xs), max(xs))

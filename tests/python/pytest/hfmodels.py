"""The suite's fixtures: small random HF models (nothing downloaded), float32 on the CPU, one
thread; the ulpprof build tree's program and capture library (set by
tests/python/test_pytest.py, which runs this suite, and by test_pytest_new.py, which runs it
under the newest torch and transformers)."""
import os
import sys

import pytest
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
ARCHS = ["gpt2", "llama", "qwen2", "mixtral"]
ATTNS = ["eager", "sdpa"]
TRANSFORMERS_MAJOR = int(transformers.__version__.split(".")[0])
# PyPI's torch does its float32 GEMMs with MKL, Debian's torch 1.13 with OpenBLAS.
MKL = torch.backends.mkl.is_available()
# OPENBLAS_CORETYPE=Haswell: Debian torch 1.13's OpenBLAS then picks its
# GEMM kernel by the number of rows, so a prefix-cache hit (8 new rows)
# rounds differently from the miss (40 rows), in every architecture here.
# Set by test_pytest.py when the CPU has AVX2.
HASWELL = not MKL and os.environ.get("OPENBLAS_CORETYPE", "").lower() == "haswell"
# MKL (PyPI's torch): a mixture of experts' hit differs from its miss.  Each
# expert's GEMM takes the tokens routed to it, whose number differs between
# the miss (40 tokens) and the hit (8), and MKL's kernels round a row
# differently with that number: measured here on both of MKL's x86 code
# paths (MKL_ENABLE_INSTRUCTIONS=AVX2 and AVX512).  On the AVX-512 path the
# dense models' hit is their miss bit for bit.
# The architecture whose hit the five-line test expects to fail.
DIVERGING = "mixtral" if MKL else "qwen2"


def hit_differs(arch):
    """Whether this world's miss/hit pair of `arch` is known to differ."""
    return HASWELL or (MKL and arch == "mixtral")


def model_of(arch, attn="eager"):
    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4,
                                      n_positions=64, attn_implementation=attn)
        return transformers.GPT2LMHeadModel(cfg).eval()
    kw = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              attn_implementation=attn)
    if arch == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw)).eval()
    if arch == "mixtral":  # 4 experts, 2 per token
        return transformers.MixtralForCausalLM(transformers.MixtralConfig(
            num_local_experts=4, num_experts_per_tok=2, **kw)).eval()
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kw)).eval()


@pytest.fixture(params=ARCHS)
def model(request):
    with torch.no_grad():
        yield model_of(request.param)


@pytest.fixture
def prompt():
    return torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(1))

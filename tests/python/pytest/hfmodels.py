"""The suite's fixtures: small random HF models (nothing downloaded), float32 on the CPU, one
thread; the ulpprof build tree's program and capture library (set by
tests/python/test_pytest.py, which runs this suite)."""
import os
import sys

import pytest
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
ARCHS = ["gpt2", "llama", "qwen2"]
# OPENBLAS_CORETYPE=Haswell: Debian torch 1.13's OpenBLAS then picks its
# GEMM kernel by the number of rows, so a prefix-cache hit (8 new rows)
# rounds differently from the miss (40 rows).  Set by test_pytest.py when
# the CPU has AVX2.
HASWELL = os.environ.get("OPENBLAS_CORETYPE", "").lower() == "haswell"


def model_of(arch):
    torch.manual_seed(0)
    if arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=256, n_embd=64, n_layer=2, n_head=4,
                                      n_positions=64, attn_implementation="eager")
        return transformers.GPT2LMHeadModel(cfg).eval()
    kw = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              attn_implementation="eager")
    if arch == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**kw)).eval()
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**kw)).eval()


@pytest.fixture(params=ARCHS)
def model(request):
    with torch.no_grad():
        yield model_of(request.param)


@pytest.fixture
def prompt():
    return torch.randint(0, 256, (1, 40), generator=torch.Generator().manual_seed(1))

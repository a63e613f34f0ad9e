"""A prefix-cache miss and hit of a small random Qwen2 (HF transformers, CPU,
nothing downloaded), captured with ulpprof.torch; then: ulpprof diff miss.h5 hit.h5"""
import torch
import transformers
import ulpprof.torch

torch.manual_seed(0)
cfg = transformers.Qwen2Config(vocab_size=1000, hidden_size=128, intermediate_size=384,
                               num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2)
model = transformers.Qwen2ForCausalLM(cfg).eval()
prompt = torch.randint(0, 1000, (1, 40))
with torch.no_grad():
    with ulpprof.torch.capture(model, "miss.h5", label="miss", run={"cache": "miss"}):
        model(prompt, past_key_values=transformers.DynamicCache())  # 40 tokens, one pass
    with ulpprof.torch.capture(model, "hit.h5", label="hit", run={"cache": "hit"}):
        cache = transformers.DynamicCache()
        model(prompt[:, :32], past_key_values=cache)        # the prefix, cached earlier
        model(prompt[:, 32:], past_key_values=cache)        # then the 8 new tokens

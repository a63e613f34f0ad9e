"""Prints, as JSON, the module names (`model.named_modules()`) of tiny
random HF transformers models, one list per architecture that this
interpreter's transformers has: {"transformers": VERSION, "trees": {ARCH:
[NAME, ...]}}.  Run by test_sites_real.py under .ci/pyenv and
.ci/pyenv-new."""
import json
import sys

import transformers

TINY = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
ARCHS = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", {}),
    "mistral": ("MistralConfig", "MistralForCausalLM", {}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_local_experts=2, num_experts_per_tok=1)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=2, num_experts_per_tok=1, moe_intermediate_size=8,
                       shared_expert_intermediate_size=8)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(pad_token_id=0)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(head_dim=8)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(vocab_size=64, n_embd=16, n_layer=2, n_head=2,
                                                   n_positions=32)),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", {}),
}


def main():
    trees = {}
    for arch, (cfg_name, cls_name, extra) in ARCHS.items():
        cfg_cls = getattr(transformers, cfg_name, None)
        cls = getattr(transformers, cls_name, None)
        if cfg_cls is None or cls is None:
            continue
        kw = {} if arch == "gpt2" else dict(TINY)
        kw.update(extra)
        model = cls(cfg_cls(**kw))
        trees[arch] = [n for n, _ in model.named_modules() if n]
    json.dump({"transformers": transformers.__version__, "trees": trees}, sys.stdout)


if __name__ == "__main__":
    main()

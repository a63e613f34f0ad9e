"""Prints, as JSON, the module names (`named_modules()`) of a tiny
Megatron-Core GPTModel built on the CPU from the unpacked wheel at argv[1]
(its local layer spec, RMSNorm, gated MLP, grouped-query attention, one
process group of one rank over gloo): {"megatron_core": VERSION, "tree":
[NAME, ...]}.  Run by test_sites_real.py under .ci/pyenv-new."""
import json
import os
import sys
import warnings

sys.path.insert(0, sys.argv[1])
warnings.simplefilter("ignore")
import torch  # noqa: E402

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", sys.argv[2] if len(sys.argv) > 2 else "29533")
torch.distributed.init_process_group("gloo", rank=0, world_size=1)
from megatron.core import package_info, parallel_state  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.core.models.gpt.gpt_model import GPTModel  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402

parallel_state.initialize_model_parallel(1, 1)
cfg = TransformerConfig(num_layers=2, hidden_size=16, num_attention_heads=2, num_query_groups=1,
                        ffn_hidden_size=32, gated_linear_unit=True, use_cpu_initialization=True,
                        normalization="RMSNorm", add_bias_linear=False)
model = GPTModel(config=cfg, transformer_layer_spec=get_gpt_layer_local_spec(
    normalization="RMSNorm"), vocab_size=64, max_sequence_length=32,
    position_embedding_type="rope")
json.dump({"megatron_core": package_info.__version__,
           "tree": [n for n, _ in model.named_modules() if n]}, sys.stdout)
torch.distributed.destroy_process_group()

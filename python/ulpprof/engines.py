"""Attaching ulpprof.torch inside inference engines (vLLM, SGLang).

The engines' model classes use the checkpoint's module names, the same as HF
transformers (`model.embed_tokens`, `model.layers.N.self_attn`, `.mlp`,
`model.norm`), so the default discovery finds them, and their forward
`(input_ids[T], positions[T], ...)` gives every [T, ...] capture its token
positions (a position that does not follow the previous one starts the next
request).  Two differences from HF, handled by attach():
  * a decoder layer returns `(hidden_states, residual)`, and the residual
    stream is their sum (the add is fused into the next norm): attach()
    captures both (`model.layers.N` and `model.layers.N.1`);
  * logits come from `logits_processor` (one row per sequence), not from
    `lm_head`, whose forward is never called.
Per-layer capture needs eager execution: vLLM `enforce_eager=True`, SGLang
`--disable-cuda-graph` (CUDA graphs replay without Python, so no hook runs;
the CUDA collector skips and counts marks during graph capture).
docs/engines.md has the recipes.
"""
from .torch import capture

__all__ = ["attach", "vllm_model"]

_attached = []


def attach(model, path=None, **options):
    """Hooks an engine's model for the rest of the process (closed at exit)
    and returns the Capture.  path None: ULPPROF_OUTPUT (`ulpprof record -o`,
    use %p for one file per worker process).  Defaults: outputs="all"."""
    options.setdefault("outputs", "all")
    cap = capture(model, path, **options)
    _attached.append(cap)
    return cap


def vllm_model(llm):
    """The torch model inside a vLLM `LLM` whose workers run in this process
    (vLLM's V0 engine, or V1 with VLLM_ENABLE_V1_MULTIPROCESSING=0); raises
    LookupError naming what is missing otherwise.  Across processes, use
    `llm.apply_model(lambda m: ulpprof.engines.attach(m, "run-%p.h5"))`
    (vLLM >= 0.9) instead."""
    paths = ("llm_engine.model_executor.driver_worker.model_runner.model",
             "llm_engine.model_executor.driver_worker.worker.model_runner.model",
             "llm_engine.engine_core.engine_core.model_executor.driver_worker.worker"
             ".model_runner.model")
    for p in paths:
        obj = llm
        try:
            for part in p.split("."):
                obj = getattr(obj, part)
            return obj
        except AttributeError:
            continue
    raise LookupError("no model runner in this process (tried %s); with vLLM's V1 engine set "
                      "VLLM_ENABLE_V1_MULTIPROCESSING=0 or use llm.apply_model" % ", ".join(paths))

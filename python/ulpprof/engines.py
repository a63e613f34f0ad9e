"""Attaching ulpprof.torch inside inference engines (vLLM, SGLang).

The engines' model classes use the checkpoint's module names, the same as HF
transformers (`model.embed_tokens`, `model.layers.N.self_attn`, `.mlp`,
`model.norm`), so the default discovery finds them, and their forward
`(input_ids[T], positions[T], ...)` gives every [T, ...] capture its token
positions (a decode step of one request, [1, H], included; a position that
does not follow the previous one starts the next request).  Differences
from HF, handled by attach():
  * a decoder layer returns `(hidden_states, residual)`, and the residual
    stream is their sum (the add is fused into the next norm): attach()
    captures both (`model.layers.N` and `model.layers.N.1`);
  * logits come from `logits_processor` (one row per sequence), not from
    `lm_head`, whose forward is never called;
  * vLLM: with the model runner known (vllm_model(), or the worker
    function vllm_worker_attach()), each token's request is the engine's
    own request (its id, numbered in order of first appearance), not a
    position restart, so a request keeps its number across steps and two
    requests at consecutive positions stay apart; and the logits, which
    vLLM computes after the forward returns (`compute_logits`, one row per
    request: its last token of the step), get those tokens' positions and
    requests.  The captured `input_ids` let `ulpprof diff` pair the
    requests of two runs by their tokens.  tokens=True records each
    request's produced token and top-2 margin from those logits (not for
    a partial prefill, whose token vLLM discards): `ulpprof streams`.
Per-layer capture needs eager execution: vLLM `enforce_eager=True`, SGLang
`--disable-cuda-graph` (CUDA graphs replay without Python, so no hook runs;
the CUDA collector skips and counts marks during graph capture).
docs/engines.md has the recipes.
"""
import functools

import torch as _torch

from .torch import capture

__all__ = ["attach", "vllm_model", "vllm_worker_attach", "vllm_worker_close"]

_attached = []
_runners = {}  # id(model) -> the vLLM model runner that calls it (vllm_model, the worker)


class _VllmTokens:
    """The tokens of a vLLM V1 model runner's forward call: positions from
    the call, requests from the runner's input batch (req_ids and
    query_start_loc, set before the model runs)."""

    def __init__(self, runner):
        self.runner = runner
        self.numbers = {}  # vLLM request id -> the capture's request number
        self.last = None  # (positions[T], requests[T], query_start_loc[R + 1], prompt lengths[R])

    def __call__(self, args, kwargs):
        self.last = None
        pos = kwargs.get("positions")
        if pos is None and len(args) > 1:
            pos = args[1]
        batch = getattr(self.runner, "input_batch", None)
        qsl = getattr(self.runner, "query_start_loc", None)
        if not _torch.is_tensor(pos) or pos.dim() != 1 or batch is None or qsl is None:
            return None
        n = int(batch.num_reqs)
        ids = list(batch.req_ids[:n])
        starts = _torch.as_tensor(qsl.np[:n + 1] if hasattr(qsl, "np") else qsl[:n + 1]) \
            .to(_torch.int64)
        total = int(starts[-1]) if n else 0
        if len(ids) != n or total == 0 or total > pos.shape[0]:
            return None
        for r in ids:
            self.numbers.setdefault(r, len(self.numbers))
        req = _torch.repeat_interleave(_torch.tensor([self.numbers[r] for r in ids]),
                                       starts[1:] - starts[:-1])
        positions = pos[:total].detach().to("cpu", _torch.int64)
        prompt = getattr(batch, "num_prompt_tokens", None)
        prompt = _torch.as_tensor(prompt[:n]).to(_torch.int64) if prompt is not None else None
        self.last = (positions, req, starts, prompt)
        return positions, req, pos.shape[0]

    def logits_rows(self, rows):
        """(positions, requests, produces) of compute_logits' rows: one per
        request (its last token of the step; produces: its logits emit a
        token, the request's prompt is all fed: a partial prefill's token is
        discarded), or one per token (produces None); None otherwise."""
        if self.last is None:
            return None
        pos, req, starts, prompt = self.last
        if rows == starts.shape[0] - 1:
            idx = starts[1:] - 1
            produces = pos[idx] >= prompt - 1 if prompt is not None else None
            return pos[idx], req[idx], produces
        if rows == pos.shape[0]:
            return pos, req, None
        return None


def attach(model, path=None, runner=None, **options):
    """Hooks an engine's model for the rest of the process (closed at exit)
    and returns the Capture.  path None: ULPPROF_OUTPUT (`ulpprof record -o`,
    use %p for one file per worker process).  runner: vLLM's model runner
    (vllm_model() remembers it for its model): requests are the engine's,
    logits get positions.  Defaults: outputs="all"."""
    options.setdefault("outputs", "all")
    if runner is None:
        runner = _runners.get(id(model))
    source = None
    if runner is not None and getattr(runner, "input_batch", None) is not None:
        source = _VllmTokens(runner)
        options.setdefault("flat_tokens", source)
    cap = capture(model, path, **options)
    _attached.append(cap)
    orig = getattr(model, "compute_logits", None)
    if source is not None and callable(orig):
        @functools.wraps(orig)
        def compute_logits(hidden_states, *args, **kwargs):
            rows = None
            if not cap._closed and _torch.is_tensor(hidden_states) and hidden_states.dim() >= 1:
                rows = source.logits_rows(hidden_states.shape[0])
            if rows is None:
                return orig(hidden_states, *args, **kwargs)
            with cap.rows(*rows):
                return orig(hidden_states, *args, **kwargs)

        had = "compute_logits" in model.__dict__
        model.compute_logits = compute_logits
        close = cap.close

        def closed():
            if model.__dict__.get("compute_logits") is compute_logits:
                if had:
                    model.compute_logits = orig
                else:
                    del model.compute_logits
            close()

        cap.close = closed
    return cap


def _runner_of(llm):
    paths = ("llm_engine.model_executor.driver_worker.model_runner",
             "llm_engine.model_executor.driver_worker.worker.model_runner",
             "llm_engine.engine_core.engine_core.model_executor.driver_worker.worker"
             ".model_runner")
    for p in paths:
        obj = llm
        try:
            for part in p.split("."):
                obj = getattr(obj, part)
            return obj
        except AttributeError:
            continue
    raise LookupError("no model runner in this process (tried %s); with vLLM's V1 engine set "
                      "VLLM_ENABLE_V1_MULTIPROCESSING=0, or attach in the worker: "
                      "llm.collective_rpc(ulpprof.engines.vllm_worker_attach, args=(path,))"
                      % ", ".join(p + ".model" for p in paths))


def vllm_model(llm):
    """The torch model inside a vLLM `LLM` whose workers run in this process
    (vLLM's V1 engine with VLLM_ENABLE_V1_MULTIPROCESSING=0, or V0); raises
    LookupError naming what is missing otherwise.  attach() then knows its
    model runner.  With the worker in its own process, attach there:
    `llm.collective_rpc(ulpprof.engines.vllm_worker_attach, args=(path,))`."""
    runner = _runner_of(llm)
    model = runner.model
    _runners[id(model)] = runner
    return model


def vllm_worker_attach(worker, path=None, **options):
    """Attaches to the model of a vLLM worker, in the worker's process, and
    returns the snapshot's path there (a string, which vLLM can send back).
    Made to be sent to the workers by vLLM (a module-level function, which
    pickles by name; vLLM sends a function only with
    VLLM_ALLOW_INSECURE_SERIALIZATION=1):
        llm.collective_rpc(ulpprof.engines.vllm_worker_attach,
                           args=("hit-%p.h5",), kwargs={"label": "hit"})
        llm.generate(...)
        llm.collective_rpc(ulpprof.engines.vllm_worker_close)
    options: those of attach() (label, run, ...)."""
    runner = worker.model_runner
    model = runner.model
    _runners[id(model)] = runner
    return attach(model, path, runner=runner, **options).path


def vllm_worker_close(worker=None):
    """Closes every capture attach() made in this process (the worker's,
    through llm.collective_rpc) and returns their paths: the files are
    complete when it returns."""
    paths = []
    while _attached:
        cap = _attached.pop(0)
        if cap.path is not None and cap.path not in paths:
            paths.append(cap.path)
        cap.close()
    return paths

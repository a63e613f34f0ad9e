"""Finds the captures of an HF-style decoder model: its layers, their
attention and MLP, the final norm, the input embeddings and the logits.

Names are the modules' own paths in the model (`model.layers.3.mlp`,
`transformer.h.0`, `lm_head`): the names of the checkpoint's weights, which
HF transformers, vLLM and SGLang share, so runs of different engines pair
by name.  A sub-module of layer N carries layer N.
"""
import re

# Children that hold the decoder layers, and what a layer's children are.
LAYER_LISTS = ("layers", "h", "blocks", "block", "layer")
ATTENTION = ("self_attn", "attn", "attention", "self_attention", "mixer")
MLP = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "moe")
FINAL_NORM = ("norm", "ln_f", "final_layer_norm", "final_layernorm", "norm_f")
EMBEDDING = ("embed_tokens", "wte", "embed_in", "word_embeddings", "tok_embeddings")
LOGITS = ("logits_processor", "lm_head", "embed_out", "output")  # vLLM, SGLang: logits_processor
KV = ("k_proj", "v_proj")

_LAYER_IN_NAME = re.compile(r"(?:^|\.)(?:layers|h|blocks|block|layer)\.(\d+)(?:\.|$)")


class Spec:
    """One module to hook: its capture name, layer, role, and the names of the
    captures it is computed from (FORMAT.md `inputs`)."""

    def __init__(self, path, name, layer, role, inputs=(), kind="activation"):
        self.path, self.name, self.layer, self.role = path, name, layer, role
        self.inputs = list(inputs)
        self.kind = kind

    def __repr__(self):
        return "Spec(%r, layer=%d, role=%r)" % (self.name, self.layer, self.role)


def layer_of(name):
    """The layer number in a name like `model.layers.3.mlp` (3), else -1."""
    m = _LAYER_IN_NAME.search(name)
    return int(m.group(1)) if m else -1


def _module_path(modules, target):
    for path, m in modules.items():
        if m is target:
            return path
    return None


def _child(modules, parent, names):
    for n in names:
        p = parent + "." + n if parent else n
        if p in modules:
            return p
    return None


def find_layers(model):
    """The path of the module list that holds the decoder layers (the longest
    list named like `layers` / `h` / `blocks`), or None."""
    import torch

    best = None
    for path, m in model.named_modules():
        last = path.rsplit(".", 1)[-1]
        if isinstance(m, torch.nn.ModuleList) and last in LAYER_LISTS and len(m) > 0:
            if best is None or len(m) > best[1]:
                best = (path, len(m))
    return best[0] if best else None


def discover(model, layers=None, prefix="", sublayers=True, kv=False, embeddings=True,
             logits=True, norm=True):
    """The list of Specs to hook, in execution order.  `layers`: the path of
    the layer list when discovery cannot find it.  Raises ValueError when the
    model has no decoder layers we can find."""
    # Every path, also those of a module listed twice (one layer repeated in
    # the layer list): each is a capture of its own.
    modules = dict(model.named_modules(remove_duplicate=False))
    lpath = layers if layers is not None else find_layers(model)
    if lpath is None or lpath not in modules:
        raise ValueError("no decoder layers found (a ModuleList named one of %s); pass "
                         "layers='path.to.list'" % (", ".join(LAYER_LISTS)))
    base = lpath.rsplit(".", 1)[0] if "." in lpath else ""

    def nm(path):
        return prefix + path

    specs = []
    prev = None
    emb = None
    get_in = getattr(model, "get_input_embeddings", None)
    if embeddings:
        target = None
        try:
            target = get_in() if callable(get_in) else None
        except (NotImplementedError, AttributeError):
            target = None
        emb = _module_path(modules, target) if target is not None else None
        emb = emb or _child(modules, base, EMBEDDING)
        if emb is not None:
            specs.append(Spec(emb, nm(emb), -1, "activation"))
            prev = nm(emb)
    for i, _ in enumerate(modules[lpath]):
        lp = "%s.%d" % (lpath, i)
        inner = []
        if sublayers or kv:
            attn = _child(modules, lp, ATTENTION)
            mlp = _child(modules, lp, MLP)
            if kv and attn is not None:
                for k in KV:
                    p = attn + "." + k
                    if p in modules:
                        specs.append(Spec(p, nm(p), i, "kv", [prev] if prev else []))
            if sublayers and attn is not None:
                specs.append(Spec(attn, nm(attn), i, "activation", [prev] if prev else []))
                inner.append(nm(attn))
            if sublayers and mlp is not None:
                specs.append(Spec(mlp, nm(mlp), i, "activation",
                                  inner + ([prev] if prev else [])))
                inner.append(nm(mlp))
        specs.append(Spec(lp, nm(lp), i, "activation", inner[::-1] + ([prev] if prev else [])))
        prev = nm(lp)
    if norm:
        np_ = _child(modules, base, FINAL_NORM)
        if np_ is not None:
            specs.append(Spec(np_, nm(np_), -1, "activation", [prev]))
            prev = nm(np_)
    if logits:
        head = None
        get_out = getattr(model, "get_output_embeddings", None)
        try:
            target = get_out() if callable(get_out) else None
        except (NotImplementedError, AttributeError):
            target = None
        head = _child(modules, "", LOGITS[:1])  # the engines compute logits there
        head = head or (_module_path(modules, target) if target is not None else None)
        head = head or _child(modules, "", LOGITS)
        if head is not None and head != emb:
            specs.append(Spec(head, nm(head), -1, "logits", [prev] if prev else []))
    return specs

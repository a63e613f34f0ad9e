"""The module tree of an inference engine's model class, read from its
source with `ast` (vLLM's and SGLang's model classes need a running engine
to be built): the dotted names `named_modules()` would give, with every
list of layers shown as its entries 0 and 1.

    tree(files, "LlamaForCausalLM") -> ["model", "model.embed_tokens", ...]

`files` maps a module name ("llama", "sglang.srt.models.llama") to its
source text.  Every `self.X = <call>` in a class's `__init__` (in any
branch) is a submodule X; when the call names a class of `files` -- as
callee, inside a lambda (`make_layers(n, lambda prefix: Layer(...))`), as
the default of an `__init__` parameter (`layer_type=LlamaDecoderLayer`),
or as what a method of the class returns (`self._init_model(...)`) -- X's
own submodules follow.  A call into a list maker (`make_layers`,
`make_pp_layers`, `nn.ModuleList`) makes X a list.  Attributes that are
not modules (`self.num_heads = max(...)`) come out as names too: no site
rule knows them, and the test expects no site for them."""
import ast

LISTS = {"make_layers", "make_pp_layers", "ModuleList"}


def _callee(call):
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


class _Classes:
    def __init__(self, files):
        self.classes = {}
        for src in files.values():
            for node in ast.walk(ast.parse(src)):
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, node)

    def _method(self, cls, name):
        for b in cls.body:
            if isinstance(b, ast.FunctionDef) and b.name == name:
                return b
        for base in cls.bases:  # an in-file base class's method
            bn = base.id if isinstance(base, ast.Name) else None
            if bn in self.classes and bn != cls.name:
                m = self._method(self.classes[bn], name)
                if m is not None:
                    return m
        return None

    def _defaults(self, fn):
        out = {}
        a = fn.args
        pos = a.posonlyargs + a.args
        for arg, d in zip(pos[len(pos) - len(a.defaults):], a.defaults):
            out[arg.arg] = d
        for arg, d in zip(a.kwonlyargs, a.kw_defaults):
            if d is not None:
                out[arg.arg] = d
        return out

    def _class_in(self, expr, cls, defaults):
        """The first class of `files` that expr builds, or None."""
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                f = node.func
                if (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                        and f.value.id == "self"):
                    m = self._method(cls, f.attr)
                    if m is not None:
                        for r in ast.walk(m):
                            if isinstance(r, ast.Return) and r.value is not None:
                                c = self._class_in(r.value, cls, self._defaults(m))
                                if c:
                                    return c
            if isinstance(node, ast.Name):
                if node.id in self.classes:
                    return node.id
                d = defaults.get(node.id)
                if isinstance(d, ast.Name) and d.id in self.classes:
                    return d.id
        return None

    def children(self, name):
        """[(attr, class or None, is_list)] of class `name`'s __init__."""
        cls = self.classes[name]
        init = self._method(cls, "__init__")
        if init is None:
            return []
        defaults = self._defaults(init)
        out, seen = [], set()
        for node in ast.walk(init):
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            if not isinstance(node.value, ast.Call):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                elts = t.elts if isinstance(t, ast.Tuple) else [t]
                for e in elts:
                    if not (isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name)
                            and e.value.id == "self"):
                        continue
                    # `self.start_layer, self.end_layer, self.layers = make_layers(...)`
                    # (vLLM), `self.layers, self.start_layer, ... = make_pp_layers(...)`
                    if isinstance(t, ast.Tuple) and any(
                            getattr(x, "attr", None) == "layers" for x in elts) \
                            and e.attr != "layers":
                        continue
                    if e.attr in seen:
                        continue
                    seen.add(e.attr)
                    is_list = _callee(node.value) in LISTS
                    out.append((e.attr, self._class_in(node.value, cls, defaults), is_list))
        return out


def tree(files, root):
    c = _Classes(files)
    names = []

    def walk(prefix, cls, depth):
        if depth > 12:
            raise RuntimeError("module tree deeper than 12 at %s" % prefix)
        for attr, sub, is_list in c.children(cls):
            bases = ["%s%s" % (prefix, attr)]
            if is_list:
                names.append(bases[0])
                bases = ["%s.%d" % (bases[0], i) for i in (0, 1)]
            for b in bases:
                names.append(b)
                if sub is not None:
                    walk(b + ".", sub, depth + 1)

    walk("", root, 0)
    return names

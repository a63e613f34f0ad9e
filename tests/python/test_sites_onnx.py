"""Logical sites on real implementations (docs/sites.md): the same random
small Qwen2 weights in HF transformers (torch, eager attention) and in ONNX
Runtime (exported with torch.onnx at opset 17, the module scopes' outputs
marked as graph outputs), captured under each engine's own names, compared
by `ulpprof diff` with no hand-made map: every capture paired by (site,
layer), the first diverging site named, each row's differing count and
max |a-b| against numpy.  `ulpprof ladder` over the two runs decides rung 6
(engine).  (HF's sdpa attention needs torch >= 2.1.1; Debian's torch is
1.13, so eager against sdpa is not tested here.)
Started under the .ci/pyenv interpreter when this one lacks transformers."""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ["ULPPROF_SOURCE_DIR"]
BUILD = os.environ["ULPPROF_BUILD_DIR"]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyenv_reexec  # noqa: E402

pyenv_reexec.unless("transformers")
try:
    import onnx  # noqa: E402
    import onnxruntime as ort  # noqa: E402
except ImportError:
    print("SKIP: onnxruntime/onnx not installed (bash .ci/pyenv installs them)")
    sys.exit(77)
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
from ulpprof._lib import Session  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
LAYERS = 2


def model(attn):
    torch.manual_seed(7)
    cfg = transformers.Qwen2Config(vocab_size=96, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=LAYERS, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    cfg._attn_implementation = attn
    m = transformers.Qwen2ForCausalLM(cfg).eval()
    for p in m.parameters():  # the default init leaves the norms at 1: vary them
        p.data.normal_(0, 0.2)
    return m


class Logits(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids):
        return self.m(input_ids=ids, use_cache=False, return_dict=False)[0]


def hooked_names(m):
    """The modules to capture: the layers and their leaves (no rotary), the
    embedding, the final norm and lm_head."""
    out = []
    for name, mod in m.named_modules():
        leaf = len(list(mod.children())) == 0
        if name.endswith("rotary_emb"):
            continue
        if leaf or (name.startswith("model.layers.") and name.count(".") == 2):
            out.append(name)
    return out


def write(path, tensors, run):
    s = Session(path, label=run["engine"], run=run)
    for name, arr, role in tensors:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        assert s.capture(name, arr.ctypes.data, "f32", list(arr.shape), role=role) == 0
    s.close()


def hf_run(m, ids):
    names = hooked_names(m)
    got = []
    hooks = []
    for name in names:
        mod = m.get_submodule(name)

        def hook(_mod, _inp, out, name=name):
            t = out[0] if isinstance(out, tuple) else out
            got.append((name, t.detach().numpy().copy(), "logits" if name == "lm_head" else
                        "activation"))
        hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        m(input_ids=ids, use_cache=False)
    for h in hooks:
        h.remove()
    return names, got


def onnx_run(m, ids, names, tmp):
    path = os.path.join(tmp, "m.onnx")
    with torch.no_grad():
        torch.onnx.export(Logits(m), (ids,), path, opset_version=17, input_names=["input_ids"],
                          output_names=["logits"])
    g = onnx.load(path)
    # Each hooked module's scope output: the last node made directly in it.
    # The exporter's scopes: `/m/model/layers.0/mlp` (a list's index stays
    # joined to it).  lm_head's output is the graph's output `logits`.
    def scope(n):
        out = ""
        for c in n.split("."):
            out += ("." if c.isdigit() else "/") + c
        return "/m" + out
    scopes = {scope(n): n for n in names if n != "lm_head"}
    last = {}
    for node in g.graph.node:
        for o in node.output:
            scope = o.rsplit("/", 1)[0]
            if scope in scopes and o.startswith("/"):
                last[scope] = o
    marked = [last[s] for s in scopes if s in last]
    for o in marked:
        g.graph.output.append(onnx.helper.make_empty_tensor_value_info(o))
    onnx.save(g, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    vals = sess.run(outs, {"input_ids": ids.numpy()})
    by = dict(zip(outs, vals))
    # Graph order; '/' written as '.', which a capture name may hold.
    order = [o for node in g.graph.node for o in node.output if o in by]
    return [(o.replace("/", "."), by[o], "logits" if o == "logits" else "activation")
            for o in order]


def diff_json(a, b, *extra):
    p = subprocess.run([ULPPROF, "diff", "-f", "json", *extra, a, b], capture_output=True,
                       text=True)
    assert p.returncode in (0, 1), (p.returncode, p.stderr)
    return p.returncode, json.loads(p.stdout)


def check_rows(d, arrays_a, arrays_b):
    """Every row against numpy: differing elements and max |a - b|."""
    for row in d["rows"]:
        a = arrays_a[row["name"]]
        b = arrays_b[row.get("name_b") or row["name"]]
        assert a.shape == b.shape, (row["name"], a.shape, b.shape)
        ua, ub = a.view(np.uint32), b.view(np.uint32)
        assert row["differing"] == int((ua != ub).sum()), row["name"]
        want = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())
        assert abs(row["max_abs_diff"] - want) <= 1e-12 * max(1.0, want), (row, want)


def main():
    ids = torch.tensor([[3, 17, 5, 60, 2, 41, 9, 88]])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = os.environ.get("SITES_KEEP", tmp)
        eager = model("eager")
        names, hf = hf_run(eager, ids)
        onx = onnx_run(eager, ids, names, tmp)
        a, b = (os.path.join(tmp, f) for f in ("hf.h5", "ort.h5"))
        write(a, hf, {"engine": "transformers-eager"})
        write(b, onx, {"engine": "onnxruntime"})
        arr_hf = {n: v for n, v, _ in hf}
        arr_ort = {n: v for n, v, _ in onx}

        # HF against ORT, no map: paired by site, every capture on both sides.
        rc, d = diff_json(a, b)
        s = d["summary"]
        assert s.get("paired_by", "name") == "site", s
        assert s["only_in_a"] == 0 and s["only_in_b"] == 0, s
        assert s["shared"] == len(hf) == len(onx), (s, len(hf), len(onx))
        sites = {(r["site"], -1 if r.get("layer") is None else r["layer"]) for r in d["rows"]}
        for layer in range(LAYERS):
            for site in ("input_norm", "q", "k", "v", "o_proj", "post_attn_norm", "gate", "up",
                         "act", "down", "out"):
                assert (site, layer) in sites, (site, layer, sorted(sites))
        assert ("embed", -1) in sites and ("logits", -1) in sites and ("final_norm", -1) in sites
        check_rows(d, arr_hf, arr_ort)
        # The first divergence: the first row, in A's order, whose bits differ (numpy).
        first = next(r for r in d["rows"]
                     if (arr_hf[r["name"]].view(np.uint32) !=
                         arr_ort[r["name_b"]].view(np.uint32)).any())
        fd = d["first_divergence"]
        assert fd is not None and fd["name"] == first["name"], (fd, first["name"])
        assert fd["site"] == first["site"] and fd["name_b"] == first["name_b"], fd
        assert rc == 1, "HF torch and ONNX Runtime bitwise equal everywhere: nothing to test"
        assert d["ladder"]["level"] == 6, d["ladder"]
        # --by name pairs nothing, and nothing compared is an error, never a verdict.
        p = subprocess.run([ULPPROF, "diff", "-f", "json", "--by", "name", a, b],
                           capture_output=True, text=True)
        assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout[:200])
        assert p.stderr.count("\n") == 1 and "share no capture name" in p.stderr, p.stderr
        # The table shows both names.
        p = subprocess.run([ULPPROF, "diff", a, b], capture_output=True, text=True)
        assert "model.layers.0.self_attn.q_proj = .m.model.layers.0.self_attn.q_proj." in p.stdout, \
            p.stdout

        # The ladder over the two runs decides rung 6 (engine).
        p = subprocess.run([ULPPROF, "ladder", "-f", "json", a, b], capture_output=True,
                           text=True)
        assert p.returncode in (0, 1), (p.returncode, p.stderr)
        lad = json.loads(p.stdout)
        rung = next(r for r in lad["rungs"] if r["level"] == 6)
        assert rung["verdict"] in ("breaks", "holds"), rung
        print("ok: %d captures paired by site; first divergence %s (%s)" %
              (s["shared"], fd["name"], fd["site"]))


if __name__ == "__main__":
    main()

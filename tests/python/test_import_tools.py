"""`ulpprof import` of files written by the real tools, as they write them
today (python/ulpprof/_import.py); every expected figure recomputed here
with numpy from the tools' own files.

1. SGLang 0.5.23's dumper (its debug_utils/dumper.py from the wheel that
   .ci/sglang-wheel fetches, the serving-stack modules it imports stubbed),
   non-intrusive mode, on an engine-shaped model (sglang_dump_run.py): batch
   1 (prompt P) and batch 4 (P in row 2).  The import reads `step=` names,
   maps the doubled non-intrusive names, keeps input_ids as token ids,
   positions/seq_lens/rids as metadata; the diff pairs A's P with B's row 2
   by its tokens and finds the first differing row numpy finds.
2. Polygraphy 0.53's `run --onnxrt --save-outputs` JSON (from the venv of
   .ci/pyenv-onnx) of a tiny ONNX model whose tensor names are ONNX
   exporter paths (`/model/layers.0/...`): imported under mapped names,
   bits equal to the arrays decoded from the JSON here, and the diff of two
   seeds counts the differing elements numpy counts.

Needs torch >= 2 (the dumper; re-executed under .ci/pyenv-new when this
interpreter's torch is older).  Exit 77 (skipped, with the reason) when a
tool cannot be installed on this machine (no PyPI)."""
import base64
import glob
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

SRC = os.environ.get("ULPPROF_SOURCE_DIR", os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.path.abspath(os.environ.get("ULPPROF_BUILD_DIR", "build"))
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
HERE = os.path.dirname(os.path.abspath(__file__))


def skip(why):
    print("SKIP: %s" % why)
    sys.exit(77)


def tool(script):
    p = subprocess.run(["bash", os.path.join(SRC, ".ci", script)], capture_output=True,
                       text=True)
    if p.returncode != 0 or not p.stdout.strip():
        skip(".ci/%s could not install what this test needs: %s" % (script,
                                                                     p.stderr.strip()[-300:]))
    return p.stdout.strip()


def torch_major():
    try:
        import torch
    except ImportError:
        return 0
    return int(torch.__version__.split(".")[0])


if torch_major() < 2:
    if os.environ.get("ULPPROF_TOOLS_REEXEC"):
        print("FAIL: %s has no torch >= 2 although .ci/pyenv-new made it" % sys.executable)
        sys.exit(1)
    exe = tool("pyenv-new")
    os.environ["ULPPROF_TOOLS_REEXEC"] = "1"
    os.execv(exe, [exe] + sys.argv)

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"),
           ULPPROF_CAPTURE_LIBRARY=os.path.join(BUILD, "capture", "libulpprof_capture.so"))


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=600, env=ENV, **kw)


def import_(out, *paths):
    p = run(sys.executable, "-m", "ulpprof", "import", "-o", out, *paths)
    assert p.returncode == 0, p.stderr
    return p


def diff_json(a, b):
    p = run(ULPPROF, "diff", "--format", "json", a, b)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def stubs(where, wheel):
    """SGLang's dumper.py out of the wheel, with the three serving-stack
    modules it imports at its top (and pyzmq) stubbed."""
    with zipfile.ZipFile(wheel) as z:
        src = z.read("sglang/srt/debug_utils/dumper.py")
    files = {
        "sglang/__init__.py": "", "sglang/srt/__init__.py": "",
        "sglang/srt/managers/__init__.py": "", "sglang/srt/debug_utils/__init__.py": "",
        "sglang/srt/managers/io_struct.py": "sock_recv = sock_send = wrap_as_pickle = None\n",
        "sglang/srt/runtime_context.py": "def get_parallel():\n    return None\n\n\n"
        "def get_server_args():\n    return None\n\n\ndef get_serving():\n    return None\n",
        "sglang/srt/utils.py": "def get_device():\n    return 'cpu'\n",
        "zmq.py": "",
    }
    for rel, text in files.items():
        path = os.path.join(where, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    with open(os.path.join(where, "sglang/srt/debug_utils/dumper.py"), "wb") as f:
        f.write(src)


def fields(path):
    base = os.path.basename(path)[:-3]
    return dict(p.split("=", 1) for p in base.split("___"))


def sglang_files(root):
    """{(step, name): value} of a dump, read with torch.load here."""
    out = {}
    for path in glob.glob(os.path.join(root, "dump_*", "*.pt")):
        f = fields(path)
        obj = torch.load(path, weights_only=True)
        out[(int(f["step"]), f["name"])] = obj["value"]
    return out


class ImportToolsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.tmp.name, *names)

    def test_sglang_dumper_bs1_vs_bs4(self):
        wheel = tool("sglang-wheel")
        stubs(self.path("stubs"), wheel)
        dumps = {}
        for batch in (1, 4):
            d = self.path("bs%d" % batch)
            p = run(sys.executable, os.path.join(HERE, "sglang_dump_run.py"), self.path("stubs"),
                    d, str(batch))
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            self.assertEqual(len(glob.glob(os.path.join(d, "dump_*"))), 1)
            dumps[batch] = sglang_files(d)
        a, b = self.path("bs1.h5"), self.path("bs4.h5")
        pa = import_(a, self.path("bs1"))
        import_(b, self.path("bs4"))
        self.assertEqual(pa.stderr.count("note:"), 1, pa.stderr)  # one note, not an abort
        self.assertIn("(rids)", pa.stderr)

        # numpy: the rows of each request per step, by positions and seq_lens as SGLang has them.
        def keyed(d, name):
            out = {}
            for step in (0, 1):
                pos = d[(step, "positions")].numpy()
                lens = d[(step, "seq_lens")].numpy()
                rids = d[(step, "rids")]
                n = len(rids)
                if len(pos) == n:
                    rows = list(range(n))
                else:
                    rows = np.repeat(np.arange(n), lens - 0).tolist()
                v = d[(step, name)].numpy()
                for i in range(len(pos)):
                    out[(rids[rows[i]], int(pos[i]))] = v[i]
            return out

        # The same prompt has the same rid in both runs (the driver names them by prompt).
        names = [("model.embed_tokens", "non_intrusive__model.embed_tokens.output"),
                 ("model.layers.0.proj", "non_intrusive__model.layers.0.proj.output"),
                 ("model.layers.0", "non_intrusive__model.layers.0.output"),
                 ("model.layers.1", "non_intrusive__model.layers.1.output"),
                 ("lm_head", "non_intrusive__lm_head.output")]
        first = None
        counts = {}
        for cap, raw in names:
            ka, kb = keyed(dumps[1], raw), keyed(dumps[4], raw)
            diff_keys = sorted(k[1] for k in ka if not np.array_equal(
                ka[k].view(np.uint32), kb[k].view(np.uint32)))
            counts[cap] = (len(ka), len(diff_keys))
            if diff_keys and first is None:
                first = (cap, diff_keys[0])
        self.assertIsNotNone(first)
        doc = diff_json(a, b)
        self.assertEqual(doc["requests_paired"], [{"b": 2, "a": 0}])
        self.assertEqual(doc["streams_part"], [])
        rows = {r["name"]: r for r in doc["rows"]}
        for cap, (n, nd) in counts.items():
            self.assertEqual((rows[cap]["positions_compared"], rows[cap]["positions_differing"]),
                             (n, nd), cap)
        fd = doc["first_divergence"]
        self.assertEqual((fd["name"], fd["request"], fd["position"]), (first[0], 0, first[1]))
        with h5py.File(a, "r") as f:
            caps = f["captures"]
            for gone in ("positions", "seq_lens", "rids"):
                self.assertNotIn(gone, caps)
            ids = caps["input_ids"]["0"]
            self.assertEqual(ids.attrs["role"].decode() if isinstance(ids.attrs["role"], bytes)
                             else ids.attrs["role"], "input")
            self.assertTrue(np.array_equal(ids[()], dumps[1][(0, "input_ids")].numpy()))
            self.assertTrue(np.array_equal(ids.attrs["positions"],
                                           dumps[1][(0, "positions")].numpy()))
            lm = caps["lm_head"]["1"]
            role = lm.attrs["role"]
            self.assertEqual(role.decode() if isinstance(role, bytes) else role, "logits")
            self.assertEqual(int(lm.attrs["step"]), 1)
            self.assertTrue(np.array_equal(lm[()].view(np.uint32), dumps[1][
                (1, "non_intrusive__lm_head.output")].numpy().view(np.uint32)))
            self.assertEqual(int(caps["model.layers.1"]["0"].attrs.get("layer", -1)), 1)
            # The doubled non-intrusive input name maps to the module's path once.
            self.assertIn("model.layers.1.inputs.1", caps)

    def test_polygraphy_json(self):
        py = tool("pyenv-onnx")
        poly = os.path.join(os.path.dirname(py), "polygraphy")
        model = self.path("model.onnx")
        p = subprocess.run([py, "-c", MAKE_ONNX, model], capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(p.returncode, 0, p.stderr)
        outs = {}
        for seed in (1, 2):
            out = self.path("out%d.json" % seed)
            p = subprocess.run([poly, "run", model, "--onnxrt", "--onnx-outputs", "mark", "all",
                                "--seed", str(seed), "--save-outputs", out],
                               capture_output=True, text=True, timeout=600,
                               env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
            self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-2000:])
            outs[seed] = out
        # The arrays as Polygraphy wrote them, decoded here.
        def arrays(path):
            with open(path) as f:
                doc = json.load(f)
            self.assertEqual(doc["polygraphy_class"], "RunResults")
            ((_, iters),) = doc["lst"]
            got = {}
            for name, v in iters[0]["outputs"].items():
                v = v.get("values", v)
                got[name] = np.load(io.BytesIO(base64.b64decode(v["array"])))
            return got

        want = {s: arrays(o) for s, o in outs.items()}
        self.assertIn("/model/layers.0/self_attn/MatMul_output_0", want[1])
        mapped = {"/model/layers.0/self_attn/MatMul_output_0":
                  "model.layers.0.self_attn.MatMul_output_0",
                  "/model/layers.1/mlp/Tanh_output_0": "model.layers.1.mlp.Tanh_output_0",
                  "logits": "logits"}
        h5 = {}
        for s, o in outs.items():
            h5[s] = self.path("pg%d.h5" % s)
            import_(h5[s], o)
        with h5py.File(h5[1], "r") as f:
            self.assertEqual(sorted(f["captures"]), sorted(mapped.values()))
            for orig, name in mapped.items():
                ds = f["captures"][name]["0"]
                self.assertTrue(np.array_equal(ds[()].view(np.uint32),
                                               want[1][orig].view(np.uint32)), name)
            self.assertEqual(int(f["captures"]["model.layers.1.mlp.Tanh_output_0"]["0"]
                                 .attrs["layer"]), 1)
        doc = diff_json(h5[1], h5[2])
        rows = {r["name"]: r for r in doc["rows"]}
        for orig, name in mapped.items():
            n = int(np.sum(want[1][orig].view(np.uint32) != want[2][orig].view(np.uint32)))
            self.assertEqual(rows[name]["differing"], n, name)
        self.assertEqual(rows["logits"]["role"], "logits")


MAKE_ONNX = r"""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
w0 = numpy_helper.from_array((np.arange(16, dtype=np.float32).reshape(4, 4) - 7) / 9, "W0")
w1 = numpy_helper.from_array((np.arange(12, dtype=np.float32).reshape(4, 3) - 5) / 7, "W1")
a = "/model/layers.0/self_attn/MatMul_output_0"
t = "/model/layers.1/mlp/Tanh_output_0"
nodes = [helper.make_node("MatMul", ["x", "W0"], [a], name="/model/layers.0/self_attn/MatMul"),
         helper.make_node("Tanh", [a], [t], name="/model/layers.1/mlp/Tanh"),
         helper.make_node("MatMul", [t, "W1"], ["logits"], name="/lm_head/MatMul")]
g = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                      [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 3])],
                      [w0, w1])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.checker.check_model(m)
onnx.save(m, sys.argv[1])
"""

if __name__ == "__main__":
    unittest.main()

"""Pairing by logical site (docs/sites.md) on hand-made snapshots: the
built-in names of HF transformers, vLLM, Megatron-Core, GPT-2, the ONNX
exporter and the reference workload pair with each other by (site, layer);
`--map FILE` pairs names no built-in rule knows (its first group the
layer); a name no rule knows pairs by name; `auto` keeps pairing by name
when a name is shared; bad maps exit 2 with one line naming the file and
line.  Every differing count and max |a-b| is numpy's."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffsnap as ds  # noqa: E402

BUILD = os.environ["ULPPROF_BUILD_DIR"]
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
rng = np.random.default_rng(5)


def cap(name, arr, role="activation"):
    return dict(name=name, bits=arr.view(np.uint32), dtype="f32", role=role)


def run(*args):
    return subprocess.run([ULPPROF, *args], capture_output=True, text=True)


def diff(a, b, *extra):
    p = run("diff", "-f", "json", *extra, a, b)
    assert p.returncode in (0, 1), (p.returncode, p.stderr)
    return json.loads(p.stdout)


def check(d, va, vb):
    for r in d["rows"]:
        x, y = va[r["name"]], vb[r.get("name_b") or r["name"]]
        assert r["differing"] == int((x.view(np.uint32) != y.view(np.uint32)).sum()), r
        want = float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max())
        assert abs(r["max_abs_diff"] - want) <= 1e-12 * max(want, 1.0), (r, want)


def main():
    # One tensor per site; B's copy of each perturbed in a few elements.
    sites = ["embed", "q", "gate_up", "down", "out", "final_norm", "logits"]
    base = {s: rng.standard_normal((4, 8)).astype(np.float32) for s in sites}
    pert = {s: v.copy() for s, v in base.items()}
    for k, s in enumerate(sites[1:], 1):
        pert[s].flat[:k] = np.nextafter(pert[s].flat[:k], np.float32(np.inf))
    conventions = {
        "hf": ["model.embed_tokens", "model.layers.1.self_attn.q_proj",
               "model.layers.1.mlp.gate_up_proj", "model.layers.1.mlp.down_proj",
               "model.layers.1", "model.norm", "lm_head"],
        "megatron": ["embedding.word_embeddings", "module.decoder.layers.1.self_attention.q_x",
                     "decoder.layers.1.mlp.linear_fc1", "decoder.layers.1.mlp.linear_fc2",
                     "decoder.layers.1", "decoder.final_layernorm", "output_layer"],
        "onnx": [".model.embed_tokens.Gather_output_0",
                 ".model.layers.1.self_attn.q_proj.MatMul_output_0",
                 ".model.layers.1.mlp.gate_up_proj.MatMul_1_output_0",
                 ".model.layers.1.mlp.down_proj.MatMul_output_0",
                 ".model.layers.1.Add_1_output_0", ".model.norm.Mul_1_output_0", "logits"],
        "workload": ["model.embed_tokens", "model.layers.1.self_attn.q_proj",
                     "model.layers.1.mlp.gate_up_proj", "model.layers.1.mlp_out",
                     "model.layers.1.out", "model.norm", "lm_head.logits"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        files, values = {}, {}
        for conv, names in conventions.items():
            src = base if conv == "hf" else pert
            caps = [cap(n, src[s], "logits" if s == "logits" else "activation")
                    for n, s in zip(names, sites)]
            files[conv] = os.path.join(tmp, conv + ".h5")
            values[conv] = {n: src[s] for n, s in zip(names, sites)}
            ds.write_snapshot(files[conv], caps, label=conv)

        # ONNX and HF: every site paired, with no map.
        d = diff(files["hf"], files["onnx"])
        s = d["summary"]
        assert s.get("paired_by", "name") == "site" and s["shared"] == 7, s
        check(d, values["hf"], values["onnx"])
        assert d["first_divergence"]["site"] == "q", d["first_divergence"]
        assert d["first_divergence"]["name_b"] == conventions["onnx"][1]
        # Workload names: mlp_out is the MLP block's output, not down_proj's.
        d = diff(files["hf"], files["workload"], "--by", "site")
        got = {r["name"]: r.get("name_b") for r in d["rows"]}
        assert got["model.layers.1.mlp.down_proj"] is None  # only in A
        assert d["summary"]["shared"] == 6 and d["summary"]["only_in_a"] == 1, d["summary"]
        assert d["summary"]["only_in_b"] == 1, d["summary"]
        check({"rows": [r for r in d["rows"] if r["status"] in ("identical", "differs")]},
              values["hf"], values["workload"])
        # Megatron: `self_attention.q_x` is no built-in name -> only in one side; a map pairs it.
        d = diff(files["hf"], files["megatron"])
        assert d["summary"]["shared"] == 6, d["summary"]
        m = os.path.join(tmp, "map.txt")
        with open(m, "w") as f:
            f.write("# my engine\nmodule\\.decoder\\.layers\\.([0-9]+)\\.self_attention\\.q_x q\n")
        d = diff(files["hf"], files["megatron"], "--map", m)
        assert d["summary"]["shared"] == 7, d["summary"]
        check(d, values["hf"], values["megatron"])
        row = next(r for r in d["rows"] if r.get("site") == "q")
        assert row["layer"] == 1 and row["name_b"] == conventions["megatron"][1], row

        # auto: the shared name pairs by name, the capture no name pairs by its site;
        # --by site pairs both by site.
        mixed = os.path.join(tmp, "mixed.h5")
        ds.write_snapshot(mixed, [cap("model.embed_tokens", pert["embed"]),
                                  cap(".model.layers.1.self_attn.q_proj.MatMul_output_0",
                                      pert["q"])])
        d = diff(files["hf"], mixed)
        # one row by name, the others by site: "mixed", and each row says which
        assert d["summary"].get("paired_by") == "mixed" and d["summary"]["shared"] == 2
        by = {r["name"]: r for r in d["rows"] if r["status"] in ("identical", "differs")}
        assert by["model.embed_tokens"].get("site") is None, by  # paired by its name
        assert by["model.embed_tokens"]["paired_by"] == "name", by
        assert by["model.layers.1.self_attn.q_proj"]["site"] == "q", by
        assert by["model.layers.1.self_attn.q_proj"]["paired_by"] == "site", by
        d = diff(files["hf"], mixed, "--by", "site")
        assert d["summary"].get("paired_by", "name") == "site" and d["summary"]["shared"] == 2
        check({"rows": [r for r in d["rows"] if r["status"] in ("identical", "differs")]},
              values["hf"], {"model.embed_tokens": pert["embed"],
                                ".model.layers.1.self_attn.q_proj.MatMul_output_0": pert["q"]})

        # Bad maps: exit 2, one line naming the file and line.
        for text, msg in (("x.* nosuchsite\n", "unknown site 'nosuchsite'"),
                          ("x(( q\n", "bad regular expression"),
                          ("onlyone\n", "expected 'PATTERN SITE'"),
                          ("# nothing\n", "holds no rule")):
            with open(m, "w") as f:
                f.write(text)
            p = run("diff", "--map", m, files["hf"], files["onnx"])
            lines = p.stderr.strip().splitlines()
            assert p.returncode == 2 and len(lines) == 1 and msg in lines[0] and m in lines[0], \
                (text, p.returncode, p.stderr)
        p = run("diff", "--map", os.path.join(tmp, "absent"), files["hf"], files["onnx"])
        assert p.returncode == 2 and "cannot open site map" in p.stderr, p.stderr
        p = run("diff", "--by", "name", "--map", m, files["hf"], files["onnx"])
        assert p.returncode == 2, p.stderr
        p = run("diff", "--by", "bogus", files["hf"], files["onnx"])
        assert p.returncode == 2 and "--by takes" in p.stderr, p.stderr
    print("ok")


if __name__ == "__main__":
    main()

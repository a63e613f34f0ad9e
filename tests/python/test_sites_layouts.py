"""Pairing by site across layouts (docs/sites.md "Layouts") on hand-made
snapshots: separate q, k, v against vLLM's fused `qkv_proj` (and the
reverse), Megatron-Core's per-group `linear_qkv` with a declared head size,
separate gate, up against `gate_up_proj`, and column-parallel shards joined
on the last axis.  The fused and sharded tensors are built here with numpy
from the separate ones; every count, max |a-b| and max ULP is numpy's,
computed from the separate tensors alone.  Shapes that do not fit a layout,
an undeclared Megatron head size and row-parallel shards exit 2 with one
line naming the file and capture (or map line)."""
import csv
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
rng = np.random.default_rng(28)
T, HQ, HKV, D, I = 5, 4, 2, 8, 24


def cap(name, arr):
    return dict(name=name, bits=np.ascontiguousarray(arr).view(np.uint32), dtype="f32")


def run(*args):
    return subprocess.run([ULPPROF, *args], capture_output=True, text=True)


def diff(a, b, *extra):
    p = run("diff", "-f", "json", "--by", "site", *extra, a, b)
    assert p.returncode in (0, 1), (p.returncode, p.stderr)
    return json.loads(p.stdout)


def ordered(x):
    """f32 bits as integers in the order of the values (sign-magnitude folded)."""
    u = x.view(np.uint32).astype(np.int64)
    return np.where(u >= 0x80000000, 0x80000000 - u, u)


def expect(x, y):
    d = x.view(np.uint32) != y.view(np.uint32)
    return dict(differing=int(d.sum()),
                max_abs_diff=float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()),
                max_ulp=int(np.abs(ordered(x) - ordered(y)).max()))


def bump(x, n):
    """A copy of x with n scattered elements moved by 1 to 3 ULPs."""
    y = x.copy()
    idx = rng.choice(y.size, n, replace=False)
    for k, i in enumerate(idx):
        for _ in range(1 + k % 3):
            y.flat[i] = np.nextafter(y.flat[i], np.float32(np.inf))
    return y


def check_rows(d, want, side):
    rows = {r["site"]: r for r in d["rows"] if r.get("site") in want}
    assert set(rows) == set(want), (sorted(rows), d["rows"])
    for site, (x, y) in want.items():
        r, e = rows[site], expect(x, y)
        assert r["differing"] == e["differing"], (site, r, e)
        assert r["max_abs_diff"] == e["max_abs_diff"], (site, r, e)
        assert r["max_ulp"] == e["max_ulp"], (site, r, e)
        assert r["shape"] == list(x.shape), (site, r)
        assert r["layout"]["side"] == side, (site, r)
    return rows


def err_line(p, *needles):
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    for n in needles:
        assert n in lines[0], (n, lines[0])


def main():
    x = {"norm": rng.standard_normal((T, 16)).astype(np.float32),
         "q": rng.standard_normal((T, HQ * D)).astype(np.float32),
         "k": rng.standard_normal((T, HKV * D)).astype(np.float32),
         "v": rng.standard_normal((T, HKV * D)).astype(np.float32),
         "gate": rng.standard_normal((T, I)).astype(np.float32),
         "up": rng.standard_normal((T, I)).astype(np.float32)}
    y = {s: bump(a, 1 + k) for k, (s, a) in enumerate(x.items())}
    hf = "model.layers.0."
    with tempfile.TemporaryDirectory() as tmp:
        def snap(name, caps):
            path = os.path.join(tmp, name + ".h5")
            ds.write_snapshot(path, caps, label=name)
            return path

        sep = snap("hf", [cap(hf + "input_layernorm", x["norm"]),
                          cap(hf + "self_attn.q_proj", x["q"]),
                          cap(hf + "self_attn.k_proj", x["k"]),
                          cap(hf + "self_attn.v_proj", x["v"]),
                          cap(hf + "mlp.gate_proj", x["gate"]),
                          cap(hf + "mlp.up_proj", x["up"])])
        qkv = np.concatenate([y["q"], y["k"], y["v"]], axis=-1)
        gate_up = np.concatenate([y["gate"], y["up"]], axis=-1)
        vllm = snap("vllm", [cap(hf + "input_layernorm", y["norm"]),
                             cap(hf + "self_attn.qkv_proj", qkv),
                             cap(hf + "mlp.gate_up_proj", gate_up)])
        want = {s: (x[s], y[s]) for s in ("q", "k", "v", "gate", "up")}

        # Separate against fused, built in: the fused side (B) is split.
        d = diff(sep, vllm)
        assert d["summary"].get("paired_by") == "site", d["summary"]
        rows = check_rows(d, want, "b")
        assert rows["k"]["layout"]["transform"] == "k of qkv q|k|v", rows["k"]
        assert rows["up"]["layout"]["transform"] == "up of gate_up gate|up", rows["up"]
        assert d["summary"]["shared"] == 6 and d["summary"]["only_in_b"] == 0, d["summary"]
        # The worst element is indexed in the separate tensor.
        e = expect(x["v"], y["v"])
        flat = int(np.argmax(np.abs(ordered(x["v"]) - ordered(y["v"]))))
        assert rows["v"]["worst_index"] == list(np.unravel_index(flat, x["v"].shape)), rows["v"]
        # The text report shows the transform and its side.
        p = run("diff", "--by", "site", sep, vllm)
        assert p.returncode == 1 and "[B: q of qkv q|k|v]" in p.stdout, p.stdout
        # Fused against separate: A is split; rows name A's fused capture.
        d = diff(vllm, sep)
        rows = check_rows(d, {s: (y[s], x[s]) for s in want}, "a")
        assert rows["q"]["name"] == hf + "self_attn.qkv_proj", rows["q"]
        assert rows["q"]["name_b"] == hf + "self_attn.q_proj", rows["q"]
        # The CSV report's layout columns, at the end: A's side split.
        p = run("diff", "-f", "csv", "--by", "site", vllm, sep)
        assert p.returncode == 1, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0].split(",")[-5:-4] == ["layout"], lines[0]
        got = {r["site"]: r for r in csv.DictReader(lines)}
        for st, fu, parts in (("q", "qkv", "q|k|v"), ("k", "qkv", "q|k|v"), ("v", "qkv", "q|k|v"),
                              ("gate", "gate_up", "gate|up"), ("up", "gate_up", "gate|up")):
            assert (got[st]["layout_side"], got[st]["layout"]) == \
                ("a", "%s of %s %s" % (st, fu, parts)), got[st]
        assert (got["input_norm"]["layout_side"], got["input_norm"]["layout"]) == ("", "")
        assert d["summary"]["only_in_a"] == 0 and d["summary"]["only_in_b"] == 0, d["summary"]

        # Megatron-Core's per-group layout: [T, groups, (q_per_group + 2) * D].
        qpg = HQ // HKV
        groups = np.concatenate([y["q"].reshape(T, HKV, qpg * D), y["k"].reshape(T, HKV, D),
                                 y["v"].reshape(T, HKV, D)], axis=-1).reshape(T, -1)
        mg = "decoder.layers.0."
        meg = snap("megatron", [cap(mg + "input_layernorm", y["norm"]),
                                cap(mg + "self_attention.linear_qkv", groups),
                                cap(mg + "mlp.linear_fc1", gate_up)])
        p = run("diff", "--by", "site", sep, meg)
        err_line(p, meg, mg + "self_attention.linear_qkv", "D=N")
        m = os.path.join(tmp, "meg.map")
        with open(m, "w") as f:
            f.write("decoder\\.layers\\.([0-9]+)\\.self_attention\\.linear_qkv qkv "
                    "[qkv-groups D=%d]\n" % D)
        d = diff(sep, meg, "--map", m)
        rows = check_rows(d, want, "b")
        assert rows["q"]["layout"]["transform"] == "q of qkv per group (D=8)", rows["q"]
        # The plain split of the per-group tensor would differ: the test can tell them apart.
        assert not np.array_equal(groups, qkv)
        # A wrong head size does not fit: exit 2 naming the file and the capture.
        with open(m, "w") as f:
            f.write("decoder\\.layers\\.([0-9]+)\\.self_attention\\.linear_qkv qkv "
                    "[qkv-groups D=5]\n")
        err_line(run("diff", "--by", "site", "--map", m, sep, meg), meg, mg + "self_attention.linear_qkv")

        # Column-parallel shards: joined on the last axis in rank order.
        half = HQ * D // 2
        tp = snap("tp", [cap(hf + "input_layernorm", y["norm"]),
                         cap(hf + "self_attn.q_proj.tp1", y["q"][:, half:]),
                         cap(hf + "self_attn.q_proj.tp0", y["q"][:, :half])])
        with open(m, "w") as f:
            f.write("model\\.layers\\.([0-9]+)\\.self_attn\\.q_proj\\.tp([0-9]) q [shard \\2/2]\n")
        d = diff(sep, tp, "--map", m)
        rows = {r["site"]: r for r in d["rows"] if r.get("site") == "q"}
        e = expect(x["q"], y["q"])
        assert rows["q"]["differing"] == e["differing"], (rows, e)
        assert rows["q"]["max_ulp"] == e["max_ulp"] and rows["q"]["max_abs_diff"] == \
            e["max_abs_diff"], (rows, e)
        assert rows["q"]["layout"] == {"side": "b", "transform": "2 column shards concatenated"}
        assert d["summary"]["only_in_b"] == 0, d["summary"]
        # A missing shard, and row-parallel shards, are errors.
        tp1 = snap("tp1", [cap(hf + "input_layernorm", y["norm"]),
                           cap(hf + "self_attn.q_proj.tp0", y["q"][:, :half])])
        err_line(run("diff", "--by", "site", "--map", m, sep, tp1), tp1, "shard 1 is not captured")
        with open(m, "w") as f:
            f.write("x\\.([0-9]+)\\.o\\.tp([0-9]) o_proj [shard \\2/2 rows]\n")
        err_line(run("diff", "--by", "site", "--map", m, sep, tp), m, "line 1", "after the all-reduce")

        # A fused capture whose shape does not fit: exit 2, never a compare.
        bad = snap("bad", [cap(hf + "input_layernorm", y["norm"]),
                           cap(hf + "self_attn.qkv_proj", qkv[:, :-1]),
                           cap(hf + "mlp.gate_up_proj", gate_up)])
        err_line(run("diff", "--by", "site", sep, bad), bad, hf + "self_attn.qkv_proj", "q | k | v")
        bad2 = snap("bad2", [cap(hf + "input_layernorm", y["norm"]),
                             cap(hf + "self_attn.qkv_proj", qkv),
                             cap(hf + "mlp.gate_up_proj", gate_up[:-1])])
        err_line(run("diff", "--by", "site", sep, bad2), bad2, hf + "mlp.gate_up_proj", "leading axes")
        # Two fused captures in different layouts are not compared as bits.
        err_line(run("diff", "--by", "site", vllm, meg), "different layouts")
    print("ok")


if __name__ == "__main__":
    main()

"""Tensor-parallel runs joined by `ulpprof diff --tp-join` (docs/sites.md
"Tensor-parallel runs").  A tiny attention-projection and gated MLP is
split by hand as vLLM splits it -- qkv_proj and gate_up_proj
column-parallel (each rank's q | k | v and gate | up), o_proj and
down_proj row-parallel with a real all-reduce -- and run by real
torch.distributed (gloo, 2 processes, one snapshot a rank with /env rank),
against a single process on the same weights.  Every count, max |a-b| and
max ULP is numpy's over the tensors read back with h5py and joined here.
Also: the ranks' agreement on the all-reduced outputs (and a rank made to
disagree), a TP2 run against the TP1 run with the sides swapped, and the
errors (qkv without head counts, a missing rank's capture)."""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffsnap as ds  # noqa: E402

BUILD = os.environ["ULPPROF_BUILD_DIR"]
ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
T, H, HQ, HKV, D, I = 6, 16, 4, 2, 4, 24
PRE = "model.layers.0."

WORKER = r"""
import os, sys
import numpy as np
import torch
import torch.distributed as dist
sys.path.insert(0, sys.argv[5])
import diffsnap as ds
rank, world, init, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
T, H, HQ, HKV, D, I = 6, 16, 4, 2, 4, 24
g = torch.Generator().manual_seed(28)
x = torch.randn(T, H, generator=g)
wq = torch.randn(HQ * D, H, generator=g) / 4
wk = torch.randn(HKV * D, H, generator=g) / 4
wv = torch.randn(HKV * D, H, generator=g) / 4
wo = torch.randn(H, HQ * D, generator=g) / 4
wg = torch.randn(I, H, generator=g) / 4
wu = torch.randn(I, H, generator=g) / 4
wd = torch.randn(H, I, generator=g) / 4
if world > 1:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
def part(w, n):  # this rank's rows of a column-parallel weight
    s = w.shape[0] // world
    return w[rank * s:(rank + 1) * s]
def cols(w):  # this rank's columns of a row-parallel weight
    s = w.shape[1] // world
    return w[:, rank * s:(rank + 1) * s]
with torch.no_grad():
    q, k, v = x @ part(wq, 0).T, x @ part(wk, 0).T, x @ part(wv, 0).T
    qkv = torch.cat([q, k, v], dim=-1)
    # the attention core stands in as q itself: each rank holds its heads
    o = q @ cols(wo).T
    if world > 1:
        dist.all_reduce(o)
    gate, up = x @ part(wg, 0).T, x @ part(wu, 0).T
    gate_up = torch.cat([gate, up], dim=-1)
    act = torch.nn.functional.silu(gate) * up
    down = act @ cols(wd).T
    if world > 1:
        dist.all_reduce(down)
P = "model.layers.0."
caps = [(P + "input_layernorm", x), (P + "self_attn.qkv_proj", qkv), (P + "self_attn.o_proj", o),
        (P + "mlp.gate_up_proj", gate_up), (P + "mlp.act_fn", act), (P + "mlp.down_proj", down)]
ds.write_snapshot(out, [dict(name=n, bits=t.contiguous().numpy().view(np.uint32), dtype="f32",
                             layer=0, positions=list(range(T))) for n, t in caps],
                  label="tp%d" % world, env={"rank": str(rank)})
if world > 1:
    dist.barrier()
    dist.destroy_process_group()
"""


def run(*args):
    return subprocess.run([ULPPROF, *args], capture_output=True, text=True)


def ordered(x):
    u = x.view(np.uint32).astype(np.int64)
    return np.where(u >= 0x80000000, 0x80000000 - u, u)


def expect(x, y):
    d = x.view(np.uint32) != y.view(np.uint32)
    return dict(differing=int(d.sum()),
                max_abs_diff=float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()),
                max_ulp=int(np.abs(ordered(x) - ordered(y)).max()))


def read(path):
    with h5py.File(path, "r") as f:
        return {n: np.array(f["captures"][n]["0"][()], dtype=np.float32) for n in f["captures"]}


def joined(ranks, name):
    """numpy's join of the ranks' shards of `name`, as TP1 lays the tensor out."""
    shards = [r[name] for r in ranks]
    if name.endswith("qkv_proj"):
        wq, wkv = HQ * D // len(ranks), HKV * D // len(ranks)
        cuts = [(0, wq), (wq, wq + wkv), (wq + wkv, wq + 2 * wkv)]
    elif name.endswith("gate_up_proj"):
        w = shards[0].shape[-1] // 2
        cuts = [(0, w), (w, 2 * w)]
    else:
        cuts = [(0, shards[0].shape[-1])]
    return np.concatenate([s[:, a:b] for a, b in cuts for s in shards], axis=-1)


def check(d, tp1, want):
    rows = {r["name"]: r for r in d["rows"]}
    assert set(rows) == set(want), (sorted(rows), sorted(want))
    for name, y in want.items():
        r, e = rows[name], expect(tp1[name], y)
        assert r["status"] in ("identical", "differs"), r
        for key in ("differing", "max_abs_diff", "max_ulp"):
            assert r[key] == e[key], (name, key, r[key], e[key])
        assert r["shape"] == list(y.shape), (name, r["shape"])


def report_join(x, y, mp, side, ncol, nwhole, agree, cells, name=None):
    """The joined side said in the table, Markdown and CSV reports: `agree`
    with %s for the disagreeing capture's name (quoted as each format quotes),
    and CSV's tp_ranks_a, tp_whole_disagree_a, tp_ranks_b, tp_whole_disagree_b
    `cells` on every row."""
    head = ("%s joined from 2 ranks: %d captures column-parallel, joined on the last axis in "
            "rank order; %d whole on every rank, rank 0's compared: " % (side, ncol, nwhole))
    for fmt, q in (("table", ""), ("markdown", "`")):
        p = run("diff", "--tp-join", "--map", mp, "-f", fmt, "--color", "never", x, y) \
            if fmt == "table" else run("diff", "--tp-join", "--map", mp, "-f", fmt, x, y)
        assert p.returncode in (0, 1), p.stderr
        line = head + (agree % (q + name + q) if name else agree)
        text = " ".join(p.stdout.split())  # the table wraps its summary
        assert " ".join(line.split()) in text, (fmt, line, p.stdout)
    p = run("diff", "--tp-join", "--map", mp, "-f", "csv", x, y)
    assert p.returncode in (0, 1), p.stderr
    # the rows streamed as they come (one a batch), byte for byte the report
    # of the whole result (ULPPROF_DIFF_STREAM=0: the rows kept in memory)
    for env in (dict(os.environ, ULPPROF_DIFF_STREAM="0"), dict(os.environ, ULPPROF_DIFF_BATCH="1")):
        q = subprocess.run([ULPPROF, "diff", "--tp-join", "--map", mp, "-f", "csv", x, y],
                           capture_output=True, text=True, env=env)
        assert (q.returncode, q.stdout, q.stderr) == (p.returncode, p.stdout, p.stderr), \
            (q.returncode, q.stdout, q.stderr)
    import csv as csvmod
    rows = list(csvmod.DictReader(p.stdout.splitlines()))
    assert rows and all((r["tp_ranks_a"], r["tp_whole_disagree_a"], r["tp_ranks_b"],
                         r["tp_whole_disagree_b"]) == cells for r in rows), rows[:1]


def main():
    try:
        import torch.distributed as dist  # noqa: F401
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("no gloo")
    except ImportError as e:
        print("skipped: torch.distributed with gloo is not available here (%s)" % e)
        return 77
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        tp1 = os.path.join(tmp, "tp1.h5")
        tp2 = os.path.join(tmp, "tp2")
        os.mkdir(tp2)
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        subprocess.run([sys.executable, script, "0", "1", "", tp1, here], check=True)
        init = "file://" + os.path.join(tmp, "rendezvous")
        procs = [subprocess.Popen([sys.executable, script, str(r), "2", init,
                                   os.path.join(tp2, "%d.h5" % r), here]) for r in range(2)]
        assert [p.wait(timeout=300) for p in procs] == [0, 0]

        mp = os.path.join(tmp, "map.txt")
        with open(mp, "w") as f:
            f.write("model\\.layers\\.([0-9]+)\\.self_attn\\.qkv_proj  qkv  [qkv Hq=%d Hkv=%d D=%d]\n"
                    % (HQ, HKV, D))
        a = read(tp1)
        ranks = [read(os.path.join(tp2, "%d.h5" % r)) for r in range(2)]
        want = {}
        for n in a:
            if n.endswith(("qkv_proj", "gate_up_proj", "act_fn")):
                want[n] = joined(ranks, n)
            else:
                want[n] = ranks[0][n]
        # gloo's all-reduce leaves every rank the same bits
        for n in (PRE + "self_attn.o_proj", PRE + "mlp.down_proj"):
            assert ranks[0][n].tobytes() == ranks[1][n].tobytes(), n
        # the joined tensors are the unsharded ones' shapes
        for n in a:
            assert want[n].shape == a[n].shape, (n, want[n].shape, a[n].shape)

        p = run("diff", "--tp-join", "--map", mp, "-f", "json", tp1, tp2)
        assert p.returncode in (0, 1), (p.returncode, p.stderr)
        d = json.loads(p.stdout)
        check(d, a, want)
        print("TP2 vs TP1:", {n[len(PRE):]: (r["differing"], r["max_ulp"])
                              for n, r in ((r["name"], r) for r in d["rows"])})
        assert d["b"]["path"] == tp2 if isinstance(d.get("b"), dict) else True
        err = p.stderr.strip().splitlines()
        assert len(err) == 1 and "'%s': 2 ranks joined: 3 captures column-parallel" % tp2 in err[0] \
            and "3 whole on every rank" in err[0] and "agree bit for bit on all 3" in err[0], err
        assert tp1 in p.stdout and tp2 in p.stdout and "joined.h5" not in p.stdout, p.stdout[:400]
        identical = all(expect(a[n], want[n])["differing"] == 0 for n in a)
        assert (p.returncode == 0) == identical, (p.returncode, identical)
        # the report says which side was joined, from how many ranks, and whether
        # the ranks agree on the captures each holds whole (numpy: none differs)
        ncol = sum(n.endswith(("qkv_proj", "gate_up_proj", "act_fn")) for n in a)
        whole = [n for n in a if not n.endswith(("qkv_proj", "gate_up_proj", "act_fn"))]
        nbad = sum(ranks[0][n].tobytes() != ranks[1][n].tobytes() for n in whole)
        assert (ncol, len(whole), nbad) == (3, 3, 0)
        assert "tp_join" not in d["a"], d["a"]
        assert d["b"]["tp_join"] == dict(ranks=2, column_parallel=ncol, whole=len(whole),
                                         whole_disagree=nbad, first_disagree=None), d["b"]
        report_join(tp1, tp2, mp, "B", ncol, len(whole), "the ranks agree bit for bit on all 3",
                    ("", "", "2", "0"))

        # swapped sides: the TP run on A
        p = run("diff", "--tp-join", "--map", mp, "-f", "json", tp2, tp1)
        assert p.returncode in (0, 1), p.stderr
        d = json.loads(p.stdout)
        assert d["a"]["tp_join"]["ranks"] == 2 and "tp_join" not in d["b"], (d["a"], d["b"])
        rows = {r["name"]: r for r in d["rows"]}
        for n in a:
            assert rows[n]["differing"] == expect(want[n], a[n])["differing"], n

        # a rank that disagrees on an all-reduced output: said, rank 0's compared
        bad = os.path.join(tmp, "tp2bad")
        os.mkdir(bad)
        for r in range(2):
            caps = []
            for i, (n, t) in enumerate(ranks[r].items()):
                t = t.copy()
                if r == 1 and n.endswith("down_proj"):
                    t.flat[[3, 7, 11]] = np.nextafter(t.flat[[3, 7, 11]], np.float32(np.inf))
                caps.append(dict(name=n, bits=t.view(np.uint32), dtype="f32", layer=0,
                                 positions=list(range(T))))
            ds.write_snapshot(os.path.join(bad, "%d.h5" % r), caps, env={"rank": str(r)})
        ranks_bad = [read(os.path.join(bad, "%d.h5" % r)) for r in range(2)]
        n_bad = expect(ranks_bad[0][PRE + "mlp.down_proj"], ranks_bad[1][PRE + "mlp.down_proj"])
        p = run("diff", "--tp-join", "--map", mp, "-f", "json", tp1, bad)
        assert p.returncode in (0, 1), p.stderr
        assert ("DISAGREE on 1: first '%smlp.down_proj' #0, rank 1 differs from rank 0 in %d of "
                "%d elements" % (PRE, n_bad["differing"], T * H)) in p.stderr, p.stderr
        d = json.loads(p.stdout)
        rows = {r["name"]: r for r in d["rows"]}
        n = PRE + "mlp.down_proj"
        assert rows[n]["differing"] == expect(a[n], ranks_bad[0][n])["differing"]
        bad_whole = [m for m in whole if ranks_bad[0][m].tobytes() != ranks_bad[1][m].tobytes()]
        assert bad_whole == [n], bad_whole
        assert d["b"]["tp_join"] == dict(
            ranks=2, column_parallel=ncol, whole=len(whole), whole_disagree=len(bad_whole),
            first_disagree=dict(name=n, occurrence=0, rank=1, differing=n_bad["differing"],
                                elements=T * H)), d["b"]
        report_join(tp1, bad, mp, "B", ncol, len(whole),
                    "the ranks DISAGREE on 1: first %s #0, rank 1 differs from rank 0 in %d of "
                    "%d elements" % ("%s", n_bad["differing"], T * H),
                    ("", "", "2", str(len(bad_whole))), name=n)

        # without the head counts a q|k|v per rank cannot be joined
        p = run("diff", "--tp-join", "-f", "json", tp1, tp2)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and "qkv_proj" in lines[0] and \
            "Hq=N Hkv=N D=N" in lines[0], (p.returncode, p.stderr)

        # a rank's file without a capture rank 0 has
        miss = os.path.join(tmp, "tp2miss")
        os.mkdir(miss)
        for r in range(2):
            caps = [dict(name=n, bits=t.view(np.uint32), dtype="f32", layer=0)
                    for n, t in ranks[r].items() if not (r == 1 and n.endswith("act_fn"))]
            if r == 1:
                caps.append(dict(name="extra", bits=np.zeros(2, np.uint32), dtype="f32"))
            ds.write_snapshot(os.path.join(miss, "%d.h5" % r), caps, env={"rank": str(r)})
        p = run("diff", "--tp-join", "--map", mp, tp1, miss)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and "1.h5" in lines[0] and \
            "act_fn" in lines[0], (p.returncode, p.stderr)

        # without --tp-join a directory against a file is compared rank by rank, as before
        p = run("diff", "-f", "json", tp1, tp2)
        assert p.returncode in (1, 2), p.stderr
    print("ok: TP2 (gloo) joined against TP1, numbers equal numpy's")
    return 0


if __name__ == "__main__":
    sys.exit(main())

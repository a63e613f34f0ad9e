"""`ulpprof diff` without --by (auto) on an HF-shaped run (q_proj, k_proj,
v_proj, gate_proj, up_proj) against a vLLM-shaped one (qkv_proj,
gate_up_proj) that share other names (o_proj, down_proj): the shared
names pair by name, the others by site, the fused side split -- every
count, max |a-b| and max ULP numpy's.  And a padded batch [B, T, H] with
positions and requests against a flat [T, H] token layout: paired by
(request, position), the pad rows only in A, the numbers numpy's over
the real tokens."""
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
rng = np.random.default_rng(29)
T, HQ, HKV, D, I, H = 5, 4, 2, 8, 24, 32


def ordered(x):
    u = x.view(np.uint32).astype(np.int64)
    return np.where(u >= 0x80000000, 0x80000000 - u, u)


def expect(x, y):
    d = x.view(np.uint32) != y.view(np.uint32)
    return dict(differing=int(d.sum()),
                max_abs_diff=float(np.abs(x.astype(np.float64) - y.astype(np.float64)).max()),
                max_ulp=int(np.abs(ordered(x) - ordered(y)).max()))


def bump(x, idx):
    y = x.copy()
    for k, i in enumerate(idx):
        for _ in range(1 + k % 3):
            y.flat[i] = np.nextafter(y.flat[i], np.float32(np.inf))
    return y


def cap(name, x, **kw):
    return dict(name=name, bits=np.ascontiguousarray(x).view(np.uint32), dtype="f32", **kw)


def diff(a, b):
    p = subprocess.run([ULPPROF, "diff", "-f", "json", a, b], capture_output=True, text=True)
    assert p.returncode in (0, 1), (p.returncode, p.stderr)
    return json.loads(p.stdout)


def check(row, x, y):
    e = expect(x, y)
    for k in ("differing", "max_abs_diff", "max_ulp"):
        assert row[k] == e[k], (row["name"], k, row[k], e[k])


def auto_hf_vllm(tmp):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    q, k, v, o = f(T, HQ * D), f(T, HKV * D), f(T, HKV * D), f(T, H)
    g, u, dn = f(T, I), f(T, I), f(T, H)
    P = "model.layers.0."
    hf = [cap(P + "self_attn.q_proj", q), cap(P + "self_attn.k_proj", k),
          cap(P + "self_attn.v_proj", v), cap(P + "self_attn.o_proj", o),
          cap(P + "mlp.gate_proj", g), cap(P + "mlp.up_proj", u), cap(P + "mlp.down_proj", dn)]
    q2, v2, o2, u2 = bump(q, [1, 9, 30]), bump(v, [4]), bump(o, [0, 7]), bump(u, [2, 50, 77])
    vl = [cap(P + "self_attn.qkv_proj", np.concatenate([q2, k, v2], -1)),
          cap(P + "self_attn.o_proj", o2),
          cap(P + "mlp.gate_up_proj", np.concatenate([g, u2], -1)), cap(P + "mlp.down_proj", dn)]
    a, b = os.path.join(tmp, "hf.h5"), os.path.join(tmp, "vllm.h5")
    ds.write_snapshot(a, hf)
    ds.write_snapshot(b, vl)
    d = diff(a, b)
    rows = {r["name"]: r for r in d["rows"]}
    assert all(r["status"] in ("identical", "differs") for r in d["rows"]), d["rows"]
    assert set(rows) == {c["name"] for c in hf}, sorted(rows)
    for n, x, y in ((P + "self_attn.q_proj", q, q2), (P + "self_attn.k_proj", k, k),
                    (P + "self_attn.v_proj", v, v2), (P + "self_attn.o_proj", o, o2),
                    (P + "mlp.gate_proj", g, g), (P + "mlp.up_proj", u, u2),
                    (P + "mlp.down_proj", dn, dn)):
        check(rows[n], x, y)
    assert rows[P + "self_attn.q_proj"]["layout"] == {"side": "b", "transform": "q of qkv q|k|v"}
    assert rows[P + "self_attn.q_proj"]["name_b"] == P + "self_attn.qkv_proj"
    assert "layout" not in rows[P + "self_attn.o_proj"], rows[P + "self_attn.o_proj"]
    # mixed: o_proj and down_proj paired by the names both have, the rest by site;
    # the summary says so and each row says how it paired
    by_name = {P + "self_attn.o_proj", P + "mlp.down_proj"}
    assert d["summary"]["paired_by"] == "mixed", d["summary"]
    for n, r in rows.items():
        assert r["paired_by"] == ("name" if n in by_name else "site"), r
        assert ("site" in r and r["site"] is not None) == (n not in by_name), r
    # the CSV report carries the same, in columns appended at the end
    p = subprocess.run([ULPPROF, "diff", "-f", "csv", a, b], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    head = p.stdout.splitlines()[0].split(",")
    assert head[-9:] == ["site", "name_b", "paired_by", "layout_side", "layout", "tp_ranks_a",
                         "tp_whole_disagree_a", "tp_ranks_b", "tp_whole_disagree_b"], head
    assert head[:2] == ["name", "occurrence"] and head[34] == "max_abs_diff_fine", head
    sites = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "gate_proj": "gate", "up_proj": "up"}
    fused = {"q": "qkv_proj", "k": "qkv_proj", "v": "qkv_proj", "gate": "gate_up_proj",
             "up": "gate_up_proj"}
    parts = {"q": "q|k|v", "k": "q|k|v", "v": "q|k|v", "gate": "gate|up", "up": "gate|up"}
    got = {r["name"]: r for r in csv.DictReader(p.stdout.splitlines())}
    assert set(got) == set(rows), sorted(got)
    for n, r in got.items():
        short = n.rsplit(".", 1)[1]
        if n in by_name:
            want = ("", n, "name", "", "")
        else:
            st = sites[short]
            sub = "self_attn." if fused[st] == "qkv_proj" else "mlp."
            want = (st, P + sub + fused[st], "site", "b",
                    "%s of %s %s" % (st, fused[st].replace("_proj", ""), parts[st]))
        assert (r["site"], r["name_b"], r["paired_by"], r["layout_side"], r["layout"]) == want, \
            (n, r)
        assert (r["tp_ranks_a"], r["tp_ranks_b"]) == ("", ""), r
        assert int(r["differing"]) == rows[n]["differing"], (n, r["differing"])
    # no site shared beyond the names: by name, as before (no site in the rows)
    ds.write_snapshot(b, vl[1:2] + [cap("other", f(3))])
    d = diff(a, b)
    assert d["summary"].get("paired_by") != "site" and all("site" not in r for r in d["rows"])


def batch_vs_flat(tmp):
    lens, B, TT, W = [3, 5, 2], 3, 5, 4
    flat = [rng.standard_normal((n, W)).astype(np.float32) for n in lens]
    pad = np.zeros((B, TT, W), np.float32)
    for b, x in enumerate(flat):
        pad[b, :lens[b]] = x
    pos = np.tile(np.arange(TT), (B, 1))
    req = np.repeat(np.arange(B)[:, None], TT, 1)
    for b in range(B):
        req[b, lens[b]:] = 100 + b  # pad slots: requests of their own
    fl = np.concatenate(flat)
    fpos = np.concatenate([np.arange(n) for n in lens])
    freq = np.concatenate([[b] * n for b, n in enumerate(lens)])
    fl2 = bump(fl, [6, 17, 29])
    a, b = os.path.join(tmp, "bth.h5"), os.path.join(tmp, "th.h5")
    ds.write_snapshot(a, [cap("h", pad, positions=pos, requests=req)])
    ds.write_snapshot(b, [cap("h", fl2, positions=fpos, requests=freq)])
    r = diff(a, b)["rows"][0]
    check(r, fl, fl2)
    assert r["aligned"] and r["positions_compared"] == sum(lens), r
    assert r["positions_only_in_a"] == B * TT - sum(lens) and r["positions_only_in_b"] == 0, r
    assert r["positions_differing"] == 3, r
    first = int(np.flatnonzero(fl.view(np.uint32) != fl2.view(np.uint32))[0]) // W
    assert r["first_differing"] == {"request": int(freq[first]), "position": int(fpos[first])}, r
    worst = int(np.argmax(np.abs(ordered(fl) - ordered(fl2))))
    wr, wp = int(freq[worst // W]), int(fpos[worst // W])
    assert r["worst_key"] == {"request": wr, "position": wp}, (r["worst_key"], wr, wp)
    ds.write_snapshot(b, [cap("h", fl, positions=fpos, requests=freq)])
    p = subprocess.run([ULPPROF, "diff", a, b], capture_output=True, text=True)
    assert p.returncode == 0, (p.returncode, p.stdout)  # pads alone are no difference


def main():
    with tempfile.TemporaryDirectory() as tmp:
        auto_hf_vllm(tmp)
        batch_vs_flat(tmp)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

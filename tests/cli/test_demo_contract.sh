#!/usr/bin/env bash
# `ulpprof demo --contract --dir D`: the files it writes into D, its exit
# code, and `contract compare` / `contract check` run by hand over them with
# their exit codes.  The figures printed are checked with h5py/numpy over the
# demo's own snapshots (D/*.h5), never against the tool:
#  - /trace/gemms: the rows of each capture's `gemms` range are the GEMMs
#    that computed it, their M/N/K those of the model (/run model_shape,
#    prompt_len, prefix_len): M the rows the pass computes (the prompt for
#    the miss, the suffix for the hit and the split);
#  - compare miss/hit: the reason is the split-K policy, found at every site
#    numpy finds a GEMM shape whose (tile, split-K) the miss's M and the
#    hit's M set apart: one line for all of them, with their count, the site
#    patterns (a pattern only where numpy finds every site it matches among
#    them) and the M and tile/split-K numpy reads from the rows; the JSON
#    (--format json) lists exactly those sites;
#  - compare split/hit: one numerical_policy (their rows are the same);
#  - check of "level 2 with split at the block boundary": in scope are the
#    runs whose computed suffix starts at a block boundary (numpy from /run),
#    the one pair on the rung among them is bitwise equal (h5py): kept, exit 0;
#  - check of plain "level 2": the pairs on the rung (differing /run keys all
#    cache/split) and how many differ, the first divergence of miss vs hit
#    (capture, position, max ULP) recomputed by numpy: broken, exit 1.
set -u
ULPPROF=${ULPPROF:?path of the ulpprof binary}
PY=${ULP_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d "${ULPPROF_BUILD_DIR:-/tmp}/test_demo_contract.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
D=$tmp/d

"$ULPPROF" demo --contract --no-plots --dir "$D" >"$tmp/demo" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "demo --contract: exit $rc, want 0 ($(head -3 "$tmp/err"))"
[ -s "$tmp/err" ] && fail "demo --contract wrote to stderr: $(head -3 "$tmp/err")"
for f in contract-miss.json contract-hit.json contract-split.json claim-level2-split.json \
    claim-level2.json 0-miss.h5 3-hit.h5 4-split.h5; do
    [ -s "$D/$f" ] || fail "demo --contract did not write $f"
done

"$ULPPROF" contract compare "$D/contract-miss.json" "$D/contract-hit.json" >"$tmp/cmp_mh" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "compare miss hit: exit $rc ($(cat "$tmp/err"))"
"$ULPPROF" contract compare --format json "$D/contract-miss.json" "$D/contract-hit.json" \
    >"$tmp/cmp_mh_json" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "compare --format json miss hit: exit $rc ($(cat "$tmp/err"))"
"$ULPPROF" contract compare "$D/contract-split.json" "$D/contract-hit.json" >"$tmp/cmp_sh" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "compare split hit: exit $rc ($(cat "$tmp/err"))"
"$ULPPROF" contract check "$D/claim-level2-split.json" "$D"/*.h5 >"$tmp/chk1" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 0 ] || fail "check level2-split: exit $rc, want 0 (kept) ($(cat "$tmp/err"))"
"$ULPPROF" contract check "$D/claim-level2.json" "$D"/*.h5 >"$tmp/chk2" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] || fail "check level2: exit $rc, want 1 (broken) ($(cat "$tmp/err"))"
# The demo printed the same compare and check text.
for f in cmp_mh cmp_sh chk1 chk2; do
    grep -v '^contract .* against [0-9]* runs$' "$tmp/$f" >"$tmp/$f.body"
    while IFS= read -r line; do
        grep -qxF -- "$line" "$tmp/demo" || fail "$f: line not in the demo's output: $line"
    done <"$tmp/$f.body"
done

# A declared tile-invariance of a site, falsified by the rows of the ladder's runs.
cat >"$tmp/inv.json" <<'JSON'
{"ulpprof_contract": 1, "producer": "tile-invariant claim",
 "gemm": {"model.layers.0.mlp_out": {"policy": "tile-invariant"}}}
JSON
"$ULPPROF" contract check "$tmp/inv.json" "$D"/*.h5 >"$tmp/inv" 2>"$tmp/err"
rc=$?
[ "$rc" -eq 1 ] || fail "check tile-invariant: exit $rc, want 1 (broken) ($(cat "$tmp/err"))"

"$PY" - "$D" "$tmp" <<'EOF' || fail "the figures against h5py/numpy"
import itertools, json, os, re, sys
import h5py
import numpy as np

D, T = sys.argv[1], sys.argv[2]
out = {k: open(os.path.join(T, k)).read() for k in ("cmp_mh", "cmp_mh_json", "cmp_sh", "chk1", "chk2", "inv")}
bad = []


def check(cond, msg):
    if not cond:
        bad.append(msg)
        print("FAIL:", msg)


def load(path):
    with h5py.File(path, "r") as f:
        caps = {}
        for name, g in f["captures"].items():
            for occ, d in g.items():
                pos = d.attrs.get("positions")
                caps.setdefault(name, []).append(
                    (int(d.attrs["seq"]), None if pos is None else np.array(pos), np.array(d[()])))
        run = {k: v.decode() for k, v in f["run"].attrs.items()}
        gemms = np.array(f["trace/gemms"][()]) if "trace/gemms" in f else None
    return caps, run, gemms


runs = {p[:-3]: load(os.path.join(D, p)) for p in sorted(os.listdir(D)) if p.endswith(".h5")}
base = ["0-miss", "1-repeat", "2-batch4", "3-hit", "4-split", "5-chunk64", "6-tp2", "7-tp4"]
# The rung-7 pair (two BLAS libraries) runs where the second library loads.
check(sorted(runs) in (base, base + ["8-openblas", "9-refblas"]),
      "8 ladder runs, or 10 with the rung-7 pair; found %s" % sorted(runs))


def ordered(x):
    """f32 bits (bf16 reads as f32 through h5py) on a monotone integer line."""
    b = x.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)


def rows(caps, name):
    out = {}
    for seq, pos, raw in sorted(caps[name], key=lambda t: t[0]):
        for i, p in enumerate(pos):
            out[int(p)] = raw[i]
    return out


def first_div(a, b):
    """(capture, first differing position, max ULP) in capture order, or None."""
    ca, cb = runs[a][0], runs[b][0]
    if set(ca) != set(cb):
        return ("captures differ", None, None)
    for n in sorted(ca, key=lambda n: min(t[0] for t in ca[n])):
        ra, rb = rows(ca, n), rows(cb, n)
        common = sorted(set(ra) & set(rb))
        diff = [p for p in common if not np.array_equal(ra[p].view(np.uint32), rb[p].view(np.uint32))]
        if diff:
            ulp = max(int(np.max(np.abs(ordered(ra[p]) - ordered(rb[p])))) for p in common)
            return (n, diff[0], ulp >> 16 if n != "lm_head.logits" else ulp)
    return None


# --- /trace/gemms: one row per GEMM the workload calls ----------------------------
def site_rows(path, cap):
    """The /trace/gemms rows in capture `cap`'s `gemms` range (occurrence 0)."""
    with h5py.File(os.path.join(D, path + ".h5"), "r") as f:
        lo, hi = f["captures"][cap]["0"].attrs["gemms"]
        return np.array(f["trace/gemms"][lo:hi])


def shapes(rows):
    return sorted((int(r["m"]), int(r["n"]), int(r["k"])) for r in rows)


def site_configs(name, cap="model.layers.0.mlp_out"):
    """M -> (tile, splitk) of the run's rows at one site (a capture's GEMMs)."""
    return {int(r["m"]): (r["tile"].decode(), int(r["splitk"])) for r in site_rows(name, cap)}


dims = dict(kv.split("=") for kv in runs["0-miss"][1]["model_shape"].split())
H, F, NH, KH, HD = (int(dims[k]) for k in ("hidden", "mlp", "heads", "kv_heads", "head_dim"))
for name in ("0-miss", "3-hit", "4-split"):
    rm = runs[name][1]
    P, C = int(rm["prompt_len"]), int(rm["prefix_len"])
    M = P if name == "0-miss" else P - C  # the rows the suffix's pass computes
    want_mlp = sorted([(M, F, H), (M, F, H), (M, H, F)])  # gate, up, down
    want_attn = sorted([(M, NH * HD, H), (M, KH * HD, H), (M, KH * HD, H), (M, H, NH * HD)]
                       + [(M, P, HD), (M, HD, P)] * NH)  # q k v o, per head Q.K^T and P.V
    check(shapes(site_rows(name, "model.layers.0.mlp_out")) == want_mlp,
          "%s: mlp rows %s, want %s" % (name, shapes(site_rows(name, "model.layers.0.mlp_out")), want_mlp))
    check(shapes(site_rows(name, "model.layers.0.attn_out")) == want_attn,
          "%s: attn rows %s" % (name, shapes(site_rows(name, "model.layers.0.attn_out"))))
    lg = site_rows(name, "lm_head.logits")
    check(shapes(lg) == [(P - C, int(dims["vocab"]), H)], "%s: lm_head rows %s" % (name, shapes(lg)))
    r0 = site_rows(name, "model.layers.0.mlp_out")[0]
    check([r0[k].decode() for k in ("a_type", "b_type", "d_type", "compute")]
          == ["bf16", "bf16", "f32", "32F"], "%s: row types %s" % (name, r0))

# --- compare miss vs hit: the split-K policy of the suffix's GEMMs ----------------
run_m = runs["0-miss"][1]
m_miss = int(run_m["prompt_len"])
m_hit = int(run_m["prompt_len"]) - int(run_m["prefix_len"])
cm, ch = site_configs("0-miss"), site_configs("3-hit")
check(sorted(cm) == [m_miss] and sorted(ch) == [m_hit] and m_miss != m_hit,
      "rows' M: miss %s hit %s, want %d and %d" % (sorted(cm), sorted(ch), m_miss, m_hit))
check(cm.get(m_miss) != ch.get(m_hit), "miss and hit ran one configuration: %s" % cm)
level = [l for l in out["cmp_mh"].splitlines() if l.startswith("level: ")]
check(len(level) == 1, "compare miss hit: one level line")
lv = level[0] if level else ""


def gemm_sites(name):
    """Every capture with a non-empty gemms range (a GEMM site)."""
    with h5py.File(os.path.join(D, name + ".h5"), "r") as f:
        return sorted(n for n, g in f["captures"].items()
                      if "gemms" in g["0"].attrs and g["0"].attrs["gemms"][1] > g["0"].attrs["gemms"][0])


def split_apart(site):
    """(miss config, hit config) of the first GEMM shape (N, K) at `site` whose
    (tile, split-K) differ between the miss's M and the hit's, or None."""
    rm, rh = site_rows("0-miss", site), site_rows("3-hit", site)
    for a in rm:
        for b in rh:
            if (int(a["n"]), int(a["k"])) != (int(b["n"]), int(b["k"])):
                continue
            ca = (int(a["m"]), a["algo"].decode(), a["tile"].decode(), int(a["splitk"]))
            cb = (int(b["m"]), b["algo"].decode(), b["tile"].decode(), int(b["splitk"]))
            if ca[1:] != cb[1:]:
                return ca, cb
    return None


universe = sorted(set(gemm_sites("0-miss")) | set(gemm_sites("3-hit")))
apart = {s: split_apart(s) for s in universe}
apart = {s: c for s, c in apart.items() if c is not None}
check(len(apart) == 24 and len(set(apart.values())) == 1,
      "numpy: %d sites split apart, configs %s" % (len(apart), set(apart.values())))
pat = lambda s: ".".join("*" if p.isdigit() else p for p in s.split("."))
pats = sorted({pat(s) for s in apart
               if sum(pat(u) == pat(s) for u in universe) == sum(pat(t) == pat(s) for t in apart) > 1})
check(pats == ["model.layers.*.attn_out", "model.layers.*.mlp_out"], "numpy: patterns %s" % pats)
want = "split-K policy depends on M at %d gemm sites (%s): " % (len(apart), ", ".join(pats))
check(re.match(r"level: at most 0 \(repeat\): " + re.escape(want), lv) is not None,
      "compare miss hit: want %r in %s" % (want, lv))
split_lines = [l for l in out["cmp_mh"].splitlines() if "split-K policy" in l]
check(len(split_lines) == 2, "compare miss hit: one split-K line and the level: %s" % split_lines)
for (m, algo, tile, sk) in set(c for pair in apart.values() for c in pair):
    check(("M=%d %s %s split-K %d" % (m, algo, tile, sk)) in lv,
          "compare miss hit: M=%d %s %s split-K %d not named: %s" % (m, algo, tile, sk, lv))
js = json.loads(out["cmp_mh_json"])
jsplit = [d for d in js["differences"] if d.get("kind") == "split-K policy depends on M"]
check(len(jsplit) == 1 and sorted(jsplit[0]["sites"]) == sorted(apart)
      and jsplit[0]["count"] == len(apart) and js["level"] == 0 and jsplit[0]["rung"] == 1,
      "compare --format json: %s, numpy %s" % (jsplit, sorted(apart)))
check(js["reason"] == lv[len("level: at most 0 (repeat): "):], "compare --format json: reason %s"
      % js["reason"])
cm, ch = site_configs("0-miss"), site_configs("3-hit")
# --- compare split vs hit: bitwise alike runs, one policy -------------------------
check(first_div("4-split", "3-hit") is None, "numpy: split and hit are not bitwise equal")
check(site_configs("4-split") == ch, "numpy: split and hit rows differ")
check("level: 7 " in out["cmp_sh"] and ": the same" in out["cmp_sh"],
      "compare split hit: %s" % out["cmp_sh"])

# --- check of the claims -------------------------------------------------------
def at_boundary(run):
    """The computed suffix starts at a block boundary (docs/contract.md)."""
    p, bs = int(run["prefix_len"]), int(run["block_size"])
    chunk = run["prefill_chunk"]
    if p % bs:
        return False
    return run["cache"] == "hit" or run["split"] != "none" or (chunk != "none" and p % int(chunk) == 0)


rung2 = {"cache", "split"}
names = sorted(runs)
in_scope = [n for n in names if runs[n][1]["batch_size"] == "1" and runs[n][1]["tp"] == "1"
            and at_boundary(runs[n][1])]
pairs1 = [(a, b) for a, b in itertools.combinations(in_scope, 2)
          if {k for k in runs[a][1] if runs[a][1][k] != runs[b][1].get(k)} <= rung2
          and any(runs[a][1][k] != runs[b][1][k] for k in rung2)]
check(sorted(in_scope) == ["3-hit", "4-split"], "numpy: runs in scope %s" % in_scope)
check(all(first_div(a, b) is None for a, b in pairs1), "numpy: a claim-1 pair differs")
claim1 = [l for l in out["chk1"].splitlines() if "claim 1" in l]
want1 = "%d of %d runs in scope" % (len(in_scope), len(runs))
check(len(claim1) == 1 and claim1[0].split()[0] == "kept" and want1 in claim1[0]
      and "%d pair on the rung, bitwise identical" % len(pairs1) in claim1[0],
      "check 1: %s (want %s, %d pair)" % (claim1, want1, len(pairs1)))
check(out["chk1"].rstrip().splitlines()[-1].startswith("verdict: kept"), "check 1 verdict")

pairs2 = [(a, b) for a, b in itertools.combinations(names, 2)
          if {k for k in runs[a][1] if runs[a][1][k] != runs[b][1].get(k)} <= rung2
          and any(runs[a][1][k] != runs[b][1][k] for k in rung2)]
differ = [(a, b) for a, b in pairs2 if first_div(a, b) is not None]
fd = first_div("0-miss", "3-hit")
claim2 = [l for l in out["chk2"].splitlines() if "claim 1" in l]
text2 = claim2[0] if claim2 else ""
check(text2.split()[:1] == ["BROKEN"], "check 2: %s" % claim2)
check("%d of %d pairs on the rung differ" % (len(differ), len(pairs2)) in text2,
      "check 2: want %d of %d pairs differ: %s" % (len(differ), len(pairs2), text2))
check(fd is not None and ("miss vs hit first at %s" % fd[0]) in text2
      and ("position %d, max %d ULP" % (fd[1], fd[2])) in text2,
      "check 2: numpy first divergence %s: %s" % (fd, text2))
check(out["chk2"].rstrip().splitlines()[-1].startswith("verdict: broken"), "check 2 verdict")

# --- tile-invariance: the first scheme at the site and the first other one --------
first = other = None
for name in names:
    for r in site_rows(name, "model.layers.0.mlp_out"):
        sch = tuple(r[k].decode() if r[k].dtype.kind == "S" else int(r[k])
                    for k in ("api", "algo", "tile", "stages", "splitk", "reduction"))
        if first is None:
            first = (int(r["m"]), sch)
        elif other is None and sch != first[1]:
            other = (int(r["m"]), sch)
inv = [l for l in out["inv"].splitlines() if "gemm.model.layers.0.mlp_out.policy" in l]
check(other is not None, "numpy: one scheme only at the site")
if other and len(inv) == 1:
    for m, sch in (first, other):
        check(("M=%d %s %s" % (m, sch[1], sch[2])) in inv[0] and ("split-K %d" % sch[4]) in inv[0],
              "tile-invariant: M=%d %s not named: %s" % (m, sch, inv[0]))
    check(inv[0].split()[0] == "BROKEN", "tile-invariant: %s" % inv[0])
else:
    check(False, "tile-invariant: %s" % inv)
sys.exit(1 if bad else 0)
EOF

[ "$fails" -eq 0 ] && echo "ok" || { echo "$fails failures"; exit 1; }

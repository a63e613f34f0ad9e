"""`ulpprof ladder --format json` against a numpy recomputation of every pair.

Runs are snapshots written with h5py (diffsnap.py) whose /run keys sweep the
ladder's rungs; some differ from the base run at a chosen layer and row, one
flips a logits row, one has a capture of another shape, one differs in a key
without a rung, one in two rungs at once; a second set can decide no rung;
a third is made of run directories of per-rank files.  Everything the
report says is recomputed here from the files and from format/FORMAT.md's
rules, never through ulpprof: which captures differ (raw bits), the first
divergence (A's seq order; shape and dtype mismatches count) and the row of
its first differing element, the argmax flips (NaN never wins, ties go to
the lowest index, and a row whose emitted token differs is a flip even where
one run's top two were tied), the keys that differ, the rung each pair decides, the groups
of bitwise-identical runs (a rank only one run has makes a pair differ),
each rung's verdict and its first break.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffsnap as ds  # noqa: E402

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
ULPPROF = os.environ.get("ULPPROF") or os.path.join(BUILD, "programs", "ulpprof")
FAILS = []

# FORMAT.md: the /run keys of each rung.
RUNG_OF = {"repeat": 0, "batch_size": 1, "cache": 2, "split": 2, "block_size": 3,
           "prefill_chunk": 3, "tp": 4, "dp": 4, "ep": 4, "quant": 5, "engine": 6,
           "vendor": 7, "device": 7, "blas": 7}


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)


# --- Writing the runs ---------------------------------------------------------------

ROWS, HIDDEN, VOCAB, LAYERS = 4, 8, 16, 4


def base_tensors(seed=0):
    rng = np.random.default_rng(seed)
    acts = [rng.integers(0x3c00, 0x4000, size=(ROWS, HIDDEN)).astype(np.uint16)
            for _ in range(LAYERS)]
    logits = rng.standard_normal((ROWS, VOCAB)).astype(np.float32)
    logits[:, 5] += 4.0                     # a clear winner per row ...
    logits[2, 9] = logits[2, 5] - 1e-3      # ... except row 2, nearly tied with token 9
    return acts, logits


def write_run(path, run, label, perturb=None, flip=False, reshape_layer=None, env=None):
    acts, logits = base_tensors()
    acts = [a.copy() for a in acts]
    if perturb is not None:
        layer, row = perturb
        for lay in range(layer, LAYERS):     # the difference propagates to later layers
            acts[lay][row:, :] ^= 1
    if flip:
        logits = logits.copy()
        logits[2, 9] = logits[2, 5] + 1e-3
    caps = []
    for lay in range(LAYERS):
        bits = acts[lay]
        if reshape_layer == lay:
            bits = bits.reshape(ROWS * 2, HIDDEN // 2)
        # Token positions on every capture but the reshaped one (rows 100..103).
        pos = None if reshape_layer == lay else list(range(100, 100 + ROWS))
        caps.append({"name": "model.layers.%d.out" % lay, "bits": bits, "dtype": "bf16",
                     "layer": lay, "positions": pos})
    caps.append({"name": "lm_head.logits", "bits": logits.view(np.uint32), "dtype": "f32",
                 "role": "logits"})
    ds.write_snapshot(path, caps, label=label, run=run, env=env)


# --- The independent recomputation --------------------------------------------------

def read_snapshot(path):
    caps = []
    with h5py.File(path, "r") as f:
        run = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["run"].attrs.items()}
        env = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f["env"].attrs.items()}
        for name, grp in f["captures"].items():
            for occ, d in grp.items():
                role = d.attrs.get("role", b"activation")
                role = role.decode() if isinstance(role, bytes) else role
                dtype = d.attrs["dtype"]
                dtype = dtype.decode() if isinstance(dtype, bytes) else dtype
                layer = int(d.attrs["layer"]) if "layer" in d.attrs else None
                raw = np.array(d[()]).view(ds.STORAGE[dtype][0])
                pos = np.array(d.attrs["positions"]) if "positions" in d.attrs else None
                caps.append({"name": name, "occ": int(occ), "seq": int(d.attrs["seq"]),
                             "dtype": dtype, "bits": raw, "layer": layer, "role": role,
                             "positions": pos})
    caps.sort(key=lambda c: c["seq"])
    return {"run": run, "env": env, "caps": caps, "label": None}


def argmax_rows(x):
    """Per row: (argmax, top-1 minus top-2); NaN never wins, ties to the lowest index."""
    x = x.reshape(-1, x.shape[-1]).astype(np.float64)
    out = []
    for row in x:
        ok = ~np.isnan(row)
        if not ok.any():
            out.append((-1, None))
            continue
        v = np.where(ok, row, -np.inf)
        top = np.sort(v)[::-1]
        out.append((int(np.argmax(v)), top[0] - top[1] if v.size > 1 else None))
    return out


def count_flips(fa, fb):
    """FORMAT.md: the emitted token (argmax, lowest index on ties) differs."""
    return sum(1 for (xa, _), (xb, _) in zip(fa, fb) if xa != xb)


def compare_files(a, b):
    """identical, first divergence (dict) and argmax flips of one file pair."""
    bmap = {(c["name"], c["occ"]): c for c in b["caps"]}
    amap = {(c["name"], c["occ"]): c for c in a["caps"]}
    identical, first, flips, rows = True, None, 0, 0
    for c in a["caps"]:
        rows += 1
        o = bmap.get((c["name"], c["occ"]))
        if o is None:
            identical = False
            continue
        if o["dtype"] != c["dtype"]:
            status = "dtype_mismatch"
        elif o["bits"].shape != c["bits"].shape:
            status = "shape_mismatch"
        else:
            ne = np.flatnonzero(c["bits"].ravel() != o["bits"].ravel())
            status = "differs" if ne.size else "identical"
            if c["role"] == "logits" and c["dtype"] == "f32":
                fa = argmax_rows(c["bits"].view(np.float32))
                fb = argmax_rows(o["bits"].view(np.float32))
                flips += count_flips(fa, fb)
        if status == "identical":
            continue
        identical = False
        if first is None:
            row = position = None
            pos = c["positions"]
            rows = pos.size if pos is not None else (
                c["bits"].shape[0] if c["bits"].ndim >= 1 else 0)
            if status == "differs" and rows > 0:
                row = int(ne[0] // (c["bits"].size // rows))
                if pos is not None:
                    position = int(pos.ravel()[row])
                if pos is not None and o["positions"] is not None:
                    # Aligned (FORMAT.md): rows paired by (request, position); the
                    # runs here hold the same ascending positions, so the first
                    # differing key is the first differing row's position.
                    row = None
            first = {"capture": c["name"], "occurrence": c["occ"], "layer": c["layer"],
                     "status": status, "row": row, "position": position}
    for c in b["caps"]:
        if (c["name"], c["occ"]) not in amap:
            identical = False
            rows += 1
    return identical, first, flips, rows


def layer_key(first):
    if first is None:
        return 2 ** 31 + 1
    return first["layer"] if first["layer"] is not None else 2 ** 31 - 1


def expected_ladder(runs, ignore=()):
    """runs: list of {rank: snapshot}.  The whole ladder, recomputed."""
    n = len(runs)
    pairs = []
    for a in range(n):
        for b in range(a + 1, n):
            ra, rb = runs[a], runs[b]
            common = sorted(set(ra) & set(rb))
            # A rank only one run has is not compared, and the runs differ there.
            ident, first, flips = set(ra) == set(rb), None, 0
            for rank in common:
                i, f, fl, _ = compare_files(ra[rank], rb[rank])
                ident &= i
                flips += fl
                if f is not None and (first is None or layer_key(f) < layer_key(first)):
                    first = dict(f, rank=rank)
            run_a, run_b = ra[min(ra)]["run"], rb[min(rb)]["run"]
            keys = sorted(k for k in set(run_a) | set(run_b) if run_a.get(k) != run_b.get(k))
            rungs = {RUNG_OF[k] for k in keys if k in RUNG_OF and k not in ignore}
            unctl = any(k not in RUNG_OF and k not in ignore for k in keys)
            if unctl or (not run_a and not run_b):
                rung = None
            elif not rungs:
                rung = 0
            elif len(rungs) == 1 and (ident is False or len(
                    [k for k in keys if k in RUNG_OF and k not in ignore]) == 1):
                # FORMAT.md: several keys of one rung decide it only when the runs differ.
                rung = rungs.pop()
            else:
                rung = None
            pairs.append({"a": a, "b": b, "identical": ident, "differing_keys": keys,
                          "first": first, "flips": flips, "rung": rung,
                          "rungs": sorted({RUNG_OF[k] for k in keys
                                           if k in RUNG_OF and k not in ignore})})
    # Groups: connected components of identical pairs, numbered by their first run.
    group = list(range(n))
    for p in pairs:
        if p["identical"]:
            ga, gb = group[p["a"]], group[p["b"]]
            lo, hi = min(ga, gb), max(ga, gb)
            group = [lo if g == hi else g for g in group]
    order = sorted(set(group))
    group = [order.index(g) for g in group]
    rungs = []
    for level in range(8):
        deciding = [j for j, p in enumerate(pairs) if p["rung"] == level]
        breaking = [j for j in deciding if not pairs[j]["identical"]]
        verdict = "untested" if not deciding else "breaks" if breaking else "holds"
        first_break = None
        for j in breaking:
            if first_break is None or layer_key(pairs[j]["first"]) < layer_key(
                    pairs[first_break]["first"]):
                first_break = j
        rungs.append({"level": level, "verdict": verdict, "first_break": first_break,
                      "deciding": len(deciding), "breaking": len(breaking)})
    return pairs, group, rungs


def run_ladder(args):
    p = subprocess.run([ULPPROF, "ladder", "-f", "json"] + args, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        print(p.stderr)
    return p.returncode, (json.loads(p.stdout) if p.returncode in (0, 1) else None), p.stderr


def compare_report(name, rep, runs, ignore=()):
    pairs, group, rungs = expected_ladder(runs, ignore)
    check(rep["format"] == "ulpprof-ladder" and rep["format_version"] == 1, name + ": format")
    check([r["group"] for r in rep["runs"]] == group,
          "%s: groups %r, expected %r" % (name, [r["group"] for r in rep["runs"]], group))
    check(len(rep["pairs"]) == len(pairs), name + ": pair count")
    for got, exp in zip(rep["pairs"], pairs):
        tag = "%s: pair %d-%d" % (name, exp["a"], exp["b"])
        check((got["a"], got["b"]) == (exp["a"], exp["b"]), tag + " order")
        check(got["identical"] == exp["identical"], tag + " identical")
        check(got["differing_keys"] == exp["differing_keys"],
              "%s keys %r vs %r" % (tag, got["differing_keys"], exp["differing_keys"]))
        check(got["argmax_flips"] == exp["flips"],
              "%s flips %r vs %r" % (tag, got["argmax_flips"], exp["flips"]))
        check(got["rung"] == exp["rung"], "%s rung %r vs %r" % (tag, got["rung"], exp["rung"]))
        check(got["rungs"] == exp["rungs"], tag + " rungs")
        fd, ef = got["first_divergence"], exp["first"]
        if ef is None:
            check(fd is None, tag + " first divergence should be null")
        else:
            check(fd is not None and all(fd[k] == ef[k] for k in
                                         ("capture", "occurrence", "layer", "status", "row",
                                          "position", "rank")),
                  "%s first divergence %r vs %r" % (tag, fd, ef))
    for got, exp in zip(rep["rungs"], rungs):
        tag = "%s: rung %d" % (name, exp["level"])
        check(got["level"] == exp["level"] and got["verdict"] == exp["verdict"],
              "%s verdict %r vs %r" % (tag, got["verdict"], exp["verdict"]))
        check(got["deciding_pairs"] == exp["deciding"] and
              got["breaking_pairs"] == exp["breaking"], tag + " pair counts")
        fb = got["first_break"]
        if exp["first_break"] is None:
            check(fb is None, tag + " first break should be null")
        else:
            check(fb is not None and fb["pair"] == exp["first_break"],
                  "%s first break %r vs pair %r" % (tag, fb, exp["first_break"]))
    return rungs


def main():
    tmp = tempfile.mkdtemp(prefix="ulpprof-ladder-")
    try:
        # Set 1: the base run and one run per knob.
        base = {"batch_size": "1", "cache": "miss", "tp": "1", "model": "toy"}
        specs = [
            ("r0", {}, {}),
            ("r1", {}, {}),                                            # repeat: identical
            ("r2", {"batch_size": "4"}, {"perturb": (2, 3)}),          # rung 1 breaks at 2
            ("r3", {"cache": "hit"}, {}),                              # rung 2 holds
            ("r4", {"tp": "2"}, {"perturb": (1, 1), "flip": True}),    # rung 4 breaks, flips
            ("r5", {"batch_size": "4", "cache": "hit"}, {"perturb": (2, 3)}),  # = r2; mixed vs r0
            ("r6", {"model": "other"}, {"perturb": (0, 2)}),           # key without a rung
            ("r7", {"prefill_chunk": "64"}, {"reshape_layer": 3}),     # rung 3: shape mismatch
        ]
        paths = []
        for label, over, kw in specs:
            p = os.path.join(tmp, "set1", label + ".h5")
            os.makedirs(os.path.dirname(p), exist_ok=True)
            write_run(p, dict(base, **over), label, **kw)
            paths.append(p)
        runs = [{0: read_snapshot(p)} for p in paths]
        rc, rep, err = run_ladder(paths)
        check(rc == 1, "set 1: exit %d (a rung breaks), stderr %r" % (rc, err))
        if rep:
            rungs = compare_report("set 1", rep, runs)
            check([r["verdict"] for r in rungs[:5]] == ["holds", "breaks", "holds", "breaks",
                                                       "breaks"],
                  "set 1: the intended verdicts %r" % [r["verdict"] for r in rungs])
        # The same runs as one directory argument.
        rc2, rep2, _ = run_ladder([os.path.join(tmp, "set1")])
        check(rc2 == 1 and rep2 is not None and
              [r["path"] for r in rep2["runs"]] == paths, "set 1 as a directory")
        # --ignore model: r6's pairs with the base now decide rung 0 and break it.
        rc3, rep3, _ = run_ladder(["--ignore", "model"] + paths)
        if rep3:
            rungs = compare_report("set 1 --ignore model", rep3, runs, ignore=("model",))
            check(rungs[0]["verdict"] == "breaks", "ignoring model: repeat breaks")

        # Set 2: two runs that differ in two rungs at once: nothing can be decided.
        u = []
        for label, run, kw in (("u0", {"batch_size": "1", "cache": "miss"}, {}),
                               ("u1", {"batch_size": "8", "cache": "hit"}, {"perturb": (1, 0)})):
            p = os.path.join(tmp, label + ".h5")
            write_run(p, run, label, **kw)
            u.append(p)
        rc, rep, err = run_ladder(u)
        check(rc == 0, "set 2: exit %d (nothing breaks), %r" % (rc, err))
        if rep:
            rungs = compare_report("set 2", rep, [{0: read_snapshot(p)} for p in u])
            check(all(r["verdict"] == "untested" for r in rungs), "set 2: all untested")
            check(rep["rungs"][1]["mixed_pairs"] == 1 and rep["rungs"][1]["varied"],
                  "set 2: rung 1 varied in a mixed pair")

        # Set 3: run directories of per-rank files (rank from /env).
        tps = []
        for tp, ranks in (("1", [0]), ("2", [0, 1]), ("2b", [0, 1]), ("4", [0, 1, 2, 3])):
            d = os.path.join(tmp, "tp", "tp" + tp)
            os.makedirs(d)
            for r in ranks:
                kw = {"perturb": (1, r)} if tp == "4" else {}
                write_run(os.path.join(d, "rank%d.h5" % (3 - r)),   # names out of rank order
                          {"tp": tp.rstrip("b")}, "tp" + tp, env={"rank": str(r)}, **kw)
            tps.append(d)
        rc, rep, err = run_ladder([os.path.join(tmp, "tp")])
        check(rc == 1, "set 3: exit %d, %r" % (rc, err))
        if rep:
            runs3 = []
            for d in tps:
                runs3.append({int(read_snapshot(os.path.join(d, f))["env"]["rank"]):
                              read_snapshot(os.path.join(d, f)) for f in os.listdir(d)})
            compare_report("set 3", rep, runs3)
            check([len(r["files"]) for r in rep["runs"]] == [1, 2, 2, 4], "set 3: rank counts")
            check([f["rank"] for f in rep["runs"][3]["files"]] == [0, 1, 2, 3], "set 3: ranks")
            pr = rep["pairs"][0]
            check(pr["ranks"] == 1 and pr["ranks_only_b"] == 1, "set 3: tp1 vs tp2 ranks")

        # Errors: exit 2 and one line naming the problem.
        bad = os.path.join(tmp, "bad.h5")
        with open(bad, "w") as f:
            f.write("not hdf5\n")
        for args, what in (([paths[0]], "one file"), ([paths[0], bad], "bad file"),
                           (["--match", "nothing*"] + paths[:2], "empty selection"),
                           ([paths[0], os.path.join(tmp, "missing.h5")], "missing file")):
            p = subprocess.run([ULPPROF, "ladder"] + args, capture_output=True, text=True)
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 2 and len(lines) >= 1 and p.stdout == "",
                  "%s: exit %d, stderr %r" % (what, p.returncode, p.stderr))
        # A run directory whose files claim one rank is not a multi-rank run.
        dup = os.path.join(tmp, "dup")
        os.makedirs(dup)
        for k in range(2):
            write_run(os.path.join(dup, "%d.h5" % k), base, "dup", env={"rank": "0"})
        p = subprocess.run([ULPPROF, "ladder", dup, paths[0]], capture_output=True, text=True)
        check(p.returncode == 2 and "are both rank 0" in p.stderr and p.stdout == "",
              "duplicate rank: exit %d, %r" % (p.returncode, p.stderr))
        # The table and Markdown say the same verdicts.
        for fmt in ("table", "markdown"):
            p = subprocess.run([ULPPROF, "ladder", "-f", fmt] + paths, capture_output=True,
                               text=True)
            check(p.returncode == 1 and "breaks" in p.stdout and "holds" in p.stdout,
                  fmt + " output")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if FAILS:
        print("%d failures" % len(FAILS))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()

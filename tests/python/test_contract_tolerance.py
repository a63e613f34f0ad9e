"""A claim's tolerance, weighed (docs/contract.md "Tolerances").

Two runs written with h5py differ on the cache rung (cache=miss/hit) by
amounts set here, so every expectation is derived by hand: the hit adds 3
to the bf16 bits of one element of model.layers.1.out (3 ULP: positive
values in 1..2, no binade crossed) and 1 to one element of each later layer
(1 ULP); a second hit also shifts one logits row, whose KL divergences
numpy computes.  A claim of level 2 is kept within tolerance when every
capture that differs is named by a bound of its rung that admits it, and
broken otherwise; `diff --contract` and `ladder --contract` give the same
word.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffsnap as ds  # noqa: E402
import test_ladder_numpy as tl  # noqa: E402

check = tl.check
BASE = {"batch_size": "1", "cache": "miss", "split": "none", "tp": "1", "block_size": "16"}


def write(path, run, label, bump=None, logits_shift=None, nan=False):
    acts, logits = tl.base_tensors()
    acts = [a.copy() for a in acts]
    logits = logits.copy()
    if bump:
        acts[1][2, 3] += 3
        for lay in range(2, tl.LAYERS):
            acts[lay][2, 3] += 1
    if nan:
        acts[3][0, 0] = 0x7fc0
    if logits_shift is not None:
        logits[1, 4] += np.float32(logits_shift)
    caps = [{"name": "model.layers.%d.out" % lay, "bits": acts[lay], "dtype": "bf16",
             "layer": lay} for lay in range(tl.LAYERS)]
    caps.append({"name": "lm_head.logits", "bits": logits.view(np.uint32), "dtype": "f32",
                 "role": "logits"})
    ds.write_snapshot(path, caps, label=label, run=run)
    return logits


def kl_max(a, b):
    """max over rows of max(KL(A||B), KL(B||A)), softmax in float64."""
    def logsm(x):
        x = x.astype(np.float64)
        m = x.max(axis=-1, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))
    la, lb = logsm(a), logsm(b)
    pa, pb = np.exp(la), np.exp(lb)
    return max(((pa * (la - lb)).sum(-1)).max(), ((pb * (lb - la)).sum(-1)).max())


def ulpprof(*args):
    p = subprocess.run([tl.ULPPROF] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def main():
    tmp = tempfile.mkdtemp(prefix="test_contract_tolerance.")
    P = lambda n: os.path.join(tmp, n)  # noqa: E731
    base_logits = write(P("miss.h5"), BASE, "miss")
    write(P("hit.h5"), dict(BASE, cache="hit"), "hit", bump=True)
    hit2_logits = write(P("hit2.h5"), dict(BASE, cache="hit"), "hit2", bump=True,
                        logits_shift=0.25)
    write(P("hitnan.h5"), dict(BASE, cache="hit"), "hitnan", bump=True, nan=True)
    nats = kl_max(base_logits.reshape(-1, tl.VOCAB), hit2_logits.reshape(-1, tl.VOCAB))
    check(nats > 0, "the logits shift changes the distribution")

    made = []

    def ctr(tols=None, **claim):
        c = {"ulpprof_contract": 1, "claims": [dict({"level": 2, "name": "cache"}, **claim)]}
        if tols is not None:
            c["tolerances"] = tols
        made.append(1)
        path = P("c%d.json" % len(made))
        with open(path, "w") as f:
            json.dump(c, f)
        return path

    layers = ["model.layers.*.out"]
    cases = [
        # (name, contract, hit run, exit, word, phrase in the claim's lines)
        ("no tolerance", ctr(), "hit.h5", 1, "BROKEN", "1 of 1 pairs on the rung differ"),
        ("4 ULP at the layers", ctr([{"rung": 2, "max_ulp": 4, "sites": layers}]), "hit.h5", 0,
         "kept", "kept within tolerance: max 3 ULP at model.layers.1.out "
         "(sites model.layers.*.out) <= 4"),
        ("exactly 3 ULP", ctr([{"rung": 2, "max_ulp": 3, "sites": layers}]), "hit.h5", 0,
         "kept", "max 3 ULP at model.layers.1.out"),
        ("2 ULP: beyond", ctr([{"rung": 2, "max_ulp": 2, "sites": layers}]), "hit.h5", 1,
         "BROKEN", "beyond tolerance: 3 ULP at model.layers.1.out > 2"),
        ("one site named", ctr([{"rung": 2, "max_ulp": 4, "sites": ["model.layers.1.out"]}]),
         "hit.h5", 1, "BROKEN",
         "beyond tolerance: model.layers.2.out differs (1 ULP) and no tolerance names it"),
        ("another rung's tolerance", ctr([{"rung": 1, "max_ulp": 4, "sites": layers}]),
         "hit.h5", 1, "BROKEN", "1 of 1 pairs on the rung differ"),
        ("the claim's own tolerance", ctr(tolerance={"max_ulp": 3}), "hit.h5", 0, "kept",
         "kept within tolerance: max 3 ULP at model.layers.1.out <= 3"),
        ("the claim's own, too small", ctr(tolerance={"max_ulp": 1}), "hit.h5", 1, "BROKEN",
         "3 ULP at model.layers.1.out > 1"),
        ("NaN: beyond any bound", ctr(tolerance={"max_ulp": 1000000}), "hitnan.h5", 1,
         "BROKEN", "model.layers.3.out: NaN or inf where the other side is not"),
        ("logits not named", ctr([{"rung": 2, "max_ulp": 4, "sites": layers}]), "hit2.h5", 1,
         "BROKEN", "lm_head.logits differs"),
        ("logits within nats", ctr([{"rung": 2, "max_ulp": 4, "sites": layers},
                                    {"rung": 2, "max_nats": nats * 1.01,
                                     "sites": ["lm_head.logits"]}]), "hit2.h5", 0, "kept",
         "nats at lm_head.logits"),
        ("logits beyond nats", ctr([{"rung": 2, "max_ulp": 4, "sites": layers},
                                    {"rung": 2, "max_nats": nats * 0.99,
                                     "sites": ["lm_head.logits"]}]), "hit2.h5", 1, "BROKEN",
         "nats at lm_head.logits, above its max_nats"),
    ]
    for name, c, hit, want_rc, word, phrase in cases:
        rc, out, err = ulpprof("contract", "check", c, P("miss.h5"), P(hit))
        block = out[out.find("claims\n"):]
        lines = [ln for ln in block.splitlines() if "claim 1" in ln]
        check(rc == want_rc, "%s: exit %d, want %d (%s%s)" % (name, rc, want_rc, out, err))
        check(len(lines) == 1 and lines[0].split()[0] == word,
              "%s: claim line %r, want %s" % (name, lines, word))
        check(phrase in block, "%s: %r not in %r" % (name, phrase, block))
        # diff --contract: the same word (bug for a broken claim).
        rc, out, err = ulpprof("diff", P("miss.h5"), P(hit), "--contract", c)
        want = "kept" if word == "kept" else "bug"
        ln = [x for x in out.splitlines() if x.lstrip().startswith("contract")]
        flat = " ".join(out.split())  # the report wraps long lines
        check(rc in (0, 1) and ln and ln[0].split()[1] == want + ":" and
              (phrase in flat or "differ" in phrase),
              "%s: diff --contract %r, want %s with %r (%s)" % (name, ln, want, phrase, err))

    # ladder --contract: the word per pair, in every format.  miss/hit: within
    # 4 ULP at the layers (kept); miss/hit2: the logits differ, no bound names
    # them (bug); hit/hit2: a repeat, outside the level-2 claim (not promised).
    c = ctr([{"rung": 2, "max_ulp": 4, "sites": layers}])
    three = [P("miss.h5"), P("hit.h5"), P("hit2.h5")]
    want = {("miss", "hit"): "kept", ("miss", "hit2"): "bug", ("hit", "hit2"): "not promised"}
    rc, out, err = ulpprof("ladder", "-f", "json", "--contract", c, *three)
    pairs = json.loads(out)["pairs"] if rc in (0, 1) else []
    labels = ["miss", "hit", "hit2"]
    got = {(labels[p["a"]], labels[p["b"]]): p.get("contract") for p in pairs}
    check(got == want, "ladder --contract json: %r, want %r (%s)" % (got, want, err))
    check(any("kept within tolerance: max 3 ULP at model.layers.1.out" in p.get(
        "contract_text", "") for p in pairs), "ladder json contract_text: %r" % pairs)
    for fmt, mark in (("table", "contract: %s ("), ("markdown", "contract: **%s** (")):
        rc, out, err = ulpprof("ladder", "-f", fmt, "--contract", c, *three)
        for (a, b), w in want.items():
            ln = [x for x in out.splitlines() if (" %s " % a) in x and (" %s " % b) in x and
                  "contract" in x]
            check(len(ln) == 1 and mark % w in ln[0],
                  "ladder %s: pair %s/%s %r, want %s" % (fmt, a, b, ln, w))
    rc, out, err = ulpprof("ladder", *three)
    check("contract: " not in out, "ladder without --contract names no contract")
    rc, out, err = ulpprof("ladder", "--contract", P("nope.json"), *three)
    check(rc == 2 and "nope.json" in err, "ladder --contract missing file: %d %r" % (rc, err))

    # A tolerance's sites must be globs; an unknown key is an error.
    for bad in ([{"rung": 2, "max_ulp": 1, "sites": "model.*"}],
                [{"rung": 2, "max_ulp": 1, "site": ["model.*"]}]):
        c = ctr(bad)
        rc, out, err = ulpprof("contract", "check", c, P("miss.h5"), P("hit.h5"))
        check(rc == 2 and c in err and "tolerances[0]" in err and len(
            err.strip().splitlines()) == 1, "bad tolerance %r: exit %d, %r" % (bad, rc, err))

    if tl.FAILS:
        print("%d failure(s)" % len(tl.FAILS))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

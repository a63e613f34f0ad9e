"""Digest-only runs whose requests are numbered otherwise: `ulpprof diff`
and `ulpprof ladder` take B's requests under A's numbers by their fed
token ids, as `ulpprof diff` pairs the requests of full captures
(FORMAT.md "Requests paired by their tokens").

Two runs of two prompts, written in digest mode by the C capture API: a
prefill pass (step 0), then decode steps each feeding one token per
request.  Run A numbers prompt P0 as request 0 and P1 as 1; run B numbers
them the other way round.  B's P0 generation is fed another token at
decode step PART_STEP, and B's layer row of P1 at position BUMP is one ULP
off.  Every row is a function of its prompt's tokens up to its position,
so the rows after the part differ.  Expected figures come from that
construction (numpy) and from the files read with h5py, never from
ulpprof's output.  Matched by number, every request would part at
position 0.
"""
import json
import os
import subprocess
import sys
import tempfile
import zlib

import h5py
import numpy as np

BUILD = os.environ.get("ULPPROF_BUILD_DIR", "build")
SRC = os.environ.get("ULPPROF_SOURCE_DIR", ".")
os.environ["ULPPROF_CAPTURE_LIBRARY"] = os.path.join(BUILD, "capture", "libulpprof_capture.so")
sys.path.insert(0, os.path.join(SRC, "python"))
from ulpprof import _lib  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import digests_h5  # noqa: E402

ULPPROF = os.path.join(BUILD, "programs", "ulpprof")
FAILS = []
PROMPTS = {0: [5, 6, 7, 8], 1: [9, 10, 11, 12]}
L = 4
FEED = {"A": {0: [20, 21, 22, 23], 1: [30, 31, 32, 33]},
        "B": {0: [20, 21, 29, 23], 1: [30, 31, 32, 33]}}
PART_STEP = 3          # decode step 3 feeds FEED[2] at position L + 2
PART_POS = L + 2
BUMP = 2               # B's P1 row at position 2, one ULP off
NUMBERING = {"A": {0: 0, 1: 1}, "B": {0: 1, 1: 0}}  # prompt -> request number


def check(cond, msg):
    if not cond:
        FAILS.append(msg)
        print("FAIL:", msg)


def row(prompt, prefix, bump):
    """A layer row: a function of the prompt and its tokens up to the row's position."""
    rng = np.random.default_rng(zlib.crc32(repr((prompt, tuple(prefix))).encode()))
    x = rng.standard_normal(8).astype(np.float32)
    if bump:
        x.view(np.uint32)[3] += 1
    return x


def margin(run, prompt, step):
    return 0.5 + 0.01 * step + 0.1 * prompt + (0.001 if run == "B" else 0.0)


def write(path, run):
    """Returns {(prompt, position): layer row} as written."""
    s = _lib.Session(path, label=run)
    s.set_capture_mode("digest")
    num = NUMBERING[run]
    order = sorted(PROMPTS, key=lambda p: num[p])  # batch rows in request order
    fed = {p: list(PROMPTS[p]) for p in PROMPTS}
    rows = {}
    for step in range(len(FEED[run][0]) + 1):
        ids, reqs, pos, layer, toks, tpos, treq = [], [], [], [], [], [], []
        for p in order:
            if step == 0:
                new = list(range(L))
            else:
                fed[p].append(FEED[run][p][step - 1])
                new = [L + step - 1]
            for q in new:
                ids.append(fed[p][q])
                reqs.append(num[p])
                pos.append(q)
                x = row(p, fed[p][:q + 1], run == "B" and p == 1 and q == BUMP)
                rows[(p, q)] = x
                layer.append(x)
            if step < len(FEED[run][p]):  # the token produced at the last fed position
                toks.append([FEED[run][p][step], margin(run, p, step)])
                tpos.append(new[-1])
                treq.append(num[p])
        ids = np.asarray(ids, np.int64)
        layer = np.stack(layer)
        st = s.capture("input_ids", ids.ctypes.data, "i64", ids.shape, role="input", step=step,
                       positions=pos, requests=reqs, row_rank=1)
        st |= s.capture("layers.0.out", layer.ctypes.data, "f32", layer.shape, layer=0,
                        step=step, positions=pos, requests=reqs, row_rank=1)
        if toks:
            t = np.asarray(toks, np.float64)
            st |= s.capture("tokens", t.ctypes.data, "f64", t.shape, role="logits", step=step,
                            positions=tpos, requests=treq, row_rank=1)
        check(st == 0, "capture %s step %d: status %d" % (run, step, st))
    s.close()
    return rows


def digests(path):
    """{name: {(request, position): digest}} from /digests, read with h5py."""
    out = {}
    for name, occs in digests_h5.read(path).items():
        d = out.setdefault(name, {})
        for ds in occs:
            for r, p, g in zip(np.ravel(ds.attrs["requests"]), np.ravel(ds.attrs["positions"]),
                               np.ravel(ds[()])):
                d[(int(r), int(p))] = int(g)
    return out


def main():
    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a.h5"), os.path.join(tmp, "b.h5")
        rows_a, rows_b = write(a, "A"), write(b, "B")
        with h5py.File(a, "r") as f:
            check(sorted(f["captures"].keys()) == [] and
                  sorted(digests_h5.kept(f)) == ["input_ids", "tokens"] and
                  "layers.0.out" in f["digests"] and "layers.0.out" not in digests_h5.kept(f),
                  "digest mode keeps only the ids and tokens, in /digests")
        # numpy: the layer rows that differ, keyed by A's request numbers.
        to_a = NUMBERING["A"]
        want_rows = sorted((to_a[p], q) for (p, q) in rows_a
                           if (p, q) in rows_b and rows_a[(p, q)].tobytes() !=
                           rows_b[(p, q)].tobytes())
        check(want_rows == [(0, q) for q in range(PART_POS, L + 4)] + [(1, BUMP)],
              "numpy: the construction's differing rows %s" % want_rows)
        # h5py: B's /digests keys renumbered by prompt agree with numpy's rows.
        da, db = digests(a), digests(b)
        b_to_a = {NUMBERING["B"][p]: to_a[p] for p in PROMPTS}
        db = {n: {(b_to_a[r], q): g for (r, q), g in v.items()} for n, v in db.items()}
        got_rows = sorted(k for k in da["layers.0.out"] if da["layers.0.out"][k] !=
                          db["layers.0.out"].get(k))
        check(got_rows == want_rows, "h5py digests differ at %s, numpy %s" % (got_rows, want_rows))

        p = subprocess.run([ULPPROF, "diff", "-f", "json", a, b], capture_output=True, text=True)
        check(p.returncode == 1, "diff exit %d, want 1: %s" % (p.returncode, p.stderr))
        doc = json.loads(p.stdout) if p.stdout.strip() else {}
        check(doc.get("requests_paired") == [{"b": 0, "a": 1}, {"b": 1, "a": 0}] and
              doc.get("requests_apart_b") == [], "requests_paired %s, apart %s"
              % (doc.get("requests_paired"), doc.get("requests_apart_b")))
        want_part = [{"source": "input_ids", "request": 0, "position": PART_POS,
                      "token_a": FEED["A"][0][2], "token_b": FEED["B"][0][2],
                      "step_a": PART_STEP, "step_b": PART_STEP}]
        check(doc.get("streams_part") == want_part, "streams_part %s, want %s"
              % (doc.get("streams_part"), want_part))
        caps = {c["name"]: c for c in doc.get("captures", [])}
        lay = caps.get("layers.0.out", {})
        ranges = sorted((r["request"], q) for r in lay.get("differing", [])
                        for q in range(r["first"], r["last"] + 1))
        check(lay.get("rows_differing") == len(want_rows) and ranges == want_rows and
              lay.get("only_in_a") == 0 and lay.get("only_in_b") == 0 and
              lay.get("rows_compared") == len(da["layers.0.out"]),
              "layers.0.out: %s, want rows %s" % (lay, want_rows))
        p = subprocess.run([ULPPROF, "diff", a, b], capture_output=True, text=True)
        for line in ("requests paired by tokens: B's 0 is A's 1, B's 1 is A's 0",
                     "token streams part at request 0, position %d (step %d in A): A fed token "
                     "%d, B fed token %d (recorded in input_ids)"
                     % (PART_POS, PART_STEP, FEED["A"][0][2], FEED["B"][0][2])):
            check(line in p.stdout, "table says %r:\n%s" % (line, p.stdout))

        # The ladder pairs them the same way; its margins are the produced tokens' at the
        # step before the part (P0's: request 0 in A, request 1 in B).
        p = subprocess.run([ULPPROF, "ladder", "-f", "json", a, b], capture_output=True,
                           text=True)
        check(p.returncode in (0, 1), "ladder exit %d: %s" % (p.returncode, p.stderr))
        doc = json.loads(p.stdout) if p.stdout.strip() else {"pairs": [{}]}
        q = doc["pairs"][0]
        s = dict(q.get("streams_part") or {})
        ma, mb = s.pop("margin_a", None), s.pop("margin_b", None)
        wa, wb = margin("A", 0, PART_STEP - 1), margin("B", 0, PART_STEP - 1)
        check(ma is not None and abs(ma - wa) < 1e-12 and mb is not None and
              abs(mb - wb) < 1e-12, "ladder margins %s %s, want %s %s" % (ma, mb, wa, wb))
        want = dict(want_part[0], rank=0, produced_step=PART_STEP - 1)
        check(s == want, "ladder streams_part %s, want %s" % (s, want))
        after = sum(1 for v in da.values() for (r, pos) in v if r == 0 and pos >= PART_POS)
        check(q.get("parted_requests") == 1 and q.get("rows_after_part") == after,
              "ladder parted %s, rows after %s, h5py %d" % (q.get("parted_requests"),
                                                            q.get("rows_after_part"), after))
        fd = q.get("first_divergence") or {}
        check(fd.get("capture") == "layers.0.out" and fd.get("request") == 1 and
              fd.get("position") == BUMP, "ladder first divergence %s" % fd)
    print("FAIL" if FAILS else "ok")
    sys.exit(1 if FAILS else 0)


main()

"""Determinism tests in a few lines: run a model under several conditions,
capture each, and assert that they agree bit for bit.

    from ulpprof.testing import assert_invariant

    def test_prefix_cache(model, prompt):
        assert_invariant(model, {"miss": lambda: run_miss(model, prompt),
                                 "hit": lambda: run_hit(model, prompt)}, rung="cache")

Each condition is captured with ulpprof.torch.capture (its /run key is the
rung's, e.g. cache=miss, cache=hit), every run is compared with the first
(`ulpprof diff`) and, with a rung, the ladder's verdict for that rung must
be "holds".  A failure raises InvariantError (an AssertionError) whose
message has the first divergence, its origin and the argmax flips.  The
test also refuses to pass when it would prove nothing: fewer than two
conditions or no capture compared, a cache "hit" that took nothing from its
cache, a "batch" that held one request.
"""
import os
import re
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Mapping, Optional, Union

from .report import Ladder, Report, diff, ladder, rung_level
from .snapshot import Snapshot, open_snapshot

__all__ = ["assert_invariant", "InvariantError", "RUN_KEYS"]

# The /run key each rung's conditions are recorded under (analyzer/ladder.c's
# first key of the level).
RUN_KEYS = {0: "repeat", 1: "batch_size", 2: "cache", 3: "prefill_chunk", 4: "tp", 5: "quant",
            6: "engine", 7: "device"}


class InvariantError(AssertionError):
    """A condition's run differs from the first one, or the test would be
    vacuous.  `reports` maps each compared condition to its diff Report (empty
    for a vacuous test), `ladder` is the ladder (with a rung), `directory`
    holds the snapshots (kept when the assertion fails)."""

    def __init__(self, message: str, reports: Optional[Dict[str, Report]] = None,
                 ladder: Optional[Ladder] = None, directory: Optional[str] = None) -> None:
        super().__init__(message)
        self.reports = reports or {}
        self.ladder = ladder
        self.directory = directory

    def details(self) -> str:
        """The report for a failing test's output: per condition, the rows
        that differ."""
        out = []
        for name, rep in self.reports.items():
            out.append("== %s: %s vs %s (ulpprof diff %s %s)" % (
                name, "identical" if rep.identical else "differs", name, rep.a, rep.b))
            out.append(rep.summary_text())
            for r in rep.rows:
                if r.status != "identical":
                    out.append("  %-40s layer %-4s %-14s differing %s max_ulp %s origin %s" % (
                        r.name, "-" if r.layer is None else r.layer, r.status, r.differing,
                        r.max_ulp, r.origin or "-"))
        if self.directory:
            out.append("snapshots: %s" % self.directory)
        return "\n".join(out)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "run"


# ulpprof.torch files a token's k-th recomputation under request + k * _REPEAT
# (docs/python.md, "Several prompts, threads, recomputed tokens").
_REPEAT = 1000000


def _request_starts(c) -> Dict[int, int]:
    """{request: the first position that capture (pass) computed for it},
    a request's recomputed tokens (filed under request + k * _REPEAT)
    counted as the request's: a pass that recomputes positions 0-31 and
    computes 32-39 for the first time starts at 0, not at 32."""
    out: Dict[int, int] = {}
    for r, ps in c.request_positions().items():
        base = r % _REPEAT
        out[base] = min(out.get(base, ps[0]), ps[0])
    return out


def _pass_starts(snap: Snapshot) -> Dict[tuple, int]:
    """{(name, request, position): the first position of that request in
    the earliest capture (pass) that computed it}."""
    out: Dict[tuple, int] = {}
    for c in snap.captures:
        starts = _request_starts(c)
        for r, ps in c.request_positions().items():
            for p in ps:
                k = (c.name, r % _REPEAT, p)
                out[k] = min(out.get(k, starts[r % _REPEAT]), starts[r % _REPEAT])
    return out


def _took_from_cache(miss: Snapshot, hit: Snapshot) -> bool:
    """Whether the hit started a pass at a position that the miss computed
    in a pass together with earlier positions: the earlier positions then
    came from the hit's cache (as `cached_tokens > 0`).  A pass that starts
    where the miss's pass starts too (a decode step) is not counted, nor a
    hit that computed each request from its first position in every pass
    (recomputing the positions it had computed before: a fresh cache)."""
    starts = _pass_starts(miss)
    for c in hit.captures:
        for r, first in _request_starts(c).items():
            m = starts.get((c.name, r, first))
            if m is not None and m < first:
                return True
    return False


def _max_requests(snap: Snapshot) -> int:
    return max((len(c.request_positions()) for c in snap.captures), default=0)


def _has_rows(snap: Snapshot) -> bool:
    return any(c.positions is not None for c in snap.captures)


def assert_invariant(model: Any, runs: Mapping[str, Callable[[], Any]],
                     rung: Union[None, int, str] = None, *, directory: Optional[str] = None,
                     **capture_options: Any) -> Dict[str, Report]:
    """Runs `model` under each condition of `runs` (name -> a callable with
    no arguments that calls the model), captures each, compares each with
    the first, and raises InvariantError (an AssertionError) unless all are
    bitwise identical and, with `rung` ("cache", "batch", "chunk",
    "repeat", ... or a level 0-7), the ladder says that rung holds.

    Vacuous tests fail too: fewer than two conditions, a run that captured
    nothing, no capture compared; rung "cache": a hit that took nothing
    from its cache (the token positions show it: see _took_from_cache);
    rung "batch": a run after the first that held one request in every
    capture.

    directory: where the snapshots go (default: a new temporary directory,
    removed when the assertion holds, kept when it fails).
    capture_options: passed to ulpprof.torch.capture (match, kv, ...).
    Returns {condition: Report} of the conditions compared with the first.
    """
    from . import torch as ut  # imports torch: only here

    names = list(runs)
    if len(names) < 2:
        raise InvariantError("nothing compared: `runs` holds %d condition(s); give the "
                             "reference and at least one more" % len(names))
    level = rung_level(rung) if rung is not None else None
    key = RUN_KEYS[level] if level is not None else "condition"
    made = directory is None
    where = tempfile.mkdtemp(prefix="ulpprof-") if made else os.fspath(directory)
    os.makedirs(where, exist_ok=True)
    paths: List[str] = []
    for i, name in enumerate(names):
        path = os.path.join(where, "%02d-%s.h5" % (i, _safe(name)))
        with ut.capture(model, path, label=name, run={key: name}, **capture_options):
            runs[name]()
        paths.append(path)
    snaps = [open_snapshot(p) for p in paths]

    def fail(msg: str, reports: Optional[Dict[str, Report]] = None,
             lad: Optional[Ladder] = None) -> InvariantError:
        return InvariantError(msg + "\nsnapshots: %s" % where, reports, lad, where)

    for name, snap in zip(names, snaps):
        if not snap.captures:
            raise fail("nothing compared: %r captured nothing (did it call the model's "
                       "forward?)" % name)
    ref = snaps[0]
    if level == 2:
        for name, snap in zip(names[1:], snaps[1:]):
            if not (_has_rows(ref) and _has_rows(snap)):
                raise fail("cannot tell whether %r took anything from its cache: its "
                           "captures have no token positions" % name)
            if not _took_from_cache(ref, snap):
                raise fail("%r took nothing from its cache: every pass computed each "
                           "request from the first position %r computed in that pass, so "
                           "the test compares two misses" % (name, names[0]))
    if level == 1:
        for name, snap in zip(names[1:], snaps[1:]):
            if not _has_rows(snap):
                raise fail("cannot tell whether %r held a batch: its captures have no "
                           "token rows" % name)
            if _max_requests(snap) < 2:
                raise fail("%r held one request in every capture: not a batch, so the test "
                           "compares batch 1 with batch 1" % name)
    reports: Dict[str, Report] = {}
    for name, path in zip(names[1:], paths[1:]):
        rep = diff(paths[0], path)
        reports[name] = rep
        if rep.compared == 0:
            raise fail("nothing compared: %r and %r share no capture that could be compared "
                       "(%d rows, none with both sides' elements)"
                       % (names[0], name, len(rep.rows)), reports)
    lad = ladder(paths) if level is not None else None
    bad = [n for n, r in reports.items() if not r.identical]
    verdict = lad.rung(level).verdict if lad is not None and level is not None else None
    if bad or (verdict is not None and verdict != "holds"):
        name = bad[0] if bad else names[1]
        head = "%r differs from %r" % (name, names[0])
        if verdict is not None:
            head += " (rung %s %s)" % (lad.rung(level).name, verdict)
        if not bad:
            head = "the ladder says rung %s %s although every diff is identical" % (
                lad.rung(level).name, verdict)
        raise fail(head + "\n" + reports[name].summary_text(), reports, lad)
    if made:
        shutil.rmtree(where, ignore_errors=True)
    return reports
